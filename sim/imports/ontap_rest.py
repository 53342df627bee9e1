"""``dbsim import ontap-rest``: answers of ONTAP's REST API for volumes and LUNs
(``GET /api/storage/volumes`` or ``/api/storage/luns`` with ``fields=statistics`` or
``metric``), a series of them, as the ``ontap`` source (docs/capture.md, "ONTAP REST
responses").

A file holds one answer (``{"records": [...]}``) or several, one per line (JSON Lines, as a
loop of ``curl`` calls appends them); several files are read together. The arithmetic is
the live collector's (:mod:`storage.collectors.ontap`, NetApp Harvest's): for each volume
(``volume:<svm>/<name>``) or LUN (``lun:<path>``), two consecutive ``statistics`` readings
give ``<io>_iops`` and ``<io>_bps`` as counter differences over the difference of their
``statistics.timestamp`` s, and ``<io>_latency_us`` as the latency counter's difference over
the operations' (read, write, other, total). A ``metric`` record is ONTAP's own average over
``metric.duration`` and is written as it is.

Left out and listed: a record whose counters are not what ONTAP documents, one whose
``status`` is not ``ok`` (``partial_no_data`` …), one without a timestamp (no time for a
rate). A counter that went down (a takeover, a giveback, a counter manager restart) is a
reset: no rate across it, a message says where. A reading with the same timestamp as the
previous one was not refreshed and is skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import median
from typing import Any

from sim.errors import ConfigError
from sim.imports.source import Parsed, Row, SourceFile
from sim.safeio import load_json
from storage.collectors.ontap import (
    METRIC_OK,
    OK,
    SOURCE,
    MalformedRecord,
    Reading,
    first_decrease,
    rates,
    reading,
)


@dataclass
class Point:
    """One record's reading, where it is in its file."""

    entity: str
    reading: Reading
    time: datetime
    source: SourceFile
    line: int


def _documents(source: SourceFile) -> list[tuple[int, Any]]:
    """The answers in the file: the whole text as one JSON value, or one per line."""
    what = f"{source.path}: JSON"
    try:
        return [(1, load_json(source.text, what=what))]
    except ConfigError:
        pass
    lines = [(index + 1, line) for index, line in enumerate(source.lines) if line.strip()]
    if len(lines) > 1 and all(line.lstrip().startswith("{") for _, line in lines):
        return [(number, _load(line, source, number, what)) for number, line in lines]
    return [(1, _load(source.text, source, 1, what))]


def _load(text: str, source: SourceFile, first_line: int, what: str) -> Any:
    try:
        return load_json(text, what=what)
    except ConfigError as exc:
        line = first_line
        try:
            json.loads(text)
        except json.JSONDecodeError as error:
            line = first_line + error.lineno - 1
        except (ValueError, RecursionError):
            pass
        raise source.refuse(line, "JSON", str(exc).split(": ", 2)[-1]) from None


def _entity(record: dict[str, Any]) -> str:
    name = str(record.get("name", record.get("uuid", "?")))
    href = str(((record.get("_links") or {}).get("self") or {}).get("href", ""))
    if "/luns" in href or name.startswith("/vol/"):
        return f"lun:{name}"
    svm = (record.get("svm") or {}).get("name") if isinstance(record.get("svm"), dict) else None
    return f"volume:{svm}/{name}"


def _record_line(source: SourceFile, start_line: int, name: str, after: int) -> int:
    """The line of the record's ``"name": "<name>"`` (for messages), searched from ``after``."""
    pattern = re.compile(r'"name"\s*:\s*' + re.escape(json.dumps(name)))
    for index in range(max(after, start_line - 1), len(source.lines)):
        if pattern.search(source.lines[index]):
            return index + 1
    return start_line


def _points(source: SourceFile) -> tuple[list[Point], list[Row]]:
    """Every statistics reading (for rates) and every metric record (a row as it is)."""
    points: list[Point] = []
    metric_rows: list[Row] = []
    cursor = 0
    for start, document in _documents(source):
        records = document.get("records") if isinstance(document, dict) else None
        if not isinstance(records, list):
            raise source.refuse(start, "records", "the answer holds no records list")
        for record in records:
            if not isinstance(record, dict):
                source.drop(start, "a record that is not an object")
                continue
            line = _record_line(source, start, str(record.get("name", "")), cursor)
            cursor = line
            part = "statistics" if isinstance(record.get("statistics"), dict) else "metric"
            read = _read(source, record, part, line)
            if read is None:
                continue
            time = datetime.fromtimestamp(read.timestamp or 0.0, UTC)
            if part == "metric":
                values = {k: float(v) for k, v in read.figures.items()}
                metric_rows.append((time, SOURCE, _entity(record), values))
            else:
                points.append(Point(_entity(record), read, time, source, line))
    return points, metric_rows


def _read(source: SourceFile, record: dict[str, Any], part: str, line: int) -> Reading | None:
    try:
        read = reading(record, part)
    except MalformedRecord as exc:
        source.drop(line, str(exc))
        return None
    if read is None:
        source.drop(line, "no statistics.*_raw counters and no metric")
        return None
    if read.status not in (OK if part == "statistics" else METRIC_OK):
        source.drop(line, f"{part}.status is {read.status}: ONTAP's figures are incomplete")
        return None
    if read.timestamp is None:
        source.drop(line, f"{part}.timestamp missing or not a time: no time to form a rate")
        return None
    return read


def _rates(points: list[Point], notes: list[str]) -> tuple[list[Row], list[float]]:
    rows: list[Row] = []
    spacing: list[float] = []
    by_entity: dict[str, list[Point]] = {}
    for point in points:
        by_entity.setdefault(point.entity, []).append(point)
    for entity, series in by_entity.items():
        series.sort(key=lambda p: p.time)
        before: Point | None = None
        for after in series:
            if before is not None and after.time == before.time:
                continue  # not refreshed: the next reading spans both
            if before is not None:
                seconds = (after.time - before.time).total_seconds()
                broken = first_decrease(before.reading, after.reading)
                if broken is not None:
                    notes.append(
                        f"ontap {entity}: counter reset between {before.source.path}:"
                        f"{before.line} and {after.source.path}:{after.line} ({broken}): "
                        "no rate across it, that interval left out"
                    )
                else:
                    rows.append(
                        (after.time, SOURCE, entity, rates(before.reading, after.reading, seconds))
                    )
                    spacing.append(seconds)
            before = after
    return rows, spacing


def parse(files: list[SourceFile]) -> Parsed:
    points: list[Point] = []
    rows: list[Row] = []
    for source in files:
        found, metric_rows = _points(source)
        if not found and not metric_rows:
            raise source.nothing_left("records")
        points.extend(found)
        rows.extend(metric_rows)
    notes: list[str] = []
    rated, spacing = _rates(points, notes)
    rows.extend(rated)
    interval = median(spacing) if spacing else None
    means = []
    if interval:
        means.append(
            f"ontap: rates are differences of readings {interval:g} s apart (median): bursts "
            "shorter than that are invisible; latency is a mean per operation, no distribution"
        )
    starts = [p.time for p in points] or [r[0] for r in rows]
    return Parsed(
        rows, interval, means_only=means, started=min(starts) if points else None, notes=notes
    )
