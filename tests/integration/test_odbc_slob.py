"""The pyodbc path for real: SLOB-like through unixODBC and psqlODBC ("PostgreSQL Unicode").

An ``odbc`` target with dialect ``postgres`` runs the same code as ``kind: sqlserver`` (the
OdbcConnection in the engine's thread pool, autocommit off, fast executemany, qmark binds);
only the driver and the SQL dialect differ. Each test uses its own table prefix and removes
its tables afterwards, so the shared ``test`` database is left as found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import OwnershipError, TargetError
from sim.protocols import EngineContext
from storage.targets.settings import OdbcSettings, SqlServerSettings
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration

DRIVER = "PostgreSQL Unicode"
HOST, PORT, DATABASE, USER = "127.0.0.1", 5432, "test", "postgres"
ROWS = 10_000
INSTALL = "apt-get install odbc-postgresql unixodbc"
PASSWORD_ENV = "DBSIM_TEST_ODBC_PASSWORD"

try:
    import pyodbc

    from storage.targets.odbc import OdbcTarget, SqlServerTarget
except ImportError as exc:  # unixODBC missing: pyodbc cannot load libodbc
    pyodbc = None
    IMPORT_ERROR = str(exc)


def _connection_string() -> str:
    return f"DRIVER={{{DRIVER}}};SERVER={HOST};PORT={PORT};DATABASE={DATABASE};UID={USER};"


@pytest.fixture(scope="module")
def driver() -> None:
    if pyodbc is None:
        pytest.skip(f"!!! pyodbc cannot load ({IMPORT_ERROR}): {INSTALL}")
    if DRIVER not in pyodbc.drivers():
        pytest.skip(f"!!! ODBC driver {DRIVER!r} is not installed: {INSTALL}")
    try:
        pyodbc.connect(_connection_string(), timeout=5).close()
    except pyodbc.Error as exc:
        pytest.skip(f"!!! PostgreSQL on {HOST}:{PORT} is not reachable through ODBC: {exc}")


def _sql(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own (autocommit), not the target's."""
    # pyodbc's own context manager commits but does not close; closing() does.
    with contextlib.closing(pyodbc.connect(_connection_string(), autocommit=True)) as conn:
        cursor = conn.execute(sql, *params)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


def _tables(prefix: str) -> set[str]:
    rows = _sql(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name LIKE ?",
        f"{prefix}%",
    )
    return {name for (name,) in rows}


@pytest.fixture
def prefix(driver: None) -> Iterator[str]:
    """A table prefix no other test uses; whatever carries it is removed afterwards."""
    name = f"odbc{secrets.token_hex(4)}"
    yield name
    for table in _tables(name):
        _sql(f'DROP TABLE IF EXISTS "{table}"')
    if _sql("SELECT to_regclass('dbsim_registry')") != [(None,)]:
        _sql("DELETE FROM dbsim_registry WHERE name LIKE ?", f"{name}%")


def workload(prefix: str, **params: Any) -> tuple[SlobWorkload, OdbcTarget]:
    target = OdbcTarget(
        OdbcSettings(driver=DRIVER, dialect="postgres", host=HOST, port=PORT, database=DATABASE)
    )
    parameters = SlobParameters(**{"scale": ROWS, "table_prefix": prefix, **params})
    return SlobWorkload(parameters, target), target


def test_load_puts_one_row_in_each_block(prefix: str) -> None:
    report = load_and_verify(*workload(prefix))
    table = f"{prefix}_1_cf1"
    assert report["verify"]["tables"] == [
        {"table": table, "rows": ROWS, "max_key": ROWS, "blocks": ROWS, "max_rows_per_block": 1}
    ]
    assert report["target"]["dialect"] == "postgres"
    assert report["target"]["dbms_name"] == "PostgreSQL"
    # Counted again here, from ctid, on a connection of our own: as many distinct blocks as
    # rows means no block holds two.
    [(rows, blocks)] = _sql(f"SELECT COUNT(*), COUNT(DISTINCT (ctid::text::point)[0]) FROM {table}")
    assert (rows, blocks) == (ROWS, ROWS)
    [(keys, distinct, top)] = _sql(
        f"SELECT COUNT(custid), COUNT(DISTINCT custid), MAX(custid) FROM {table}"
    )
    assert (keys, distinct, top) == (ROWS, ROWS, ROWS)
    [(width,)] = _sql(f"SELECT MIN(LENGTH(c20)) FROM {table}")
    assert width == 128
    # A second load finds its own, complete data and leaves it alone.
    again = load_and_verify(*workload(prefix))
    assert again["load"]["tables"][0]["built"] is False


