"""Rows recorded from real Oracle and SQL Server servers (tests/data/dbviews, each file says
where its rows come from), served by a DB-API cursor: the only piece the statistics
collectors' tests replace. No database is mocked: neither server can run here, and the
collector's statements and its reading of rows are the code a real server would meet.

A fixture file holds one section per view, ``[v$sysstat]``, then a header line of the query's
column names and one line per row, ``|``-separated, with a trailing ``# …`` note allowed. The
cursor answers a statement with the section whose view the SQL names, after checking that the
SQL selects every column of its header (so a query changed without its recording fails).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from sim.protocols import EngineContext, SqlConnection, Target
from sim.sql import Statement
from storage.collectors.view_counters import dict_rows

DATA = Path(__file__).resolve().parents[1] / "data" / "dbviews"
_SECTION = re.compile(r"^\[(?P<view>[^\]]+)\]$")

#: A view's recorded result: its column names and rows.
Recorded = tuple[list[str], list[list[Any]]]


def _value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def load(name: str) -> dict[str, Recorded]:
    """The sections of ``tests/data/dbviews/<name>``: view -> (columns, rows)."""
    views: dict[str, Recorded] = {}
    current: str | None = None
    for raw in (DATA / name).read_text(encoding="utf-8").splitlines():
        line = raw.split("    #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if found := _SECTION.match(line):
            current = found["view"]
            continue
        if current is None:
            raise ValueError(f"{name}: a row before any [view] section: {raw!r}")
        cells = line.split("|")
        if current not in views:
            views[current] = (cells, [])
            continue
        columns, rows = views[current]
        if len(cells) != len(columns):
            raise ValueError(f"{name}: [{current}] row of {len(cells)} cells: {raw!r}")
        rows.append([_value(cell) for cell in cells])
    return views


def scaled(
    views: dict[str, Recorded], factor: float, keep: Sequence[str] = ()
) -> dict[str, Recorded]:
    """The same rows with every numeric cell times ``factor``, except the columns ``keep``
    (names, bucket bounds, a start time)."""
    out: dict[str, Recorded] = {}
    for view, (columns, rows) in views.items():
        out[view] = (
            columns,
            [
                [
                    cell * factor if isinstance(cell, int | float) and column not in keep else cell
                    for column, cell in zip(columns, row, strict=True)
                ]
                for row in rows
            ],
        )
    return out


class RecordedCursor:
    """A DB-API cursor answering each statement from one reading of recorded views."""

    def __init__(self, readings: list[dict[str, Recorded]], upper_names: bool = False) -> None:
        """``upper_names``: describe the columns upper-cased, as Oracle does for unquoted
        names."""
        self.readings = readings
        self.upper_names = upper_names
        #: An exception every execute raises (a refused view), None to answer.
        self.error: Exception | None = None
        self.reading = 0
        self.description: list[tuple[str, None, None, None, None, None, None]] | None = None
        self._rows: list[list[Any]] = []
        self.executed: list[str] = []

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> RecordedCursor:
        if self.error is not None:
            raise self.error
        views = self.readings[self.reading]
        named = [view for view in views if view.lower() in sql.lower()]
        if len(named) != 1:
            raise AssertionError(f"no single recorded view for: {sql}")
        columns, rows = views[named[0]]
        missing = [c for c in columns if not re.search(rf"\b{re.escape(c)}\b", sql, re.I)]
        if missing:
            raise AssertionError(f"the query of {named[0]} selects no {missing}: {sql}")
        self.executed.append(sql)
        names = [c.upper() if self.upper_names else c for c in columns]
        self.description = [(c, None, None, None, None, None, None) for c in names]
        self._rows = [list(row) for row in rows]
        return self

    def fetchall(self) -> list[list[Any]]:
        rows, self._rows = self._rows, []
        return rows


class RecordedConnection(SqlConnection):
    """``rows`` as Oracle's and ODBC's connections make it: execute on the cursor, then
    :func:`storage.collectors.view_counters.dict_rows` of its description and rows."""

    def __init__(self, cursor: RecordedCursor) -> None:
        self.cursor = cursor
        self.rollbacks = 0
        self.closed = False

    async def rows(self, statement: Statement, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        self.cursor.execute(statement.sql, list(params))
        return dict_rows(self.cursor.description, self.cursor.fetchall())

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        return (await self.rows(statement, params))[0].popitem()[1]

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        return [next(iter(row.values())) for row in await self.rows(statement, params)]

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        raise AssertionError(f"a statistics collector changed something: {statement.sql}")

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        raise AssertionError(f"a statistics collector changed something: {statement.sql}")

    async def commit(self) -> None:
        raise AssertionError("a statistics collector committed")

    async def rollback(self) -> None:
        self.rollbacks += 1

    async def close(self) -> None:
        self.closed = True


class RecordedTarget(Target):
    """A target of ``kind``/``dialect`` whose connections answer from ``cursor``."""

    kind: ClassVar[str] = "recorded"
    dialect: ClassVar[str] = "recorded"
    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, kind: str, cursor: RecordedCursor, user: str = "dbsim") -> None:
        self.kind = kind  # type: ignore[misc]
        self.dialect = kind  # type: ignore[misc]
        self.cursor = cursor
        self.connections: list[RecordedConnection] = []
        self.settings = type("Settings", (), {"user": user})()

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> RecordedConnection:
        conn = RecordedConnection(self.cursor)
        self.connections.append(conn)
        return conn

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list[Path]:
        return []

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}
