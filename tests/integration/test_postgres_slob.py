"""SLOB-like on the live PostgreSQL: one row per block, idempotent load, ownership, exact mix,
visible updates; and the target's own promises (no password in messages, transactions).

The runs through the engine (the mix, the updates) run once per session runner, the native
libpq loop and asyncpg (tests/support/session_runners.py): they deal, bind and count
differently.

Every test uses its own table prefix, unique to this test run, in database ``test``, schema
``public``, and drops what it loaded in a ``finally``, so concurrent runs do not collide.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import re
import secrets
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import asyncpg
import pytest

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import OwnershipError, TargetError
from sim.protocols import EngineContext
from sim.sql import Statement
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from tests.support.session_runners import AskedRunner, session_runner
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration
# The fixture this module's runs through the engine take: each session runner in turn.
__all__ = ["session_runner"]
T = TypeVar("T")

HOST, PORT, DATABASE = "127.0.0.1", 5432, "test"
ROWS = 10_000
RUN = secrets.token_hex(3)  # unique to this test run
UPDATE_VALUE = re.compile(r"^\d{6}\.\d{12}\.")  # what SlobSession writes: session.loop.


@pytest.fixture(autouse=True, scope="module")
def _server() -> None:
    async def probe() -> None:
        conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=DATABASE)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        pytest.skip(f"!!! PostgreSQL on {HOST}:{PORT} is not reachable: {exc}")


def _target(**settings: Any) -> PostgresTarget:
    return PostgresTarget(
        PostgresSettings(**{"host": HOST, "port": PORT, "database": DATABASE, **settings})
    )


def workload(prefix: str, **params: Any) -> tuple[SlobWorkload, PostgresTarget]:
    target = _target()
    params = {"scale": ROWS, "table_prefix": prefix, **params}
    return SlobWorkload(SlobParameters(**params), target), target


def sql(query: str, *args: Any) -> list[asyncpg.Record]:
    """Run one query on a connection of the test's own (not through dbsim)."""

    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=DATABASE)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def with_open(target: PostgresTarget, work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await work()
            finally:
                await target.close()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def loaded() -> Iterator[str]:
    """A prefix with cf1 and cf2 loaded (scan_pct > 0 builds cf2), dropped at the end."""
    prefix = f"pm{RUN}"
    try:
        load_and_verify(*workload(prefix, scan_pct=20))
        yield prefix
    finally:
        drop_objects(*workload(prefix))


def test_load_gives_one_row_per_block_scattered_keys_and_is_idempotent() -> None:
    prefix = f"pl{RUN}"
    table = f"{prefix}_1_cf1"
    try:
        report = load_and_verify(*workload(prefix))
        assert report["load"]["tables"][0] == {"table": table, "rows": ROWS, "built": True}
        assert report["verify"]["tables"][0] == {
            "table": table,
            "rows": ROWS,
            "max_key": ROWS,
            "blocks": ROWS,  # via ctid: every row in a block of its own
            "max_rows_per_block": 1,
        }
        facts = report["target"]
        assert facts["server_version"] and facts["password_from"] is None  # no password set
        assert "password" not in str({k: v for k, v in facts.items() if k != "password_from"})
        assert load_and_verify(*workload(prefix))["load"]["tables"][0]["built"] is False
        # Physical order is a permutation: neighbouring keys are far apart in ctid order.
        keys = [r[0] for r in sql(f"SELECT custid FROM {table} ORDER BY ctid LIMIT 1000")]
        assert sum(1 for a, b in itertools.pairwise(keys) if abs(a - b) == 1) < 10
        options = sql("SELECT reloptions FROM pg_class WHERE relname = $1", table)[0][0]
        assert "fillfactor=10" in options
        index = sql("SELECT indexdef FROM pg_indexes WHERE tablename = $1", table)[0][0]
        assert "UNIQUE" not in index.upper() and "(custid)" in index
        # A read counts WORK_UNIT−1 rows.
        slob, target = workload(prefix)
        read = slob.render("read", table=table)

        async def count() -> Any:
            conn = await target.connect()
            try:
                return await conn.scalar(read, (1000 - 64, 1000))
            finally:
                await conn.close()

        assert with_open(target, count) == 63
    finally:
        assert drop_objects(*workload(prefix)) == [table]
    assert not sql("SELECT 1 FROM pg_class WHERE relname = $1", table)


def test_a_foreign_table_of_the_same_name_is_never_touched() -> None:
    prefix = f"pf{RUN}"
    table = f"{prefix}_1_cf1"
    sql(f"CREATE TABLE {table} (precious text)")
    try:
        sql(f"INSERT INTO {table} VALUES ('keep me')")
        with pytest.raises(OwnershipError, match=f"{table} exists but was not created by dbsim"):
            load_and_verify(*workload(prefix))
        assert drop_objects(*workload(prefix)) == []
        assert [r[0] for r in sql(f"SELECT precious FROM {table}")] == ["keep me"]
    finally:
        sql(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.parametrize(
    ("update_pct", "scan_pct", "redo"), [(10, 0, "LITE"), (30, 20, "HEAVY"), (100, 0, "LITE")]
)
def test_run_mix_follows_the_rule_exactly(
    loaded: str, update_pct: int, scan_pct: int, redo: str, session_runner: AskedRunner
) -> None:
    slob, target = workload(loaded, update_pct=update_pct, scan_pct=scan_pct, redo_stress=redo)
    runner = session_runner.on("postgres")
    # A count of transactions, not a duration: 1.5 s with a floor of 100 operations was a
    # rate in disguise (4 updates in all once, a busy host's fsync holding every commit).
    load = Load(sessions=4, warmup_s=0.3, loops_per_session=40, seed=3, session_runner=runner)
    engine = Engine(slob, target, load)
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    session_runner.ran(engine.result.session_runner, engine.result.session_runner_why)
    totals = engine.recorder.totals
    counts = {name: stats.count for name, stats in totals.items()}
    assert sum(s.error_count for s in totals.values()) == 0
    assert sum(counts.values()) == 4 * 40, counts  # every session's every transaction
    expected = slob.expected_mix(engine.result.op_ranges)  # every kind, ran or not
    assert set(counts) <= set(expected), counts
    assert expected == {name: counts.get(name, 0) for name in expected}


@pytest.mark.parametrize("redo", ["LITE", "HEAVY"])
def test_updates_change_the_redo_stress_columns(redo: str, session_runner: AskedRunner) -> None:
    runner = session_runner.on("postgres")
    prefix = f"pu{redo[0].lower()}{runner[0]}{RUN}"
    table = f"{prefix}_1_cf1"
    columns = ", ".join(f"c{i}" for i in range(2, 21))
    try:
        slob, target = workload(prefix, update_pct=100, redo_stress=redo)
        load = Load(loops_per_session=20, sessions=2, seed=5, session_runner=runner)
        engine = Engine(slob, target, load)
        asyncio.run(engine.run())
        assert engine.result.outcome == "completed", engine.result.error
        session_runner.ran(engine.result.session_runner, engine.result.session_runner_why)
        rows = sql(f"SELECT {columns} FROM {table} WHERE c2 ~ '^[0-9]{{6}}[.]'")
        assert len(rows) > 100, "updates did not reach the table"  # 40 updates × 63 rows
        for row in rows:
            c = dict(zip(range(2, 21), row, strict=True))
            assert UPDATE_VALUE.match(c[2]) and len(c[2]) == 128 and c[20] == c[2]
            middle = {c[i] for i in range(3, 20)}
            if redo == "HEAVY":
                assert middle == {c[2]}
            else:  # LITE: c3..c19 keep the loaded text
                assert len(middle) == 1 and not UPDATE_VALUE.match(c[3])
        assert len({r[0][:20] for r in rows}) > 20  # values differ per session and loop
    finally:
        drop_objects(*workload(prefix))


def test_appends_fill_cf3_one_row_per_block_kept_by_loads_and_dropped(
    session_runner: AskedRunner,
) -> None:
    """append_pct (not SLOB's): one new row of cf1's shape in cf3 per append, each in a heap
    block of its own (fillfactor 10 holds for inserts), with keys no two sessions share;
    cf3 is created empty, kept with its rows by the next load, and dropped with the rest."""
    runner = session_runner.on("postgres")
    prefix = f"pa{runner[0]}{RUN}"
    cf3 = f"{prefix}_1_cf3"
    params = {"update_pct": 20, "append_pct": 30, "scan_pct": 10}
    dropped: list[str] = []
    try:
        report = load_and_verify(*workload(prefix, **params))
        assert {"table": cf3, "rows": 0, "built": True} in report["load"]["tables"]
        slob, target = workload(prefix, **params)
        load = Load(loops_per_session=100, sessions=3, seed=7, session_runner=runner)
        engine = Engine(slob, target, load)
        asyncio.run(engine.run())
        assert engine.result.outcome == "completed", engine.result.error
        session_runner.ran(engine.result.session_runner, engine.result.session_runner_why)
        totals = engine.recorder.totals
        assert sum(s.error_count for s in totals.values()) == 0
        counts = {name: stats.count for name, stats in totals.items()}
        # Per session of 100: 20 updates, 24 appends (30 % of the other 80), 5 scans (10 % of
        # the 56 reads left), 51 reads.
        assert counts == {"update": 60, "append": 72, "scan": 15, "read": 153}
        assert slob.expected_mix(engine.result.op_ranges) == counts
        [(rows, blocks, keys)] = sql(
            f"SELECT COUNT(*), COUNT(DISTINCT (ctid::text::point)[0]), COUNT(DISTINCT custid) "
            f"FROM {cf3}"
        )
        assert rows == blocks == keys == 72
        [(c2, c20)] = sql(f"SELECT c2, c20 FROM {cf3} LIMIT 1")
        assert UPDATE_VALUE.match(c2) and len(c2) == 128 and c20 == c2
        again = load_and_verify(*workload(prefix, **params))
        assert {"table": cf3, "rows": 0, "built": False} in again["load"]["tables"]
        verified = {"table": cf3, "blocks": 72, "max_rows_per_block": 1}
        assert verified in again["verify"]["tables"]
    finally:
        dropped = drop_objects(*workload(prefix))
    assert dropped == [f"{prefix}_1_cf1", f"{prefix}_1_cf2", cf3]
    assert not sql("SELECT 1 FROM pg_class WHERE relname = $1", cf3)


def test_row_updates_change_one_row_each_in_scattered_blocks(
    session_runner: AskedRunner,
) -> None:
    """row_update_pct (not SLOB's): each row update rewrites c2 and c20 of one random key and
    nothing else, in place (HOT: the row stays in its block), and the blocks they dirty are
    scattered over cf1 (the keys' permutation), so two are neighbours about as often as
    random blocks are (the kernel's write-back merges only neighbours: sim.replay.dbrowmix)."""
    runner = session_runner.on("postgres")
    prefix = f"pr{runner[0]}{RUN}"
    cf1 = f"{prefix}_1_cf1"
    params = {"update_pct": 0, "row_update_pct": 60, "range_pct": 20, "range_blocks": 16}
    try:
        load_and_verify(*workload(prefix, **params))
        before = dict(sql(f"SELECT custid, ctid::text FROM {cf1}"))
        slob, target = workload(prefix, **params)
        load = Load(loops_per_session=100, sessions=3, seed=7, session_runner=runner)
        engine = Engine(slob, target, load)
        asyncio.run(engine.run())
        assert engine.result.outcome == "completed", engine.result.error
        session_runner.ran(engine.result.session_runner, engine.result.session_runner_why)
        totals = engine.recorder.totals
        assert sum(s.error_count for s in totals.values()) == 0
        counts = {name: stats.count for name, stats in totals.items()}
        # Per session of 100: 60 row updates, 8 range reads (20 % of the 40 reads), 32 reads.
        assert counts == {"row_update": 180, "range": 24, "read": 96}
        expected = slob.expected_mix(engine.result.op_ranges)
        assert expected == {**counts, "update": 0, "scan": 0}
        changed = sql(
            f"SELECT custid, ctid::text, c2, c3, c20 FROM {cf1} WHERE c2 ~ '^[0-9]{{6}}[.]'"
        )
        # 180 draws among 10,000 keys: a key drawn twice (expected ~1.6 times) counts once.
        assert 170 <= len(changed) <= 180
        for key, ctid, c2, c3, c20 in changed:
            assert UPDATE_VALUE.match(c2) and c20 == c2 and not UPDATE_VALUE.match(c3)
            assert ctid.split(",")[0] == before[key].split(",")[0]  # the same heap block
        blocks = sorted({int(ctid.strip("()").split(",")[0]) for _, ctid, *_ in changed})
        neighbours = sum(1 for x, y in itertools.pairwise(blocks) if y - x == 1)
        # Random blocks: ~n^2/N = 180^2/10,000 = 3.2 neighbour pairs expected; a range of
        # keys in block order would make ~n. Eight bounds a Poisson(3.2) above 99 %.
        assert neighbours <= 8, blocks
    finally:
        drop_objects(*workload(prefix))


# ------------------------------------------------------------------ the target itself


def test_errors_are_target_errors_without_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBSIM_TEST_PG_PASSWORD", "s3cret-Value-42")
    target = _target(port=1, password_env="DBSIM_TEST_PG_PASSWORD", connect_timeout_s=2)
    with pytest.raises(TargetError, match="cannot connect") as caught:
        with_open(target, _noop)
    assert "s3cret-Value-42" not in str(caught.value)
    assert "s3cret-Value-42" not in str(target.describe())

    good = _target(password_env="DBSIM_TEST_PG_PASSWORD")  # trust auth ignores it

    async def bad_sql() -> None:
        conn = await good.connect()
        try:
            await conn.scalar(Statement("oops", "SELECT * FROM no_such_table_dbsim", ()))
        finally:
            await conn.close()

    with pytest.raises(TargetError, match="oops") as caught:
        with_open(good, bad_sql)
    assert isinstance(caught.value.__cause__, asyncpg.UndefinedTableError)


async def _noop() -> None:
    return None


def test_describe_storage_paths_and_transactions() -> None:
    target = _target()
    table = f"ptx{RUN}"
    create = Statement("create", f"CREATE TABLE {table} (v int)", ())
    insert = Statement("insert", f"INSERT INTO {table} VALUES ($1)", ("v",))
    count = Statement("count", f"SELECT COUNT(*) FROM {table}", ())

    async def work() -> list[int]:
        conn = await target.connect()
        try:
            assert conn._bind_execute is not None, "asyncpg changed: the fast path is off"
            await conn.execute(create)
            assert await conn.execute(insert, (1,)) == 1
            await conn.commit()  # autocommit: nothing to do, the insert is already durable
            await conn.begin()
            await conn.execute(insert, (2,))
            await conn.rollback()
            await conn.begin()
            await conn.execute(insert, (3,))
            await conn.commit()
            update = Statement("update", f"UPDATE {table} SET v = v + $1", ("d",))
            assert await conn.execute(update, (10,)) == 2
            assert (
                await conn.scalar(Statement("none", f"SELECT v FROM {table} WHERE false", ()))
                is None
            )
            return [await conn.scalar(count)] + await conn.column(
                Statement("all", f"SELECT v FROM {table} ORDER BY v", ())
            )
        finally:
            await conn.execute(Statement("drop", f"DROP TABLE IF EXISTS {table}", ()))
            await conn.close()

    assert with_open(target, work) == [2, 11, 13]
    facts = target.describe()
    assert facts["database"] == DATABASE and facts["shared_buffers"]
    data_directory = sql("SHOW data_directory")[0][0]
    assert facts["data_directory"] == data_directory
    assert [str(p) for p in target.storage_paths()] == [data_directory]


def test_close_does_not_wait_forever_for_a_connection_never_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("storage.targets.postgres.CLOSE_TIMEOUT_S", 0.5)
    target = _target()

    async def leak() -> None:
        await target.connect()  # never closed

    with_open(target, leak)  # returns: the held connection was terminated
    assert target.describe()["host"] == HOST


def test_a_load_stopped_between_create_and_its_mark_leaves_no_table() -> None:
    # PostgreSQL commits each statement on its own unless a transaction is opened: the token's
    # COMMENT ON TABLE came after a committed CREATE TABLE, and a SIGINT of the native signal
    # sweep's load phase landed between them and left a table dbsim refused to drop ("lacks the
    # dbsim marker"). Now both are one transaction: stopped right before the COMMENT (the
    # wrapper cancels there, as a stop does), nothing stays, and the next load runs.
    from sim.protocols import connect_sql
    from workloads.ownership import TableRegistry

    prefix = f"pk{RUN}"
    table = f"{prefix}_1_cf1"
    tables = TableRegistry("slob", "postgres", PostgresTarget.paramstyle)

    class StoppedBeforeTheMark:
        def __init__(self, conn: Any) -> None:
            self._conn = conn

        def __getattr__(self, name: str) -> Any:
            return getattr(self._conn, name)

        async def execute(self, statement: Statement, params: Any = ()) -> int:
            if statement.name == "CommentOnTable":
                raise asyncio.CancelledError  # the stop, between the CREATE and its mark
            return int(await self._conn.execute(statement, params))

    async def stopped() -> None:
        target = _target()
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            conn = await connect_sql(target)
            try:
                await tables.ensure(conn)
                assert await tables.begin_load(conn, table, {"scale": 1})
                create = Statement("CreateTable", f'CREATE TABLE "{table}" (custid INT)', ())
                with pytest.raises(asyncio.CancelledError):
                    await tables.create_table(StoppedBeforeTheMark(conn), table, create)  # type: ignore[arg-type]
            finally:
                await conn.close()
                await target.close()

    try:
        asyncio.run(stopped())
        assert sql("SELECT to_regclass($1)::text", table) == [(None,)]  # taken back whole
        load_and_verify(*workload(prefix))  # no OwnershipError: nothing foreign was left
        assert sql(f'SELECT count(*) FROM "{table}"') == [(ROWS,)]
    finally:
        drop_objects(*workload(prefix))
