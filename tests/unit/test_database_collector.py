"""The ``db`` collector: its pure arithmetic, and its rates against the live PostgreSQL driven
with a fake clock (two readings with a known number of statements in between).

The live part runs in a database of its own, created and dropped here, so no other activity
on the server shows in its ``pg_stat_database`` row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
from collections.abc import Iterator

import asyncpg
import pytest
import sqlglot

from sim import registry
from sim.dialects import SqlDialect
from sim.protocols import GAP_RESET, Collector, EngineContext, Sample, Target
from storage.collectors.database import (
    PostgresStatsCollector,
    auto_db,
    blocks_read_from_means,
    cache_warning,
    counter_rates,
    first_decrease,
    hit_pct,
    physical_reads_per_op,
    postgres_database_sql,
    stats_reset_moved,
    table_blocks_read,
)
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings, SqliteSettings
from storage.targets.sqlite import SqliteTarget
from tests.support.counters import by_entity, impossible_rates
from tests.unit.test_devices import PathsTarget

HOST, PORT = "127.0.0.1", 5432
OWN_DB = f"dbsim_ut_collector_{os.getpid()}"


def table_sample(name: str, heap_read: float, idx_read: float, interval: float) -> Sample:
    values = {
        "heap_blks_read_s": heap_read,
        "idx_blks_read_s": idx_read,
        "heap_blks_hit_s": 1000.0,
        "idx_blks_hit_s": 1000.0,
        "interval_s": interval,
    }
    return Sample("db", f"table:{name}", values)


# ------------------------------------------------------------------ pure functions


def test_a_decrease_or_a_moved_stats_reset_is_a_reset_never_a_rate() -> None:
    before = {"a": 100.0, "b": 5.0, "reset_pg_stat_database": 0.0, "reset_pg_stat_wal": 1.7e9}
    assert first_decrease(before, before | {"a": 125.0}, ["a", "b"]) is None
    assert first_decrease(before, before | {"b": 2.0}, ["a", "b"]) == "b: 5 -> 2"
    assert counter_rates({"a": 1, "b": 0}, {"a": 11, "b": 4}, 2.0, {"a": "a_s", "b": "b_s"}) == {
        "a_s": 5.0,
        "b_s": 2.0,
    }
    assert stats_reset_moved(before, dict(before)) is None
    # pg_stat_reset() then a busy second: every counter is higher again, only the time says it.
    after = before | {"a": 900.0, "reset_pg_stat_database": 1764620000.25}
    assert first_decrease(before, after, ["a", "b"]) is None
    assert stats_reset_moved(before, after) == (
        "pg_stat_database.stats_reset: never -> 2025-12-01T20:13:20.250+00:00"
    )


def test_hit_pct_and_the_cache_warning() -> None:
    assert hit_pct(90, 10) == 90.0
    assert hit_pct(0, 0) == 0.0
    assert cache_warning(None) is None
    assert cache_warning(50.0) is None  # "more than half" only
    assert cache_warning(12.0) is None
    message = cache_warning(50.1)
    assert message is not None and "50.1 %" in message and "larger" in message


def test_physical_reads_per_op_sums_table_samples_over_their_intervals() -> None:
    samples = [
        table_sample("slob1_cf1", heap_read=600.0, idx_read=30.0, interval=1.0),
        table_sample("slob1_cf1", heap_read=500.0, idx_read=0.0, interval=2.0),
        table_sample("slob2_cf1", heap_read=100.0, idx_read=0.0, interval=1.0),
        Sample("db", "test", {"blks_read_s": 1e9, "interval_s": 1.0}),  # not a table
        Sample("block", "table:vda", {"heap_blks_read_s": 1e9}),  # not this source
    ]
    assert table_blocks_read(samples) == 630 + 1000 + 100
    assert physical_reads_per_op(samples, 10) == 173.0
    assert physical_reads_per_op(1730.0, 10) == 173.0
    assert physical_reads_per_op(samples, 0) is None
    means = {
        "table:slob1_cf1": {"heap_blks_read_s": 60.0, "idx_blks_read_s": 3.0},
        "test": {"blks_read_s": 1e9},
    }
    assert blocks_read_from_means(means, 10.0) == 630.0


@pytest.mark.parametrize("version", [140012, 150020, 160004, 170002, 180000])
def test_the_counter_query_parses_for_every_supported_version(version: int) -> None:
    text = postgres_database_sql(version)
    sqlglot.parse_one(text, read="postgres")
    assert ("pg_stat_io" in text) == (version >= 160000)
    assert ("pg_stat_checkpointer" in text) == (version >= 170000)
    for column in ("checkpoints_timed", "buffers_backend", "wal_sync", "blks_read"):
        assert f"AS {column}" in text


def test_auto_applies_to_postgres_only_and_is_registered() -> None:
    assert "db" in registry.collectors()
    assert auto_db(SqliteTarget(SqliteSettings()), {}) == []
    found = auto_db(PostgresTarget(PostgresSettings()), {"table_prefix": "slob"})
    assert len(found) == 1 and isinstance(found[0], PostgresStatsCollector)
    assert found[0].table_prefix == "slob"


class MadeUpSqlTarget(PathsTarget):
    kind = "madeupsql"
    dialect = "madeupsql"


class MadeUpStatsCollector(Collector):
    source = "db"

    def __init__(self, options: dict[str, object]) -> None:
        self.options = options

    async def start(self, now: float) -> None:
        return None

    async def sample(self, now: float) -> list[Sample]:
        return []


def _made_up_stats(target: Target, options: dict[str, object]) -> list[Collector]:
    return [MadeUpStatsCollector(options)]


def test_the_dialect_records_hook_is_the_one_home_of_database_statistics() -> None:
    """A kind the collector module has never heard of gets its statistics from its dialect
    record alone; PostgreSQL's come the same way."""
    record = SqlDialect(
        name="madeupsql",
        sqlalchemy_module="sqlalchemy.dialects.sqlite",
        sqlglot="sqlite",
        max_identifier_chars=30,
        stats_collectors=_made_up_stats,
    )
    entry = registry.TargetEntry("madeupsql", SqliteSettings, None, "a made-up SQL kind", record)
    registry.targets()  # the built-in kinds first
    registry.register_target(entry)
    try:
        (found,) = auto_db(MadeUpSqlTarget([]), {"table_pattern": "^t_"})
    finally:
        registry._targets.pop("madeupsql", None)
    assert isinstance(found, MadeUpStatsCollector) and found.options == {"table_pattern": "^t_"}
    postgres = registry.target("postgres").dialect
    assert postgres is not None and postgres.stats_collectors is not None
    (pg,) = postgres.stats_collectors(PostgresTarget(PostgresSettings()), {"table_prefix": "s"})
    assert isinstance(pg, PostgresStatsCollector) and pg.table_prefix == "s"


