"""Numbers to pixels and tick labels: formatters, round ticks, linear and log scales."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Formatter = Callable[[float], str]


def finite(value: object) -> float | None:
    """``value`` as a float, or None when it is missing or not a finite number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_number(value: float) -> str:
    """Compact axis label: 950, 1.5k, 20k, 1.2M."""
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def fmt_us(value: float) -> str:
    """A duration given in µs, in the unit a DBA reads it: 250 µs, 1.5 ms, 2.1 s."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g} s"
    if magnitude >= 1e3:
        return f"{value / 1e3:.3g} ms"
    return f"{value:.3g} µs"


def fmt_pct(value: float) -> str:
    """A percentage axis label."""
    return f"{value:.0f}%"


def fmt_ms(value: float) -> str:
    """A duration given in ms (iostat's await)."""
    return fmt_us(value * 1000)


def nice_ticks(lo: float, hi: float, target: int = 5, *, slack: float = 0.0) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering ``[lo, hi]`` inclusively, except
    that ``hi`` may pass the last tick by ``slack`` of a step (no tick added for 5.002 s)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(target, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * 0.999)
    first = math.floor(lo / step + 1e-9) * step
    # Up to the first tick at or above hi: the axis must hold the largest value.
    count = max(math.ceil((hi - first) / step - 1e-9 - slack), 1)
    return [round(first + k * step, 12) for k in range(min(count, 49) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering ``[lo, hi]`` (``lo`` > 0), with 2 and 5 added for short spans."""
    if lo <= 0 or hi <= 0:
        return []
    low, high = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if high == low:
        high += 1
    decades = [10.0**k for k in range(low, high + 1)]
    if high - low <= 2:
        decades = sorted(d * m for d in decades for m in (1, 2, 5) if d * m <= 10.0**high)
    return decades


class Scale:
    """Maps a data domain onto pixels, linearly or by log10."""

    def __init__(self, lo: float, hi: float, a: float, b: float, *, log: bool = False) -> None:
        self.log = log
        self.lo, self.hi = lo, hi
        self.a, self.b = a, b
        self._l0 = math.log10(lo) if log else lo
        self._l1 = math.log10(hi) if log else hi
        if self._l1 == self._l0:
            self._l1 = self._l0 + 1.0

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.a + (v - self._l0) / (self._l1 - self._l0) * (self.b - self.a)

    def accepts(self, value: float | None) -> bool:
        return value is not None and (value > 0 if self.log else True)


def domain(
    values: Sequence[float], *, log: bool, floor: float | None = 0.0, slack: float = 0.0
) -> tuple[float, ...]:
    """The axis domain and ticks: ``(lo, hi, *ticks)`` rounded outwards to tick values (see
    :func:`nice_ticks` for ``slack``); the domain always holds every value."""
    data = [v for v in values if v > 0] if log else list(values)
    if not data:
        return (1.0, 10.0, 1.0, 10.0) if log else (0.0, 1.0, *nice_ticks(0.0, 1.0))
    lo, hi = min(data), max(data)
    if log:
        ticks = log_ticks(lo, hi)
        return (ticks[0], ticks[-1], *ticks)
    if floor is not None:
        lo = min(lo, floor)
    ticks = nice_ticks(lo, hi, slack=slack)
    return (min(ticks[0], lo), max(ticks[-1], hi), *ticks)
