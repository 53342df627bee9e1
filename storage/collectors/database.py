"""The ``db`` collector family: the database's own I/O statistics, once per interval.

A SLOB-like run is judged by the database's statistics over the measured window (Oracle AWR
in the original): how many block reads each SQL statement caused and how many of the block
requests the database cache served. This module samples them; the pure arithmetic the
summary uses (:func:`physical_reads_per_op`, :func:`cache_warning`) is in
:mod:`storage.collectors.database_figures`.

Which collectors sample a target's statistics is its dialect record's ``stats_collectors``
hook (:mod:`sim.dialects`), the one place that says it: PostgreSQL's is
:func:`postgres_stats_collectors` (:class:`PostgresStatsCollector`, here), MariaDB/MySQL's is
``storage.targets.mysql_record``'s InnoDB collector, Oracle's and SQL Server's are
:func:`storage.collectors.oracle_stats.oracle_stats_collectors` and
:func:`storage.collectors.sqlserver_stats.sqlserver_stats_collectors` (their system views'
counters, storage.collectors.view_counters).

Resets: a view whose ``stats_reset`` time moved (``pg_stat_reset()``, ``pg_stat_reset_shared``)
or a counter that went down (a crash restart) gives a :data:`~sim.protocols.GAP_RESET` sample
for that interval instead of figures, and the reading becomes the new baseline; see
:meth:`PostgresStatsCollector.sample`.

Options (``auto(target, options)``): ``table_pattern`` (a regular expression matching whole
names: the workload's ``table_pattern()``, which the runner passes) or ``table_prefix`` (names
that start with it) restricts the per-table samples; without either every user table of the
target's schema is sampled.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from sim.dialects import dialect_of
from sim.errors import CollectorError
from sim.protocols import GAP_RESET, Collector, Sample, Target, connect_sql, gap_sample
from sim.registry import (
    COLLECTOR_SCOPE_SHARED,
    ROLE_DATABASE,
    CollectorEntry,
    Display,
    Figure,
    register_collector,
)
from sim.sql import Statement
from storage.collectors.database_figures import (
    CACHE_WARNING_PCT,
    RESET_PREFIX,
    SOURCE,
    TABLE_ENTITY_PREFIX,
    blocks_read_from_means,
    cache_warning,
    counter_rates,
    first_decrease,
    hit_pct,
    physical_reads_per_op,
    stats_reset_moved,
    table_blocks_read,
    when,
)
from storage.collectors.database_io import (
    PG_ACTIVITY_SQL,
    PG_SEES_ALL_SQL,
    check_sees_all,
    missing_grant,
    postgres_vocabulary,
)

if TYPE_CHECKING:
    from storage.targets.postgres import PostgresConnection

__all__ = [
    "CACHE_WARNING_PCT",
    "SOURCE",
    "PostgresStatsCollector",
    "auto_db",
    "blocks_read_from_means",
    "cache_warning",
    "counter_rates",
    "first_decrease",
    "hit_pct",
    "physical_reads_per_op",
    "postgres_database_sql",
    "stats_reset_moved",
    "table_blocks_read",
]

# --------------------------------------------------------------------------- PostgreSQL SQL


def _per_s(*counters: str) -> dict[str, str]:
    """counter -> rate key: ``<counter>_s``; ``<counter>_ms_s`` for the ``*_time`` counters,
    which are milliseconds (and stay zero unless ``track_io_timing`` is on)."""
    return {c: c + ("_ms_s" if c.endswith("_time") else "_s") for c in counters}


PG_DATABASE_RATES = _per_s(
    "blks_read", "blks_hit", "xact_commit", "xact_rollback", "tup_returned", "tup_fetched",
    "tup_updated", "blk_read_time", "blk_write_time",
)  # fmt: skip
PG_WAL_RATES = _per_s("wal_records", "wal_bytes", "wal_write", "wal_sync")
PG_BGWRITER_RATES = _per_s("buffers_checkpoint", "buffers_clean", "buffers_backend")
#: Reported as plain differences over the interval (they are rare events, not rates).
PG_BGWRITER_DELTAS = ("checkpoints_timed", "checkpoints_req")
#: pg_stat_io (16+): relation I/O of every backend type, summed (``io_<column>``).
_PG_IO_COLUMNS = ("reads", "hits", "writes", "extends", "evictions", "fsyncs", "read_time",
                  "write_time")  # fmt: skip
PG_IO_RATES = _per_s(*(f"io_{c}" for c in _PG_IO_COLUMNS))
PG_TABLE_RATES = _per_s(
    "heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit", "toast_blks_read",
    "toast_blks_hit",
)  # fmt: skip
_PG_IO_SUMS = (
    "(SELECT "
    + ", ".join(f"COALESCE(SUM({c}), 0)::float8 AS io_{c}" for c in _PG_IO_COLUMNS)
    + ", COALESCE(EXTRACT(EPOCH FROM MAX(stats_reset)), 0)::float8 AS reset_pg_stat_io"
    + " FROM pg_stat_io WHERE object = 'relation') AS io"
)


def postgres_database_sql(version_num: int) -> str:
    """One row of cumulative counters for the current database, WAL, checkpointer and
    background writer (and pg_stat_io from 16 on), in the views of server ``version_num``,
    with each view's ``stats_reset`` time (``reset_<view>``)."""
    columns = [f"d.{c}::float8 AS {c}" for c in PG_DATABASE_RATES]
    columns.append(
        "COALESCE(EXTRACT(EPOCH FROM d.stats_reset), 0)::float8 AS reset_pg_stat_database"
    )
    sources = ["pg_stat_database AS d"]
    if version_num >= 140000:  # pg_stat_wal appeared in 14
        columns += ["w.wal_records::float8 AS wal_records", "w.wal_bytes::float8 AS wal_bytes"]
        columns.append(
            "COALESCE(EXTRACT(EPOCH FROM w.stats_reset), 0)::float8 AS reset_pg_stat_wal"
        )
        sources.append("pg_stat_wal AS w")
        if version_num >= 180000:  # 18 moved WAL writes and syncs to pg_stat_io
            columns += [
                "(SELECT COALESCE(SUM(writes), 0) FROM pg_stat_io WHERE object = 'wal')::float8"
                " AS wal_write",
                "(SELECT COALESCE(SUM(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal')::float8"
                " AS wal_sync",
            ]
        else:
            columns += ["w.wal_write::float8 AS wal_write", "w.wal_sync::float8 AS wal_sync"]
    sources.append("pg_stat_bgwriter AS b")
    columns.append(
        "COALESCE(EXTRACT(EPOCH FROM b.stats_reset), 0)::float8 AS reset_pg_stat_bgwriter"
    )
    if version_num >= 170000:  # 17 split the checkpointer out and dropped buffers_backend
        sources.append("pg_stat_checkpointer AS c")
        columns.append(
            "COALESCE(EXTRACT(EPOCH FROM c.stats_reset), 0)::float8 AS reset_pg_stat_checkpointer"
        )
        columns += [
            "c.buffers_written::float8 AS buffers_checkpoint",
            "b.buffers_clean::float8 AS buffers_clean",
            "(SELECT COALESCE(SUM(writes), 0) FROM pg_stat_io WHERE object = 'relation'"
            " AND backend_type = 'client backend')::float8 AS buffers_backend",
            "c.num_timed::float8 AS checkpoints_timed",
            "c.num_requested::float8 AS checkpoints_req",
        ]
    else:
        columns += [f"b.{c}::float8 AS {c}" for c in (*PG_BGWRITER_RATES, *PG_BGWRITER_DELTAS)]
    if version_num >= 160000:
        columns += [f"io.{c}" for c in PG_IO_RATES]
        columns.append("io.reset_pg_stat_io")
        sources.append(_PG_IO_SUMS)
    return (
        "SELECT "
        + ",\n       ".join(columns)
        + "\n  FROM "
        + ",\n       ".join(sources)
        + "\n WHERE d.datname = current_database()"
    )


