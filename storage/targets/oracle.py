"""Oracle through python-oracledb's async thin mode, natively on the engine's loop.

Thin mode speaks Oracle Net itself, so no Oracle client libraries are needed. ``open`` creates
an async connection pool on the engine loop (it connects nothing yet: connections are made on
demand, so constructing or opening the target never needs a server); each session acquires one
connection, keeps one cursor on it (statement cache hits for repeated SQL) and returns it to
the pool on close. Autocommit stays off: commits are real.

Binds are *named* (``:lo``); a connection turns the positional parameters it is given into a
dict by ``statement.param_names`` (a name used three times in the SQL is one entry).

DDL needs no IF [NOT] EXISTS (Oracle has it only from 23ai): workloads check the catalogue
before they create or drop (workloads.common.TableRegistry).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import oracledb

from sim.errors import TargetError
from sim.protocols import EngineContext, SqlConnection, Statement, Target
from sim.scenario import MAX_SESSIONS
from sim.secrets import redact, resolve_secret
from storage.targets.settings import OracleSettings

DEFAULT_CONNECT_TIMEOUT_S = 10.0
# Every session holds its connection for the whole run and all connect before any starts, so
# the pool must never make one wait for another: room for the most sessions a scenario allows
# plus the set-up connections (load, verify, drop).
POOL_MAX = MAX_SESSIONS + 8


def error_text(exc: oracledb.Error) -> str:
    """The driver's message (``ORA-nnnnn: …`` or ``DPY-nnnn: …``) on one line."""
    detail = exc.args[0] if exc.args else exc
    return " ".join(str(getattr(detail, "message", detail)).split())


def bind_dict(statement: Statement, params: Sequence[Any]) -> dict[str, Any]:
    """Named binds from positional parameters in ``statement.param_names`` order.

    Surplus trailing parameters are dropped: a workload passes the same arguments to every
    dialect's version of a statement, and this dialect's may not use them all.
    """
    names = statement.param_names
    if len(params) < len(names):
        raise TargetError(
            f"oracle: {statement.name}: {len(params)} parameter(s) for binds {', '.join(names)}"
        )
    return dict(zip(names, params, strict=False))


class OracleConnection(SqlConnection):
    """One session's pooled connection with one reusable cursor."""

    def __init__(self, raw: oracledb.AsyncConnection, hide: Callable[[str], str]) -> None:
        self._raw = raw
        self._cursor = raw.cursor()
        self._hide = hide

    def _error(self, what: str, exc: oracledb.Error) -> TargetError:
        return TargetError(self._hide(f"oracle: {what}: {error_text(exc)}"))

    @staticmethod
    async def _plain(value: Any) -> Any:
        # A CLOB arrives as a locator; callers expect text.
        if isinstance(value, oracledb.AsyncLOB):
            return await value.read()
        return value

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        binds = bind_dict(statement, params)
        try:
            await self._cursor.execute(statement.sql, binds)
            row = await self._cursor.fetchone()
            return None if row is None else await self._plain(row[0])
        except oracledb.Error as exc:
            raise self._error(statement.name, exc) from exc

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        binds = bind_dict(statement, params)
        try:
            await self._cursor.execute(statement.sql, binds)
            return [await self._plain(row[0]) for row in await self._cursor.fetchall()]
        except oracledb.Error as exc:
            raise self._error(statement.name, exc) from exc

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        binds = bind_dict(statement, params)
        try:
            await self._cursor.execute(statement.sql, binds)
        except oracledb.Error as exc:
            raise self._error(statement.name, exc) from exc
        return int(self._cursor.rowcount)

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        batch = [bind_dict(statement, row) for row in rows]
        try:
            await self._cursor.executemany(statement.sql, batch)
        except oracledb.Error as exc:
            raise self._error(statement.name, exc) from exc

    async def commit(self) -> None:
        try:
            await self._raw.commit()
        except oracledb.Error as exc:
            raise self._error("commit", exc) from exc

    async def rollback(self) -> None:
        try:
            await self._raw.rollback()
        except oracledb.Error as exc:
            raise self._error("rollback", exc) from exc

    async def close(self) -> None:
        try:
            self._cursor.close()
            await self._raw.close()  # back to the pool, which rolls back anything uncommitted
        except oracledb.Error as exc:
            raise self._error("close", exc) from exc


class OracleTarget(Target):
    """Oracle Database through python-oracledb thin (``kind: oracle``)."""

    kind: ClassVar[str] = "oracle"
    dialect: ClassVar[str] = "oracle"
    paramstyle: ClassVar[str] = "named"

    def __init__(self, settings: OracleSettings) -> None:
        self.settings = settings
        self._pool: oracledb.AsyncConnectionPool | None = None
        self._password: str | None = None
        self._server_version: str | None = None

    def _hide(self, text: str) -> str:
        return redact(text, [self._password] if self._password else [])

    def _where(self) -> str:
        s = self.settings
        return f"oracle: cannot connect to {s.host}:{s.port}/{s.service_name} as {s.user}"

    async def open(self, context: EngineContext) -> None:
        # The context's thread pool is not needed: thin mode is asyncio-native on its loop.
        s = self.settings
        self._password = resolve_secret(s, "target")
        try:
            self._pool = oracledb.create_pool_async(
                user=s.user,
                password=self._password,
                host=s.host,
                port=s.port,
                service_name=s.service_name,
                min=0,
                max=POOL_MAX,
                increment=1,
                getmode=oracledb.POOL_GETMODE_TIMEDWAIT,
                wait_timeout=int(DEFAULT_CONNECT_TIMEOUT_S * 1000),
                tcp_connect_timeout=DEFAULT_CONNECT_TIMEOUT_S,
                program="dbsim",
            )
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"{self._where()}: {error_text(exc)}")) from exc

    async def connect(self) -> OracleConnection:
        if self._pool is None:
            raise TargetError("oracle: target used before open()")
        try:
            raw = await self._pool.acquire()
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"{self._where()}: {error_text(exc)}")) from exc
        self._server_version = str(raw.version)
        return OracleConnection(raw, self._hide)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        try:
            if pool is not None:
                await pool.close(force=True)
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"oracle: closing the pool: {error_text(exc)}")) from exc
        finally:
            self._password = None

    def storage_paths(self) -> list[Path]:
        directory = self.settings.data_directory
        return [directory] if directory is not None else []

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {
            "kind": self.kind,
            "dialect": self.dialect,
            "host": s.host,
            "port": s.port,
            "service_name": s.service_name,
            "user": s.user,
            "password_from": (
                f"env:{s.password_env}" if s.password_env else "file" if s.password_file else None
            ),
            "driver": f"python-oracledb {oracledb.__version__} thin (async)",
            "server_version": self._server_version,
        }
