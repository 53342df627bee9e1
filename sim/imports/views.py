"""What the view-snapshot importers share (``pg-views``, ``mssql-views``, ``mariadb-views``):
a file of snapshots of a database's cumulative counters, one or more rows per snapshot,
each with the snapshot's time, turned into per-second rates between consecutive snapshots.

The file is what the query in docs/capture.md writes when run every N seconds and appended:
CSV with a header (``psql \\copy … csv header``, ``sqlcmd -s, -W``) or tab-separated
(``mysql --batch``). A header repeated by every run, ``sqlcmd``'s dashes under it and its
``(N rows affected)`` lines are skipped; every other line is a row.

Per entity (a database, a server), two consecutive snapshots give one interval: its length
is the difference of their times, its rates the counters' differences over it. A counter
that went down, or a ``*_stats_reset`` time that changed, is a reset (a restart, a
``pg_stat_reset()``): no rate is formed across it, the interval is left out and a message
says where, as the live collector marks a reset. A row that cannot be read (a counter that
is not a number, a time that is not one, a second row for one entity at one time) is dropped
and listed. Snapshots are taken in time order, whatever the order of the lines.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from statistics import median

from sim.imports.source import Parsed, Row, SourceFile, combine, number
from storage.collectors.database_figures import SOURCE as DB_SOURCE

#: A line ``sqlcmd`` prints under the header (``-----,-----``) or after the rows.
_RULE = re.compile(r"^[-\s,|\t]+$")
_ROWS_AFFECTED = re.compile(r"^\(\d+ rows? affected\)$")
_OFFSET_HOURS = re.compile(r"([+-]\d{2})$")
_FRACTION = re.compile(r"\.(\d{6})\d+")

Counters = dict[str, float]
Figures = Callable[[Counters, float, Mapping[str, str]], dict[str, float]]


@dataclass(frozen=True)
class ViewFormat:
    """One view-snapshot format: its columns and how differences become figures.

    ``counters``: the cumulative columns every row must have as numbers; ``optional``: those
    that may be missing from the header or empty in a row (the figures they feed are then
    absent); ``resets``: columns whose change marks a reset (``*_stats_reset``);
    ``numbers``: other columns a row needs as positive numbers.
    ``counters_of``: a row's counters keyed for summing (SQL Server sums a database's files
    by type); ``figures``: the differences over the interval's seconds (and the later
    snapshot's text columns) as the ``db`` vocabulary."""

    name: str
    time_column: str
    entity_column: str
    counters: tuple[str, ...]
    figures: Figures
    optional: tuple[str, ...] = ()
    resets: tuple[str, ...] = ()
    #: Columns that are not counters but must be positive numbers (``block_size``).
    numbers: tuple[str, ...] = ()
    counters_of: Callable[[Counters, Mapping[str, str]], Counters] | None = None


@dataclass
class Snapshot:
    time: datetime
    line: int
    counters: Counters = field(default_factory=dict)
    resets: dict[str, str] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)


