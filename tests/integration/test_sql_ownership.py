"""Ownership as identity, live on SQLite and PostgreSQL (issues #20 and #13).

Every trap of the issue, each with a victim that is not dbsim's: its checksum before and after
must be equal, the refusal names the object and why, and (through the engine) the run ends
before any session starts with exit code 2. PostgreSQL tests run in a schema of their own, so
each has its own registry and nothing is shared with other tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import EXIT_BAD_INPUT, MissingDataError, OwnershipError
from sim.protocols import Target, Workload
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings, SqliteSettings
from storage.targets.sqlite import SqliteTarget
from tests.support.postgres import postgres_problem
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.workload import SsbWorkload

pytestmark = pytest.mark.integration

HOST, PORT, DATABASE = "127.0.0.1", 5432, "test"
SSB_SIZE = "1600K"  # 200 pages: 100 rows in each of two tables
SSB_ROWS = 100
VICTIM_ROWS = 300


class Db:
    """A backend as someone other than dbsim sees it: raw SQL and checksums."""

    kind: str

    def target(self) -> Target:
        raise NotImplementedError

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def checksum(self, table: str) -> str:
        raise NotImplementedError

    def names(self) -> set[str]:
        raise NotImplementedError

    def victim(self, name: str, columns: str, *, view_of: str | None = None) -> str:
        """Someone's table ``name`` (or a view ``name`` over ``view_of``) with rows whose keys
        cover dbsim's key ranges; returns the checksum of the data behind it."""
        base = view_of or name
        self.sql(f"CREATE TABLE {base} (custid INTEGER, {columns})")
        width = len(columns.split(","))
        values = ", ".join(
            f"({k}, {', '.join(repr(f'precious {k}') for _ in range(width))})"
            for k in range(1, VICTIM_ROWS + 1)
        )
        self.sql(f"INSERT INTO {base} VALUES {values}")
        if view_of is not None:
            self.sql(f"CREATE VIEW {name} AS SELECT * FROM {view_of}")
        return self.checksum(base)


class SqliteDb(Db):
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def target(self) -> Target:
        return SqliteTarget(SqliteSettings(path=self.path))

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path) as conn:
            return conn.execute(statement).fetchall()

    def checksum(self, table: str) -> str:
        rows = self.sql(f"SELECT * FROM {table} ORDER BY rowid")
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    def names(self) -> set[str]:
        return {n for (n,) in self.sql("SELECT name FROM sqlite_master")}


class PostgresDb(Db):
    kind = "postgres"

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def target(self) -> Target:
        settings = PostgresSettings(
            host=HOST, port=PORT, database=DATABASE, schema_name=self.schema
        )
        return PostgresTarget(settings)

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        async def run() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(
                host=HOST,
                port=PORT,
                user="postgres",
                database=DATABASE,
                server_settings={"search_path": self.schema},
            )
            try:
                return [tuple(r) for r in await conn.fetch(statement)]
            finally:
                await conn.close()

        return asyncio.run(run())

    def checksum(self, table: str) -> str:
        [(digest,)] = self.sql(
            f"SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {table} AS t"
        )
        return str(digest)

    def names(self) -> set[str]:
        rows = self.sql(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE n.nspname = '{self.schema}'"
        )
        return {str(r[0]) for r in rows}


def _postgres_reachable() -> str | None:
    return postgres_problem(HOST, PORT, DATABASE)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        yield SqliteDb(tmp_path / "shared.sqlite")
        return
    problem = _postgres_reachable()
    if problem:
        pytest.skip(f"!!! PostgreSQL on {HOST}:{PORT} is not reachable: {problem}")
    schema = f"own_{uuid.uuid4().hex[:10]}"
    admin = PostgresDb("public")
    admin.sql(f"CREATE SCHEMA {schema}")
    try:
        yield PostgresDb(schema)
    finally:
        admin.sql(f"DROP SCHEMA {schema} CASCADE")


def ssb(db: Db, prefix: str = "user", **params: Any) -> tuple[SsbWorkload, Target]:
    target = db.target()
    parameters = SsbParameters(
        **{"database_size": SSB_SIZE, "tables": 2, "table_prefix": prefix, **params}
    )
    return SsbWorkload(parameters, target), target


def slob(db: Db, **params: Any) -> tuple[SlobWorkload, Target]:
    target = db.target()
    return SlobWorkload(SlobParameters(**{"scale": 10_000, **params}), target), target


