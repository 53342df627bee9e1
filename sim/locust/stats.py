"""Locust's statistics fed from dbsim's microsecond histograms, one batch per interval.

Two decisions live here.

**Resolution.** Locust keys its response-time distribution by ``bucket_response_time(ms)``,
which by default rounds to whole milliseconds below 100 ms: a 300 µs query lands in the 0 ms
bucket. :func:`bucket_response_time_us` keeps three significant digits at every magnitude
(0.347 ms, 12.3 ms, 1230 ms) — the resolution of dbsim's own HDR histograms — and
:func:`install_bucket` puts it in place of Locust's in every process (master and workers; the
function is module-level in ``locust.stats`` on purpose, its docstring says so).

**Batching.** ``events.request.fire`` once per operation costs a Python event dispatch, a
dict update per percentile bucket and a cross-thread hand-off per operation; at 20k+ ops/s
that is a sizeable share of the gevent thread, and the latencies it would carry are already in
the interval histograms. Instead, once per interval, each operation's histogram becomes one
:class:`LatencyBatch` (computed with numpy on the engine thread: the histogram's non-empty
buckets, re-keyed with the installed bucket function) and is merged into Locust's
``RequestStats`` with ``StatsEntry.extend`` — the very method Locust's master uses to merge
a worker's report — so counts, sums, min/max, per-second rates and the percentile cache
behave exactly as if Locust had logged each operation, at the cost of one merge per
operation name per interval. Workers' ``RequestStats`` then travel to the master through
Locust's own report channel, unchanged.

Only measured intervals are fed: Locust's table shows the measured window, as the bundle's
totals do, so the two agree to the operation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import locust.stats
import numpy as np
from hdrh.histogram import HdrHistogram
from locust.stats import RequestStats, StatsEntry, StatsError

from sim.core.metrics import OpStats

SIGNIFICANT_DIGITS = 3
US_PER_MS = 1000.0


def bucket_response_time_us(response_time: float) -> float:
    """Locust's response-time key (ms) with three significant digits at every magnitude, so
    sub-millisecond latencies keep their microseconds (0.347) instead of rounding to 0 or 1."""
    if response_time <= 0:
        return 0
    digits = SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(response_time))
    value = round(float(response_time), digits)
    return int(value) if digits <= 0 else value


def install_bucket() -> None:
    """Replace Locust's millisecond bucketing in this process (call in master and workers)."""
    locust.stats.bucket_response_time = bucket_response_time_us  # type: ignore[assignment]  # Locust's documented hook


