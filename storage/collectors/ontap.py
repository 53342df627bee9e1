"""``OntapCollector``: IOPS, latency and throughput of NetApp ONTAP volumes and LUNs per interval.

Shapes: ONTAP REST API reference, docs.netapp.com/us-en/ontap-restapi/get-storage-volumes.html and
get-storage-luns.html (``statistics.{iops_raw,latency_raw,throughput_raw}.*``: cumulative ops,
microseconds, bytes; ``metric.*``: averages over ``metric.duration``), and docs.netapp.com/us-en/
ontap-automation/rest/interpret_api_response.html (paging by ``_links.next.href``, errors as
``{"error": {"message", "code"}}``). Rates are computed as NetApp Harvest's KeyPerf collector
does; docs/ontap.md explains the arithmetic and the skipped intervals.

Load on the cluster: per interval one GET of /api/storage/volumes and/or one of /api/storage/luns
(filtered by name and SVM, only the ``statistics`` or ``metric`` fields), plus one per further
page; ``auto`` mode may add one ``metric`` GET at start. Calls run in the collector's own small
thread pool, so a hung cluster never holds the engine's threads.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim.errors import CollectorError, ScenarioError
from sim.field_errors import error_lines
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, Target, gap_sample
from sim.registry import (
    COLLECTOR_SCOPE_SHARED,
    ROLE_ARRAY,
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
    register_collector,
)
from storage.collectors.ontap_client import OntapClient, cluster_url, dig

SOURCE = "ontap"
PATHS = {"volume": "/api/storage/volumes", "lun": "/api/storage/luns"}
IO_TYPES = ("read", "write", "other", "total")
RAW_GROUPS = {"iops_raw": "iops", "latency_raw": "latency_us", "throughput_raw": "bps"}
METRIC_GROUPS = {"iops": "iops", "latency": "latency_us", "throughput": "bps"}
METRIC_OK = (None, "ok", "backfilled_data")  # a backfilled sample is still a real average
OK = (None, "ok")
DETAIL_CHARS = 200  # a malformed record is quoted this far in its gap's detail


class OntapSettings(BaseModel):
    """The cluster, the login and what to watch (``collectors.ontap``). Volumes are watched when
    ``volumes`` is set or ``luns`` is not (``svm`` alone: all its volumes); LUNs when listed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = Field(min_length=1, description="Host, address or https://host[:port].")
    port: int = Field(default=443, ge=1, le=65535)
    username_env: str = Field(min_length=1)
    password_env: str | None = None
    password_file: Path | None = None
    verify_tls: bool = True
    ca_file: Path | None = None
    svm: str | None = None
    volumes: list[str] = Field(default_factory=list)
    luns: list[str] = Field(default_factory=list)
    mode: Literal["statistics", "metric", "auto"] = "auto"
    timeout_s: float = Field(default=1.5, gt=0, le=60)

    @model_validator(mode="after")
    def _consistent(self) -> OntapSettings:
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError("name exactly one of password_env or password_file")
        if not (self.volumes or self.luns or self.svm):
            raise ValueError("name volumes, luns or an svm to watch")
        if self.ca_file is not None and not self.verify_tls:
            raise ValueError("ca_file applies only with verify_tls: true")
        if not all(path.startswith("/") for path in self.luns):
            raise ValueError("luns are LUN paths such as /vol/vol1/lun1")
        cluster_url(self.cluster, self.port)
        return self


@dataclass(frozen=True)
class Reading:
    """One record's figures keyed like the output (``read_iops``, ``read_latency_us``,
    ``read_bps`` …): cumulative counters from ``statistics`` or averages from ``metric``."""

    figures: Mapping[str, int | float]
    stamp: str | None
    timestamp: float | None  # seconds since the epoch, parsed from ``stamp``
    status: Any  # "ok", or what went wrong (partial_no_data, negative_delta …)


class MalformedRecord(ValueError):
    """An object record whose counters are not what ONTAP documents (a group or an I/O type
    missing, a value that is not a non-negative number); the message says which field."""


def has_part(record: Mapping[str, Any], part_name: str) -> bool:
    """Whether the record carries a ``statistics`` (raw counters) or ``metric`` part."""
    groups = RAW_GROUPS if part_name == "statistics" else METRIC_GROUPS
    part = record.get(part_name)
    return isinstance(part, dict) and isinstance(part.get(next(iter(groups))), dict)


