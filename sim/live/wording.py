"""Words and units of the live page: the verdict as honest as the run's phase, and each
latest value of a chart with its unit. Outside :mod:`sim.locust` (whose import patches sockets
with gevent), so they are tested without Locust."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.judge.slo import format_value
from sim.report.scales import finite, fmt_ms, fmt_us
from sim.report.svg import Panel

#: Phases before the measured window: no verdict can be formed yet.
BEFORE_WINDOW = frozenset({"ready", "connecting", "loading", "calibrating", "warm-up"})


def verdict(
    analysis: Mapping[str, Any] | None,
    final: bool,
    phase: str = "measuring",
    running: bool = True,
) -> dict[str, Any]:
    """The verdict as honest as the run's phase: waiting before the measured window, "so far"
    while it runs, "final" once the bundle's analysis is written, and for an ended run whose
    analysis is still being written, the verdict of the ended run (never "so far")."""
    if running and phase in BEFORE_WINDOW:
        return {"kind": "verdict", "call": "waiting for the measured window",
                "summary": f"{phase}: nothing is measured yet"}  # fmt: skip
    found = (analysis or {}).get("verdict") or {}
    call = str(found.get("call") or "not yet")
    summary = str(found.get("summary") or "waiting for measured intervals")
    # The analysis' sentence opens with the call ("Client-bound: …"); the page shows the call
    # in its own cell, so it is not said twice.
    head, sep, rest = summary.partition(": ")
    if sep and head.lower() == call.lower():
        summary = rest
    if final:
        kind = "final verdict"
    elif running:
        kind = "verdict so far"
    else:
        kind = "verdict of the ended run (its report is being written)"
        if not analysis:
            call, summary = "being written", "the run has ended; its final verdict comes next"
    return {"kind": kind, "call": call, "summary": summary}


#: The unit of a panel's figures, by what its title says (the first that matches).
TITLE_UNITS = (
    ("failed operations/s", "errors/s"),
    ("ops/s", "ops/s"),
    ("MB/s", "MB/s"),
    ("IOPS", "IOPS"),
    ("Reads/s", "reads/s"),
    ("Writes/s", "writes/s"),
    ("aqu-sz", "requests queued"),
    ("%", "%"),
    ("(ms)", "ms"),
)


def value_text(panel: Panel, value: float | None) -> str:
    """A latest value with its unit, as a person writes it: ``5.79 ms``, ``7,942 IOPS``,
    ``33 %``, ``1,104 ops/s``; ``–`` when the interval has none."""
    number = finite(value)
    if number is None:
        return "–"
    if panel.y_format is fmt_us:
        return format_value("p99_us_max", number)
    if panel.y_format is fmt_ms or panel.title.endswith("(ms)"):
        return format_value("await_ms_max", number)
    unit = next((u for key, u in TITLE_UNITS if key in panel.title), "")
    if unit == "%":
        return f"{number:.0f} %" if number >= 10 else f"{number:.1f} %"
    digits = 0 if abs(number) >= 100 or number == 0 else 1 if abs(number) >= 10 else 2
    shown = f"{number:,.{digits}f}"
    return f"{shown} {unit}".strip()