def parse_time(text: str) -> datetime | None:
    """A snapshot's time as the databases print it: ``2026-01-05 10:00:00.123456+00``
    (PostgreSQL), ``2026-01-05 10:00:00.1234567 +00:00`` (SQL Server), ``2026-01-05
    10:00:00.123456`` (MariaDB, no zone), ISO 8601 with ``T`` and ``Z``."""
    value = text.strip().replace("T", " ").replace("Z", "+00:00")
    value = re.sub(r"\s+([+-]\d{2}(:?\d{2})?)$", r"\1", value)
    value = _FRACTION.sub(lambda m: "." + m.group(1), value)
    value = _OFFSET_HOURS.sub(r"\1:00", value) if re.search(r"\d[+-]\d{2}$", value) else value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _records(source: SourceFile) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header (lower-cased names) and every data line as cells, with its line."""
    lines = source.lines
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise source.refuse(0, "header", "the file is empty")
    delimiter = "\t" if "\t" in lines[first] else ","
    header_line = lines[first]
    header = [name.strip().lower() for name in _split(header_line, delimiter)]
    records: list[tuple[int, list[str]]] = []
    for index in range(first + 1, len(lines)):
        line = lines[index]
        stripped = line.strip()
        if not stripped or line == header_line or _RULE.match(stripped):
            continue
        if _ROWS_AFFECTED.match(stripped):
            continue
        records.append((index + 1, [cell.strip() for cell in _split(line, delimiter)]))
    return header, records


def _split(line: str, delimiter: str) -> list[str]:
    try:
        return next(csv.reader(io.StringIO(line), delimiter=delimiter), [])
    except csv.Error:  # a stray \r inside the line: its cells as they stand, checked later
        return line.split(delimiter)


def _snapshot(
    view: ViewFormat, header: list[str], line: int, cells: list[str], source: SourceFile
) -> tuple[str, Snapshot] | None:
    """One row as (entity, snapshot), or None after dropping it with the reason."""
    if len(cells) != len(header):
        source.drop(line, f"{len(cells)} cells where the header has {len(header)}")
        return None
    row = dict(zip(header, cells, strict=True))
    moment = parse_time(row[view.time_column])
    if moment is None:
        source.drop(line, f"{view.time_column}: {row[view.time_column][:40]!r} is not a time")
        return None
    snapshot = Snapshot(moment, line, text=row)
    for name in (*view.counters, *view.optional):
        raw = row.get(name)
        if raw is None or (name in view.optional and raw in ("", "NULL", "\\N")):
            continue
        value = number(raw)
        if value is None or value < 0:
            source.drop(line, f"{name}: {raw[:40]!r} is not a count")
            return None
        snapshot.counters[name] = value
    for name in view.numbers:
        value = number(row.get(name, ""))
        if value is None or value <= 0:
            source.drop(line, f"{name}: {row.get(name, '')[:40]!r} is not a positive number")
            return None
    snapshot.resets = {name: row.get(name, "") for name in view.resets}
    if view.counters_of is not None:
        snapshot.counters = view.counters_of(snapshot.counters, row)
    return row[view.entity_column] or "(unnamed)", snapshot


def _check_header(view: ViewFormat, header: list[str], source: SourceFile) -> None:
    needed = (view.time_column, view.entity_column, *view.counters, *view.numbers)
    missing = [name for name in needed if name not in header]
    if missing:
        raise source.refuse(
            1,
            missing[0],
            f"no such column in the header (the {view.name} query of docs/capture.md writes it)",
        )


def snapshots(view: ViewFormat, source: SourceFile) -> dict[str, list[Snapshot]]:
    """Per entity, its snapshots in time order; rows of one snapshot (same time) summed."""
    header, records = _records(source)
    _check_header(view, header, source)
    per_entity: dict[str, dict[datetime, Snapshot]] = {}
    for line, cells in records:
        read = _snapshot(view, header, line, cells, source)
        if read is None:
            continue
        entity, snapshot = read
        seen = per_entity.setdefault(entity, {})
        if snapshot.time in seen and view.counters_of is None:
            first = seen[snapshot.time].line
            source.drop(line, f"a second row for {entity} at {snapshot.time} (line {first})")
        elif snapshot.time in seen:
            total = seen[snapshot.time].counters
            for key, value in snapshot.counters.items():
                total[key] = total.get(key, 0.0) + value
        else:
            seen[snapshot.time] = snapshot
    return {e: sorted(s.values(), key=lambda x: x.time) for e, s in per_entity.items()}


def _reset(before: Snapshot, after: Snapshot) -> str | None:
    for name, stamp in after.resets.items():
        if stamp != before.resets.get(name, stamp):
            return f"{name}: {before.resets[name] or 'never'} -> {stamp or 'never'}"
    for name, count in after.counters.items():
        if name in before.counters and count < before.counters[name]:
            return f"{name}: {before.counters[name]:.0f} -> {count:.0f}"
    return None


def _intervals(
    view: ViewFormat, source: SourceFile, entity: str, series: list[Snapshot], notes: list[str]
) -> list[Row]:
    rows: list[Row] = []
    before: Snapshot | None = None
    for after in series:
        if before is None:
            before = after
            continue
        seconds = (after.time - before.time).total_seconds()
        reset = _reset(before, after)
        if reset is not None:
            notes.append(
                f"db {entity}: counter reset between {source.path}:{before.line} and line "
                f"{after.line} ({reset}): no rate across it, that interval left out"
            )
        else:
            delta = {
                k: v - before.counters[k] for k, v in after.counters.items() if k in before.counters
            }
            figures = view.figures(delta, seconds, after.text)
            if figures:
                rows.append((after.time, DB_SOURCE, entity, figures))
        before = after
    return rows


def parse_one(view: ViewFormat, source: SourceFile) -> Parsed:
    notes: list[str] = []
    rows: list[Row] = []
    starts: list[datetime] = []
    spacing: list[float] = []
    for entity, kept in snapshots(view, source).items():
        if len(kept) < 2:
            continue
        starts.append(kept[0].time)
        spacing.extend((b.time - a.time).total_seconds() for a, b in itertools.pairwise(kept))
        rows.extend(_intervals(view, source, entity, kept, notes))
    if not rows and not notes:
        raise source.nothing_left("snapshots (two of an entity are needed for a rate)")
    interval = median(spacing) if spacing else None
    means = (
        [
            f"db: rates are differences of snapshots {interval:g} s apart (median): bursts "
            "shorter than that are invisible"
        ]
        if interval
        else []
    )
    return Parsed(
        rows, interval, means_only=means, started=min(starts) if starts else None, notes=notes
    )


def parse_views(view: ViewFormat, files: list[SourceFile]) -> Parsed:
    return combine(files, lambda source: parse_one(view, source))


def per_second(
    delta: Counters, seconds: float, names: Mapping[str, tuple[str, float]]
) -> dict[str, float]:
    """``figure -> delta[counter] × factor / seconds`` for the counters present."""
    return {
        figure: delta[counter] * factor / seconds
        for figure, (counter, factor) in names.items()
        if counter in delta
    }


def mean_ms(delta: Counters, time_ms: str, count: str) -> float | None:
    """A mean wait per request: Δtime / Δcount, None when nothing completed or either is
    missing."""
    if time_ms not in delta or count not in delta or delta[count] <= 0:
        return None
    return delta[time_ms] / delta[count]
