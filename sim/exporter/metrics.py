"""The run's figures as Prometheus metrics, fed from the engine's per-interval event.

:class:`RunExporter` listens to the engine's ``interval``, ``state``, ``progress`` and
``collector_error`` events (sim.core.events): the same objects the bundle writer writes into
``timeseries/``, so a scraped figure equals the bundle's. Each interval is folded into an
immutable snapshot that replaces the previous one in one assignment; a scrape (any thread)
reads whichever snapshot is current, so it never sees half an interval.

Metrics (every name under ``dbsim_``; docs/prometheus.md lists them):

* ``dbsim_op_latency_seconds{op, phase}`` — histogram of the latencies of the operations that
  succeeded (buckets :data:`sim.exporter.names.BOUNDS_S`), cumulative since the run started;
  ``_count`` is their count; ``_sum`` is the intervals' exact means × counts.
* ``dbsim_ops_total{op, phase}``, ``dbsim_op_errors_total{op, phase}`` (0 when none failed),
  ``dbsim_op_errors_by_class_total{op, phase, class}``.
* ``dbsim_<collector>_<figure>{collector, <entity label>}`` — gauges: the latest interval's
  sample of every collector figure, in base units; absent once the run has ended (a figure
  that is not current is not shown as if it were).
* ``dbsim_run_info``, ``dbsim_run_state{state}``, ``dbsim_run_elapsed_seconds``,
  ``dbsim_run_step``, ``dbsim_intervals_total``, ``dbsim_last_interval_timestamp_seconds``,
  ``dbsim_progress_done{what}`` / ``dbsim_progress_total{what}``,
  ``dbsim_collector_errors_total{collector}``, ``dbsim_sessions``.

Only :mod:`sim.exporter` imports ``prometheus_client``; nothing imports this module unless a
run is exported (``dbsim run --metrics-port``, the web UI's ``/metrics``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from sim import registry
from sim.core.metrics import Interval, OpStats, new_histogram
from sim.exporter.names import BOUNDS_S, BOUNDS_US, PREFIX, figure_name, sanitize
from sim.protocols import Sample

#: The engine's states, in order (sim.core.events); ``dbsim_run_state`` has one series each.
STATES = (
    "idle",
    "setup",
    "loading",
    "verifying",
    "connecting",
    "warmup",
    "measure",
    "stopping",
    "finished",
)
LE_LABELS = (*(f"{b:.10g}" for b in BOUNDS_S), "+Inf")
_index_to_bucket: np.ndarray[Any, np.dtype[np.intp]] | None = None


def bucket_of_index() -> np.ndarray[Any, np.dtype[np.intp]]:
    """For each slot of dbsim's HDR histogram layout, the latency bucket its values fall in
    (its highest equivalent value, the value HDR's percentiles report, against ``le``)."""
    global _index_to_bucket
    if _index_to_bucket is None:
        h = new_histogram()
        top = [
            h.get_highest_equivalent_value(h.get_value_from_index(i)) for i in range(h.counts_len)
        ]
        _index_to_bucket = np.searchsorted(np.asarray(BOUNDS_US), np.asarray(top), side="left")
    return _index_to_bucket


def bucket_counts(histogram: HdrHistogram) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The histogram's counts per latency bucket (not cumulative; the last is +Inf)."""
    counts = np.ctypeslib.as_array(histogram.counts)
    slots = np.flatnonzero(counts)
    per_bucket = np.bincount(
        bucket_of_index()[slots], weights=counts[slots], minlength=len(BOUNDS_US) + 1
    )
    return per_bucket.astype(np.int64)


@dataclass(frozen=True)
class OpSeries:
    """One operation's cumulative figures in one phase."""

    buckets: np.ndarray[Any, np.dtype[np.int64]]
    sum_s: float = 0.0
    errors: Mapping[str, int] = field(default_factory=dict)

    def plus(self, stats: OpStats) -> OpSeries:
        count = stats.count
        mean_us = (stats.percentiles_us().get("mean_us") or 0.0) if count else 0.0
        errors = dict(self.errors)
        for cls, n in stats.errors.items():
            errors[cls] = errors.get(cls, 0) + n
        return OpSeries(
            self.buckets + bucket_counts(stats.histogram),
            self.sum_s + mean_us * count / 1e6,
            errors,
        )


def empty_series() -> OpSeries:
    return OpSeries(np.zeros(len(BOUNDS_US) + 1, dtype=np.int64))


@dataclass(frozen=True)
class Snapshot:
    """Everything one scrape shows."""

    info: Mapping[str, str] = field(default_factory=dict)
    state: str = "idle"
    ops: Mapping[tuple[str, str], OpSeries] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()
    elapsed_s: float | None = None
    step: int | None = None
    intervals: int = 0
    last_wall: float | None = None
    progress: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    collector_errors: Mapping[str, int] = field(default_factory=dict)
    sessions: int | None = None


def run_info(scenario: Any, bundle: Path | None) -> dict[str, str]:
    """``dbsim_run_info``'s labels: the bundle's run name, scenario, workload and target."""
    return {
        "run": bundle.name if bundle is not None else "",
        "scenario": scenario.name or "",
        "workload": scenario.workload.name,
        "target": scenario.target.kind,
    }


class RunExporter(Collector):
    """A prometheus_client collector of one run at a time (a new run starts from zero, which
    Prometheus' ``rate()`` reads as a counter reset)."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # ------------------------------------------------------------------ feeding (engine thread)

    def attach(self, engine: Any, info: Mapping[str, str] | None = None) -> None:
        """Start exporting ``engine``'s run (a ``sim.core.engine.Engine``): from zero."""
        sessions = getattr(engine, "max_sessions", None)
        self.snapshot = Snapshot(info=dict(info or {}), state="setup", sessions=sessions)
        events = engine.events
        events.interval.add_listener(self.on_interval)
        events.state.add_listener(self.on_state)
        events.progress.add_listener(self.on_progress)
        events.collector_error.add_listener(self.on_collector_error)

    def start(self, info: Mapping[str, str], sessions: int | None) -> None:
        """Start exporting a run fed from elsewhere (a distributed run's merged intervals,
        sim.locust.merge): from zero, as :meth:`attach`."""
        self.snapshot = Snapshot(info=dict(info), state="setup", sessions=sessions)

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        old = self.snapshot
        ops = dict(old.ops)
        for name, stats in interval.ops.items():
            key = (name, interval.phase)
            ops[key] = ops.get(key, empty_series()).plus(stats)
        self.snapshot = replace(
            old,
            ops=ops,
            samples=tuple(s for s in samples if not s.gap),
            elapsed_s=interval.t_end,
            step=interval.step,
            intervals=old.intervals + 1,
            last_wall=time.time(),
        )

    def on_state(self, state: str, detail: str = "") -> None:
        old = self.snapshot
        samples = () if state == "finished" else old.samples
        self.snapshot = replace(old, state=state, samples=samples)

    def on_progress(self, what: str, done: int, total: int) -> None:
        old = self.snapshot
        self.snapshot = replace(old, progress={**old.progress, what: (done, total)})

    def on_collector_error(self, source: str, message: str) -> None:
        old = self.snapshot
        errors = dict(old.collector_errors)
        errors[source] = errors.get(source, 0) + 1
        self.snapshot = replace(old, collector_errors=errors)

    # ------------------------------------------------------------------ scraping (any thread)

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        yield from run_metrics(snap)
        yield from op_metrics(snap)
        yield from storage_metrics(snap.samples)


def _gauge(name: str, doc: str, value: float, unit: str = "") -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=value, unit=unit)


