"""A replay against the capture it was made from: ``dbsim compare CAPTURE REPLAY``.

``REPLAY`` is a replay's directory (``replay.json`` beside one bundle per scale, written by
``dbsim replay``). ``CAPTURE`` must be the very bundle the replay was made from: the
directory ``replay.json`` names (``capture.bundle``) and ``CAPTURE`` are compared by device
and inode, never by their names; a relative name is read from the directory the replay ran
in (told apart from ``replay.json``'s own ``directory``), a scale's bundle from the replay's
directory as it is now. Anything else is bad input (:class:`~sim.errors.ConfigError`).

Nothing is echoed from ``replay.json`` but the judgement: both sides are recomputed from the
bundles, the capture's window as the replay chose it (:func:`sim.replay.shape.production_window`
over :func:`sim.profile.build_profile`), each scale's over the intervals ``replay.json`` says it
judged (its ``replay.window``, :func:`~sim.replay.shape.between`), and the fidelity checks are
run again on them (:func:`sim.replay.fidelity.checks`; a file replay's
:func:`sim.replay.fileplan.checks` on the calls its ``fileops`` series counted over the run's
measured stage). Where a recomputed figure or check departs from what ``replay.json`` stored
beyond rounding (:data:`SAME_REL`), the scale's ``mismatches`` say so: that is a bug.

Per figure each side also gets its **intervals** (:mod:`sim.replay.spread`): the per-interval
spread (the lowest and the highest interval's value) and the 95 % interval of the window's
mean from batch means (:func:`sim.judge.noise.batch_means`, Student's t). The capture's side
is taken times the scale where the figure scales (the IOPS, the calls), as the replay was
asked. A day-shape scale is shown as ``replay.json`` holds its steps (nothing recomputed).

The judgement of record stays ``replay.json``'s, per scale: the exit code is
:data:`~sim.errors.EXIT_UNFAITHFUL` (5) when any scale is unfaithful, else
:data:`~sim.errors.EXIT_OK` (0); bad input is :data:`~sim.errors.EXIT_BAD_INPUT` (2).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import EXIT_OK, EXIT_UNFAITHFUL, ConfigError
from sim.replay import fidelity
from sim.replay.shape import Shape, between, device_series, shape_over
from sim.replay.spread import device_values, side

REPLAY_NAME = "replay.json"
#: Two figures of the same bundles differ beyond rounding when they differ by more than this
#: (relative; JSON keeps a float's 17 digits, so only a different computation gets there).
SAME_REL = 1e-6


@dataclass(frozen=True)
class Figure:
    """One device figure: its key in a shape's dict, its label, unit, whether the asked is
    the capture's times the scale, and the fidelity check judging it (None: shown only)."""

    key: str
    label: str
    unit: str
    scales: bool
    check: str | None


FIGURES = (
    Figure("read_iops", "read IOPS", "1/s", True, "read IOPS"),
    Figure("write_iops", "write IOPS", "1/s", True, "write IOPS"),
    Figure("read_pct", "read share", "%", False, "read share"),
    Figure("read_kib", "mean read", "KiB", False, "read size"),
    Figure("write_kib", "mean write", "KiB", False, "write size"),
    Figure("seq_pct", "sequential", "%", False, None),
    Figure("read_await", "read await", "ms", False, None),
    Figure("write_await", "write await", "ms", False, None),
    Figure("read_p99", "read p99", "ms", False, None),
    Figure("write_p99", "write p99", "ms", False, None),
)


def shape_value(shape: dict[str, Any], key: str) -> float | None:
    """A figure of a shape's dict (``Shape.as_dict``, or as ``replay.json`` stored it)."""
    value = shape.get(key, (shape.get("latency_ms") or {}).get(key))
    return None if value is None else float(value)


def read_replay(replay: Path) -> dict[str, Any]:
    """``replay.json`` of a replay's directory; ConfigError (one line) when it is not one."""
    from sim.safeio import read_json_file

    path = replay / REPLAY_NAME
    try:
        doc = read_json_file(path, what="replay document")
    except FileNotFoundError:
        raise ConfigError(f"{replay}: not a replay directory (no {REPLAY_NAME})") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("scales"), list):
        raise ConfigError(f"{path}: not a replay document (no scales)")
    if not isinstance((doc.get("capture") or {}).get("bundle"), str):
        raise ConfigError(f"{path}: names no capture bundle")
    return doc


