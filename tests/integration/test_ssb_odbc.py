"""SSB-like over ``kind: odbc`` into the local PostgreSQL through psqlODBC, in the default
batches: the load, the exact mix of a short run (on both session runners: the native unixODBC
loop and pyodbc on threads), and a drop that takes only dbsim's tables.

Regression: the second load batch failed "String data, right truncation: length 740 buffer
510". pyodbc re-executes its prepared INSERT on the same cursor and resets the parameters
after each batch; psqlODBC cannot describe them after that, so pyodbc sized the text buffers
of every later parameter array as VARCHAR(255) while SSB sends 370 characters. The target
now declares the sizes from each batch (``storage/targets/odbc.py``). Each test has its own
table prefix and drops what it loaded, so the shared ``test`` database is left as found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from sim.config.resolve import validate
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.protocols import EngineContext, Target, connect_sql
from sim.run.runner import build_target, build_workload
from sim.sql import Statement
from tests.support.session_runners import AskedRunner, session_runner
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.schema import TEXT_COLUMNS, TEXT_WIDTH
from workloads.ssb.workload import SsbWorkload

pytestmark = pytest.mark.integration
# The fixture the engine run takes: the native ODBC loop and pyodbc on threads in turn.
__all__ = ["session_runner"]

DRIVER = "PostgreSQL Unicode"
HOST, PORT, DATABASE, USER = "127.0.0.1", 5432, "test", "postgres"
INSTALL = "apt-get install odbc-postgresql unixodbc"
SIZE = "16M"  # 2 tables × 1,024 rows: 500 + 500 + 24 in the default batches
TABLES = 2
RUN_S = 2.5

try:
    import pyodbc

    from storage.targets.odbc import LONGEST_ARRAY_TEXT, OdbcConnection
except ImportError as exc:  # no libodbc.so.2: the one import error that skips
    if "libodbc" not in str(exc):
        raise
    pyodbc = None
    IMPORT_ERROR = str(exc)


def _connection_string() -> str:
    return f"DRIVER={{{DRIVER}}};SERVER={HOST};PORT={PORT};DATABASE={DATABASE};UID={USER};"


@pytest.fixture(scope="module", autouse=True)
def driver() -> None:
    """Skips (loudly) only when unixODBC or psqlODBC is not installed; an unreachable
    PostgreSQL is a failure, not a skip."""
    if pyodbc is None:
        pytest.skip(f"!!! {IMPORT_ERROR}: SSB over psqlODBC NOT TESTED ({INSTALL})")
    if DRIVER not in pyodbc.drivers():
        pytest.skip(f"!!! ODBC driver {DRIVER!r} is not installed: NOT TESTED ({INSTALL})")


def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    """One statement on a connection of its own (autocommit): what another client sees."""
    with contextlib.closing(pyodbc.connect(_connection_string(), autocommit=True)) as conn:
        cursor = conn.execute(query, *params)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


def scenario(prefix: str, **load: Any) -> dict[str, Any]:
    """A scenario as a user writes it: ``kind: odbc``, no DSN, the default load batch."""
    return {
        "name": "ssb-odbc",
        "target": {
            "kind": "odbc",
            "driver": DRIVER,
            "dialect": "postgres",
            "host": HOST,
            "port": PORT,
            "database": DATABASE,
            "user": USER,
        },
        "workload": {
            "name": "ssb",
            "parameters": {"database_size": SIZE, "tables": TABLES, "table_prefix": prefix},
        },
        "load": load,
    }


def built(prefix: str, **load: Any) -> tuple[SsbWorkload, Target, Any]:
    parsed = validate(scenario(prefix, **load))
    target = build_target(parsed)
    workload = build_workload(parsed, target)
    assert isinstance(workload, SsbWorkload) and target.kind == "odbc"
    return workload, target, parsed


@pytest.fixture
def prefix() -> Iterator[str]:
    """A table prefix of this test's own; whatever it loaded is dropped afterwards."""
    name = f"o{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        ssb, target, _ = built(name)
        drop_objects(ssb, target)