def run_metrics(snap: Snapshot) -> Iterator[Metric]:
    """The run's identity, state, clock and bookkeeping."""
    info = GaugeMetricFamily(
        f"{PREFIX}_run_info", "the run exported (always 1)", labels=sorted(snap.info)
    )
    if snap.info:
        info.add_metric([snap.info[k] for k in sorted(snap.info)], 1)
    yield info
    state = GaugeMetricFamily(
        f"{PREFIX}_run_state",
        "1 for the engine's current state, 0 for the others",
        labels=["state"],
    )
    for name in STATES:
        state.add_metric([name], 1 if name == snap.state else 0)
    yield state
    yield CounterMetricFamily(
        f"{PREFIX}_intervals",
        "intervals closed (rows of timeseries/ops.csv's interval)",
        value=snap.intervals,
    )
    if snap.elapsed_s is not None:
        yield _gauge(
            "run_elapsed_seconds", "engine clock at the end of the last interval", snap.elapsed_s
        )
    if snap.last_wall is not None:
        yield _gauge(
            "last_interval_timestamp_seconds",
            "wall clock (Unix time) when the last interval closed",
            snap.last_wall,
        )
    if snap.step is not None:
        yield _gauge("run_step", "index of the load step the last interval belongs to", snap.step)
    if snap.sessions is not None:
        yield _gauge("sessions", "sessions the run drives (Locust users)", snap.sessions)
    done = GaugeMetricFamily(
        f"{PREFIX}_progress_done", "set-up progress (rows loaded …)", labels=["what"]
    )
    total = GaugeMetricFamily(f"{PREFIX}_progress_total", "set-up work to do", labels=["what"])
    for what, (d, t) in sorted(snap.progress.items()):
        done.add_metric([what], d)
        total.add_metric([what], t)
    yield done
    yield total
    errors = CounterMetricFamily(
        f"{PREFIX}_collector_errors",
        "samples a collector lost (failed or timed out)",
        labels=["collector"],
    )
    for source, n in sorted(snap.collector_errors.items()):
        errors.add_metric([source], n)
    yield errors