def is_replay_dir(path: Path) -> bool:
    """Whether ``path`` is given as a replay's directory: it holds ``replay.json`` (readable
    or not: :func:`read_replay` says), or it is named as ``dbsim replay`` names them
    (``<time>-replay``)."""
    return path.is_dir() and ((path / REPLAY_NAME).exists() or path.name.endswith("-replay"))


def _ran_in(doc: dict[str, Any], replay: Path) -> Path | None:
    """The directory the replay ran in, when ``replay.json``'s own relative ``directory`` is
    the tail of ``replay``'s path (its names were written relative to it)."""
    written = Path(os.path.normpath(str(doc.get("directory") or "")))
    if not doc.get("directory") or written.is_absolute():
        return None
    here = Path(os.path.abspath(replay))
    tail = len(written.parts)
    if here.parts[-tail:] != written.parts:
        return None
    return Path(*here.parts[:-tail])


def locate(text: str, doc: dict[str, Any], replay: Path) -> Path:
    """A path ``replay.json`` names: one under its own directory is read in ``replay`` as it
    is now; an absolute one as it is; a relative one from the directory the replay ran in
    (else from here)."""
    named = Path(text)
    home = str(doc.get("directory") or "")
    if home:
        try:
            return replay / named.relative_to(home)
        except ValueError:
            pass
    if named.is_absolute():
        return named
    base = _ran_in(doc, replay)
    return Path(os.path.abspath(base / named if base else named))


def check_identity(capture: Path, doc: dict[str, Any], replay: Path) -> Path:
    """The capture ``replay.json`` names, when it is ``capture`` (same device and inode);
    ConfigError otherwise."""
    named = locate(doc["capture"]["bundle"], doc, replay)
    try:
        given = os.stat(capture)
    except OSError as exc:
        raise ConfigError(f"{capture}: cannot read: {exc.strerror or exc}") from None
    try:
        theirs = os.stat(named)
    except OSError:
        raise ConfigError(
            f"{capture} is not the capture {replay} was made from ({doc['capture']['bundle']}, "
            "which is no longer there)"
        ) from None
    if (given.st_dev, given.st_ino) != (theirs.st_dev, theirs.st_ino):
        raise ConfigError(
            f"{capture} is not the capture {replay} was made from ({doc['capture']['bundle']})"
        )
    return named


@dataclass(frozen=True)
class Window:
    """A side's recomputed shape with the series and the intervals it was taken over."""

    shape: Shape
    series: dict[str, list[Any]]
    picked: list[int]


def capture_window(capture: Path) -> Window:
    from sim.profile import build_profile
    from sim.replay.shape import production_window

    profile = build_profile(capture)
    shape = production_window(profile)
    series = device_series(profile)
    return Window(shape, series, between(series, shape.window.first_t, shape.window.last_t))


def replay_window(bundle: Path, stored: dict[str, Any]) -> Window:
    """A scale's bundle's shape over the window ``replay.json`` says it judged."""
    from sim.profile import build_profile

    window = stored.get("window") or {}
    if "first_t" not in window or "last_t" not in window:
        raise ConfigError(f"{bundle}: replay.json holds no window for this scale")
    series = device_series(build_profile(bundle))
    picked = between(series, float(window["first_t"]), float(window["last_t"]))
    return Window(shape_over(series, picked, str(window.get("how", ""))), series, picked)


def differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > SAME_REL * max(abs(a), abs(b), 1e-9)