# ------------------------------------------------------------------ live rate arithmetic


async def _admin(query: str) -> None:
    conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database="postgres")
    try:
        await conn.execute(query)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def own_database() -> Iterator[str]:
    try:
        asyncio.run(_admin(f"CREATE DATABASE {OWN_DB}"))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        pytest.skip(f"!!! PostgreSQL on {HOST}:{PORT} is not reachable: {exc}")
    try:
        yield OWN_DB
    finally:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {OWN_DB} WITH (FORCE)"))


COMMITS = 100
UPDATED_ROWS = 40
INTERVAL_S = 2.0  # fake clock: the rates divide by this, however long the test really took
OWN_COMMITS_MAX = 6  # the collector's own statements and the flush call land in the window


async def _checkpoints(worker: asyncpg.Connection) -> tuple[float, float]:
    """The server's (timed, requested) checkpoint counters, where its version keeps them."""
    version = int(await worker.fetchval("SHOW server_version_num"))
    view, timed, req = (
        ("pg_stat_checkpointer", "num_timed", "num_requested")
        if version >= 170000
        else ("pg_stat_bgwriter", "checkpoints_timed", "checkpoints_req")
    )
    row = await worker.fetchrow(f"SELECT {timed}::float8, {req}::float8 FROM {view}")
    assert row is not None
    return float(row[0]), float(row[1])