def reading(record: Mapping[str, Any], part_name: str) -> Reading | None:
    """The ``statistics`` (raw counters) or ``metric`` part of a record; None without one.

    Every group (``iops_raw``, ``latency_raw``, ``throughput_raw``, or the metric's three) must
    hold a number for each of read, write, other and total — raw counters as non-negative
    integers (64-bit, as ONTAP keeps them) — or :class:`MalformedRecord` says what is wrong: a
    record that lost one figure must not quietly give the others alone.
    """
    if not has_part(record, part_name):
        return None
    part = record[part_name]
    raw = part_name == "statistics"
    groups = RAW_GROUPS if raw else METRIC_GROUPS
    figures: dict[str, int | float] = {}
    for group, suffix in groups.items():
        values = part.get(group)
        if not isinstance(values, dict):
            raise MalformedRecord(f"{part_name}.{group} is missing")
        for io in IO_TYPES:
            value = values.get(io)
            number = (int,) if raw else (int, float)
            if isinstance(value, bool) or not isinstance(value, number) or value < 0:
                raise MalformedRecord(f"{part_name}.{group}.{io} is {json.dumps(value)[:40]}")
            figures[f"{io}_{suffix}"] = value  # ints stay ints: bytes outgrow a float's 2**53
    stamp = part.get("timestamp") if isinstance(part.get("timestamp"), str) else None
    try:
        timestamp = datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        timestamp = None
    return Reading(figures, stamp, timestamp, part.get("status"))


def first_decrease(before: Reading, after: Reading) -> str | None:
    """The first raw counter (as ONTAP names it) that went down between two readings, or the
    timestamp going back, as ``"<field>: <old> -> <new>"``; None when all moved forward."""
    stamps = before.timestamp is not None and after.timestamp is not None
    if stamps and (after.timestamp or 0.0) < (before.timestamp or 0.0):
        return f"statistics.timestamp: {before.stamp} -> {after.stamp}"
    names = {suffix: group for group, suffix in RAW_GROUPS.items()}
    for key, value in after.figures.items():
        old = before.figures.get(key, value)
        if value < old:
            io, suffix = key.split("_", 1)
            return f"statistics.{names[suffix]}.{io}: {old} -> {value}"
    return None


def rates(before: Reading, after: Reading, interval_s: float) -> dict[str, float]:
    """Harvest's arithmetic: ``<io>_iops`` and ``<io>_bps`` are counter deltas over
    ``interval_s``; ``<io>_latency_us`` is the latency delta over the same I/O type's operations
    delta (0 when no operation completed)."""
    delta = {k: v - before.figures[k] for k, v in after.figures.items() if k in before.figures}
    values: dict[str, float] = {}
    for io in (io for io in IO_TYPES if f"{io}_iops" in delta):
        ops = delta[f"{io}_iops"]
        values[f"{io}_iops"] = ops / interval_s
        if f"{io}_latency_us" in delta:
            values[f"{io}_latency_us"] = delta[f"{io}_latency_us"] / ops if ops > 0 else 0.0
        if f"{io}_bps" in delta:
            values[f"{io}_bps"] = delta[f"{io}_bps"] / interval_s
    return values


