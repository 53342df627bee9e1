"""What the database asked of its storage, from the source playing the database role: per
database or instance, the database I/O vocabulary (docs/bundle.md, ``db`` source) and the
wait-event histograms an AWR report gives.

Only the vocabulary's columns are read: a live collector's other figures (PostgreSQL's
``blks_read_s`` …) are not the same quantities and are not relabelled. An entity without any
of them (a table, a database whose collector predates the vocabulary) is left out, and the
profile says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sim.profile.columns import TIME, Col, summary_figures, window_figures
from sim.profile.figures import DERIVED, column_info
from sim.profile.source import Table

DB_COLUMNS = (
    Col("phys_read_req_s", "physical reads", "1/s", TIME, "physical read requests per second"),
    Col("phys_read_kB_s", "read kB/s", "kB/s", TIME, "physically read, kB per second"),
    Col("single_block_read_s", "single-block reads", "1/s", TIME, "single-block reads/s"),
    Col("multi_block_read_s", "multi-block reads", "1/s", TIME, "multi-block reads/s"),
    Col("phys_write_req_s", "physical writes", "1/s", TIME, "physical write requests/s"),
    Col("phys_write_kB_s", "write kB/s", "kB/s", TIME, "physically written, kB per second"),
    Col("log_write_req_s", "log writes", "1/s", TIME, "log (redo, WAL) write requests/s"),
    Col("log_write_kB_s", "log kB/s", "kB/s", TIME, "log (redo, WAL) written, kB per second"),
    Col("commits_s", "commits", "1/s", TIME, "commits per second"),
    Col(
        "single_block_read_ms",
        "single-block wait",
        "ms",
        "single_block_read_s",
        "mean wait of a single-block read",
    ),
    Col(
        "multi_block_read_ms",
        "multi-block wait",
        "ms",
        "multi_block_read_s",
        "mean wait of a multi-block read",
    ),
    Col("log_write_ms", "log write wait", "ms", "log_write_req_s", "mean wait of a log write"),
    Col("io_req_s", "I/O requests", "1/s", TIME, "physical reads + writes + log writes"),
)
VOCABULARY = frozenset(c.key for c in DB_COLUMNS) - {"io_req_s"}
REQUESTS = ("phys_read_req_s", "phys_write_req_s", "log_write_req_s")
WAIT_MARK = ":wait:"
CLUSTER = ":cluster"
WAIT_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
WAIT_COLUMNS = (*(f"le_{b}ms_pct" for b in WAIT_BOUNDS), "gt_1024ms_pct")
_WAIT_COLUMN = re.compile(r"^(le_\d+ms_pct|gt_1024ms_pct)$")


def keep_column(name: str) -> bool:
    return name in VOCABULARY or bool(_WAIT_COLUMN.match(name))


@dataclass
class DatabaseData:
    table: Table
    column_kind: str
    #: ``series[entity][key]`` per interval, for the entities with vocabulary columns.
    series: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    info: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    waits: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    without: list[str] = field(default_factory=list)

    @property
    def lengths(self) -> list[float]:
        return self.table.lengths


def database_data(table: Table, column_kind: str) -> DatabaseData:
    """The vocabulary per entity, the wait histograms per ``<instance>:wait:<event>``."""
    data = DatabaseData(table, column_kind)
    for entity in sorted(table.values):
        columns = table.values[entity]
        if WAIT_MARK in entity:
            waits = {c: columns[c] for c in WAIT_COLUMNS if c in columns}
            if waits:
                data.waits[entity] = waits
            continue
        found = {k: v for k, v in columns.items() if k in VOCABULARY}
        if not found:
            data.without.append(entity)
            continue
        data.series[entity] = dict(found)
        data.info[entity] = {
            k: column_info(_unit(k), column_kind, f"{table.name}: {k} of {entity}") for k in found
        }
        _requests(data, entity)
    return data


def _unit(key: str) -> str:
    return next(c.unit for c in DB_COLUMNS if c.key == key)


def _requests(data: DatabaseData, entity: str) -> None:
    """``io_req_s``: the entity's physical reads, writes and log writes together."""
    series = data.series[entity]
    parts = [series[k] for k in REQUESTS if k in series]
    if not parts:
        return
    series["io_req_s"] = [
        sum(v for v in values if v is not None) if any(v is not None for v in values) else None
        for values in zip(*parts, strict=True)
    ]
    named = " + ".join(k for k in REQUESTS if k in data.series[entity])
    data.info[entity]["io_req_s"] = column_info(
        "1/s", DERIVED, f"{data.table.name}: {named} of {entity}"
    )


def load_series(data: DatabaseData) -> tuple[list[float | None], str]:
    """All entities' I/O requests per second together, per interval, and where from; a
    cluster's total (``<name>:cluster``, an AWR RAC report's) rather than its instances
    beside it, which it already counts."""
    entities = [e for e, s in data.series.items() if "io_req_s" in s]
    clusters = [e for e in entities if e.endswith(CLUSTER)]
    entities = clusters or entities
    parts = [data.series[e]["io_req_s"] for e in entities]
    total = [
        sum(v for v in values if v is not None) if any(v is not None for v in values) else None
        for values in zip(*parts, strict=True)
    ]
    return total, f"{data.table.name}: {' + '.join(REQUESTS)}, over {', '.join(entities)}"


def database_document(data: DatabaseData) -> dict[str, Any]:
    """The database part of the profile: per entity the summary of every vocabulary figure
    and its per-interval series; per wait event its histogram's mean shares."""
    entities = {}
    for entity, series in data.series.items():
        entities[entity] = {
            "summary": summary_figures(series, data.lengths, data.info[entity], DB_COLUMNS),
            "columns": data.info[entity],
            "series": series,
        }
    waits = {}
    for entity, columns in data.waits.items():
        instance, _, event = entity.partition(WAIT_MARK)
        shares = {c: _mean(values, data.lengths) for c, values in columns.items()}
        waits[entity] = {
            "instance": instance,
            "event": event,
            "unit": "% of waits in the bucket",
            "what": data.column_kind,
            "source": f"{data.table.name}: {', '.join(columns)} of {entity}, mean over intervals",
            "shares_pct": shares,
        }
    return {
        "source": data.table.source,
        "t": data.table.times,
        "interval_s": data.lengths,
        "entities": entities,
        "waits": waits,
        "without": data.without,
    }


def _mean(values: list[float | None], lengths: list[float]) -> float | None:
    pairs = [(v, dt) for v, dt in zip(values, lengths, strict=True) if v is not None]
    total = sum(dt for _, dt in pairs)
    return round(sum(v * dt for v, dt in pairs) / total, 4) if total else None


def window_document(data: DatabaseData, first: int, last: int) -> dict[str, Any]:
    """Every entity's vocabulary over intervals ``first..last``."""
    return {
        entity: window_figures(series, data.lengths, data.info[entity], DB_COLUMNS, first, last)
        for entity, series in data.series.items()
    }