async def _checkpoint_seen(worker: asyncpg.Connection, before: tuple[float, float]) -> None:
    """CHECKPOINT, then wait until the checkpointer has published it: it reports its counters
    after waking the backend that asked, so an immediate read may miss it. On a connection to
    another database, so that the measured database's commit count stays the test's own."""
    await worker.execute("CHECKPOINT")
    for _ in range(500):
        if (await _checkpoints(worker))[1] > before[1]:
            return
        await asyncio.sleep(0.01)
    pytest.fail("CHECKPOINT never showed in the server's requested-checkpoint counter")


async def _measure(database: str) -> tuple[list[Sample], list[tuple[float, float]]]:
    """The collector's samples over the test's work, and the server's checkpoint counters
    read just before the collector's first reading and just after its second."""
    target = PostgresTarget(PostgresSettings(host=HOST, port=PORT, database=database))
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        await target.open(EngineContext(asyncio.get_running_loop(), executor))
        worker = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=database)
        admin = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database="postgres")
        try:
            await worker.execute(
                "CREATE TABLE ut_rates (k int PRIMARY KEY, v text);"
                f"INSERT INTO ut_rates SELECT g, 'x' FROM generate_series(1, {UPDATED_ROWS}) g;"
                "CREATE TABLE other_table (k int)"
            )
            await worker.execute("SELECT pg_stat_force_next_flush()")
            collector = PostgresStatsCollector(target, table_prefix="ut_")
            checkpoints = [await _checkpoints(admin)]
            await collector.start(100.0)
            await _checkpoint_seen(admin, checkpoints[0])
            for _ in range(COMMITS):
                await worker.fetchval("SELECT 1")
            await worker.execute("UPDATE ut_rates SET v = 'y'")  # one commit, 40 rows
            await worker.fetch("SELECT * FROM ut_rates WHERE k = 1")
            # Backends publish their counters at most once a second unless asked to.
            await worker.execute("SELECT pg_stat_force_next_flush()")
            samples = await collector.sample(100.0 + INTERVAL_S)
            checkpoints.append(await _checkpoints(admin))
            await collector.stop()
            assert collector.version_num is not None and collector.version_num >= 140000
        finally:
            await admin.close()
            await worker.close()
            await target.close()
    return samples, checkpoints


def test_rates_from_two_readings_of_the_live_server(own_database: str) -> None:
    samples, checkpoints = asyncio.run(_measure(own_database))
    by_entity = {s.entity: s for s in samples}
    assert set(by_entity) == {own_database, "table:ut_rates"}  # the prefix leaves other_table out
    db = by_entity[own_database].values
    # 100 SELECTs + 1 UPDATE + 1 SELECT + the flush call, each its own transaction.
    expected = (COMMITS + 3) / INTERVAL_S
    assert expected <= db["xact_commit_s"] <= expected + OWN_COMMITS_MAX / INTERVAL_S, db
    assert db["tup_updated_s"] == UPDATED_ROWS / INTERVAL_S
    assert db["xact_rollback_s"] == 0
    assert db["interval_s"] == INTERVAL_S
    assert db["wal_records_s"] >= UPDATED_ROWS / INTERVAL_S  # one heap record per new version
    assert db["wal_bytes_s"] > 0 and db["blks_hit_s"] > 0
    assert 0 < db["cache_hit_pct"] <= 100
    # Checkpoints are counted as plain differences between the collector's two readings: the
    # test's own CHECKPOINT at least, and no more than the server counted around the window
    # (other sessions may checkpoint too; the timed ones come every checkpoint_timeout).
    (timed_0, req_0), (timed_1, req_1) = checkpoints
    assert 1 <= db["checkpoints_req"] <= req_1 - req_0, (db["checkpoints_req"], checkpoints)
    assert 0 <= db["checkpoints_timed"] <= timed_1 - timed_0, (db["checkpoints_timed"], checkpoints)
    table = by_entity["table:ut_rates"].values
    # The UPDATE and the lookup touched the table's heap and its primary-key index.
    assert table["heap_blks_hit_s"] + table["heap_blks_read_s"] >= 2 / INTERVAL_S
    assert table["idx_blks_hit_s"] + table["idx_blks_read_s"] >= 1 / INTERVAL_S
    assert table["interval_s"] == INTERVAL_S


# ------------------------------------------------------------------ pg_stat_reset() live

RESET_UPDATED_ROWS = UPDATED_ROWS


