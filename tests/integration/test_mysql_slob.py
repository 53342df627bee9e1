"""SLOB-like and SSB-like on the live MariaDB (127.0.0.1:3306, root, database ``test``): rows
per InnoDB page as InnoDB itself counts them, idempotent loads, exact mixes, ownership (a
foreign table is never touched, ``drop`` leaves a foreign table of the same prefix alone) and
the ``db`` collector's InnoDB figures feeding physical reads per read.

Every test uses its own table prefix and drops what it loaded, so concurrent runs do not
collide. The checks of the data go through PyMySQL on a connection of the test's own, not
through dbsim. The runs through the engine run once per session runner, the native
Connector/C loop and asyncmy (tests/support/session_runners.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

pymysql = pytest.importorskip("pymysql", reason="!!! PyMySQL missing: MariaDB NOT TESTED")

from sim import registry  # noqa: E402 - after the skip above
from sim.config.scenario import Load  # noqa: E402
from sim.core.dataset import drop_objects, load_and_verify  # noqa: E402
from sim.core.engine import Engine  # noqa: E402
from sim.errors import OwnershipError  # noqa: E402
from sim.protocols import EngineContext, Target  # noqa: E402
from storage.collectors.database import auto_db  # noqa: E402
from storage.collectors.innodb import InnodbStatsCollector  # noqa: E402
from storage.targets.mysql import MysqlTarget  # noqa: E402
from storage.targets.mysql_record import INNODB_PAGE_BYTES, MysqlSettings  # noqa: E402
from tests.support.session_runners import AskedRunner, session_runner  # noqa: E402
from workloads.slob.parameters import SlobParameters  # noqa: E402
from workloads.slob.workload import SlobWorkload  # noqa: E402
from workloads.ssb.parameters import SsbParameters  # noqa: E402
from workloads.ssb.workload import SsbWorkload  # noqa: E402

pytestmark = pytest.mark.integration
# The fixture this module's runs through the engine take: each session runner in turn.
__all__ = ["session_runner"]
T = TypeVar("T")
DSN = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
SLOB_ROWS = 10_000
SSB_SIZE = "4M"  # 256 rows (8 KiB each) in each of two tables


@pytest.fixture(autouse=True, scope="module")
def _server() -> None:
    try:
        pymysql.connect(**DSN).close()
    except pymysql.MySQLError as exc:
        pytest.skip(f"!!! MariaDB on {DSN['host']}:{DSN['port']} is not reachable: {exc}")


def sql(query: str, *args: Any) -> list[tuple[Any, ...]]:
    """One statement on a connection of the test's own, committed."""
    conn = pymysql.connect(**DSN, autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute(query, args or None)
            return list(cursor.fetchall())
    finally:
        conn.close()


def leaf_pages(table: str, index: str) -> int:
    """InnoDB's own count of the clustered index's leaf pages, after ANALYZE TABLE."""
    sql(f"ANALYZE TABLE `{table}`")
    rows = sql(
        "SELECT stat_value FROM mysql.innodb_index_stats WHERE database_name = 'test' "
        "AND table_name = %s AND index_name = %s AND stat_name = 'n_leaf_pages'",
        table,
        index,
    )
    return int(rows[0][0])


def innodb_status() -> dict[str, float]:
    """The server's buffer pool counters, read by the test itself (not through dbsim)."""
    rows = sql(
        "SHOW GLOBAL STATUS WHERE Variable_name IN "
        "('Innodb_buffer_pool_reads', 'Innodb_buffer_pool_read_requests')"
    )
    return {str(name): float(value) for name, value in rows}


def target() -> MysqlTarget:
    entry = registry.target("mysql")
    assert entry.factory is not None
    built = entry.factory(MysqlSettings())
    assert isinstance(built, MysqlTarget)
    return built


def slob(prefix: str, **params: Any) -> tuple[SlobWorkload, Target]:
    t = target()
    return SlobWorkload(SlobParameters(scale=SLOB_ROWS, table_prefix=prefix, **params), t), t


def ssb(prefix: str, **params: Any) -> tuple[SsbWorkload, Target]:
    t = target()
    parameters = SsbParameters(
        **{"database_size": SSB_SIZE, "tables": 2, "table_prefix": prefix, **params}
    )
    return SsbWorkload(parameters, t), t


@pytest.fixture
def prefix() -> Iterator[str]:
    """A table prefix of this test's own; whatever SLOB or SSB loaded is dropped afterwards."""
    name = f"m{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        drop_objects(*slob(name))
        drop_objects(*ssb(name))


def with_open(t: Target, work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            await t.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await work()
            finally:
                await t.close()

    return asyncio.run(main())


def run(workload: Any, t: Target, runner: AskedRunner, **load: Any) -> dict[str, int]:
    engine = Engine(workload, t, Load(session_runner=runner.on("mysql"), **load))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    runner.ran(engine.result.session_runner, engine.result.session_runner_why)
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    expected = workload.expected_mix(engine.result.op_ranges)
    assert {k: v for k, v in expected.items() if v} == {k: v for k, v in counts.items() if v}
    return counts


def test_slob_rows_fill_half_an_innodb_page_each_and_reload_idempotently(prefix: str) -> None:
    table = f"{prefix}_1_cf1"
    report = load_and_verify(*slob(prefix))
    [verified] = report["verify"]["tables"]
    assert verified["rows"] == SLOB_ROWS and verified["max_rows_per_block"] == 2
    # InnoDB keeps two records on a page however large they are; a third never fits.
    pages = leaf_pages(table, "GEN_CLUST_INDEX")
    assert math.ceil(SLOB_ROWS / 2) <= pages <= math.ceil(SLOB_ROWS / 2) + 2
    assert verified["blocks"] == pages
    [(engine,)] = sql(
        "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
        "AND TABLE_NAME = %s",
        table,
    )
    assert engine == "InnoDB"
    # The row's data: above a third of a page (three never fit) and within the half InnoDB
    # allows a record in-page (nothing moved off-page).
    [(row_bytes,)] = sql(
        f"SELECT MAX(LENGTH(pad) + {' + '.join(f'LENGTH(c{i})' for i in range(2, 21))}) "
        f"FROM `{table}`"
    )
    assert INNODB_PAGE_BYTES / 3 < row_bytes < 8126
    [(comment,)] = sql(
        "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
        "AND TABLE_NAME = %s",
        table,
    )
    assert comment.startswith("dbsim:")
    assert load_and_verify(*slob(prefix))["load"]["tables"][0]["built"] is False
    # A read counts WORK_UNIT-1 rows through the non-unique index.
    workload, t = slob(prefix)
    read = workload.render("read", table=table)

    async def count() -> Any:
        conn = await t.connect()
        try:
            return await conn.scalar(read, (1000 - 64, 1000))
        finally:
            await conn.close()

    assert with_open(t, count) == 63


@pytest.fixture(scope="module")
def slob_loaded() -> Iterator[str]:
    """SLOB's table, loaded once for the mix of both session runners; dropped at the end."""
    name = f"m{uuid.uuid4().hex[:8]}"
    try:
        load_and_verify(*slob(name))
        yield name
    finally:
        drop_objects(*slob(name))


def test_slob_exact_mix_on_mariadb(slob_loaded: str, session_runner: AskedRunner) -> None:
    workload, t = slob(slob_loaded, update_pct=20)
    counts = run(workload, t, session_runner, loops_per_session=50, sessions=4, seed=2)
    assert counts == {"read": 160, "update": 40}


def test_slob_appends_fill_cf3_two_rows_an_innodb_page_and_drop_removes_it(
    prefix: str, session_runner: AskedRunner
) -> None:
    """append_pct (not SLOB's) on InnoDB: one padded row of cf1's shape in cf3 per append,
    two a 16 KiB page as in cf1 (min_rows_per_page 2), keys no two sessions share; cf3 is
    created empty, kept with its rows by the next load, and dropped with the rest."""
    cf3 = f"{prefix}_1_cf3"
    params = {"update_pct": 20, "append_pct": 30}
    report = load_and_verify(*slob(prefix, **params))
    assert {"table": cf3, "rows": 0, "built": True} in report["load"]["tables"]
    workload, t = slob(prefix, **params)
    counts = run(workload, t, session_runner, loops_per_session=50, sessions=4, seed=2)
    # Per session of 50: 10 updates, 12 appends (30 % of the other 40), 28 reads.
    assert counts == {"update": 40, "append": 48, "read": 112}
    assert sql(f"SELECT COUNT(*), COUNT(DISTINCT custid) FROM `{cf3}`") == [(48, 48)]
    [(c2, c20, pad)] = sql(f"SELECT c2, c20, LENGTH(pad) FROM `{cf3}` LIMIT 1")
    assert len(c2) == 128 and c20 == c2 and pad > 0
    pages = leaf_pages(cf3, "GEN_CLUST_INDEX")
    assert 48 // 2 <= pages <= 48 // 2 + 2
    again = load_and_verify(*slob(prefix, **params))
    assert {"table": cf3, "rows": 0, "built": False} in again["load"]["tables"]
    [verified] = [v for v in again["verify"]["tables"] if v["table"] == cf3]
    assert verified == {"table": cf3, "blocks": pages, "max_rows_per_block": 2}
    assert drop_objects(*slob(prefix)) == [f"{prefix}_1_cf1", cf3]
    assert not sql(
        "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = %s",
        cf3,
    )


def test_slob_row_updates_change_one_row_each_on_innodb(
    prefix: str, session_runner: AskedRunner
) -> None:
    """row_update_pct (not SLOB's) on InnoDB: each row update rewrites c2 and c20 of one
    random key, nothing else."""
    cf1 = f"{prefix}_1_cf1"
    params = {"update_pct": 0, "row_update_pct": 40}
    load_and_verify(*slob(prefix, **params))
    workload, t = slob(prefix, **params)
    counts = run(workload, t, session_runner, loops_per_session=50, sessions=4, seed=2)
    # Per session of 50: 20 row updates (40 %), 30 reads.
    assert counts == {"row_update": 80, "read": 120}
    changed = sql(f"SELECT c2, c3, c20 FROM `{cf1}` WHERE c2 REGEXP '^[0-9]{{6}}[.]'")
    assert 75 <= len(changed) <= 80  # 80 draws among 10,000 keys: a repeat counts once
    assert all(c20 == c2 and c3 != c2 for c2, c3, c20 in changed)
    drop_objects(*slob(prefix))


def test_drop_leaves_a_foreign_table_of_the_same_prefix_alone(prefix: str) -> None:
    load_and_verify(*slob(prefix))
    sql(f"CREATE TABLE `{prefix}_9_cf1` (precious VARCHAR(20))")
    try:
        sql(f"INSERT INTO `{prefix}_9_cf1` VALUES ('keep me')")
        assert drop_objects(*slob(prefix)) == [f"{prefix}_1_cf1"]
        assert sql(f"SELECT precious FROM `{prefix}_9_cf1`") == [("keep me",)]
        assert not sql(
            "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
            "AND TABLE_NAME = %s",
            f"{prefix}_1_cf1",
        )
    finally:
        sql(f"DROP TABLE IF EXISTS `{prefix}_9_cf1`")


def test_a_foreign_table_with_dbsims_name_is_refused_and_kept(prefix: str) -> None:
    sql(f"CREATE TABLE `{prefix}_2` (precious VARCHAR(20))")
    try:
        sql(f"INSERT INTO `{prefix}_2` VALUES ('keep me')")
        with pytest.raises(OwnershipError, match=f"{prefix}_2 exists but was not created by dbsim"):
            load_and_verify(*ssb(prefix))
        assert drop_objects(*ssb(prefix)) == []
        assert sql(f"SELECT precious FROM `{prefix}_2`") == [("keep me",)]
    finally:
        sql(f"DROP TABLE IF EXISTS `{prefix}_2`")


def test_a_load_stopped_right_after_create_table_is_taken_back(prefix: str) -> None:
    # MariaDB commits a CREATE TABLE at once. The token used to follow in an ALTER TABLE …
    # COMMENT: a SIGINT 85 ms into a load (the native signal sweep) landed between the two and
    # left a table dbsim refused as not its own ("lacks the dbsim marker"). Now the token is
    # in the CREATE: the load is stopped here right after it, and the next load takes it back.
    from sim.protocols import connect_sql
    from sim.sql import Statement
    from workloads.identity import marked_create
    from workloads.ownership import TableRegistry

    table = f"{prefix}_1_cf1"
    tables = TableRegistry("slob", "mysql", MysqlTarget.paramstyle)

    async def stopped_after_create() -> None:
        t = target()
        pool = concurrent.futures.ThreadPoolExecutor(1)
        await t.open(EngineContext(asyncio.get_running_loop(), pool))
        conn = await connect_sql(t)
        try:
            await tables.ensure(conn)
            assert await tables.begin_load(conn, table, {"scale": 1})
            token = str((await tables.recorded(conn, table) or {})["token"])
            create = Statement("CreateTable", f"CREATE TABLE `{table}` (custid INT)", ())
            await conn.execute(marked_create("mysql", create, token))  # and here it stops
        finally:
            await conn.close()
            await t.close()
            pool.shutdown()

    asyncio.run(stopped_after_create())
    assert sql("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
               "DATABASE() AND TABLE_NAME = %s", table)[0][0].startswith("dbsim:")  # fmt: skip
    load_and_verify(*slob(prefix))  # no OwnershipError: the stale copy is dbsim's, rebuilt
    assert sql(f"SELECT COUNT(*) FROM `{table}`") == [(SLOB_ROWS,)]


def test_a_table_recreated_outside_dbsim_is_refused(prefix: str) -> None:
    load_and_verify(*slob(prefix))
    table = f"{prefix}_1_cf1"
    sql(f"DROP TABLE `{table}`")
    sql(f"CREATE TABLE `{table}` (custid INT)")
    try:
        with pytest.raises(OwnershipError, match="lacks the dbsim marker"):
            load_and_verify(*slob(prefix))
        with pytest.raises(OwnershipError, match="lacks the dbsim marker"):
            drop_objects(*slob(prefix))
        assert sql(f"SELECT COUNT(*) FROM `{table}`") == [(0,)]  # still there, untouched
    finally:
        sql(f"DROP TABLE IF EXISTS `{table}`")
        sql("DELETE FROM dbsim_registry WHERE name = %s", table)


def test_ssb_two_rows_per_16k_page_exact_mix_and_drop(
    prefix: str, session_runner: AskedRunner
) -> None:
    workload, t = ssb(prefix, read_pct=70, rows_select=20)
    report = load_and_verify(workload, t)
    rows = workload.p.rows_per_table
    for number, verified in enumerate(report["verify"]["tables"], 1):
        assert verified["block_size"] == INNODB_PAGE_BYTES and verified["unique_index"]
        assert verified["rows"] == rows and verified["max_rows_per_block"] == 2
        assert verified["blocks"] == leaf_pages(f"{prefix}_{number}", f"{prefix}_{number}_custid")
        assert verified["blocks"] == math.ceil(rows / 2)
    counts = run(workload, t, session_runner, loops_per_session=20, sessions=4, seed=5)
    assert counts == {"read": 4 * 14, "update": 4 * 6}
    assert drop_objects(*ssb(prefix)) == [f"{prefix}_1", f"{prefix}_2"]


def test_db_collector_counts_buffer_pool_reads_per_read(prefix: str) -> None:
    workload, t = slob(prefix)
    load_and_verify(workload, t)
    read = workload.render("read", table=f"{prefix}_1_cf1")

    around: list[dict[str, float]] = []

    async def sample() -> tuple[list[Any], list[Any]]:
        [collector] = auto_db(t, {})
        assert isinstance(collector, InnodbStatsCollector)
        around.append(innodb_status())
        await collector.start(0.0)
        conn = await t.connect()
        try:
            for lo in range(0, SLOB_ROWS - 64, 97):
                await conn.scalar(read, (lo, lo + 64))
            await conn.commit()
        finally:
            await conn.close()
        samples = await collector.sample(10.0)
        around.append(innodb_status())
        await collector.stop()
        return samples, [collector]

    samples, [collector] = with_open(t, sample)
    [database] = samples
    values = database.values
    reads = math.ceil((SLOB_ROWS - 64) / 97)
    assert values["interval_s"] == 10.0
    # The figures are differences of the server's counters between the collector's two
    # readings, which the test's own readings bracket (the counters are server-wide: other
    # sessions' page requests and misses count too, never fewer than none). Each read touches
    # 63 rows on ~32 pages plus index pages: at least 32 page requests per statement.
    before, after = around
    misses = after["Innodb_buffer_pool_reads"] - before["Innodb_buffer_pool_reads"]
    requests = (
        after["Innodb_buffer_pool_read_requests"] - before["Innodb_buffer_pool_read_requests"]
    )
    assert 0 <= values["blks_read_s"] * 10.0 <= misses + 1e-6, (values, misses)
    assert 32 * reads <= values["buffer_pool_read_requests_s"] * 10.0 <= requests + 1e-6, (
        values,
        requests,
    )
    means = {"test": values}
    facts, _ = collector.findings(means, {"read": reads}, 10.0)
    expected = values["blks_read_s"] * 10.0 / reads
    assert facts["physical_reads_per_read"] == round(expected, 2)
