"""The size cap of a live capture (``--max-bytes``): when to sample less often, and when to stop.

A capture that runs for days at one sample a second would grow without bound, and an
operator who gave it a cap must never find the cap silently exceeded nor intervals silently
dropped. The budget halves what is left at each step instead: once the bundle holds half the
cap, the interval doubles; at three quarters it doubles again, and so on (x2, x4 …), up to
:data:`MAX_COARSE_S`. Each step is recorded (when, at what size, to what interval) so the
bundle says where its resolution changed. When even the coarsest interval's next rows would
not fit, the capture stops, completed, with the reason. Pure arithmetic: the capture loop
feeds it the bundle's size after each interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The coarsest interval the budget goes to (sar's default interval, 10 minutes): coarser
#: samples would no longer show an hour's shape.
MAX_COARSE_S = 600.0
#: The smallest cap accepted: the bundle's first files (summary, headers) take a few kB.
MIN_MAX_BYTES = 64 * 1024
#: The next interval is assumed to add at most this many times the largest growth of one
#: interval so far (the summary is rewritten too and may grow by a message). The largest, not
#: the last: a source's rows come irregularly (blocklatency writes an entity only in intervals
#: with requests), and judged on a quiet interval the next busy one passed the cap by 665 bytes.
GROWTH_MARGIN = 2.0


@dataclass
class SizeBudget:
    """Where a capture of ``max_bytes`` stands, interval after interval."""

    max_bytes: int
    base_interval_s: float
    interval_s: float = 0.0
    steps: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    #: The bundle's size after the previous interval (at first: its files before any row).
    last_size: int = 0
    #: The most one interval has added to the bundle so far.
    max_growth: int = 0

    def __post_init__(self) -> None:
        self.interval_s = self.interval_s or self.base_interval_s

    @property
    def level(self) -> int:
        """How many times the interval has doubled."""
        return len(self.steps)

    def after_interval(self, size: int, t: float) -> str:
        """Account for the bundle's ``size`` after the interval ending at ``t`` (seconds since
        the capture started). Returns ``"coarsen"`` (the interval doubled: see
        :attr:`interval_s`), ``"stop"`` (see :attr:`stopped`) or ``""``."""
        self.max_growth = max(self.max_growth, size - self.last_size)
        self.last_size = size
        if size + GROWTH_MARGIN * self.max_growth > self.max_bytes:
            return self._stop(size, t)
        threshold = self.max_bytes * (1.0 - 0.5 ** (self.level + 1))
        if size < threshold:
            return ""
        if self.interval_s * 2 > max(MAX_COARSE_S, self.base_interval_s):
            return ""  # the coarsest interval: sample on until the next rows would not fit
        self.interval_s *= 2
        self.steps.append(
            {"t": round(t, 3), "bundle_bytes": size, "interval_s": round(self.interval_s, 3)}
        )
        return "coarsen"

    def _stop(self, size: int, t: float) -> str:
        self.stopped = (
            f"capture.max_bytes: the bundle holds {size:,} of {self.max_bytes:,} bytes at "
            f"t={t:.1f} s (sampling every {self.interval_s:g} s); the next interval's rows "
            "would not fit, so the capture stopped there"
        )
        return "stop"

    def describe(self) -> dict[str, Any]:
        """``capture.limits`` of the summary."""
        return {
            "max_bytes": self.max_bytes,
            "reached": bool(self.steps or self.stopped),
            "coarsened_to_s": round(self.interval_s, 3) if self.steps else None,
            "coarsening": list(self.steps),
            "stopped": self.stopped or None,
        }


def parse_size(text: str, where: str = "--max-bytes") -> int:
    """``"500M"``, ``"2G"``, ``"100000"`` as bytes (K, M, G, T are powers of 1024); ValueError
    naming ``where`` otherwise."""
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    factor = 1
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if raw and raw[-1] in units:
        factor, raw = units[raw[-1]], raw[:-1]
    try:
        value = float(raw.replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a size (e.g. 500M, 2G, 100000)") from None
    if not value * factor >= MIN_MAX_BYTES or value * factor > 1 << 50:
        raise ValueError(
            f"{where}: {text} is out of range ({MIN_MAX_BYTES:,} bytes to 1P; the bundle's "
            "first files take a few kB)"
        )
    return int(value * factor)
