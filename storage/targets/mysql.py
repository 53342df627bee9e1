"""MariaDB and MySQL through asyncmy, on the engine's event loop (``kind: mysql``).

The target and its connections live here; the kind's settings and dialect record (InnoDB's
page facts, the ownership marker as a table comment, the ``db`` collector) live in
storage.targets.mysql_record, which registers the kind without importing the driver and
imports this module when a mysql target is built.

Driver: asyncmy (Cython, asyncio-native; docs/databases.md has the measurements against
aiomysql). Transactions: autocommit off, so a statement's work is committed by ``commit()``
as on the other SQL targets. DDL commits implicitly in MySQL; the ownership registry records
a table's identity right after its CREATE, so a failure in between leaves a table that
carries dbsim's token and is rebuilt by the next load.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sim.config.scenario import MAX_SESSIONS
from sim.errors import TargetError
from sim.protocols import (
    EngineContext,
    LoadLock,
    SqlConnection,
    Statement,
    Target,
    WaitCallback,
)
from sim.secrets import redact, resolve_secret
from storage.targets.locks import polled_lock
from storage.targets.mysql_record import MysqlSettings

#: Connections are opened lazily (min 0): sessions plus loader, verifier, collector, spares.
POOL_MAX = MAX_SESSIONS + 8
#: How long ``close()`` waits for held connections before terminating them (as postgres.py).
CLOSE_TIMEOUT_S = 10.0
try:
    import asyncmy
    from asyncmy import errors as mysql_errors
except ImportError as exc:  # the kind is registered all the same; building it says what is missing
    asyncmy = None  # type: ignore[assignment]
    MISSING_DRIVER: str | None = f"target.kind: mysql needs asyncmy (pip install asyncmy): {exc}"
    DRIVER_ERRORS: tuple[type[BaseException], ...] = (OSError,)
else:
    MISSING_DRIVER = None
    DRIVER_ERRORS = (mysql_errors.MySQLError, OSError)
#: Client error codes for a connection that is gone (server gone away, lost, cannot connect).
DISCONNECT_CODES = frozenset({2002, 2003, 2006, 2013, 2055, 1927, 1053})


@dataclass(frozen=True)
class ConnectionRoom:
    """How many connections the server could still take from dbsim when it connected (the
    native loop's choice reads ``free``: storage.targets.pgloop_session.unavailable)."""

    max_connections: int
    in_use: int

    @property
    def free(self) -> int:
        # The connection that measured this goes back to the pool (+1).
        return max(self.max_connections - self.in_use + 1, 0)


class MysqlConnection(SqlConnection):
    """One session's pooled asyncmy connection; one cursor per statement."""

    __slots__ = ("_conn", "_release", "_secrets")

    def __init__(self, conn: Any, release: Any, secrets: list[str]) -> None:
        self._conn = conn
        self._release = release
        self._secrets = secrets

    def _error(self, what: str, exc: BaseException) -> TargetError:
        return TargetError(redact(f"mysql: {what}: {type(exc).__name__}: {exc}", self._secrets))

    async def _run(self, statement: Statement, params: Sequence[Any]) -> Any:
        if self._conn is None:
            raise TargetError(f"mysql: {statement.name}: the connection is closed")
        cursor = self._conn.cursor()
        try:
            # Always a tuple, so the driver always formats: the text's literal percent signs
            # are doubled for it (sim.sql.to_paramstyle, paramstyle "format").
            await cursor.execute(statement.sql, tuple(params))
        except DRIVER_ERRORS as exc:
            await cursor.close()
            raise self._error(statement.name, exc) from exc
        return cursor

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        cursor = await self._run(statement, params)
        try:
            row = await cursor.fetchone()
        finally:
            await cursor.close()
        return row[0] if row else None

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        cursor = await self._run(statement, params)
        try:
            return [row[0] for row in await cursor.fetchall()]
        finally:
            await cursor.close()

    async def rows(
        self, statement: Statement, params: Sequence[Any] = ()
    ) -> list[Mapping[str, Any]]:
        """Every row as a mapping of column name to value (collectors)."""
        cursor = await self._run(statement, params)
        try:
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in await cursor.fetchall()]
        finally:
            await cursor.close()

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        cursor = await self._run(statement, params)
        try:
            return int(cursor.rowcount)
        finally:
            await cursor.close()

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        """One multi-row INSERT per batch (asyncmy folds an INSERT's VALUES together)."""
        if self._conn is None:
            raise TargetError(f"mysql: {statement.name}: the connection is closed")
        cursor = self._conn.cursor()
        try:
            await cursor.executemany(statement.sql, [tuple(r) for r in rows])
        except DRIVER_ERRORS as exc:
            raise self._error(statement.name, exc) from exc
        finally:
            await cursor.close()

    async def commit(self) -> None:
        try:
            await self._conn.commit()
        except DRIVER_ERRORS as exc:
            raise self._error("commit", exc) from exc

    async def rollback(self) -> None:
        try:
            await self._conn.rollback()
        except DRIVER_ERRORS as exc:
            raise self._error("rollback", exc) from exc

    async def close(self) -> None:
        """Roll back what is open and give the connection back to the pool; idempotent."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(*DRIVER_ERRORS):
            await conn.rollback()
        self._release(conn)


class MysqlTarget(Target):
    """A MariaDB or MySQL server reached with asyncmy; settings in :class:`MysqlSettings`."""

    kind: ClassVar[str] = "mysql"
    dialect: ClassVar[str] = "mysql"
    paramstyle: ClassVar[str] = "format"

    def __init__(self, settings: MysqlSettings) -> None:
        self.settings = settings
        self._pool: Any = None
        self._secrets: list[str] = []
        self.server_version: str | None = None
        self.buffer_pool_bytes: int | None = None
        self.server_data_directory: Path | None = None
        self.connection_room: ConnectionRoom | None = None

    def _where(self) -> str:
        s = self.settings
        return f"{s.user}@{s.host}:{s.port}/{s.database}"

    def _error(self, what: str, exc: BaseException) -> TargetError:
        message = f"mysql: {what} ({self._where()}): {type(exc).__name__}: {exc}"
        return TargetError(redact(message, self._secrets))

    async def open(self, context: EngineContext) -> None:
        """Create the pool and read the server's facts (proving the settings work)."""
        s = self.settings
        password = resolve_secret(s, "target")
        self._secrets = [password] if password else []
        try:
            self._pool = await asyncmy.create_pool(
                host=s.host,
                port=s.port,
                user=s.user,
                password=password or "",
                db=s.database,
                connect_timeout=s.connect_timeout_s,
                autocommit=False,
                minsize=0,
                maxsize=POOL_MAX,
                charset="utf8mb4",
            )
            async with self._pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute(
                    "SELECT VERSION(), @@innodb_buffer_pool_size, @@datadir, @@max_connections, "
                    "(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                    "WHERE VARIABLE_NAME = 'THREADS_CONNECTED')"
                )
                version, pool_bytes, datadir, max_connections, in_use = await cur.fetchone()
                await conn.rollback()
        except DRIVER_ERRORS as exc:
            await self.close()
            raise self._error("cannot connect", exc) from exc
        self.server_version = str(version)
        self.buffer_pool_bytes = int(pool_bytes)
        self.server_data_directory = Path(str(datadir)) if datadir else None
        if max_connections is not None and in_use is not None:
            self.connection_room = ConnectionRoom(int(max_connections), int(in_use))

    async def connect(self) -> MysqlConnection:
        if self._pool is None:
            raise TargetError("mysql: target used before open()")
        try:
            conn = await self._pool.acquire()
        except DRIVER_ERRORS as exc:
            raise self._error("cannot connect", exc) from exc
        return MysqlConnection(conn, self._pool.release, self._secrets)

    async def close(self) -> None:
        """Close the pool; connections still held after ``CLOSE_TIMEOUT_S`` (one never given
        back) are terminated: asyncmy's ``wait_closed`` would wait for them forever (#33)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
            try:
                await asyncio.wait_for(pool.wait_closed(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                pool.terminate()

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """``GET_LOCK`` on a name of the database and key. MySQL's named locks have no shared
        mode, so verifiers take it exclusively too (they wait for each other, briefly)."""
        return self._named_lock(key, shared, on_wait)

    @contextlib.asynccontextmanager
    async def _named_lock(
        self, key: str, shared: bool, on_wait: WaitCallback | None
    ) -> AsyncIterator[LoadLock]:
        if self._pool is None:
            raise TargetError("mysql: target used before open()")
        # GET_LOCK names are at most 64 characters.
        name = f"dbsim-load:{self.settings.database}:{key}"[:64]
        conn = await self.connect()
        take = Statement("get_lock", "SELECT GET_LOCK(%s, 0)", ("name",))
        give = Statement("release_lock", "SELECT RELEASE_LOCK(%s)", ("name",))

        async def try_acquire() -> bool:
            return bool(await conn.scalar(take, (name,)))

        async def release() -> None:
            await conn.scalar(give, (name,))

        try:
            async with polled_lock(
                try_acquire,
                release,
                what=f"{key}* in {self._where()}",
                how=f"GET_LOCK('{name}')",
                shared=shared,
                on_wait=on_wait,
            ) as lock:
                yield lock
        finally:
            await conn.close()

    def is_disconnect(self, exc: BaseException) -> bool:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if isinstance(cause, ConnectionError | TimeoutError | OSError):
            return True
        code = cause.args[0] if getattr(cause, "args", None) else None
        return isinstance(code, int) and code in DISCONNECT_CODES

    def storage_paths(self) -> list[Path]:
        """The configured data directory, else the server's own when it runs here and is
        readable (so the block collector can find its devices)."""
        if self.settings.data_directory is not None:
            return [self.settings.data_directory]
        path = self.server_data_directory
        local = self.settings.host in ("127.0.0.1", "localhost", "::1")
        if path is not None and local and path.exists() and os.access(path, os.R_OK):
            return [path]
        return []

    def describe(self) -> dict[str, Any]:
        s = self.settings
        data_directory = s.data_directory or self.server_data_directory
        return {
            "kind": self.kind,
            "host": s.host,
            "port": s.port,
            "database": s.database,
            "user": s.user,
            "password_from": (
                f"env:{s.password_env}" if s.password_env else "file" if s.password_file else None
            ),
            "server_version": self.server_version,
            "innodb_buffer_pool_bytes": self.buffer_pool_bytes,
            "data_directory": str(data_directory) if data_directory else None,
        }