def test_a_run_keeps_the_exact_mix_and_commits_its_updates(prefix: str) -> None:
    slob, target = workload(prefix, update_pct=10, scan_pct=20, threads_per_schema=4)
    engine = Engine(slob, target, Load(loops_per_session=200, warmup_s=0.3))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    totals = engine.recorder.totals
    counts = {name: stats.count for name, stats in totals.items()}
    assert sum(s.error_count for s in totals.values()) == 0
    assert counts.get("update", 0) == 4 * 2 * 10  # 4 sessions × 200 loops × 10 %
    assert slob.expected_mix(engine.result.op_ranges) == {
        "read": counts.get("read", 0),
        "update": counts.get("update", 0),
        "scan": counts.get("scan", 0),
    }
    # Committed: a connection of our own sees every session's values (the engine's
    # connections are closed, and closing rolls back whatever was not committed).
    rows = _sql(f"SELECT c2, c20 FROM {prefix}_1_cf1 WHERE c2 LIKE '0000%'")
    assert rows, "no committed update is visible"
    assert all(len(c2) == 128 and c2 == c20 for c2, c20 in rows)
    assert {c2[:6] for c2, _ in rows} == {"000000", "000001", "000002", "000003"}


def test_drop_removes_only_what_dbsim_created(prefix: str) -> None:
    load_and_verify(*workload(prefix, scan_pct=10))
    _sql(f"CREATE TABLE {prefix}_9_cf1 (mine TEXT)")  # the user's, despite the prefix
    assert drop_objects(*workload(prefix)) == [f"{prefix}_1_cf1", f"{prefix}_1_cf2"]
    assert _tables(prefix) == {f"{prefix}_9_cf1"}
    assert _sql("SELECT COUNT(*) FROM dbsim_registry WHERE name LIKE ?", f"{prefix}%") == [(0,)]


def test_a_foreign_table_of_the_same_name_is_refused_and_untouched(prefix: str) -> None:
    _sql(f"CREATE TABLE {prefix}_1_cf1 (precious TEXT)")
    _sql(f"INSERT INTO {prefix}_1_cf1 VALUES ('keep me')")
    with pytest.raises(OwnershipError, match=f"{prefix}_1_cf1 exists but was not created by dbsim"):
        load_and_verify(*workload(prefix))
    assert drop_objects(*workload(prefix)) == []
    assert _sql(f"SELECT precious FROM {prefix}_1_cf1") == [("keep me",)]


# --------------------------------------------------------------------------- secrets


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


async def _connect_error(target: Any) -> str:
    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        await target.open(EngineContext(loop, executor))
        try:
            with pytest.raises(TargetError) as caught:
                await target.connect()
        finally:
            await target.close()
    return str(caught.value)


# "refused" is also a word of the driver's own message ("Connection refused"): it must be
# masked there too, wherever the driver happens to repeat the secret.
@pytest.mark.parametrize("password", ["s3cr3t;{Pa55}=word", "refused"])
def test_the_password_never_appears_in_errors_or_descriptions(
    driver: None, monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, password)
    port = _closed_port()
    target = OdbcTarget(
        OdbcSettings(driver=DRIVER, host=HOST, port=port, password_env=PASSWORD_ENV)
    )
    message = asyncio.run(_connect_error(target))
    assert "SQLSTATE 08001" in message and f"{HOST}:{port}" in message
    assert password not in message
    described = json.dumps(target.describe())
    assert password not in described and PASSWORD_ENV in described


def test_sqlserver_target_hides_the_password_without_its_driver(
    driver: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = "Very$ecret-42"
    monkeypatch.setenv(PASSWORD_ENV, password)
    target = SqlServerTarget(
        SqlServerSettings(driver="No Such Driver 99", password_env=PASSWORD_ENV)
    )
    assert target.dialect == "sqlserver" and target.paramstyle == "qmark"
    message = asyncio.run(_connect_error(target))
    assert "No Such Driver 99" in message and "odbcinst -q -d" in message
    assert password not in message
    described = target.describe()
    assert password not in json.dumps(described)
    assert described["connection_keywords"]["SERVER"] == "127.0.0.1,1433"
    assert described["connection_keywords"]["Encrypt"] == "yes"
