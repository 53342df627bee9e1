"""Latency and error accounting: HDR histograms (µs) per operation per one-second interval.

The engine's sessions call :meth:`IntervalRecorder.record` on the loop thread (one dict lookup
and one histogram update per op, no locks: everything runs on one loop). Once per interval the
engine calls :meth:`IntervalRecorder.rotate`, which hands the finished interval to consumers
(bundle, console, the Locust adapter) and folds it into the run totals if it was measured.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from sim.core.intervals import Interval  # its home; imported from here too

LOWEST_TRACKABLE_US = 1
HIGHEST_TRACKABLE_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
REPORTED_PERCENTILES = (50.0, 95.0, 99.0, 99.9)
#: An error example is one line for a report, not the driver's whole text.
MAX_EXAMPLE_CHARS = 300


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_TRACKABLE_US, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)


def histogram_snapshot(source: HdrHistogram) -> HdrHistogram:
    """A copy of ``source`` that can be walked while another thread goes on adding to it.

    hdrh's walks (percentiles, mean) raise ``HdrConcurrentModificationException`` when the
    total count moves under them, and its ``add`` copies the counts (one C call, atomic under
    the GIL) apart from the total, min and max (Python reads that another thread's add can fall
    between). So the copy's total, min and max are worked out from the copied counts alone.
    """
    copy = new_histogram()
    copy.add(source)
    counts = np.ctypeslib.as_array(copy.counts)
    recorded = np.flatnonzero(counts)
    copy.total_count = int(counts.sum())
    if recorded.size:
        copy.min_value = copy.get_value_from_index(int(recorded[0]))
        copy.max_value = copy.get_value_from_index(int(recorded[-1]))
    return copy


def _counts(histogram: HdrHistogram) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len].astype(np.int64)


def percentile_values(histogram: HdrHistogram, percentiles: Iterable[float]) -> dict[float, int]:
    """hdrh's ``get_percentile_to_value_dict``, the same values, from the counts with numpy.

    hdrh walks every bucket up to the largest percentile's in Python (and its mean walks them
    with an iterator object per step): ~0.5 s of CPU for one operation's run totals with an
    outlier recorded, paid by every summary a run writes. Here the walk is a cumulative sum
    and a search; the value of the bucket found is hdrh's own (highest equivalent, or the
    lowest for percentile 0), so every figure is the one hdrh gives
    (tests/unit/test_metrics_fast.py compares them)."""
    total = int(histogram.get_total_count())
    out: dict[float, int] = {}
    if not total:
        return out
    cumulative = np.cumsum(_counts(histogram))
    for percentile in sorted(set(percentiles)):
        if percentile > 100:
            break
        target = max(int(min(percentile, 100.0) * total / 100 + 0.5), 1)
        index = int(np.searchsorted(cumulative, target, side="left"))
        if index >= cumulative.size:
            break
        value = histogram.get_value_from_index(index)
        out[percentile] = (
            histogram.get_highest_equivalent_value(value)
            if percentile
            else histogram.get_lowest_equivalent_value(value)
        )
    return out


def recorded_values(histogram: HdrHistogram) -> list[tuple[int, int]]:
    """``(value, count)`` of every recorded bucket in order, as hdrh's recorded iterator gives
    them (``value_iterated_to``: the bucket's highest equivalent value), without its walk."""
    counts = _counts(histogram)
    return [
        (
            histogram.get_highest_equivalent_value(histogram.get_value_from_index(int(index))),
            int(counts[index]),
        )
        for index in np.flatnonzero(counts)
    ]


def mean_value(histogram: HdrHistogram) -> float:
    """hdrh's ``get_mean_value`` (each recorded bucket at its median equivalent value, weighted
    by its count), over the recorded buckets only."""
    total = int(histogram.get_total_count())
    if not total:
        return 0.0
    counts = _counts(histogram)
    weighted = sum(
        int(counts[index])
        * histogram._hdr_median_equiv_value(histogram.get_value_from_index(int(index)))
        for index in np.flatnonzero(counts)
    )
    return float(weighted) / total


@dataclass
class OpStats:
    """One operation's figures for one interval (or for the whole measured window)."""

    histogram: HdrHistogram = field(default_factory=new_histogram)
    errors: dict[str, int] = field(default_factory=dict)
    #: Percentiles worked out with numpy from the interval's raw latencies when it was
    #: closed. hdrh's own percentile walk is pure Python and, with a large value recorded,
    #: takes tens of milliseconds per operation — on the engine's loop, every interval.
    exact: dict[str, float] | None = None

    @property
    def count(self) -> int:
        return int(self.histogram.get_total_count())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def snapshot(self) -> OpStats:
        """A copy safe to read on another thread while this one is still merged into."""
        return OpStats(histogram_snapshot(self.histogram), dict(self.errors), self.exact)

    def merge(self, other: OpStats) -> None:
        self.histogram.add(other.histogram)
        for cls, n in other.errors.items():
            self.errors[cls] = self.errors.get(cls, 0) + n

    def mean_us(self) -> float:
        """The mean latency (µs) as hdrh works it out (:func:`mean_value`)."""
        return mean_value(self.histogram)

    def percentiles_us(self) -> dict[str, float]:
        if self.exact is not None:
            return self.exact
        if self.count == 0:
            return {}
        values = percentile_values(self.histogram, REPORTED_PERCENTILES)
        out: dict[str, float] = {f"p{_pct_name(p)}_us": int(v) for p, v in values.items()}
        out["max_us"] = int(self.histogram.get_max_value())
        out["min_us"] = int(self.histogram.get_min_value())
        out["mean_us"] = round(mean_value(self.histogram), 1)
        return out

    def row(self) -> dict[str, Any]:
        return {"count": self.count, "errors": self.error_count, **self.percentiles_us()}


def mix_report(
    requested_pct: Mapping[str, float],
    totals: Mapping[str, OpStats],
    expected: Mapping[str, int] | None,
) -> dict[str, Any]:
    """Requested versus measured operation mix over the measured totals.

    ``expected`` holds the counts the workload's own rule prescribes for the operations its
    sessions issued (its ``expected_mix``; summed over the workers of a distributed run);
    ``exact`` says whether every count was met to the op. Without a rule (``None``: the
    workload has none, or a worker's figures are missing) there is no verdict.
    """
    issued = {name: stats.count + stats.error_count for name, stats in totals.items()}
    all_ops = sum(issued.values())
    report: dict[str, Any] = {
        "requested_pct": dict(requested_pct),
        "measured": issued,
        "measured_pct": {k: round(100 * v / all_ops, 3) for k, v in issued.items()}
        if all_ops
        else {},
    }
    if expected is not None:
        for name in expected:
            issued.setdefault(name, 0)
        report["expected_by_rule"] = dict(expected)
        report["exact"] = all(issued.get(k, 0) == v for k, v in expected.items())
    return report


def exact_percentiles(values: np.ndarray[Any, np.dtype[np.int64]]) -> dict[str, float]:
    """The reported percentiles of raw latencies: the smallest value with at least p % of
    the values at or below it (HdrHistogram's definition, without its bucketing)."""
    points = np.percentile(values, REPORTED_PERCENTILES, method="inverted_cdf")
    out: dict[str, float] = {
        f"p{_pct_name(p)}_us": int(v) for p, v in zip(REPORTED_PERCENTILES, points, strict=True)
    }
    out["max_us"] = int(values.max())
    out["min_us"] = int(values.min())
    out["mean_us"] = round(float(values.mean()), 1)
    return out


def _pct_name(p: float) -> str:
    return str(int(p)) if float(p).is_integer() else str(p).replace(".", "_")


class IntervalRecorder:
    """Collects latencies for the current interval; keeps the measured-window totals."""

    def __init__(self) -> None:
        self._current: dict[str, OpStats] = {}
        # Latencies of the current interval per operation, appended raw (one C-level append
        # per transaction) and folded into the histograms once per interval with numpy.
        self._raw: dict[str, array[int]] = {}
        self.totals: dict[str, OpStats] = {}
        self.warmup_totals: dict[str, OpStats] = {}
        #: Measured totals per step (None for an unstepped run): load points are scored on them.
        self.step_totals: dict[int | None, dict[str, OpStats]] = {}
        self.clamped = 0
        #: op -> error class -> the first message seen of it (see :meth:`record_error`).
        self.error_examples: dict[str, dict[str, str]] = {}
        #: Recorders of sessions that run on their own threads (sim.core.session_threads), folded
        #: into each interval with the loop's own records.
        self._threads: list[Any] = []

    def attach(self, recorders: Iterable[Any]) -> None:
        """Fold these session threads' recorders (``ThreadRecorder``) into every interval."""
        self._threads = list(recorders)

    @property
    def pending(self) -> bool:
        """Whether the current interval holds anything yet."""
        return bool(self._current) or bool(self._raw) or any(r.pending for r in self._threads)

    def record(self, op: str, latency_us: int) -> None:
        """One completed transaction's latency (on the engine's hot path: keep it tiny)."""
        raw = self._raw.get(op)
        if raw is None:
            raw = self._raw[op] = array("q")
        raw.append(latency_us)

    def _take_threads(self) -> None:
        """Move what the session threads recorded since the last interval into this one."""
        for recorder in self._threads:
            with recorder.lock:
                raw, errors = recorder.take()
                examples = recorder.examples
                for op, by_class in examples.items():
                    mine = self.error_examples.setdefault(op, {})
                    for cls, text in by_class.items():
                        mine.setdefault(cls, text)
            for op, values in raw.items():
                held = self._raw.get(op)
                if held is None:
                    self._raw[op] = values
                else:
                    held.extend(values)
            for op, by_class in errors.items():
                stats = self._current.get(op)
                if stats is None:
                    stats = self._current[op] = OpStats()
                for cls, n in by_class.items():
                    stats.errors[cls] = stats.errors.get(cls, 0) + n

    def _fold(self) -> None:
        """Move the raw latencies into the interval's histograms: one histogram update per
        distinct value rather than per transaction."""
        if self._threads:
            self._take_threads()
        for op, raw in self._raw.items():
            stats = self._current.get(op)
            if stats is None:
                stats = self._current[op] = OpStats()
            values = np.frombuffer(raw, dtype=np.int64)
            self.clamped += int(np.count_nonzero(values > HIGHEST_TRACKABLE_US))
            values = np.clip(values, LOWEST_TRACKABLE_US, HIGHEST_TRACKABLE_US)
            distinct, counts = np.unique(values, return_counts=True)
            record = stats.histogram.record_value
            for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
                record(value, count)
            stats.exact = exact_percentiles(values)
        self._raw = {}

    def record_error(
        self, op: str, error_class: str, message: Callable[[], str] | None = None
    ) -> None:
        """One failed transaction. ``message`` makes the error's text (already masked of
        secrets); it is called only for the first error of each operation and class, which
        is kept as that class's example for the run's error line and report."""
        stats = self._current.get(op)
        if stats is None:
            stats = self._current[op] = OpStats()
        stats.errors[error_class] = stats.errors.get(error_class, 0) + 1
        if message is not None:
            examples = self.error_examples.setdefault(op, {})
            if error_class not in examples:
                examples[error_class] = message()[:MAX_EXAMPLE_CHARS]

    def rotate(
        self, index: int, t_start: float, t_end: float, phase: str, step: int | None
    ) -> Interval:
        self._fold()
        ops, self._current = self._current, {}
        interval = Interval(index, t_start, t_end, phase, step, ops)
        buckets = (
            [self.totals, self.step_totals.setdefault(step, {})]
            if interval.measured
            else [self.warmup_totals]
        )
        for bucket in buckets:
            for name, stats in ops.items():
                total = bucket.get(name)
                if total is None:
                    total = bucket[name] = OpStats()
                total.merge(stats)
        return interval
