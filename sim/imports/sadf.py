"""``sadf -j`` JSON (sysstat's JSON of ``sar -d``, and of ``sar -u`` when present) as the block
and host collectors' figures.

The document is ``{"sysstat": {"hosts": [{"nodename", "release", "number-of-cpus",
"statistics": [{"timestamp": {...}, "disk": [...], "cpu-load": [...]}, ...]}]}}``. Each
statistics record is one interval ending at its ``timestamp`` (``date``, ``time``, and
``"utc": 1``/``0`` before sysstat 12.7, ``"tz": "UTC"`` or a zone name since; ``interval``
in seconds). A record whose time is not after the one before, or that has no readable time,
is dropped; so is a device entry with a figure that is not a number.

``sar -d`` counts reads and writes together: ``tps`` is ``iops``; ``rkB``/``wkB``/``dkB``
(or ``rd_sec``/``wr_sec``/``dc_sec`` halved, before sysstat 11.5.2) are kB/s; ``areq-sz`` (or
``avgrq-sz`` halved) is one request size for both, ``await`` one wait: ``areq_sz_kB`` and
``await_ms``, figures the block collector gives per direction, so they are listed under
``means_only``. ``aqu-sz`` (``avgqu-sz``) and ``util-percent`` are ``aqu_sz`` and ``util_pct``.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sim import registry, safeio
from sim.imports.source import Parsed, Row, SourceFile, Timeline, combine, number, source_of

#: sadf key -> (block figure, factor); the first key present of each figure wins.
DISK_KEYS: tuple[tuple[str, str, float], ...] = (
    ("tps", "iops", 1),
    ("rkB", "rkB_s", 1),
    ("rd_sec", "rkB_s", 0.5),
    ("wkB", "wkB_s", 1),
    ("wr_sec", "wkB_s", 0.5),
    ("dkB", "dkB_s", 1),
    ("dc_sec", "dkB_s", 0.5),
    ("areq-sz", "areq_sz_kB", 1),
    ("avgrq-sz", "areq_sz_kB", 0.5),
    ("aqu-sz", "aqu_sz", 1),
    ("avgqu-sz", "aqu_sz", 1),
    ("await", "await_ms", 1),
    ("util-percent", "util_pct", 1),
)
#: sar -u: the host collector's figures as sums of sar's (guest time is inside user time in
#: /proc/stat, as the host collector reads it; sar and mpstat take it out). ``sar -u`` writes
#: the first set of keys, ``sar -u ALL`` the second: an entry with any other set is damaged.
CPU_SUMS: dict[str, tuple[str, ...]] = {
    "cpu_user_pct": ("usr", "user", "nice", "guest", "gnice"),
    "cpu_system_pct": ("sys", "system", "irq", "soft"),
    "cpu_iowait_pct": ("iowait",),
    "cpu_steal_pct": ("steal",),
    "cpu_idle_pct": ("idle",),
}
CPU_KEY_SETS = (
    {"cpu", "user", "nice", "system", "iowait", "steal", "idle"},
    {"cpu", "usr", "nice", "sys", "iowait", "steal", "irq", "soft", "guest", "gnice", "idle"},
)
#: An ``interval`` beyond a day is not one (sysstat 10 printed 2**64/100 for a first record).
MAX_INTERVAL_S = 86_400
MEANS_ONLY = (
    "{0}: no request-size distribution (sar -d gives means only)",
    "{0}: reads and writes not counted apart (sar -d: tps, one request size, one await)",
)


def parse(files: list[SourceFile]) -> Parsed:
    return combine(files, parse_file)


def _document(source: SourceFile) -> Any:
    try:
        json.loads(source.text)
    except json.JSONDecodeError as exc:
        raise source.refuse(exc.lineno, "JSON", f"{exc.msg} (column {exc.colno})") from None
    except ValueError:
        pass  # a number too long for int(): the bounded reader below names it
    return safeio.load_json(source.text, what=source.path)


def _host(source: SourceFile, data: Any) -> dict[str, Any]:
    hosts = data.get("sysstat", {}).get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list) or not hosts or not isinstance(hosts[0], dict):
        raise source.refuse(1, "sysstat.hosts", "missing: not sadf -j output")
    if len(hosts) > 1:
        raise source.refuse(1, "sysstat.hosts", f"{len(hosts)} hosts; import one host per file")
    return hosts[0]


def _lines_of(source: SourceFile, key: str) -> list[int]:
    """The line of each occurrence of ``"key":`` in document order (sadf writes one record
    per line), so the n-th object holding ``key`` is found at the n-th line listed."""
    text = source.text
    found = [m.start() for m in re.finditer(rf'"{re.escape(key)}"\s*:', text)]
    lines, line, last = [], 1, 0
    for at in found:
        line += text.count("\n", last, at)
        last = at
        lines.append(line)
    return lines


def parse_file(source: SourceFile) -> Parsed:
    host = _host(source, _document(source))
    records = host.get("statistics")
    if not isinstance(records, list):
        raise source.refuse(1, "statistics", "missing: not sadf -j output")
    nodename = host.get("nodename")
    if not isinstance(nodename, str) or not nodename:
        source.drop(1, "no nodename: cpu-load not imported (no host to give it)")
        nodename = None
    reader = _Reader(source, nodename, len(records))
    reader.keys = _usual_keys(records)
    for record in records:
        reader.record(record if isinstance(record, dict) else {})
    if not any(row[1] == reader.device for row in reader.rows):
        raise source.refuse(
            0, "disk", "no sar -d figures (make the file with: sadf -j SAFILE -- -d -u)"
        )
    return Parsed(
        rows=reader.rows,
        interval_s=statistics.median(reader.intervals) if reader.intervals else None,
        started=reader.started,
        means_only=[m.format(reader.device) for m in MEANS_ONLY],
        host=_host_facts(host),
    )


class _Reader:
    """The statistics records of one host, in order, with the lines they are on."""

    def __init__(self, source: SourceFile, nodename: str | None, count: int) -> None:
        self.source, self.nodename = source, nodename
        self.stamp_lines = iter(_lines_of(source, "timestamp") + [0] * count)
        self.disk_lines = iter(_lines_of(source, "disk-device"))
        self.device = source_of(registry.ROLE_DEVICE)
        self.cpu_source = source_of(registry.ROLE_HOST_CPU)
        self.timeline = Timeline(source)
        self.intervals: list[float] = []
        self.started: datetime | None = None
        self.keys: set[str] = set()
        self.aware: bool | None = None

    @property
    def rows(self) -> list[Row]:
        return self.timeline.rows

    def record(self, record: dict[str, Any]) -> None:
        line = next(self.stamp_lines) if "timestamp" in record else 0
        disks = record.get("disk")
        entries = disks if isinstance(disks, list) else []
        entry_lines = [next(self.disk_lines, 0) for _ in entries]
        moment, interval = _timestamp(record.get("timestamp"))
        if moment is None:
            self.source.drop(line, "a record without a readable timestamp")
            return
        aware = moment.tzinfo is not None
        self.aware = aware if self.aware is None else self.aware
        if aware != self.aware:
            self.source.drop(line, "a timestamp whose zone (utc/tz) differs from the others")
            return
        if not self.timeline.accept(moment, line):
            return
        if interval is not None:
            self.intervals.append(interval)
            self.started = self.started or moment - timedelta(seconds=interval)
        for entry, at in zip(entries, entry_lines, strict=True):
            found = _disk(entry)
            if found is None:
                self.source.drop(at, "a disk entry with no device name or a figure not a number")
                continue
            # sadf writes the same keys in every entry: one that has others is damaged.
            if set(entry) != self.keys:
                odd = ", ".join(sorted(self.keys ^ set(entry)))
                self.source.drop(at, f"a disk entry whose keys differ from the others': {odd}")
                continue
            self.rows.append((moment, self.device, found[0], found[1]))
        cpu = _cpu(record) if self.nodename else {}
        if cpu is None:
            self.source.drop(line, "cpu-load of this record damaged (keys or values)")
        elif cpu and self.nodename:
            self.rows.append((moment, self.cpu_source, self.nodename, cpu))


def _usual_keys(records: list[Any]) -> set[str]:
    """The keys most disk entries of the file have (sadf writes the same in each)."""
    seen = Counter(
        frozenset(entry)
        for record in records
        if isinstance(record, dict) and isinstance(record.get("disk"), list)
        for entry in record["disk"]
        if isinstance(entry, dict)
    )
    return set(seen.most_common(1)[0][0]) if seen else set()


def _timestamp(stamp: Any) -> tuple[datetime | None, float | None]:
    """The record's time (aware when sadf says UTC) and its interval in seconds."""
    if not isinstance(stamp, dict):
        return None, None
    try:
        moment = datetime.strptime(f"{stamp.get('date')} {stamp.get('time')}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None, None
    if stamp.get("utc") == 1 or str(stamp.get("tz", "")).upper() in ("UTC", "GMT"):
        moment = moment.replace(tzinfo=UTC)
    interval = stamp.get("interval")
    seconds = float(interval) if isinstance(interval, int | float) else None
    if seconds is not None and not 0 < seconds <= MAX_INTERVAL_S:
        seconds = None
    return moment, seconds


def _disk(entry: Any) -> tuple[str, dict[str, float]] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("disk-device"), str):
        return None
    figures: dict[str, float] = {}
    for key, figure, factor in DISK_KEYS:
        if key not in entry or figure in figures:
            continue
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        checked = number(str(value))
        if checked is None or checked < 0:  # sadf prints no negative figure
            return None
        figures[figure] = checked * factor
    return (entry["disk-device"], figures) if figures else None


def _cpu(record: dict[str, Any]) -> dict[str, float] | None:
    """The host figures of ``record``'s "all" CPU; {} without cpu-load, None when damaged."""
    loads = record.get("cpu-load") or record.get("cpu-load-all")
    whole = (
        next((c for c in loads if isinstance(c, dict) and c.get("cpu") == "all"), None)
        if isinstance(loads, list)
        else None
    )
    if whole is None:
        return {} if not loads else None
    if set(whole) not in CPU_KEY_SETS:
        return None
    out: dict[str, float] = {}
    for figure, keys in CPU_SUMS.items():
        values = [whole[k] for k in keys if k in whole]
        if not values or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in values
        ):
            return None
        out[figure] = float(sum(values))
    out["cpu_busy_pct"] = 100.0 - out["cpu_idle_pct"] - out["cpu_iowait_pct"]
    return out


def _host_facts(host: dict[str, Any]) -> dict[str, Any]:
    facts = {
        "hostname": host.get("nodename"),
        "kernel": host.get("release"),
        "cpus": host.get("number-of-cpus"),
        "timezone": host.get("timezone"),
    }
    return {k: v for k, v in facts.items() if isinstance(v, str | int) and not isinstance(v, bool)}