def shape_mismatches(side_name: str, ours: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """One line per figure recomputed differently from what ``replay.json`` stored."""
    out = []
    for figure in FIGURES:
        a, b = shape_value(ours, figure.key), shape_value(stored, figure.key)
        if differs(a, b):
            out.append(
                f"{side_name} {figure.label}: recomputed {_plain(a)}, replay.json {_plain(b)}"
            )
    return out


def _plain(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def band(check: fidelity.Check, capture: Shape, replay: Shape, scale: float) -> list[float] | None:
    """The tolerance band of a judged figure around its asked value (absolute), as
    :func:`sim.replay.fidelity.checks` applies it (a rate's widened by its counts' Poisson
    interval); None when not judged."""
    want = check.expected
    if want is None or check.tolerance == fidelity.NOT_JUDGED:
        return None
    if check.unit == "%":
        return [want - fidelity.READ_SHARE_POINTS, want + fidelity.READ_SHARE_POINTS]
    if check.unit == "KiB":
        return [want * (1 - fidelity.SIZE_TOL), want * (1 + fidelity.SIZE_TOL)]
    if want == 0:  # a direction the capture did not have: a share of the asked IOPS
        return [0.0, fidelity.STRAY_SHARE * capture.iops * scale]
    captured = capture.read_iops if check.figure.startswith("read") else capture.write_iops
    poisson = fidelity.poisson_tolerance(
        captured * capture.window.seconds, want * replay.window.seconds
    )
    tol = max(fidelity.IOPS_TOL, poisson or 0.0)
    return [want * (1 - tol), want * (1 + tol)]


def figure_row(
    figure: Figure,
    sides: tuple[Window, Window],
    scale: float,
    checks: dict[str, fidelity.Check],
) -> dict[str, Any]:
    """One device figure of one scale: both sides' values and intervals, and its check."""
    cap, rep = sides
    factor = scale if figure.scales else 1.0
    captured = shape_value(cap.shape.as_dict(), figure.key)
    asked = None if captured is None else captured * factor
    got = shape_value(rep.shape.as_dict(), figure.key)
    check = checks.get(figure.check or "")
    asked_side = side(*device_values(cap.series, cap.picked, figure.key), factor)
    replay_side = side(*device_values(rep.series, rep.picked, figure.key), 1.0)
    return {
        "figure": figure.label,
        "key": figure.key,
        "check": figure.check if check else None,
        "unit": figure.unit,
        "capture": captured,
        "asked": asked if figure.scales or check else None,
        "replay": got,
        "off": check.off if check else _off(figure.unit, captured, got),
        "tolerance": check.tolerance if check else "shown",
        "ok": None if check is None or check.tolerance == fidelity.NOT_JUDGED else check.ok,
        "judged": check is not None and check.tolerance != fidelity.NOT_JUDGED,
        "band": band(check, cap.shape, rep.shape, scale) if check else None,
        "asked_intervals": asked_side.as_dict(),
        "replay_intervals": replay_side.as_dict(),
    }


def _off(unit: str, want: float | None, got: float | None) -> str:
    if want is None or got is None:
        return "-"
    if unit == "%":
        return f"{got - want:+.2f} pt"
    return f"{100 * (got - want) / want:+.1f} %" if want else "-"


def compare_replay(capture: Path, replay: Path) -> dict[str, Any]:
    """The whole comparison (module docstring): per scale the figures, their intervals, the
    mismatches with ``replay.json`` and its judgement; the exit code."""
    doc = read_replay(replay)
    named = check_identity(capture, doc, replay)
    from sim.replay.against_scale import scale_entry

    cap = capture_window(capture)
    kind = "files" if doc.get("files") else "database" if "scenario" in doc["target"] else "fio"
    mismatches = shape_mismatches("capture", cap.shape.as_dict(), doc["capture"].get("shape") or {})
    scales = [scale_entry(entry, doc, replay, cap, capture) for entry in doc["scales"]]
    unfaithful = any(not s["judgement"]["faithful"] for s in scales)
    return {
        "compare": "capture against replay",
        "capture": {
            "bundle": str(capture),
            "named_in_replay": doc["capture"]["bundle"],
            "same_directory": str(named),
            "window": cap.shape.window.how,
            "intervals": cap.shape.window.intervals,
            "mismatches": mismatches,
        },
        "replay": {"directory": str(replay), "kind": kind, "document": str(replay / REPLAY_NAME)},
        "intervals": {
            "spread": "the lowest and the highest interval's value (min-max)",
            "mean_ci95": "the 95 % interval of the window's mean: Student's t over up to "
            "10 batch means of contiguous intervals (none with fewer than 5)",
            "asked": "the capture's per-interval values times the scale where the figure "
            "scales (IOPS, calls), as the replay was asked",
        },
        "scales": scales,
        "exit_code": EXIT_UNFAITHFUL if unfaithful else EXIT_OK,
    }


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, default=str)