class OntapCollector(Collector):
    """A :class:`~sim.protocols.Sample` per interval per volume (``volume:<svm>/<name>``) and LUN
    (``lun:<path>``): ``<io>_iops``, ``<io>_latency_us``, ``<io>_bps`` for read, write, other,
    total; ``meta["mode"]`` says ``statistics`` or ``metric``; skips counted by reason."""

    source: ClassVar[str] = SOURCE

    def __init__(self, settings: OntapSettings) -> None:
        self.settings = settings
        self.base_url = cluster_url(settings.cluster, settings.port).geturl()
        volumes = bool(settings.volumes or not settings.luns)
        self.kinds = ["volume"] * volumes + ["lun"] * bool(settings.luns)
        self.modes: dict[str, str] = {}
        self.skipped: dict[str, int] = {}
        self._client: OntapClient | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._prev: dict[str, tuple[Reading, float]] = {}

    def _query(self, kind: str, mode: str) -> dict[str, str]:
        names = self.settings.volumes if kind == "volume" else self.settings.luns
        params = {"fields": f"name,svm.name,{mode}"}
        if names:
            params["name"] = "|".join(names)  # ONTAP's "or" in a query
        if self.settings.svm:
            params["svm.name"] = self.settings.svm
        return params

    async def _fetch(self, modes: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        if (client := self._client) is None:
            raise CollectorError("ontap collector: used before start() or after stop()")
        # Imported here: the registry imports this module to read any scenario, which needs
        # no event loop (dbsim validate, report, import; issue #25).
        import asyncio

        loop = asyncio.get_running_loop()
        calls = [
            loop.run_in_executor(self._pool, client.get_records, PATHS[k], self._query(k, m))
            for k, m in modes.items()
        ]
        try:  # the socket timeout bounds each read; this bounds the whole sample, all pages
            answers = await asyncio.wait_for(asyncio.gather(*calls), self.settings.timeout_s)
        except TimeoutError:
            raise client.error(f"no complete answer within {self.settings.timeout_s:g} s") from None
        return dict(zip(modes, answers, strict=True))

    async def start(self, now: float) -> None:
        s = self.settings
        self._client = client = OntapClient(s)
        self._pool = concurrent.futures.ThreadPoolExecutor(4, "dbsim-ontap")
        first = "metric" if s.mode == "metric" else "statistics"
        answers = await self._fetch(dict.fromkeys(self.kinds, first))
        for kind, records in answers.items():
            found = {r.get("name") for r in records}
            wanted = s.volumes if kind == "volume" else s.luns
            missing = [n for n in wanted if "*" not in n and n not in found]
            if missing or not records:
                raise client.error(
                    f"{kind} not found: {', '.join(missing) or '*'} (svm {s.svm or 'any'})"
                )
            raw = any(has_part(r, "statistics") for r in records)
            if s.mode == "statistics" and not raw:
                raise client.error(f"{kind}s carry no statistics.*_raw counters; try mode: auto")
            self.modes[kind] = "statistics" if first == "statistics" and raw else "metric"
        fallback = {k: m for k, m in self.modes.items() if m != first}
        if fallback:  # describe()["modes"] records the fallback
            answers.update(await self._fetch(fallback))
        self._prev = {}
        for kind in (k for k, m in self.modes.items() if m == "statistics"):
            for record in answers[kind]:
                self._from_statistics(_entity(kind, record), record, now)

    async def sample(self, now: float) -> list[Sample]:
        answers = await self._fetch(self.modes)
        samples = []
        for kind, records in answers.items():
            convert = self._from_metric if self.modes[kind] == "metric" else self._from_statistics
            for record in records:
                sample = convert(_entity(kind, record), record, now)
                if sample is not None:
                    samples.append(sample)
        return samples

    def _skip(self, reason: str) -> Sample | None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        return None

    def _gap(self, entity: str, gap: str, reason: str, detail: str, now: float) -> Sample:
        self._skip(reason)
        return gap_sample(self.source, entity, gap, detail, now)

    def _parse(
        self, entity: str, record: dict[str, Any], part: str, now: float
    ) -> Reading | Sample | None:
        """The record's reading, or the gap sample it makes: malformed, or a status saying
        the cluster's figures are incomplete (``partial_no_data`` …). None: no such part."""
        try:
            current = reading(record, part)
        except MalformedRecord as exc:
            text = json.dumps(record, separators=(",", ":"))[:DETAIL_CHARS]
            return self._gap(entity, GAP_UNREADABLE, "malformed", f"{exc}: {text}", now)
        if current is not None and current.status not in (METRIC_OK if part == "metric" else OK):
            detail = f"{part}.status is {current.status}"
            return self._gap(entity, GAP_UNREADABLE, f"status_{current.status}", detail, now)
        return current

    def _from_statistics(self, entity: str, record: dict[str, Any], now: float) -> Sample | None:
        current = self._parse(entity, record, "statistics", now)
        if current is None:
            return self._skip("no_raw_counters")
        if isinstance(current, Sample):  # the baseline stays: the next good reading spans it
            return current
        if entity not in self._prev:
            self._prev[entity] = (current, now)
            return None
        before, before_now = self._prev[entity]
        if current.timestamp is not None and before.timestamp is not None:
            interval = current.timestamp - before.timestamp  # the counters' own clock
        else:
            interval = now - before_now
        if interval == 0:
            return self._skip("stale_timestamp")  # not refreshed: the next reading spans both
        self._prev[entity] = (current, now)  # after a reset too: the next interval is exact
        broken = first_decrease(before, current)
        if broken is None and interval < 0:
            broken = f"the engine's clock went back ({before_now} -> {now})"
        if broken is not None:  # a takeover, a giveback, a counter manager restart
            return self._gap(entity, GAP_RESET, "counter_reset", broken, now)
        values = rates(before, current, interval)
        meta = _meta(record, "statistics", current) | {"interval_s": f"{interval:g}"}
        return Sample(self.source, entity, values, now, meta)

    def _from_metric(self, entity: str, record: dict[str, Any], now: float) -> Sample | None:
        current = self._parse(entity, record, "metric", now)
        if current is None:
            return self._skip("no_metric")
        if isinstance(current, Sample):
            return current
        values = {k: float(v) for k, v in current.figures.items()}
        duration = str(dig(record, "metric", "duration"))
        meta = _meta(record, "metric", current) | {"duration": duration}
        return Sample(self.source, entity, values, now, meta)

    async def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._client = None

    def describe(self) -> dict[str, Any]:
        # Settings hold references (variable names, a file path), never the secrets themselves.
        settings = self.settings.model_dump(mode="json", exclude={"cluster", "port"})
        load = " and ".join(f"GET {PATHS[k]}" for k in self.kinds) + " per interval and page"
        extra = {"modes": dict(self.modes), "skipped": dict(self.skipped), "load": load}
        return {"source": self.source, "cluster": self.base_url, **settings, **extra}


def _meta(record: Mapping[str, Any], mode: str, current: Reading) -> dict[str, str]:
    return {"mode": mode, "svm": str(dig(record, "svm", "name")), "timestamp": current.stamp or ""}


def _entity(kind: str, record: Mapping[str, Any]) -> str:
    name = record.get("name", record.get("uuid", "?"))
    return f"volume:{dig(record, 'svm', 'name')}/{name}" if kind == "volume" else f"lun:{name}"


def auto(target: Target, options: Mapping[str, Any]) -> list[Collector]:
    """The ONTAP collector if ``options["ontap"]`` holds settings (dict or :class:`OntapSettings`);
    bad settings raise :class:`ScenarioError`, one ``collectors.ontap.<field>: problem`` line
    each. No I/O (the cluster is first reached in ``start``): fit to validate a scenario early."""
    raw = options.get("ontap")
    if raw is None or isinstance(raw, OntapSettings):
        return [] if raw is None else [OntapCollector(raw)]
    try:
        return [OntapCollector(OntapSettings.model_validate(raw))]
    except ValidationError as exc:
        lines = [f"collectors.ontap.{line}".replace(".(scenario)", "") for line in error_lines(exc)]
        raise ScenarioError(lines) from None


SUMMARY = "IOPS, latency and throughput of ONTAP volumes and LUNs (REST API)"
register_collector(
    CollectorEntry(
        SOURCE,
        auto,
        SUMMARY,
        options_model=OntapSettings,
        scope=COLLECTOR_SCOPE_SHARED,
        display=Display(
            title="ONTAP",
            ui=(
                UiFigure("iops", "IOPS", "total_iops", or_sum=("read_iops", "write_iops")),
                UiFigure("read_s", "Reads/s", "read_iops"),
                UiFigure("write_s", "Writes/s", "write_iops"),
                UiFigure("read_mb_s", "Read MB/s", "read_bps", 1e-6),
                UiFigure("write_mb_s", "Write MB/s", "write_bps", 1e-6),
                UiFigure("read_await_ms", "Read await (ms)", "read_latency_us", 1e-3),
                UiFigure("write_await_ms", "Write await (ms)", "write_latency_us", 1e-3),
            ),
        ),
        correlate=(
            Figure("read_latency_us", "read latency", "µs"),
            Figure("write_latency_us", "write latency", "µs"),
            Figure("total_latency_us", "latency", "µs"),
            Figure("total_iops", "IOPS"),
        ),
        ios_figure="total_iops",
        role=ROLE_ARRAY,
    )
)