def run(pair: tuple[Workload, Target], *, skip_load: bool, loops: int = 20) -> Engine:
    engine = Engine(*pair, Load(loops_per_session=loops, sessions=2), skip_load=skip_load)
    asyncio.run(engine.run())
    return engine


def refused_before_sessions(engine: Engine, *needles: str) -> str:
    """The engine ended in set-up, asking for exit 2, with all ``needles`` in its error."""
    result = engine.result
    assert result.outcome == "failed", result
    assert result.error_exit_code == EXIT_BAD_INPUT, result.error
    assert result.sessions_started_wall is None and engine.recorder.totals == {}
    error = str(result.error)
    for needle in needles:
        assert needle in error, error
    return error


# --------------------------------------------------------------------------- issue #13


def test_skip_load_without_the_tables_stops_before_any_session_naming_them(db: Db) -> None:
    engine = run(ssb(db, read_pct=0), skip_load=True)
    error = refused_before_sessions(engine, "missing user_1, user_2", "dbsim load")
    assert engine.result.last_state == "checking", error
    # Nothing was written: not even the registry.
    assert "dbsim_registry" not in db.names() and "user_1" not in db.names()


def test_skip_load_finds_loaded_data_and_runs(db: Db) -> None:
    load_and_verify(*ssb(db))
    if db.kind == "postgres":  # what a DBA may do to dbsim's tables: identity unchanged
        db.sql("GRANT SELECT ON user_1 TO PUBLIC")
        db.sql("VACUUM ANALYZE user_1")
    engine = run(ssb(db, read_pct=0), skip_load=True)
    assert engine.result.outcome == "completed", engine.result.error
    assert engine.result.load_report["skipped"] is True
    assert [t["table"] for t in engine.result.load_report["tables"]] == ["user_1", "user_2"]
    # Other parameters than those loaded: not there as this scenario needs it.
    other = run(ssb(db, database_size="3200K"), skip_load=True)
    refused_before_sessions(other, "user_1 (loaded with other rows)", "dbsim load")


def test_a_half_loaded_table_is_not_used_with_skip_load(db: Db) -> None:
    load_and_verify(*ssb(db))
    db.sql(
        "UPDATE dbsim_registry SET fingerprint = replace(fingerprint, '\"loaded\"', '\"loading\"')"
        " WHERE name = 'user_2'"
    )
    refused_before_sessions(run(ssb(db), skip_load=True), "user_2 (its load did not finish)")


# --------------------------------------------------------------------------- foreign tables


def test_skip_load_never_updates_a_foreign_slob_table(db: Db) -> None:
    before = db.victim("slob_1_cf1", "c2 VARCHAR(128), c20 VARCHAR(128)")
    engine = run(slob(db, update_pct=100), skip_load=True)
    refused_before_sessions(engine, "slob_1_cf1 exists but was not created by dbsim")
    assert db.checksum("slob_1_cf1") == before


def test_skip_load_never_updates_a_foreign_ssb_table(db: Db) -> None:
    before = db.victim("user_1", "c1 VARCHAR(370)")
    for skip_load in (True, False):  # a run that loads refuses the same way, before loading
        engine = run(ssb(db, read_pct=0, tables=1), skip_load=skip_load)
        refused_before_sessions(engine, "user_1 exists but was not created by dbsim")
        assert db.checksum("user_1") == before


def test_a_table_recreated_by_someone_else_is_not_dbsims(db: Db) -> None:
    """dbsim created user_1; someone dropped it and made their own under the same name (on
    SQLite usually on the very root page the old one had)."""
    load_and_verify(*ssb(db))
    db.sql("DROP TABLE user_1")
    before = db.victim("user_1", "c1 VARCHAR(370)")
    for attempt in (
        lambda: drop_objects(*ssb(db)),
        lambda: load_and_verify(*ssb(db)),
    ):
        with pytest.raises(OwnershipError, match="user_1 is not the table dbsim created"):
            attempt()
        assert db.checksum("user_1") == before
    engine = run(ssb(db, read_pct=0), skip_load=True)
    refused_before_sessions(engine, "user_1 is not the table dbsim created")
    assert db.checksum("user_1") == before
    assert "user_2" in db.names()  # the refused drop dropped nothing, ours included