def recorded_values_us(histogram: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The histogram's non-empty buckets as arrays of (highest equivalent value in µs, count,
    median equivalent value in µs) — the first two are what ``get_recorded_iterator`` yields,
    computed with numpy instead of a Python loop over every bucket."""
    counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
    index = np.flatnonzero(counts).astype(np.int64)
    half_magnitude = histogram.sub_bucket_half_count_magnitude
    half = histogram.sub_bucket_half_count
    bucket = (index >> half_magnitude) - 1
    sub_bucket = (index & (half - 1)) + half
    first = bucket < 0
    sub_bucket = np.where(first, sub_bucket - half, sub_bucket)
    bucket = np.where(first, 0, bucket)
    shift = bucket + histogram.unit_magnitude
    lowest = sub_bucket << shift
    size = np.int64(1) << shift
    return lowest + size - 1, counts[index].astype(np.int64), lowest + (size >> 1)


@dataclass(frozen=True)
class LatencyBatch:
    """One operation's completions over one interval, in Locust's units (milliseconds)."""

    count: int
    buckets: dict[float, int]
    total_ms: float
    min_ms: float | None
    max_ms: float
    errors: dict[str, int] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {
            "n": self.count,
            "b": [[k, v] for k, v in self.buckets.items()],
            "sum": self.total_ms,
            "min": self.min_ms,
            "max": self.max_ms,
            "err": dict(self.errors),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> LatencyBatch:
        return cls(
            count=int(data["n"]),
            buckets={k: int(v) for k, v in data["b"]},
            total_ms=float(data["sum"]),
            min_ms=data["min"],
            max_ms=float(data["max"]),
            errors={str(k): int(v) for k, v in data["err"].items()},
        )


def batch_from_stats(stats: OpStats) -> LatencyBatch:
    """Re-key one interval's histogram with the installed bucket function (engine thread)."""
    histogram = stats.histogram
    count = stats.count
    if count == 0:
        return LatencyBatch(0, {}, 0.0, None, 0.0, dict(stats.errors))
    values_us, counts, middles_us = recorded_values_us(histogram)
    ms = values_us / US_PER_MS
    magnitude = np.floor(np.log10(ms)).astype(np.int64)
    scale = 10.0 ** (SIGNIFICANT_DIGITS - 1 - magnitude)
    keys = np.round(ms * scale) / scale
    distinct, inverse = np.unique(keys, return_inverse=True)
    summed = np.bincount(inverse, weights=counts).astype(np.int64)
    buckets = {
        bucket_response_time_us(float(k)): int(n)
        for k, n in zip(distinct.tolist(), summed.tolist(), strict=True)
    }
    return LatencyBatch(
        count=count,
        buckets=buckets,
        # HdrHistogram's own mean walks every bucket in Python; this is the same sum.
        total_ms=float(np.dot(middles_us, counts)) / US_PER_MS,
        min_ms=bucket_response_time_us(histogram.get_min_value() / US_PER_MS),
        max_ms=bucket_response_time_us(histogram.get_max_value() / US_PER_MS),
        errors=dict(stats.errors),
    )


def _entry(
    request_stats: RequestStats,
    name: str,
    method: str,
    batch: LatencyBatch,
    wall_start: float,
    wall_end: float,
) -> StatsEntry:
    """A StatsEntry holding exactly ``batch``, ready for ``extend``."""
    entry = StatsEntry(request_stats, name, method, use_response_times_cache=False)
    failures = sum(batch.errors.values())
    # One interval is one second: its operations count in the second its middle falls in,
    # so Locust's "current RPS" (an average over whole seconds) reads the interval's rate.
    second = int((wall_start + wall_end) / 2)
    entry.start_time = wall_start
    entry.last_request_timestamp = wall_end
    entry.num_requests = batch.count + failures
    # Failed operations carry no latency in dbsim; Locust counts those as "none" requests,
    # which keeps them out of the average and the percentiles.
    entry.num_none_requests = failures
    entry.num_failures = failures
    entry.total_response_time = batch.total_ms  # type: ignore[assignment]  # float ms, as with µs buckets
    entry.min_response_time = batch.min_ms  # type: ignore[assignment]
    entry.max_response_time = batch.max_ms  # type: ignore[assignment]
    entry.response_times = defaultdict(int, batch.buckets)  # type: ignore[arg-type]
    entry.num_reqs_per_sec = defaultdict(int, {second: entry.num_requests})
    entry.num_fail_per_sec = defaultdict(int, {second: failures} if failures else {})
    return entry


def feed(
    request_stats: RequestStats,
    method: str,
    batches: Mapping[str, LatencyBatch],
    wall_start: float,
    wall_end: float,
) -> int:
    """Merge one interval's batches into Locust's statistics; returns the operations added."""
    added = 0
    for name, batch in sorted(batches.items()):
        entry = _entry(request_stats, name, method, batch, wall_start, wall_end)
        if entry.num_requests == 0:
            continue
        request_stats.entries[(name, method)].extend(entry)
        request_stats.total.extend(entry)
        for error_class, occurrences in sorted(batch.errors.items()):
            key = StatsError.create_key(method, name, error_class)
            error = request_stats.errors.get(key)
            if error is None:
                error = request_stats.errors[key] = StatsError(method, name, error_class)
                error.first_seen = wall_start
            error.occurrences += occurrences
            error.last_seen = wall_end
        added += entry.num_requests
    return added