def op_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Per operation and phase: the latency histogram, successes and errors."""
    latency = HistogramMetricFamily(
        f"{PREFIX}_op_latency_seconds",
        "latency of the operations that succeeded, measured in the session (HDR histograms, "
        "µs), cumulative since the run started",
        labels=["op", "phase"],
        unit="seconds",
    )
    ops = CounterMetricFamily(f"{PREFIX}_ops", "operations that succeeded", labels=["op", "phase"])
    errors = CounterMetricFamily(
        f"{PREFIX}_op_errors", "operations that failed (0 when none did)", labels=["op", "phase"]
    )
    by_class = CounterMetricFamily(
        f"{PREFIX}_op_errors_by_class",
        "operations that failed, by error class (errors.csv's class)",
        labels=["op", "phase", "class"],
    )
    for (op, phase), series in sorted(snap.ops.items()):
        cumulative = np.cumsum(series.buckets).tolist()
        latency.add_metric(
            [op, phase], list(zip(LE_LABELS, cumulative, strict=True)), sum_value=series.sum_s
        )
        ops.add_metric([op, phase], cumulative[-1])
        errors.add_metric([op, phase], sum(series.errors.values()))
        for cls, n in sorted(series.errors.items()):
            by_class.add_metric([op, phase, cls], n)
    yield latency
    yield ops
    yield errors
    yield by_class


def storage_metrics(samples: tuple[Sample, ...]) -> Iterator[Metric]:
    """The latest interval's collector figures, one gauge per collector and key."""
    families: dict[str, GaugeMetricFamily] = {}
    # A distributed run's host-local figures carry their host (sim.live.worker_samples): a
    # ``host`` label then, on every storage family ("" for a view of a shared system).
    hosts = any(s.meta.get("host") for s in samples)
    for sample in sorted(samples, key=lambda s: (s.source, s.entity)):
        entry = registry.collector(sample.source)
        shown = entry.display if entry is not None else None
        label = sanitize(shown.entity_label if shown else "entity")
        for key, value in sorted(sample.values.items()):
            name, factor = figure_name(sample.source, key)
            family = families.get(name)
            if family is None:
                doc = (
                    f"{sample.source} collector's {key} of the last interval, measured "
                    f"(timeseries/{sample.source}.csv column {key}"
                    + (f", × {factor:g} to base units)" if factor != 1 else ")")
                )
                labels = ["collector", label, *(["host"] if hosts else [])]
                family = families[name] = GaugeMetricFamily(name, doc, labels=labels)
            where = [str(sample.meta.get("host") or "")] if hosts else []
            family.add_metric([sample.source, sample.entity, *where], float(value) * factor)
    yield from families.values()