PG_TABLES_SQL = """SELECT relname::text AS relname,
       relid::bigint::float8 AS relid,
       heap_blks_read::float8 AS heap_blks_read,
       heap_blks_hit::float8 AS heap_blks_hit,
       COALESCE(idx_blks_read, 0)::float8 AS idx_blks_read,
       COALESCE(idx_blks_hit, 0)::float8 AS idx_blks_hit,
       COALESCE(toast_blks_read, 0)::float8 AS toast_blks_read,
       COALESCE(toast_blks_hit, 0)::float8 AS toast_blks_hit
  FROM pg_statio_user_tables
 WHERE schemaname = current_schema() AND relname::text ~ $1"""
"""Block counters of the sampled tables in the target's schema (``$1``: the names' pattern)."""


# --------------------------------------------------------------------------- collector


def _statement(name: str, sql: str) -> Statement:
    params = ("prefix",) if "$1" in sql else ()
    return Statement(name=f"db_collector_{name}", sql=sql, param_names=params)


class PostgresStatsCollector(Collector):
    """PostgreSQL's statistics views as rates per second, one database sample plus one per
    table (entity ``table:<name>``).

    Load on the target: one extra connection (opened in ``start`` through the target's pool,
    on the engine's loop) running two prepared catalog-view queries per interval — one row from
    pg_stat_database, pg_stat_wal and pg_stat_bgwriter (plus pg_stat_io on 16+), and one row
    per sampled table from pg_statio_user_tables (a live capture counts the sessions of
    pg_stat_activity instead of the tables). Each is a read-only transaction, so the database's
    ``xact_commit_s`` includes two commits per interval of the collector's own.

    The server publishes a busy backend's counters about once a second (PostgreSQL 15+), so
    an interval's figures can lag the workload by up to a second; over a window of many
    intervals the lag cancels out.
    """

    source: ClassVar[str] = SOURCE

    def __init__(
        self,
        target: Target,
        table_prefix: str | None = None,
        table_pattern: str | None = None,
        capture: bool = False,
    ) -> None:
        """``capture``: a live capture's collector, which also counts the sessions' activity
        and refuses to start without the grants that needs (see :meth:`start`)."""
        if target.kind != "postgres":
            raise CollectorError(f"collector db: PostgreSQL statistics on a {target.kind} target")
        self.target = target
        self.table_prefix = table_prefix or ""
        # A prefix is the pattern of names that start with it ("" matches every table).
        self.table_pattern = table_pattern or (
            f"^{re.escape(table_prefix)}" if table_prefix else ""
        )
        self.database: str | None = None
        self.version_num: int | None = None
        self._conn: PostgresConnection | None = None
        self._db_statement: Statement | None = None
        self._tables_statement = _statement("tables", PG_TABLES_SQL)
        self.capture = capture
        self._activity_statement = _statement("activity", PG_ACTIVITY_SQL)
        self._db_rates: dict[str, str] = {}
        self._prev: tuple[dict[str, float], dict[str, dict[str, float]]] | None = None
        self._prev_now: float | None = None
        #: The collector's own statements whose commits the server has not shown yet (it
        #: publishes a backend's counts about once a second): taken off ``commits_s`` as
        #: they appear, so the figure never goes below zero and its total is exact.
        self._own_commits = 0.0

    async def start(self, now: float) -> None:
        """Open the connection, detect the server version, take the baseline."""
        conn = await connect_sql(self.target)
        # Told by what it offers, not by its class: storage.targets.postgres names this
        # collector as its dialect's hook, so importing its class here would close a cycle.
        if not callable(getattr(conn, "rows", None)):
            await conn.close()
            raise CollectorError("collector db: the target's connection is not asyncpg's")
        self._conn = cast("PostgresConnection", conn)
        try:
            version = await conn.scalar(_statement("version", "SHOW server_version_num"))
            self.version_num = int(version)
            self.database = str(await conn.scalar(_statement("db", "SELECT current_database()")))
            self._own_commits = 3.0 if self.capture else 2.0
        except Exception:
            await self.stop()
            raise
        self._db_statement = _statement("database", postgres_database_sql(self.version_num))
        self._db_rates = dict(PG_DATABASE_RATES)
        if self.version_num >= 140000:
            self._db_rates.update(PG_WAL_RATES)
        self._db_rates.update(PG_BGWRITER_RATES)
        if self.version_num >= 160000:
            self._db_rates.update(PG_IO_RATES)
        try:
            if self.capture:
                await check_sees_all(conn, _statement("sees_all", PG_SEES_ALL_SQL))
            self._prev = await self._read()
        except Exception as exc:
            await self.stop()
            if (grant := missing_grant(exc)) is None:
                raise
            raise grant from exc
        self._prev_now = now

    async def _read(self) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        conn = self._conn
        if conn is None or self._db_statement is None:
            raise CollectorError("collector db: sample() called before start()")
        rows = await conn.rows(self._db_statement)
        self._own_commits += 2  # two statements per reading, each a transaction
        if not rows:
            raise CollectorError(f"collector db: no pg_stat_database row for {self.database}")
        database = {k: float(v or 0.0) for k, v in rows[0].items()}
        if self.capture:  # the sessions instead of the tables: production may have thousands
            activity = (await conn.rows(self._activity_statement))[0]
            database.update({f"now_{k}": float(v or 0.0) for k, v in activity.items()})
            return database, {}
        tables = {
            str(row["relname"]): {k: float(v or 0.0) for k, v in row.items() if k != "relname"}
            for row in await conn.rows(self._tables_statement, (self.table_pattern,))
        }
        return database, tables

    async def sample(self, now: float) -> list[Sample]:
        """Rates since the previous reading; tables first seen now count from zero. A view
        whose ``stats_reset`` moved, or a counter that went down, makes that interval a
        :data:`~sim.protocols.GAP_RESET` gap for the database (and, for pg_stat_reset(), for
        every table); a table dropped and re-created (another relid) is a gap of its own.

        After losing its connection (the server restarted) the collector reconnects at the
        next sample and takes a fresh baseline (a restart after a crash resets the counters),
        so it reports again from the interval after that."""
        if self._conn is None:
            await self.start(now)
            return []
        if self._prev is None or self._prev_now is None:
            raise CollectorError("collector db: sample() called before start()")
        interval = now - self._prev_now
        if not interval > 0:
            raise CollectorError(f"collector db: clock did not advance ({self._prev_now} -> {now})")
        try:
            curr = await self._read()
        except Exception as exc:
            if self.target.is_disconnect(exc):
                await self.stop()
            raise
        (prev_db, prev_tables), (db, tables) = self._prev, curr
        self._prev, self._prev_now = curr, now  # after a reset too: the next interval is exact
        assert self.database is not None
        samples = [self._database_sample(prev_db, db, interval, now)]
        # pg_stat_reset() also zeroes this database's tables, whose counters may not show it.
        key = RESET_PREFIX + "pg_stat_database"
        db_reset = None
        if db[key] != prev_db[key]:
            db_reset = f"pg_stat_reset(): stats_reset {when(prev_db[key])} -> {when(db[key])}"
        zero = dict.fromkeys(("relid", *PG_TABLE_RATES), 0.0)
        for name in sorted(tables):
            entity = TABLE_ENTITY_PREFIX + name
            before, after = prev_tables.get(name), tables[name]
            if before is None:  # created since the last reading: all its counts are new
                before = zero | {"relid": after["relid"]}
            broken = db_reset
            if broken is None and before["relid"] != after["relid"]:
                broken = f"re-created (relid {before['relid']:.0f} -> {after['relid']:.0f})"
            broken = broken or first_decrease(before, after, PG_TABLE_RATES)
            if broken is not None:
                samples.append(gap_sample(SOURCE, entity, GAP_RESET, broken, now))
                continue
            rates = counter_rates(before, after, interval, PG_TABLE_RATES)
            rates["interval_s"] = interval
            samples.append(Sample(SOURCE, entity, rates, t=now, meta={"kind": "table"}))
        return samples

    def _database_sample(
        self, prev: dict[str, float], curr: dict[str, float], interval: float, now: float
    ) -> Sample:
        """The database's figures, or a reset gap when a view's counters were reset."""
        assert self.database is not None
        broken = stats_reset_moved(prev, curr) or first_decrease(
            prev, curr, [*self._db_rates, *PG_BGWRITER_DELTAS]
        )
        if broken is not None:
            return gap_sample(SOURCE, self.database, GAP_RESET, broken, now)
        values = counter_rates(prev, curr, interval, self._db_rates)
        own = min(curr["xact_commit"] - prev["xact_commit"], self._own_commits)
        self._own_commits -= own
        values.update(postgres_vocabulary(values, self.version_num or 0, own / interval))
        values.update({k[4:]: v for k, v in curr.items() if k.startswith("now_")})
        for name in PG_BGWRITER_DELTAS:
            values[name] = curr[name] - prev[name]
        values["cache_hit_pct"] = hit_pct(
            curr["blks_hit"] - prev["blks_hit"], curr["blks_read"] - prev["blks_read"]
        )
        values["interval_s"] = interval
        return Sample(SOURCE, self.database, values, t=now, meta={"kind": "database"})

    async def stop(self) -> None:
        """Give the connection back."""
        conn, self._conn = self._conn, None
        self._prev = self._prev_now = None
        if conn is not None:
            # A connection the server dropped may fail to close cleanly: it is gone anyway.
            with contextlib.suppress(Exception):
                await conn.close()

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        """Physical block reads of the workload's tables per read statement (the SLOB sanity
        check: ≈ WORK_UNIT−1 when the data is far larger than the cache), the tables' cache
        hit share, and a warning when the cache served most block requests."""
        blocks = blocks_read_from_means(means, measured_s)
        hits = sum(
            (m.get("heap_blks_hit_s", 0.0) + m.get("idx_blks_hit_s", 0.0)) * measured_s
            for entity, m in means.items()
            if entity.startswith(TABLE_ENTITY_PREFIX)
        )
        facts: dict[str, Any] = {
            "tables_blocks_read": round(blocks, 1),
            "tables_cache_hit_pct": round(hit_pct(hits, blocks), 2) if hits + blocks else None,
        }
        per_op = {
            op: round(value, 2)
            for op, count in op_counts.items()
            if (value := physical_reads_per_op(blocks, count)) is not None
        }
        if "read" in per_op:
            facts["physical_reads_per_read"] = per_op["read"]
        warning = cache_warning(facts["tables_cache_hit_pct"])
        return facts, [warning] if warning else []

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": "postgres",
            "database": self.database,
            "server_version_num": self.version_num,
            "table_prefix": self.table_prefix or None,
            "table_pattern": self.table_pattern or None,
            "pg_stat_io": self.version_num is not None and self.version_num >= 160000,
            "load": "one extra connection; two catalog-view queries per interval",
        }


