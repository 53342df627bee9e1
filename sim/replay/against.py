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
beyond rounding (:data:`sim.replay.against_figures.SAME_REL`), the scale's ``mismatches`` say
so: that is a bug.

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
from pathlib import Path
from typing import Any

from sim.errors import EXIT_OK, EXIT_UNFAITHFUL, ConfigError
from sim.replay.against_figures import shape_mismatches
from sim.replay.against_scale import scale_entry
from sim.replay.against_windows import capture_window, locate

REPLAY_NAME = "replay.json"


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


def compare_replay(capture: Path, replay: Path) -> dict[str, Any]:
    """The whole comparison (module docstring): per scale the figures, their intervals, the
    mismatches with ``replay.json`` and its judgement; the exit code."""
    doc = read_replay(replay)
    named = check_identity(capture, doc, replay)
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
