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
as whole lines in one write and flushed, so a killed run loses at most the interval in flight.
``summary.json`` is rewritten every ``flush_interval_s`` while the run goes (status
``running``) and once more when it ends, however it ends.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import socket
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import yaml

from sim import __version__
from sim.errors import BundleError
from sim.metrics import Interval, OpStats
from sim.protocols import Sample

SCHEMA_VERSION = 1
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


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: never a torn file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def iso(ts: float | None) -> str | None:
    return (
        None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    )


def new_bundle_dir(directory: Path, name: str, now: float | None = None) -> Path:
    """Create a fresh run directory; never reuses (and so never overwrites) an existing one."""
    stamp = datetime.fromtimestamp(now or time.time()).strftime("%Y%m%d-%H%M%S")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"output.directory: cannot create {directory}: {exc.strerror}") from exc
    for attempt in range(1, 1000):
        candidate = directory / (f"{stamp}-{name}" if attempt == 1 else f"{stamp}-{name}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise BundleError(
                f"output.directory: cannot create {candidate}: {exc.strerror}"
            ) from exc
        return candidate
    raise BundleError(f"output.directory: too many runs named {stamp}-{name} in {directory}")


class _AppendCsv:
    """An append-only CSV whose header is fixed by the first row written."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.path = path
        self.columns = columns
        self._handle: IO[str] = open(path, "a", encoding="utf-8", newline="")  # noqa: SIM115 - held for the run
        if self._handle.tell() == 0:
            self._write_rows([dict(zip(columns, columns, strict=True))])

    def _write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        buffer = io.StringIO()
        writer = csv.DictWriter(
            buffer, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n"
        )
        writer.writerows(rows)
        # One write call of whole lines: a kill never leaves half a row behind.
        self._handle.write(buffer.getvalue())

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._write_rows(rows)

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


class BundleWriter:
    """Writes one run's bundle as the engine's events arrive."""

    def __init__(self, path: Path, scenario: dict[str, Any], flush_interval_s: float = 2.0) -> None:
        self.path = path
        self.scenario = scenario
        self.flush_interval_s = flush_interval_s
        self.started_wall = time.time()
        (path / "timeseries").mkdir(exist_ok=True)
        (path / "histograms").mkdir(exist_ok=True)
        atomic_write(path / "scenario.yaml", yaml.safe_dump(scenario, sort_keys=False))
        self._ops = _AppendCsv(path / "timeseries" / "ops.csv", OPS_COLUMNS)
        self._errors = _AppendCsv(
            path / "timeseries" / "errors.csv", ("t", "interval", "phase", "op", "class", "count")
        )
        self._samples: dict[str, _AppendCsv] = {}
        self._hlog = open(path / "histograms" / "intervals.hlog", "a", encoding="utf-8")  # noqa: SIM115
        if self._hlog.tell() == 0:
            self._hlog.write(
                "#dbsim interval histograms: t_start_s,t_end_s,phase,op,base64 HdrHistogram\n"
            )
        self._last_flush = 0.0
        self.intervals = 0
        self.state = "setup"
        self.live: dict[str, Any] = {}
        self.storage_means: dict[str, dict[str, dict[str, float]]] = {}
        self._storage_sums: dict[tuple[str, str], dict[str, float]] = {}
        self._storage_counts: dict[tuple[str, str], int] = {}
        self._storage_seconds: dict[tuple[str, str], float] = {}
        self.messages: list[str] = []
        #: Facts known while the run goes (sessions, the stage log), kept in every summary
        #: rewrite so a killed run's summary still has them.
        self.running_extra: dict[str, Any] = {}
        self.write_summary(status="running")

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
        self.intervals += 1
        rows = list(interval.rows())
        self._ops.append(rows)
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
        lines = [
            f"{interval.t_start:.3f},{interval.t_end:.3f},{interval.phase},{op},"
            f"{stats.histogram.encode().decode('ascii')}\n"
            for op, stats in sorted(interval.ops.items())
            if stats.count
        ]
        self._hlog.write("".join(lines))
        self._append_samples(interval, samples)
        now = time.monotonic()
        if now - self._last_flush >= self.flush_interval_s:
            self.flush()

    def _append_samples(self, interval: Interval, samples: list[Sample]) -> None:
        by_source: dict[str, list[dict[str, Any]]] = {}
        for sample in samples:
            row: dict[str, Any] = {
                "t": round(interval.t_end, 3),
                "interval": interval.index,
                "phase": interval.phase,
                "entity": sample.entity,
            }
            row.update({k: round(v, 4) for k, v in sample.values.items()})
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
        for source, rows in by_source.items():
            writer = self._samples.get(source)
            if writer is None:
                columns = SAMPLE_PREFIX_COLUMNS + tuple(sorted(samples_keys(samples, source)))
                writer = self._samples[source] = _AppendCsv(
                    self.path / "timeseries" / f"{source}.csv", columns
                )
            writer.append(rows)
        self.live["samples"] = samples

    def flush(self) -> None:
        for handle in (self._ops, self._errors, *self._samples.values()):
            handle.flush()
        self._hlog.flush()
        self._last_flush = time.monotonic()
        self.write_summary(status="running")

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
        summary.update(self.running_extra)
        if extra:
            summary.update(extra)
        if self.messages:
            summary["messages"] = list(self.messages)
        try:
            atomic_write(
                self.path / "summary.json", json.dumps(summary, indent=2, default=str) + "\n"
            )
        except OSError as exc:
            raise BundleError(f"cannot write {self.path / 'summary.json'}: {exc.strerror}") from exc
        return summary

    def write_histograms(self, totals: Mapping[str, OpStats]) -> None:
        encoded = {
            name: {"count": stats.count, "hdr": stats.histogram.encode().decode("ascii")}
            for name, stats in sorted(totals.items())
            if stats.count
        }
        atomic_write(
            self.path / "histograms" / "measured.json", json.dumps(encoded, indent=2) + "\n"
        )

    def close(self) -> None:
        for handle in (self._ops, self._errors, *self._samples.values()):
            handle.close()
        self._hlog.close()


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