# --------------------------------------------------------------------------- registration


def postgres_stats_collectors(target: Target, options: dict[str, Any]) -> list[Collector]:
    """PostgreSQL's statistics collectors (the postgres dialect record's ``stats_collectors``);
    ``options["capture"]``: a live capture's (sim.capture)."""
    prefix, pattern = options.get("table_prefix"), options.get("table_pattern")
    for name, value in (("table_prefix", prefix), ("table_pattern", pattern)):
        if value is not None and not isinstance(value, str):
            raise CollectorError(f"collector db: option '{name}' must be a string")
    return [PostgresStatsCollector(target, prefix, pattern, bool(options.get("capture")))]


def auto_db(target: Target, options: dict[str, Any]) -> list[Collector]:
    """The database-statistics collectors for ``target``: its dialect record's
    ``stats_collectors`` (none for a target without SQL or a dialect without the hook)."""
    record = dialect_of(target)
    factory = record.stats_collectors if record is not None else None
    return factory(target, options) if factory is not None else []


register_collector(
    CollectorEntry(
        source=SOURCE,
        auto=auto_db,
        summary="the database's own I/O statistics, as the target's dialect record samples them "
        "(PostgreSQL: pg_stat_database, pg_statio; MariaDB/MySQL: InnoDB counters; Oracle: "
        "v$sysstat, v$system_event; SQL Server: dm_io_virtual_file_stats, dm_os_wait_stats)",
        scope=COLLECTOR_SCOPE_SHARED,
        display=Display(title="database statistics"),
        role=ROLE_DATABASE,
        # The database's own wait for one block from storage (Oracle: db file sequential read,
        # SQL Server: PAGEIOLATCH_SH, PostgreSQL with track_io_timing), per entity.
        correlate=(
            Figure("blks_read_s", "physical reads/s"),
            Figure("single_block_read_ms", "single-block read wait", "ms", 3, grouped=False),
        ),
    )
)