async def _totals(worker: asyncpg.Connection) -> dict[str, float]:
    """The raw counters behind xact_commit_s and tup_updated_s, as the server has them now."""
    row = await worker.fetchrow(
        "SELECT xact_commit::float8 AS xact_commit, tup_updated::float8 AS tup_updated"
        "  FROM pg_stat_database WHERE datname = current_database()"
    )
    assert row is not None
    return dict(row)


async def _across_a_reset(database: str) -> tuple[list[list[Sample]], list[dict[str, float]]]:
    """Four readings 2 s apart on the fake clock: work, pg_stat_reset() and work, work, the
    table dropped and re-created. Returns each interval's samples and the raw totals at each
    reading."""
    target = PostgresTarget(PostgresSettings(host=HOST, port=PORT, database=database))
    rounds: list[list[Sample]] = []
    totals: list[dict[str, float]] = []
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        await target.open(EngineContext(asyncio.get_running_loop(), executor))
        worker = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=database)
        try:
            await worker.execute(
                "DROP TABLE IF EXISTS ut_rates; DROP TABLE IF EXISTS other_table;"
                "CREATE TABLE ut_rates (k int PRIMARY KEY, v text);"
                f"INSERT INTO ut_rates SELECT g, 'x' FROM generate_series(1, {UPDATED_ROWS}) g"
            )
            await worker.execute("SELECT pg_stat_force_next_flush()")
            collector = PostgresStatsCollector(target, table_prefix="ut_")
            await collector.start(100.0)
            totals.append(await _totals(worker))

            async def work(reset: bool = False, recreate: bool = False) -> None:
                if reset:
                    await worker.execute("SELECT pg_stat_reset()")
                if recreate:
                    await worker.execute(
                        "DROP TABLE ut_rates; CREATE TABLE ut_rates (k int PRIMARY KEY, v text);"
                        f"INSERT INTO ut_rates SELECT g, 'x' FROM generate_series(1, {UPDATED_ROWS}) g"
                    )
                for _ in range(COMMITS):
                    await worker.fetchval("SELECT 1")
                await worker.execute("UPDATE ut_rates SET v = 'y'")
                await worker.execute("SELECT pg_stat_force_next_flush()")

            for i, step in enumerate(({}, {"reset": True}, {}, {"recreate": True}), start=1):
                await work(**step)
                rounds.append(await collector.sample(100.0 + i * INTERVAL_S))
                totals.append(await _totals(worker))
            await collector.stop()
        finally:
            await worker.execute("DROP TABLE IF EXISTS ut_rates")
            await worker.close()
            await target.close()
    return rounds, totals


def test_pg_stat_reset_makes_that_interval_a_gap_and_the_next_exact(own_database: str) -> None:
    rounds, totals = asyncio.run(_across_a_reset(own_database))
    before, across, after, recreated = (by_entity(r) for r in rounds)
    table = "table:ut_rates"
    assert before[own_database].gap == "" and before[table].gap == ""
    # The reset interval: no figures for the database or its table, and what was seen.
    db = across[own_database]
    assert (db.gap, dict(db.values)) == (GAP_RESET, {})
    assert db.detail.startswith("pg_stat_database.stats_reset: never -> 20")
    assert across[table].gap == GAP_RESET and across[table].detail.startswith("pg_stat_reset(): ")
    # Re-baselined at the reset reading: the next interval is exact again.
    values = after[own_database].values
    assert values["tup_updated_s"] == RESET_UPDATED_ROWS / INTERVAL_S
    expected = (COMMITS + 2) / INTERVAL_S  # 100 SELECTs, the UPDATE, the flush call
    assert expected <= values["xact_commit_s"] <= expected + OWN_COMMITS_MAX / INTERVAL_S
    assert after[table].gap == "" and after[table].values["heap_blks_hit_s"] > 0
    # A table dropped and re-created under the same name is another relation.
    assert recreated[table].gap == GAP_RESET and "re-created (relid" in recreated[table].detail
    assert recreated[own_database].gap == ""
    # No rate anywhere above 10 x the larger reading per second.
    for samples, (old, new) in zip(rounds, itertools.pairwise(totals), strict=True):
        for sample in samples:
            if sample.entity == own_database and not sample.gap:
                pairs = {f"{k}_s": (old[k], new[k]) for k in old}
                assert impossible_rates(sample.values, pairs, INTERVAL_S) == {}
