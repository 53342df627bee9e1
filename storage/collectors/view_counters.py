"""The ``db`` collectors of engines whose statistics are cumulative counters in system views
read over a plain SQL connection (Oracle's ``v$`` views, SQL Server's DMVs): the reading, the
reset rules and the findings they share. The engine modules (storage.collectors.oracle_stats,
storage.collectors.sqlserver_stats) say which rows they read and what figures they make.

The seam between a server and the arithmetic is :func:`dict_rows`: a DB-API cursor's
``description`` and rows as one dict per row, keyed by the column's lower-case name. A
connection offers its rows through ``rows(statement)`` (as PostgreSQL's and MariaDB's do);
Oracle's and ODBC's connections build those dicts with :func:`dict_rows` from the cursor they
executed on, and the tests replace only that cursor with rows recorded from real servers.

Resets (the rules every ``db`` collector follows, see storage.collectors.database): a
``reset_<what>`` entry of the database entity that changed (the instance restarted) makes the
interval a :data:`~sim.protocols.GAP_RESET` gap for every entity; a counter that went down makes
it a gap for its entity (a wait-statistics clear, a database taken offline and back). The
reading is the new baseline either way, so the next interval is exact. A row seen for the first
time counts from zero (``v$system_event`` lists an event only once it was waited for).
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, Collector, Sample, Statement, Target, connect_sql, gap_sample
from storage.collectors.database_figures import (
    SOURCE,
    cache_warning,
    first_decrease,
    physical_reads_per_op,
    stats_reset_moved,
)

#: One reading: entity -> counter -> cumulative value.
Reading = dict[str, dict[str, float]]
#: Entities' kinds (the sample's ``meta["kind"]``).
KIND_DATABASE = "database"
#: An entity of one wait event or wait type: ``<database>:wait:<name>`` (the profile reads
#: its ``le_<N>ms_pct`` histogram columns, as from an AWR report's).
WAIT_MARK = ":wait:"
#: Marks of the entities that are not the database's own (waits, I/O functions, files).
PART_MARKS = (WAIT_MARK, ":function:", ":file:")
#: The profile's wait histogram buckets: (N/2, N] ms as ``le_<N>ms_pct``, over 1024 ms as
#: ``gt_1024ms_pct`` (sim.profile.database).
HISTOGRAM_BOUNDS_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def dict_rows(
    description: Sequence[Any] | None, rows: Iterable[Sequence[Any]]
) -> list[dict[str, Any]]:
    """A DB-API cursor's result (``cursor.description`` and its rows) as one dict per row, keyed
    by the column's name in lower case (Oracle reports unquoted names upper-cased). A column
    description is anything whose [0] is the name (a tuple, python-oracledb's FetchInfo)."""
    if description is None:
        raise CollectorError("collector db: the statement returned no result set")
    names = [str(column[0]).lower() for column in description]
    return [dict(zip(names, row, strict=True)) for row in rows]


def number(value: Any) -> float:
    """A counter's value as a float (NULL, as an empty sum gives it, is 0)."""
    return 0.0 if value is None else float(value)


def wait_histogram(buckets: Mapping[float, float]) -> dict[str, float]:
    """Waits per bucket over an interval (``{upper bound in ms: waits}``, Oracle's
    ``wait_time_milli``: waits shorter than it and at least half of it) as the profile's
    ``le_<N>ms_pct`` / ``gt_1024ms_pct`` shares; nothing when there were no waits."""
    total = sum(buckets.values())
    if total <= 0:
        return {}
    shares = dict.fromkeys([f"le_{b}ms_pct" for b in HISTOGRAM_BOUNDS_MS] + ["gt_1024ms_pct"], 0.0)
    for bound, waits in buckets.items():
        key = f"le_{int(bound)}ms_pct" if bound <= HISTOGRAM_BOUNDS_MS[-1] else "gt_1024ms_pct"
        if key not in shares:  # a bound that is not a power of two: not the profile's buckets
            return {}
        shares[key] += 100.0 * waits / total
    return shares


def mean_ms(time_ms: float, count: float) -> float | None:
    """Mean wait in ms of ``count`` waits that took ``time_ms`` together (None without any)."""
    return time_ms / count if count > 0 else None


class ViewCountersCollector(Collector):
    """Cumulative counters from system views, one reading per interval over one connection of
    the target's; subclasses read the rows (:meth:`read`) and turn an entity's two readings
    into figures (:meth:`figures`)."""

    source: ClassVar[str] = SOURCE
    #: The target kind and the engine's name in messages.
    engine: ClassVar[str]

    def __init__(self, target: Target, capture: bool = False) -> None:
        self.target = target
        self.capture = capture
        self._conn: Any = None
        self.database: str | None = None
        self._prev: Reading | None = None
        self._prev_now: float | None = None

    # ------------------------------------------------------------------ for subclasses

    @abstractmethod
    async def read(self) -> tuple[str, Reading]:
        """The database entity's name and one reading of every entity (the database's holds
        ``reset_<what>`` entries where the engine tells when its counters started)."""

    @abstractmethod
    def figures(
        self, entity: str, before: Mapping[str, float], after: Mapping[str, float], seconds: float
    ) -> tuple[str, dict[str, float]]:
        """The entity's kind and figures over ``seconds`` (no counter went down)."""

    @abstractmethod
    def missing_grant(self, exc: BaseException) -> CollectorError | None:
        """The refusal of a view the user may not read, as the line that names the grant."""

    # ------------------------------------------------------------------ reading

    async def rows(self, name: str, sql: str) -> list[dict[str, Any]]:
        """Rows of one statement as dicts (lower-case keys) through the connection's ``rows``."""
        if self._conn is None:
            raise CollectorError("collector db: sample() called before start()")
        found = await self._conn.rows(Statement(f"db_collector_{name}", sql, ()))
        return [{str(k).lower(): v for k, v in dict(row).items()} for row in found]

    async def start(self, now: float) -> None:
        """Open the connection and take the baseline; a view the user may not read stops the
        collector with the grant it needs."""
        conn = await connect_sql(self.target)
        if not callable(getattr(conn, "rows", None)):
            await conn.close()
            raise CollectorError(
                f"collector db: the {self.target.kind} target's connection offers no rows(), "
                f"which the {self.engine} statistics read"
            )
        self._conn = conn
        try:
            self.database, self._prev = await self._reading()
        except Exception as exc:
            await self.stop()
            if (grant := self.missing_grant(exc)) is None:
                raise
            raise grant from exc
        self._prev_now = now

    async def _reading(self) -> tuple[str, Reading]:
        try:
            return await self.read()
        finally:
            with contextlib.suppress(Exception):
                await self._conn.rollback()  # end the read-only transaction the views opened

    async def sample(self, now: float) -> list[Sample]:
        """Rates since the previous reading, one sample per entity (see the module's reset
        rules). After losing its connection the collector reconnects at the next sample and
        takes a fresh baseline (a restarted server's counters start again)."""
        if self._conn is None:
            await self.start(now)
            return []
        if self._prev is None or self._prev_now is None:
            raise CollectorError("collector db: sample() called before start()")
        seconds = now - self._prev_now
        if not seconds > 0:
            raise CollectorError(f"collector db: clock did not advance ({self._prev_now} -> {now})")
        try:
            database, curr = await self._reading()
        except Exception as exc:
            if self.target.is_disconnect(exc):
                await self.stop()
            raise
        prev, self._prev, self._prev_now = self._prev, curr, now
        self.database = database
        return compare(self, database, prev, curr, seconds, now)

    async def stop(self) -> None:
        """Give the connection back."""
        conn, self._conn = self._conn, None
        self._prev = self._prev_now = None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # ------------------------------------------------------------------ summary

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        """Blocks the database read from storage per read statement (the SLOB check: about
        WORK_UNIT − 1 on data far larger than the cache), the cache's hit share and the
        database's own mean single-block read wait over the measured window."""
        database = {e: m for e, m in means.items() if not any(mark in e for mark in PART_MARKS)}
        blocks = sum(m.get("blks_read_s", 0.0) for m in database.values()) * measured_s
        facts: dict[str, Any] = {"tables_blocks_read": round(blocks, 1)}
        per_read = physical_reads_per_op(blocks, op_counts.get("read", 0))
        if per_read is not None:
            facts["physical_reads_per_read"] = round(per_read, 2)
        hits = [m["cache_hit_pct"] for m in database.values() if "cache_hit_pct" in m]
        facts["tables_cache_hit_pct"] = round(sum(hits) / len(hits), 2) if hits else None
        # The mean wait weighted by the reads of each interval: total wait over total reads.
        reads = sum(m.get("single_block_read_s", 0.0) for m in database.values())
        waited = sum(
            m.get("single_block_read_ms", 0.0) * m.get("single_block_read_s", 0.0)
            for m in database.values()
        )
        if reads > 0 and waited > 0:
            facts["single_block_read_ms"] = round(waited / reads, 3)
        warning = cache_warning(facts["tables_cache_hit_pct"])
        return facts, [warning] if warning else []


def compare(
    collector: ViewCountersCollector,
    database: str,
    prev: Reading,
    curr: Reading,
    seconds: float,
    now: float,
) -> list[Sample]:
    """Every entity's sample from two readings ``seconds`` apart (the module's reset rules)."""
    restarted = stats_reset_moved(prev.get(database, {}), curr.get(database, {}))
    samples: list[Sample] = []
    for entity in sorted(curr):
        after = curr[entity]
        before = {k: v for k, v in prev.get(entity, {}).items() if k in after}
        before = dict.fromkeys(after, 0.0) | before  # new rows and counters count from zero
        counters = [k for k in after if not k.startswith("reset_")]
        broken = restarted or first_decrease(before, after, counters)
        if broken is not None:
            samples.append(gap_sample(SOURCE, entity, GAP_RESET, broken, now))
            continue
        kind, values = collector.figures(entity, before, after, seconds)
        values["interval_s"] = seconds
        samples.append(Sample(SOURCE, entity, values, t=now, meta={"kind": kind}))
    return samples