def test_the_root_page_alone_would_not_tell_a_recreation_on_sqlite(tmp_path: Path) -> None:
    """Why SQLite needs the marker: DROP then CREATE TABLE reuses the root page."""
    db = SqliteDb(tmp_path / "pages.sqlite")
    load_and_verify(*ssb(db, tables=1))
    [(page,)] = db.sql("SELECT rootpage FROM sqlite_master WHERE name = 'user_1'")
    db.sql("DROP INDEX user_1_custid")
    db.sql("DROP TABLE user_1")
    db.victim("user_1", "c1 VARCHAR(370)")
    assert db.sql("SELECT rootpage FROM sqlite_master WHERE name = 'user_1'") == [(page,)]
    with pytest.raises(OwnershipError, match="lacks the dbsim marker"):
        drop_objects(*ssb(db, tables=1))


# --------------------------------------------------------------------------- views


@pytest.mark.parametrize("kind", ["view", "materialized view"])
def test_a_view_named_like_a_dbsim_table_is_refused(db: Db, kind: str) -> None:
    if kind == "materialized view" and db.kind != "postgres":
        pytest.skip("SQLite has no materialized views")
    before = db.victim("victim", "c1 VARCHAR(370)")
    create = "VIEW" if kind == "view" else "MATERIALIZED VIEW"
    db.sql(f"CREATE {create} user_1 AS SELECT * FROM victim")
    engine = run(ssb(db, read_pct=0, tables=1), skip_load=True)
    refused_before_sessions(engine, f"{kind} user_1 exists but was not created by dbsim")
    with pytest.raises(OwnershipError, match=f"{kind} user_1 exists"):
        load_and_verify(*ssb(db, tables=1))
    assert db.checksum("victim") == before


def test_a_view_standing_in_for_a_dropped_dbsim_table_is_refused(db: Db) -> None:
    """PostgreSQL views over one table are updatable: an UPDATE would reach the victim."""
    load_and_verify(*ssb(db, tables=1))
    db.sql("DROP TABLE user_1")
    before = db.victim("user_1", "c1 VARCHAR(370)", view_of="victim")
    engine = run(ssb(db, read_pct=0, tables=1), skip_load=True)
    refused_before_sessions(engine, "dbsim's table is gone and a view has its name")
    with pytest.raises(OwnershipError, match="a view has its name"):
        drop_objects(*ssb(db, tables=1))
    assert db.checksum("victim") == before and "user_1" in db.names()


# --------------------------------------------------------------------------- the registry


def test_a_lookalike_registry_is_refused_not_adopted(db: Db) -> None:
    """Someone's table named dbsim_registry, even with a row claiming their table for ssb."""
    db.sql(
        "CREATE TABLE dbsim_registry (name VARCHAR(128) PRIMARY KEY, workload VARCHAR(32), "
        "fingerprint TEXT)"
    )
    claim = (
        '{"columns": 20, "layout": 1, "load_seed": 1, "rows": 100, "state": "loaded", '
        '"text_width": 370, "workload": "ssb"}'
    )
    db.sql(f"INSERT INTO dbsim_registry VALUES ('user_1', 'ssb', '{claim}')")
    victim = db.victim("user_1", "c1 VARCHAR(370)")
    registry = db.checksum("dbsim_registry")
    for attempt in (lambda: load_and_verify(*ssb(db)), lambda: drop_objects(*ssb(db))):
        with pytest.raises(
            OwnershipError, match="dbsim_registry exists but is not dbsim's registry"
        ):
            attempt()
    engine = run(ssb(db, read_pct=0, tables=1), skip_load=True)
    refused_before_sessions(engine, "dbsim_registry exists but is not dbsim's registry")
    assert db.checksum("user_1") == victim and db.checksum("dbsim_registry") == registry


def test_a_copy_of_dbsims_registry_is_not_dbsims_registry(db: Db) -> None:
    load_and_verify(*ssb(db, tables=1))
    db.sql("ALTER TABLE dbsim_registry RENAME TO registry_saved")
    db.sql("CREATE TABLE dbsim_registry AS SELECT * FROM registry_saved")
    copy = db.checksum("dbsim_registry")
    with pytest.raises(OwnershipError, match="is not dbsim's registry"):
        load_and_verify(*ssb(db, tables=1))
    assert db.checksum("dbsim_registry") == copy