def test_load_in_default_batches_completes_with_every_row(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssb, target, _ = built(prefix)
    rows = ssb.p.rows_per_table
    batch = SsbParameters.model_fields["load_batch_rows"].default
    assert ssb.p.load_batch_rows == batch and rows > 2 * batch, "needs several batches"

    # Every batch, and whether it went as a parameter array (fast_executemany still on
    # afterwards) or row by row: the fix must keep the load on the fast path.
    batches: list[tuple[int, bool]] = []
    executemany = OdbcConnection._executemany

    def spy(self: OdbcConnection, query: str, batch_rows: Sequence[Sequence[Any]]) -> None:
        executemany(self, query, batch_rows)
        batches.append((len(batch_rows), bool(self._cursor.fast_executemany)))

    monkeypatch.setattr(OdbcConnection, "_executemany", spy)
    report = load_and_verify(ssb, target)

    assert report["load"]["built"] is True
    assert [(t["table"], t["rows"]) for t in report["verify"]["tables"]] == [
        (f"{prefix}_{n}", rows) for n in range(1, TABLES + 1)
    ]
    sizes = [batch] * (rows // batch) + [rows % batch]
    assert batches == [(n, True) for n in sizes * TABLES]
    lengths = ", ".join(f"MIN(LENGTH({c})), MAX(LENGTH({c}))" for c in TEXT_COLUMNS)
    for n in range(1, TABLES + 1):
        [counted] = sql(
            f"SELECT COUNT(*), COUNT(DISTINCT custid), MIN(custid), MAX(custid), {lengths} "
            f"FROM {prefix}_{n}"
        )
        assert counted == (rows, rows, 1, rows) + (TEXT_WIDTH,) * (2 * len(TEXT_COLUMNS))


def test_a_short_run_keeps_the_exact_mix_and_commits(
    prefix: str, session_runner: AskedRunner
) -> None:
    runner = session_runner.on("odbc")
    ssb, target, parsed = built(
        prefix, duration_s=RUN_S, warmup_s=0.3, seed=7, session_runner=runner
    )
    load_and_verify(ssb, target)
    before = dict(sql(f"SELECT custid, c1 FROM {prefix}_1"))
    engine = Engine(ssb, target, parsed.load)
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    session_runner.ran(engine.result.session_runner, engine.result.session_runner_why)
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    assert counts.get("read", 0) > 0 and counts.get("update", 0) > 0
    assert ssb.expected_mix(engine.result.op_ranges) == {
        "read": counts.get("read", 0),
        "update": counts.get("update", 0),
    }
    after = dict(sql(f"SELECT custid, c1 FROM {prefix}_1"))
    assert after.keys() == before.keys()
    assert any(after[k] != before[k] for k in before), "no committed update is visible"
    assert {len(v) for v in after.values()} == {TEXT_WIDTH}


def test_drop_removes_only_dbsims_tables(prefix: str) -> None:
    ssb, target, _ = built(prefix)
    load_and_verify(ssb, target)
    sql(f"CREATE TABLE {prefix}_9 (mine TEXT)")  # the user's, despite the prefix
    try:
        assert drop_objects(*built(prefix)[:2]) == [f"{prefix}_1", f"{prefix}_2"]
        left = sql(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name LIKE ?",
            f"{prefix}%",
        )
        assert left == [(f"{prefix}_9",)]
        assert sql("SELECT COUNT(*) FROM dbsim_registry WHERE name LIKE ?", f"{prefix}%") == [(0,)]
    finally:
        sql(f"DROP TABLE IF EXISTS {prefix}_9")


def test_later_batches_take_non_ascii_and_overlong_text(prefix: str) -> None:
    """Sizes count UTF-16 units (a non-BMP character takes two); a value too long for a
    parameter array sends its batch row by row, and the next batch is an array again."""
    table = f"{prefix}t"
    insert = Statement("insert", f"INSERT INTO {table} (k, a) VALUES (?, ?)", ("k", "a"))
    longest = LONGEST_ARRAY_TEXT
    batches: list[list[tuple[int, str | None]]] = [
        [(1, "x" * 370), (2, None)],
        [(3, "\U0001f600" * (longest // 2)), (4, "é" * 10)],
        [(5, "y" * (longest + 1))],
        [(6, ""), (7, "z" * 371)],
    ]

    async def load() -> None:
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            target = built(prefix)[1]
            await target.open(EngineContext(loop, executor))
            conn = await connect_sql(target)
            try:
                for batch in batches:
                    await conn.executemany(insert, batch)
                    await conn.commit()
            finally:
                await conn.close()
                await target.close()

    sql(f"CREATE TABLE {table} (k INTEGER, a TEXT)")
    try:
        asyncio.run(load())
        got = sql(f"SELECT k, a FROM {table} ORDER BY k")
        assert got == [row for batch in batches for row in batch]
    finally:
        sql(f"DROP TABLE IF EXISTS {table}")
