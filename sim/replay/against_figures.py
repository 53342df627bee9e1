"""The device figures of a replay against its capture (:mod:`sim.replay.against`): per figure
both sides' values and intervals, its fidelity check run again with the tolerance band it was
judged against (the check's own, never restated here), and a recomputed figure set beside the
one ``replay.json`` stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.replay import fidelity
from sim.replay.against_windows import Window
from sim.replay.spread import device_values, side

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


def band(check: fidelity.Check | None) -> list[float] | None:
    """The tolerance band a figure was judged against (absolute), as the check that judged it
    carries it (:attr:`sim.replay.fidelity.Check.band`); None when shown only or not judged."""
    return None if check is None or check.band is None else list(check.band)


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
    most = 100.0 if figure.unit == "%" else None
    asked_side = side(*device_values(cap.series, cap.picked, figure.key), factor, most)
    replay_side = side(*device_values(rep.series, rep.picked, figure.key), 1.0, most)
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
        "band": band(check),
        "asked_intervals": asked_side.as_dict(),
        "replay_intervals": replay_side.as_dict(),
    }


def _off(unit: str, want: float | None, got: float | None) -> str:
    if want is None or got is None:
        return "-"
    if unit == "%":
        return f"{got - want:+.2f} pt"
    return f"{100 * (got - want) / want:+.1f} %" if want else "-"
