"""The statistics collectors' row seam on a real DB-API driver: pyodbc through psqlODBC to the
local PostgreSQL. :func:`storage.collectors.view_counters.dict_rows` turns a real cursor's
``description`` and rows into the dicts the Oracle and SQL Server collectors read (SQL Server's
drivers are ODBC too), and the shared reading/reset code of those collectors runs on real,
moving counters (pg_stat_database's, read the way the DMVs are read). Only read: nothing is
reset, since other tests share the server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from sim.errors import CollectorError
from sim.protocols import EngineContext, SqlConnection, Target
from sim.sql import Statement
from storage.collectors.view_counters import (
    KIND_DATABASE,
    Reading,
    ViewCountersCollector,
    dict_rows,
)
from tests.integration.test_odbc_slob import _connection_string, driver  # noqa: F401

pytestmark = pytest.mark.integration

try:
    import pyodbc
except ImportError:  # the driver fixture skips, naming what to install
    pyodbc = None

DATABASE_SQL = """SELECT datname AS "DATABASE_NAME",
       xact_commit::float8 AS xact_commit, blks_hit::float8 AS blks_hit,
       EXTRACT(EPOCH FROM pg_postmaster_start_time())::float8 AS start_s
  FROM pg_stat_database WHERE datname = current_database()"""


class PyodbcRows(SqlConnection):
    """``rows`` as the ODBC connection makes it: execute, then dict_rows of the cursor."""

    def __init__(self) -> None:
        self.raw = pyodbc.connect(_connection_string(), autocommit=False)
        self.cursor = self.raw.cursor()

    async def rows(self, statement: Statement, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self.cursor.execute(statement.sql, *params)
        return dict_rows(cursor.description, cursor.fetchall())

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        return self.cursor.execute(statement.sql, *params).fetchone()[0]

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        return [row[0] for row in self.cursor.execute(statement.sql, *params).fetchall()]

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        raise AssertionError("the collector only reads")

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        raise AssertionError("the collector only reads")

    async def commit(self) -> None:
        raise AssertionError("the collector only reads")

    async def rollback(self) -> None:
        self.raw.rollback()

    async def close(self) -> None:
        with contextlib.suppress(pyodbc.Error):
            self.raw.close()


class PyodbcTarget(Target):
    kind: ClassVar[str] = "odbc"
    dialect: ClassVar[str] = "postgres"
    paramstyle: ClassVar[str] = "qmark"

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> PyodbcRows:
        return PyodbcRows()

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list:  # type: ignore[type-arg]
        return []

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}


class CommitsCollector(ViewCountersCollector):
    """The shared collector code on pg_stat_database's counters, read as a DMV is."""

    engine: ClassVar[str] = "PostgreSQL through ODBC"

    async def read(self) -> tuple[str, Reading]:
        [row] = await self.rows("database", DATABASE_SQL)
        name = str(row["database_name"])
        counters = {"xact_commit": float(row["xact_commit"]), "blks_hit": float(row["blks_hit"])}
        return name, {name: {"reset_postmaster": float(row["start_s"]), **counters}}

    def figures(
        self, entity: str, before: Mapping[str, float], after: Mapping[str, float], seconds: float
    ) -> tuple[str, dict[str, float]]:
        return KIND_DATABASE, {
            k + "_s": (after[k] - before[k]) / seconds for k in ("xact_commit", "blks_hit")
        }

    def missing_grant(self, exc: BaseException) -> CollectorError | None:
        return None


def test_a_real_cursor_gives_lower_cased_dicts(driver: None) -> None:  # noqa: F811
    conn = PyodbcRows()
    try:
        rows = asyncio.run(conn.rows(Statement("t", DATABASE_SQL, ())))
    finally:
        asyncio.run(conn.close())
    assert len(rows) == 1 and set(rows[0]) == {
        "database_name",
        "xact_commit",
        "blks_hit",
        "start_s",
    }
    assert rows[0]["database_name"] == "test" and rows[0]["xact_commit"] > 0


def test_the_collectors_reading_and_rates_on_moving_counters(driver: None) -> None:  # noqa: F811
    collector = CommitsCollector(PyodbcTarget())

    async def scenario() -> list:  # type: ignore[type-arg]
        await collector.start(0.0)
        samples = []
        for i in range(1, 4):
            await asyncio.sleep(0.6)  # PostgreSQL publishes a backend's counters ~once a second
            samples += await collector.sample(float(i))
        await collector.stop()
        return samples

    samples = asyncio.run(scenario())
    assert [s.entity for s in samples] == ["test"] * 3
    assert all(not s.gap for s in samples)
    assert all(s.values["xact_commit_s"] >= 0 and s.values["blks_hit_s"] >= 0 for s in samples)
    assert [s.values["interval_s"] for s in samples] == [1.0, 1.0, 1.0]
    assert all(s.meta == {"kind": "database"} for s in samples)
