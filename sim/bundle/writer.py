"""The run bundle: one directory per run, readable at any moment of the run.

Layout (docs/bundle.md)::

    <output.directory>/<YYYYmmdd-HHMMSS>-<name>/
        scenario.yaml            the resolved scenario (secret references only, never secrets)
        summary.json             schema_version, status, totals, mix, storage means, reports
        timeseries/ops.csv       per interval and operation: count, errors, ops/s, µs percentiles
        timeseries/errors.csv    per interval, operation and error class: count
        timeseries/<source>.csv  per interval and entity: a collector's figures (block.csv …)
        histograms/intervals.hlog  per interval and operation: the encoded HDR histogram
        histograms/measured.json   per operation: the measured window's encoded HDR histogram

JSON and YAML files are written to a temporary name, flushed and renamed into place, so they
are always whole. Time series and the histogram log are append-only: each interval is added
as whole lines in one write, so a killed run loses at most the interval in flight.
``summary.json`` is rewritten every ``flush_interval_s`` while the run goes (status
``running``) and once more when it ends, however it ends.

A bundle that cannot be written (ENOSPC, EACCES, EROFS …) never costs what is already on disk:
a failed atomic write leaves the previous file in place and removes its temporary file, and a
failed append is cut back to the last whole line. Before the run starts that is an
:class:`~sim.errors.OutputDirectoryError` (nothing ran); during the run the writer records the
first failure in :attr:`BundleWriter.failure`, tells ``on_failure`` (the runner stops the run)
and writes nothing more but the final summary and histograms, which it still tries.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sim import __version__
from sim.bundle.files import AppendCsv, AppendFile, atomic_write, iso, os_reason
from sim.errors import OutputDirectoryError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample
from sim.safeio import strict_json

if TYPE_CHECKING:
    # Annotations only: writing an imported capture needs no numpy (dbsim import, issue #25).
    from sim.core.metrics import Interval, OpStats

SCHEMA_VERSION = 1
#: Shortest time between two rewrites of summary.json in one state while running.
SUMMARY_REWRITE_MIN_S = 0.2
OPS_COLUMNS = (
    "t",
    "interval",
    "phase",
    "step",
    "op",
    "ops_s",
    "count",
    "errors",
    "p50_us",
    "p95_us",
    "p99_us",
    "p99_9_us",
    "max_us",
    "min_us",
    "mean_us",
)
SAMPLE_PREFIX_COLUMNS = ("t", "interval", "phase", "entity")
#: Intervals listed per entity under a gap in the summary (the count goes on past it).
MAX_GAP_INTERVALS_LISTED = 100
log = logging.getLogger(__name__)


class BundleWriter:
    """Writes one run's bundle as the engine's events arrive.

    Creating it writes the bundle's first files; any ``OSError`` there is an
    :class:`~sim.errors.OutputDirectoryError` (the caller removes the fresh directory). After
    that no method raises for a write that fails: the engine calls the listeners and swallows
    their exceptions with a logged traceback, and the run would carry on writing a bundle that
    no longer records it. Instead the first failure is kept in :attr:`failure` (one line naming
    the file and the errno) and handed to ``on_failure``; appends and running summaries stop,
    the final summary and histograms are still tried (a partly cut append may have freed
    space, and ``histograms/`` may still be writable when the bundle directory is not).
    """

    def __init__(
        self,
        path: Path,
        scenario: dict[str, Any],
        flush_interval_s: float = 2.0,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.scenario = scenario
        self.flush_interval_s = flush_interval_s
        self.started_wall = time.time()
        #: The first write that failed, as the line the user sees; None while all is well.
        self.failure: str | None = None
        self.on_failure = on_failure
        self._samples: dict[str, AppendCsv] = {}
        self._open: list[AppendCsv | AppendFile] = []
        self._last_flush = 0.0
        self.intervals = 0
        self.state = "setup"
        self.live: dict[str, Any] = {}
        self.storage_means: dict[str, dict[str, dict[str, float]]] = {}
        self._storage_sums: dict[tuple[str, str], dict[str, float]] = {}
        self._storage_counts: dict[tuple[str, str], int] = {}
        self._storage_seconds: dict[tuple[str, str], float] = {}
        self.messages: list[str] = []
        #: Sample gaps (``Sample.gap``) per kind, source and entity: count and intervals.
        self.gaps: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        #: Facts known while the run goes (sessions, the stage log), kept in every summary
        #: rewrite so a killed run's summary still has them.
        self.running_extra: dict[str, Any] = {}
        writing = path
        try:
            for sub in ("timeseries", "histograms"):
                writing = path / sub
                writing.mkdir(exist_ok=True)
            writing = path / "scenario.yaml"
            atomic_write(writing, yaml.safe_dump(scenario, sort_keys=False))
            writing = path / "timeseries" / "ops.csv"
            self._ops = AppendCsv(writing, OPS_COLUMNS)
            self._open.append(self._ops)
            writing = path / "timeseries" / "errors.csv"
            self._errors = AppendCsv(writing, ("t", "interval", "phase", "op", "class", "count"))
            self._open.append(self._errors)
            writing = path / "histograms" / "intervals.hlog"
            self._hlog = AppendFile(writing)
            self._open.append(self._hlog)
            if self._hlog.empty:
                self._hlog.append(
                    "#dbsim interval histograms: t_start_s,t_end_s,phase,op,base64 HdrHistogram\n"
                )
            writing = path / "summary.json"
            self._write_summary_file(self.summary_dict("running"))
        except OSError as exc:
            self.close()
            raise OutputDirectoryError(
                f"output.directory: cannot write {writing}: {os_reason(exc)}"
            ) from exc

    def _failed(self, what: Path, exc: OSError) -> None:
        """Record a write that failed (the first one is the one the user is told about)."""
        message = f"bundle: cannot write {what}: {os_reason(exc)}"
        if self.failure is not None:
            log.debug("%s (after: %s)", message, self.failure)
            return
        self.failure = message
        if self.on_failure is not None:
            self.on_failure(message)

    # ------------------------------------------------------------------ event listeners

    def on_state(self, state: str, detail: str = "") -> None:
        self.state = state
        if state not in ("stopping", "finished"):
            self.write_summary(status="running")

    def on_collector_error(self, source: str, message: str) -> None:
        self.add_message(f"collector {source}: {message}")

    def add_message(self, note: str) -> None:
        """A plain-language note for the summary's ``messages`` (kept once)."""
        if note not in self.messages:
            self.messages.append(note)

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        by_source = self._storage_rows(interval, samples)  # in memory: kept whatever happens
        self.live["samples"] = samples
        if self.failure is not None:
            return  # the bundle stopped at its first failure; its files end there, whole
        writing = self._ops.path
        try:
            self._ops.append(list(interval.rows()))
            writing = self._errors.path
            self._errors.append(
                [
                    {
                        "t": round(interval.t_end, 3),
                        "interval": interval.index,
                        "phase": interval.phase,
                        "op": op,
                        "class": cls,
                        "count": n,
                    }
                    for op, stats in sorted(interval.ops.items())
                    for cls, n in sorted(stats.errors.items())
                ]
            )
            writing = self._hlog.path
            self._hlog.append(
                "".join(
                    f"{interval.t_start:.3f},{interval.t_end:.3f},{interval.phase},{op},"
                    f"{stats.histogram.encode().decode('ascii')}\n"
                    for op, stats in sorted(interval.ops.items())
                    if stats.count
                )
            )
            for source, rows in by_source.items():
                writer = self._samples.get(source)
                if writer is None:
                    writing = self.path / "timeseries" / f"{source}.csv"
                    columns = SAMPLE_PREFIX_COLUMNS + tuple(sorted(samples_keys(samples, source)))
                    writer = self._samples[source] = AppendCsv(writing, columns)
                writing = writer.path
                writer.append(rows)
        except OSError as exc:
            self._failed(writing, exc)
            return
        self.intervals += 1
        now = time.monotonic()
        if now - self._last_flush >= self.flush_interval_s:
            self.flush()

    def _storage_rows(
        self, interval: Interval, samples: list[Sample]
    ) -> dict[str, list[dict[str, Any]]]:
        """The interval's samples as rows per source; the measured ones also go into the
        storage means."""
        by_source: dict[str, list[dict[str, Any]]] = {}
        for sample in samples:
            if sample.gap:
                self._record_gap(interval, sample)
                continue
            row: dict[str, Any] = {
                "t": round(interval.t_end, 3),
                "interval": interval.index,
                "phase": interval.phase,
                "entity": sample.entity,
            }
            row.update({k: round(v, 4) for k, v in sample.values.items()})
            if sample.meta.get("host"):  # a distributed run: whose host, and its own clock
                row["host"] = sample.meta["host"]
                row["host_t"] = round(sample.t, 3)
            by_source.setdefault(sample.source, []).append(row)
            if interval.measured:
                # Weighted by the interval's length: a stage boundary closes a short interval,
                # and its rates must not count as much as a whole second's.
                weight = max(interval.t_end - interval.t_start, 0.0)
                key = (sample.source, sample.entity)
                sums = self._storage_sums.setdefault(key, {})
                for k, v in sample.values.items():
                    sums[k] = sums.get(k, 0.0) + v * weight
                self._storage_counts[key] = self._storage_counts.get(key, 0) + 1
                self._storage_seconds[key] = self._storage_seconds.get(key, 0.0) + weight
        return by_source

    def _record_gap(self, interval: Interval, sample: Sample) -> None:
        """An entity without figures this interval (a counter reset, an unreadable section):
        counted per source and entity with the intervals it hit, and said once in the
        messages with what was seen, so a reader knows the rates skip that interval."""
        entry = self.gaps.setdefault(sample.gap, {}).setdefault(sample.source, {})
        hits = entry.setdefault(sample.entity, {"count": 0, "intervals": []})
        hits["count"] += 1
        if len(hits["intervals"]) < MAX_GAP_INTERVALS_LISTED:
            hits["intervals"].append(interval.index)
        if hits["count"] == 1:
            self.add_message(
                f"{sample.source} {sample.entity}: {sample.gap} at interval {interval.index}, "
                f"no rate for that interval ({sample.detail})"
            )

    def flush(self) -> None:
        for handle in self._handles():
            handle.flush()
        self._last_flush = time.monotonic()
        self.write_summary(status="running")

    def _handles(self) -> list[AppendCsv | AppendFile]:
        return [*self._open, *self._samples.values()]

    # ------------------------------------------------------------------ summary

    def storage_summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per source and entity, the time-weighted mean of every figure over the measured
        intervals (for rates: total over total time)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (source, entity), sums in sorted(self._storage_sums.items()):
            n = self._storage_counts[(source, entity)]
            seconds = self._storage_seconds[(source, entity)] or 1e-9
            means = {k: round(v / seconds, 4) for k, v in sorted(sums.items())}
            means["samples"] = n
            out.setdefault(source, {})[entity] = means
        return out

    def write_summary(
        self,
        status: str,
        *,
        totals: Mapping[str, OpStats] | None = None,
        measured_s: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Build the summary and write it atomically; returns it even when the write failed
        (the file then keeps its last good version). After a failure only a final summary
        (any status but ``running``) is tried again."""
        summary = self.summary_dict(status, totals=totals, measured_s=measured_s, extra=extra)
        if self.failure is None or status != "running":
            try:
                self._write_summary_file(summary)
            except OSError as exc:
                self._failed(self.path / "summary.json", exc)
        return summary

    #: State and time of the last summary.json written while running (see below).
    _summary_state: Any = None
    _summary_written = -math.inf

    def _write_summary_file(self, summary: Mapping[str, Any]) -> None:
        # A run of many short steps rewrote the whole summary, stage log included, at every
        # step: O(steps²) (1,000 steps of 1 ms took 15 s). While running, a rewrite in the same
        # state within SUMMARY_REWRITE_MIN_S of the last one is left to the next flush.
        now = time.monotonic()
        state = summary.get("state")
        if (
            summary.get("status") == "running"
            and state == self._summary_state
            and now - self._summary_written < SUMMARY_REWRITE_MIN_S
        ):
            return
        # Strict JSON: a non-finite figure (an SLO limit of 1e308 scaled past the float range)
        # becomes null, since ``Infinity`` is accepted by no JSON parser but Python's.
        atomic_write(self.path / "summary.json", strict_json(summary) + "\n")
        self._summary_state, self._summary_written = state, now

    def summary_dict(
        self,
        status: str,
        *,
        totals: Mapping[str, OpStats] | None = None,
        measured_s: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The summary as :meth:`write_summary` would write it, without writing it."""
        summary: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "dbsim_version": __version__,
            "run": self.path.name,
            "status": status,
            "state": self.state,
            "scenario": {
                "name": self.scenario.get("name"),
                "workload": (self.scenario.get("workload") or {}).get("name"),
                "target": (self.scenario.get("target") or {}).get("kind"),
            },
            "started_at": iso(self.started_wall),
            "ended_at": None if status == "running" else iso(time.time()),
            "intervals_written": self.intervals,
            "host": host_facts(),
        }
        if totals is not None:
            seconds = measured_s or 0.0
            summary["operations"] = {
                name: {
                    **stats.row(),
                    "errors_by_class": dict(sorted(stats.errors.items())),
                    "ops_s": round(stats.count / seconds, 2) if seconds > 0 else 0.0,
                }
                for name, stats in sorted(totals.items())
            }
        summary["storage"] = self.storage_summary()
        for kind in (GAP_RESET, GAP_UNREADABLE):
            if kind in self.gaps:
                summary["resets" if kind == GAP_RESET else kind] = self.gaps[kind]
        summary.update(self.running_extra)
        if extra:
            summary.update(extra)
        if self.messages:
            summary["messages"] = list(self.messages)
        return summary

    def write_histograms(self, totals: Mapping[str, OpStats]) -> None:
        """``histograms/measured.json``, atomically; tried even after a failure."""
        encoded = {
            name: {"count": stats.count, "hdr": stats.histogram.encode().decode("ascii")}
            for name, stats in sorted(totals.items())
            if stats.count
        }
        path = self.path / "histograms" / "measured.json"
        try:
            atomic_write(path, json.dumps(encoded, indent=2) + "\n")
        except OSError as exc:
            self._failed(path, exc)

    def close(self) -> None:
        for handle in self._handles():
            try:
                handle.close()
            except OSError as exc:  # NFS reports a failed write-back at close
                self._failed(handle.path, exc)


def samples_keys(samples: list[Sample], source: str) -> set[str]:
    keys: set[str] = set()
    for sample in samples:
        if sample.source == source:
            keys.update(sample.values)
    return keys


def host_facts() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
