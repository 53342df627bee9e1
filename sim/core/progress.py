"""Set-up progress as a person reads it: done of total, the rate and the time still to go.

The engine's ``progress(what, done, total)`` event (and ``dbsim load``'s) says how far a step
is; :class:`ProgressMeter` keeps when each step started, so a line can say
``load slob_1_cf1: 5,120/10,240 rows (50 %), 12,400 rows/s, ETA 0:00:04``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


def unit_of(what: str) -> str:
    """What a step counts: a file tree's build counts files, a table load rows."""
    return "files" if what.startswith("build") else "rows"


def clock_text(seconds: float) -> str:
    """``0:00:04``: hours, minutes, seconds."""
    whole = max(round(seconds), 0)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@dataclass
class _Step:
    started: float
    done: int = 0
    total: int = 0
    updated: float = 0.0


class ProgressMeter:
    """Rate and ETA per step, on an injectable clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.steps: dict[str, _Step] = {}
        self.current: str | None = None

    def update(self, what: str, done: int, total: int) -> None:
        now = self.clock()
        step = self.steps.get(what)
        if step is None:
            step = self.steps[what] = _Step(started=now)
        step.done, step.total, step.updated = done, total, now
        self.current = what

    def rate(self, what: str) -> float | None:
        """Units per second since the step started (None before any time has passed)."""
        step = self.steps[what]
        seconds = step.updated - step.started
        return step.done / seconds if seconds > 0 and step.done > 0 else None

    def line(self, what: str | None = None) -> str:
        """The step's progress in one line (the latest step's without ``what``)."""
        what = what or self.current
        if what is None:
            return ""
        step = self.steps[what]
        unit = unit_of(what)
        pct = 100 * step.done / max(step.total, 1)
        text = f"{what}: {step.done:,}/{step.total:,} {unit} ({pct:.0f} %)"
        rate = self.rate(what)
        if step.done >= step.total > 0:
            seconds = step.updated - step.started
            return text + (f", {rate:,.0f} {unit}/s, took {clock_text(seconds)}" if rate else "")
        if rate:
            text += f", {rate:,.0f} {unit}/s, ETA {clock_text((step.total - step.done) / rate)}"
        return text