def test_a_view_named_like_the_registry_is_refused(db: Db) -> None:
    db.victim("dbsim_registry", "workload VARCHAR(32), fingerprint TEXT", view_of="someones")
    before = db.checksum("someones")
    with pytest.raises(OwnershipError, match="dbsim_registry exists but is not dbsim's registry"):
        load_and_verify(*ssb(db, tables=1))
    assert db.checksum("someones") == before


# --------------------------------------------------------------------------- name collisions


def _all_rows(db: Db, names: set[str]) -> dict[str, str]:
    return {n: db.checksum(n) for n in sorted(names)}


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    base=st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True),
    tail=st.sampled_from(["1", "_1", "11", "_2_1"]),
    counts=st.tuples(st.integers(1, 3), st.integers(1, 3)),
)
def test_one_scenario_never_touches_anothers_tables_live(
    tmp_path_factory: pytest.TempPathFactory, base: str, tail: str, counts: tuple[int, int]
) -> None:
    """Scenario A, then a neighbour B whose prefix extends A's (``a`` and ``a1``: before the
    separator they shared ``a11``): B's load, update-only run and drop leave A's data as it
    was, and A's drop leaves nothing of B's behind or takes anything of it."""
    db = SqliteDb(tmp_path_factory.mktemp("collide") / "db.sqlite")
    size = lambda n: f"{SSB_ROWS * 8 * n}K"  # noqa: E731 - 100 rows per table
    a = lambda: ssb(db, base, tables=counts[0], database_size=size(counts[0]))  # noqa: E731
    b_prefix = base + tail
    b: Callable[..., tuple[SsbWorkload, Target]] = lambda **p: ssb(  # noqa: E731
        db, b_prefix, tables=counts[1], database_size=size(counts[1]), **p
    )
    load_and_verify(*a())
    tables_a = {a()[0].table_name(n) for n in range(1, counts[0] + 1)}
    before = _all_rows(db, tables_a)
    load_and_verify(*b())
    assert run(b(read_pct=0), skip_load=True, loops=10).result.outcome == "completed"
    assert _all_rows(db, tables_a) == before
    assert drop_objects(*b()) == [b()[0].table_name(n) for n in range(1, counts[1] + 1)]
    assert _all_rows(db, tables_a) == before
    assert drop_objects(*a()) == sorted(tables_a, key=lambda n: int(n.rsplit("_", 1)[1]))
    with pytest.raises(MissingDataError):
        asyncio.run(_check(a()))


async def _check(pair: tuple[Workload, Target]) -> None:
    import concurrent.futures

    from sim.protocols import EngineContext

    workload, target = pair
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        await target.open(EngineContext(asyncio.get_running_loop(), pool))
        try:
            await workload.check_loaded()
        finally:
            await target.close()


# --------------------------------------------------------------------------- through psqlODBC


def test_through_psqlodbc_the_same_checks_hold() -> None:
    """``kind: odbc`` (pyodbc, autocommit off) runs the same identity statements."""
    from tests.integration import test_ssb_odbc as odbc

    if odbc.pyodbc is None or odbc.DRIVER not in odbc.pyodbc.drivers():
        pytest.skip(f"!!! psqlODBC is not installed: NOT TESTED ({odbc.INSTALL})")
    if _postgres_reachable():
        pytest.skip("!!! PostgreSQL is not reachable")
    prefix = f"ow{uuid.uuid4().hex[:8]}"
    table = f"{prefix}_1"
    workload, target, _ = odbc.built(prefix, loops_per_session=5)
    engine = Engine(workload, target, Load(loops_per_session=5), skip_load=True)
    asyncio.run(engine.run())
    refused_before_sessions(engine, f"missing {table}, {prefix}_2", "dbsim load")
    try:
        load_and_verify(*odbc.built(prefix)[:2])
        odbc.sql(f"DROP TABLE {table}")
        odbc.sql(f"CREATE TABLE {table} (custid INTEGER, c1 VARCHAR(370))")
        odbc.sql(f"INSERT INTO {table} VALUES (1, 'precious')")
        with pytest.raises(OwnershipError, match=f"{table} is not the table dbsim created"):
            drop_objects(*odbc.built(prefix)[:2])
        assert odbc.sql(f"SELECT c1 FROM {table}") == [("precious",)]
    finally:
        odbc.sql(f"DROP TABLE IF EXISTS {table}")
        odbc.sql(f"DELETE FROM dbsim_registry WHERE name = '{table}'")
        drop_objects(*odbc.built(prefix)[:2])
