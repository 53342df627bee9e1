"""Peaks and shapes of a rate over a series of intervals: the busiest window of a given length,
the hours and their percentile, the shape of an average day.

Rates are time-weighted: a window's or an hour's figure is the sum of each interval's rate
times its length, divided by the length covered (intervals without a value are left out of
both). A window is a run of consecutive intervals, the shortest from its first interval that
reaches the window's length, so with intervals that do not divide it evenly a window runs up
to one interval longer (its start and end are stated), and never spans a gap (an interval
that starts after the one before it ended: two files, two sittings). An interval belongs to
the hour that holds its midpoint.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sim.profile.figures import nearest_rank

#: Slack on lengths: intervals closed by a tick run a few ms long or short.
SLACK = 0.001
DAY_S = 86400.0
HOUR_S = 3600.0
#: An hour counts toward the hourly percentile when at least this share of it was sampled.
HOUR_COVERED = 0.5


@dataclass(frozen=True)
class Window:
    first: int  # index of the first interval
    last: int  # index of the last interval, inclusive
    start_t: float  # the window's start on the bundle clock (the first interval's start)
    end_t: float
    mean: float


def span_s(lengths: Sequence[float]) -> float:
    return float(sum(lengths))


def typical_length(lengths: Sequence[float]) -> float:
    return float(statistics.median(lengths)) if lengths else 0.0


def busiest(
    times: Sequence[float],
    lengths: Sequence[float],
    rates: Sequence[float | None],
    window_s: float,
    label: str,
) -> Window | str:
    """The window of ``window_s`` with the highest mean rate, or a sentence saying why no
    such window can be told from these intervals."""
    typical = typical_length(lengths)
    length = "a minute" if window_s == 60 else f"{window_s / 60:g} minutes"
    if typical > window_s * (1 + SLACK):
        return f"intervals of {typical:g} s, longer than {length}: no busiest {label}"
    if span_s(lengths) < window_s * (1 - SLACK):
        return f"the data spans {span_s(lengths):g} s, less than {length}: no busiest {label}"
    best: Window | None = None
    for lo, hi in segments(times, lengths):
        found = _busiest_in(times, lengths, rates, window_s, lo, hi)
        if found is not None and (best is None or found.mean > best.mean):
            best = found
    if best is None:
        return f"no stretch of {length} without a gap and with values: no busiest {label}"
    return best


def segments(times: Sequence[float], lengths: Sequence[float]) -> list[tuple[int, int]]:
    """Runs of intervals that follow each other without a gap, as ``(first, last + 1)``."""
    out: list[tuple[int, int]] = []
    start = 0
    for k in range(1, len(times)):
        if times[k] - lengths[k] > times[k - 1] + max(0.001, 0.01 * lengths[k]):
            out.append((start, k))
            start = k
    if times:
        out.append((start, len(times)))
    return out


def _busiest_in(
    times: Sequence[float],
    lengths: Sequence[float],
    rates: Sequence[float | None],
    window_s: float,
    lo: int,
    hi: int,
) -> Window | None:
    """The busiest window within the gapless run ``lo..hi - 1`` (two pointers)."""
    best: Window | None = None
    last, covered, weighted, known = lo - 1, 0.0, 0.0, 0.0
    for first in range(lo, hi):
        while last + 1 < hi and covered < window_s * (1 - SLACK):
            last += 1
            covered += lengths[last]
            rate = rates[last]
            if rate is not None:
                weighted += rate * lengths[last]
                known += lengths[last]
        if covered < window_s * (1 - SLACK):
            break
        if known > 0 and (best is None or weighted / known > best.mean):
            start = times[first] - lengths[first]
            best = Window(first, last, start, times[last], weighted / known)
        covered -= lengths[first]
        gone = rates[first]
        if gone is not None:
            weighted -= gone * lengths[first]
            known -= lengths[first]
    return best


@dataclass
class Bucket:
    """An hour (or an hour of the day): the time sampled in it and its rate."""

    key: datetime | int
    seconds: float = 0.0
    weighted: float = 0.0
    peak: float | None = None
    days: set[object] = field(default_factory=set)

    def add(self, rate: float, length: float, day: object) -> None:
        self.seconds += length
        self.weighted += rate * length
        self.peak = rate if self.peak is None else max(self.peak, rate)
        self.days.add(day)

    @property
    def mean(self) -> float | None:
        return self.weighted / self.seconds if self.seconds > 0 else None


Clock = Callable[[float], datetime | None]


def _hours(
    times: Sequence[float],
    lengths: Sequence[float],
    rates: Sequence[float | None],
    clock: Clock,
    key: Callable[[datetime | None, float], tuple[datetime | int, object]],
) -> dict[datetime | int, Bucket]:
    buckets: dict[datetime | int, Bucket] = {}
    for t, length, rate in zip(times, lengths, rates, strict=True):
        if rate is None:
            continue
        middle = t - length / 2
        name, day = key(clock(middle), middle)
        buckets.setdefault(name, Bucket(name)).add(rate, length, day)
    return buckets


def clock_hours(
    times: Sequence[float], lengths: Sequence[float], rates: Sequence[float | None], clock: Clock
) -> list[Bucket]:
    """The hours of the clock the data covers (hours since the start when the bundle has no
    start time), in order."""

    def key(wall: datetime | None, middle: float) -> tuple[datetime | int, object]:
        if wall is None:
            return int(middle // HOUR_S), None
        return wall.replace(minute=0, second=0, microsecond=0), wall.date()

    found = _hours(times, lengths, rates, clock, key)
    return [found[k] for k in sorted(found, key=_sort_key)]


def _sort_key(key: datetime | int) -> float:
    return key.timestamp() if isinstance(key, datetime) else float(key)


def percentile_hour(hours: Sequence[Bucket], q: float = 0.95) -> tuple[Bucket, int] | str:
    """The hour whose mean rate is the ``q`` quantile (nearest rank) of the hours sampled at
    least half through, and how many hours that is of; or why there is none."""
    full = [h for h in hours if h.seconds >= HOUR_S * HOUR_COVERED and h.mean is not None]
    if not full:
        return "no hour sampled at least half through: no hourly percentile"
    value = nearest_rank([h.mean for h in full if h.mean is not None], q)
    chosen = next(h for h in full if h.mean == value)
    return chosen, len(full)


def daily_shape(
    times: Sequence[float],
    lengths: Sequence[float],
    rates: Sequence[float | None],
    clock: Clock,
) -> list[Bucket] | str:
    """Per hour of the day (0–23), every day together; or why the data has no daily shape
    (it spans less than a day)."""
    covered = (times[-1] - (times[0] - lengths[0])) if times else 0.0
    if covered < DAY_S * (1 - SLACK):
        return f"the data spans {covered / HOUR_S:.1f} h, less than a day: no daily shape"

    def key(wall: datetime | None, middle: float) -> tuple[datetime | int, object]:
        if wall is None:
            return int(middle % DAY_S // HOUR_S), int(middle // DAY_S)
        return wall.hour, wall.date()

    found = _hours(times, lengths, rates, clock, key)
    return [found[h] for h in sorted(found, key=_sort_key)]


def weighted_window(
    rates: Sequence[float | None], lengths: Sequence[float], first: int, last: int
) -> float | None:
    """The time-weighted mean of ``rates`` over intervals ``first..last``."""
    pairs = [
        (r, dt)
        for r, dt in zip(rates[first : last + 1], lengths[first : last + 1], strict=True)
        if r is not None
    ]
    total = sum(dt for _, dt in pairs)
    return sum(r * dt for r, dt in pairs) / total if total > 0 else None
