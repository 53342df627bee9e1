"""Oracle in thick mode (``driver_mode: thick``): python-oracledb's asyncio API exists only in
thin mode, so with the Oracle Client libraries the target keeps a synchronous pool and every
call hops to the engine's bounded thread pool (``EngineContext.run_blocking``), as the ODBC
targets do; the loop never waits on the network. One call at a time per connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import oracledb

from sim.errors import TargetError
from sim.protocols import EngineContext, SqlConnection, Statement
from storage.collectors.view_counters import dict_rows
from storage.targets.oracle_connect import bind_dict, error_text


class OracleThickConnection(SqlConnection):
    """One session's pooled thick-mode connection; driver calls run in the thread pool."""

    def __init__(
        self,
        raw: oracledb.Connection,
        pool: oracledb.ConnectionPool,
        context: EngineContext,
        hide: Callable[[str], str],
    ) -> None:
        self._raw = raw
        self._pool = pool
        self._cursor = raw.cursor()
        self._run = context.run_blocking
        self._lock = threading.Lock()
        self._hide = hide

    def _now(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            with self._lock:
                return fn(*args)
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"oracle: {what}: {error_text(exc)}")) from exc

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._run(self._now, what, fn, *args)

    @staticmethod
    def _plain(value: Any) -> Any:
        return value.read() if isinstance(value, oracledb.LOB) else value

    def _scalar(self, sql: str, binds: dict[str, Any]) -> Any:
        self._cursor.execute(sql, binds)
        row = self._cursor.fetchone()
        return None if row is None else self._plain(row[0])

    def _column(self, sql: str, binds: dict[str, Any]) -> list[Any]:
        self._cursor.execute(sql, binds)
        return [self._plain(row[0]) for row in self._cursor.fetchall()]

    def _rows(self, sql: str, binds: dict[str, Any]) -> list[dict[str, Any]]:
        self._cursor.execute(sql, binds)
        return dict_rows(self._cursor.description, self._cursor.fetchall())

    def _rowcount(self, sql: str, binds: dict[str, Any]) -> int:
        self._cursor.execute(sql, binds)
        return int(self._cursor.rowcount)

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        binds = bind_dict(statement, params)
        return await self._call(statement.name, self._scalar, statement.sql, binds)

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        binds = bind_dict(statement, params)
        return list(await self._call(statement.name, self._column, statement.sql, binds))

    async def rows(self, statement: Statement, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Every row as a dict of lower-cased column name to value (the db collector)."""
        binds = bind_dict(statement, params)
        return list(await self._call(statement.name, self._rows, statement.sql, binds))

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        binds = bind_dict(statement, params)
        return int(await self._call(statement.name, self._rowcount, statement.sql, binds))

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            batch = [bind_dict(statement, row) for row in rows]
            await self._call(statement.name, self._cursor.executemany, statement.sql, batch)

    async def commit(self) -> None:
        await self._call("commit", self._raw.commit)

    async def rollback(self) -> None:
        await self._call("rollback", self._raw.rollback)

    def _close(self) -> None:
        try:
            self._cursor.close()
        finally:
            self._pool.release(self._raw)  # the pool rolls back anything uncommitted

    async def close(self) -> None:
        await self._call("close", self._close)
