"""Oracle through python-oracledb: async thin mode natively on the engine's loop, or thick mode
(``driver_mode: thick``) in the engine's thread pool (storage.targets.oracle_thick). How the
settings become connection parameters (dsn, TNS alias, TCPS, wallet, SID): oracle_connect.

Thin mode speaks Oracle Net itself, so no Oracle client libraries are needed. ``open`` creates
an async connection pool on the engine loop (it connects nothing yet: connections are made on
demand, so constructing or opening the target never needs a server); each session acquires one
connection, keeps one cursor on it (statement cache hits for repeated SQL) and returns it to
the pool on close. Autocommit stays off: commits are real.

Binds are *named* (``:lo``); a connection turns the positional parameters it is given into a
dict by ``statement.param_names`` (a name used three times in the SQL is one entry).

DDL needs no IF [NOT] EXISTS (Oracle has it only from 23ai): workloads check the catalogue
before they create or drop (workloads.ownership.TableRegistry).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

import oracledb

from sim.config.scenario import MAX_SESSIONS
from sim.errors import TargetError
from sim.protocols import (
    EngineContext,
    LoadLock,
    SqlConnection,
    Statement,
    Target,
    WaitCallback,
    no_load_lock,
)
from sim.secrets import redact, resolve_secret
from storage.collectors.view_counters import dict_rows
from storage.targets.locks import LockUnsupported, lock_id, polled_lock
from storage.targets.oracle_connect import address as oracle_address
from storage.targets.oracle_connect import (
    bind_dict,
    connect_params,
    driver_label,
    dsn_host,
    error_text,
    start_thick,
    wallet_password,
)
from storage.targets.oracle_thick import OracleThickConnection
from storage.targets.settings import OracleSettings

log = logging.getLogger(__name__)

# Every session holds its connection for the whole run and all connect before any starts, so
# the pool must never make one wait for another: room for the most sessions a scenario allows
# plus the set-up connections (load, verify, drop).
POOL_MAX = MAX_SESSIONS + 8
#: A login (TCP connect, TLS, the Oracle Net handshake, authentication) must complete within
#: this many connect_timeout_s: generous, as a run's sessions log in one after another.
LOGIN_TIMEOUT_FACTOR = 6
POOL_CLOSE_TIMEOUT_S = 5.0
# DBMS_LOCK: user lock ids run 0 .. 2^30-1; X_MODE 6 excludes, S_MODE 4 shares. REQUEST answers
# 0 granted, 1 timed out (held by another), 4 already held by this session.
DBMS_LOCK_ID_BITS = 30
DBMS_LOCK_X_MODE = 6
DBMS_LOCK_S_MODE = 4
DBMS_LOCK_GRANTED = frozenset({0, 4})
DBMS_LOCK_BUSY = 1


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

    async def rows(self, statement: Statement, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Every row as a dict of lower-cased column name to value (the db collector)."""
        binds = bind_dict(statement, params)
        try:
            await self._cursor.execute(statement.sql, binds)
            return dict_rows(self._cursor.description, await self._cursor.fetchall())
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
        self._thick_pool: oracledb.ConnectionPool | None = None
        self._context: EngineContext | None = None
        self._password: str | None = None
        self._server_version: str | None = None

    def _hide(self, text: str) -> str:
        return redact(text, [self._password] if self._password else [])

    def _where(self) -> str:
        s = self.settings
        return f"oracle: cannot connect to {oracle_address(s)} as {s.user}"

    def _pool_params(self) -> dict[str, Any]:
        s = self.settings
        self._password = resolve_secret(s, "target")
        wallet = wallet_password(s)
        return {
            **connect_params(s, self._password, wallet),
            "min": 0,
            "max": POOL_MAX,
            "increment": 1,
            "getmode": oracledb.POOL_GETMODE_TIMEDWAIT,
            "wait_timeout": int(s.connect_timeout_s * 1000),
        }

    async def open(self, context: EngineContext) -> None:
        # Thin mode is asyncio-native on the loop; thick mode has only the synchronous API,
        # so its calls go to the context's thread pool (storage.targets.oracle_thick).
        s = self.settings
        params = self._pool_params()
        try:
            if s.driver_mode == "thick":
                start_thick(s)
                self._context = context
                self._thick_pool = oracledb.create_pool(**params)
            else:
                self._pool = oracledb.create_pool_async(**params)
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"{self._where()}: {error_text(exc)}")) from exc

    async def connect(self) -> SqlConnection:
        if self._thick_pool is not None and self._context is not None:
            pool, context = self._thick_pool, self._context
            try:
                raw_thick = await context.run_blocking(pool.acquire)
            except oracledb.Error as exc:
                raise TargetError(self._hide(f"{self._where()}: {error_text(exc)}")) from exc
            self._server_version = str(raw_thick.version)
            return OracleThickConnection(raw_thick, pool, context, self._hide)
        if self._pool is None:
            raise TargetError("oracle: target used before open()")
        # tcp_connect_timeout bounds only the TCP connect; the pool's wait_timeout usually ends
        # a login that gets no answer (a listener that accepts and says nothing), this always.
        deadline = LOGIN_TIMEOUT_FACTOR * self.settings.connect_timeout_s
        try:
            raw = await asyncio.wait_for(self._pool.acquire(), deadline)
        except TimeoutError as exc:
            raise TargetError(
                self._hide(f"{self._where()}: no answer to the login within {deadline:g} s")
            ) from exc
        except oracledb.Error as exc:
            text = error_text(exc)
            if "DPY-4005" in text:  # the pool's wait for a new connection ran out
                text += (
                    " (the login did not complete in time: is an Oracle listener there, is the "
                    "service open, or does the server need a longer connect_timeout_s?)"
                )
            raise TargetError(self._hide(f"{self._where()}: {text}")) from exc
        self._server_version = str(raw.version)
        return OracleConnection(raw, self._hide)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        thick, self._thick_pool = self._thick_pool, None
        try:
            if pool is not None:
                await self._close_async_pool(pool)
            if thick is not None and self._context is not None:
                await self._context.run_blocking(lambda: thick.close(force=True))
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"oracle: closing the pool: {error_text(exc)}")) from exc
        finally:
            self._password = None

    @staticmethod
    async def _close_async_pool(pool: oracledb.AsyncConnectionPool) -> None:
        # A login still waiting on a listener that never answers holds close(force=True)
        # as long as it waits (forever): bounded, and the half-made connection is left to
        # the process's exit.
        try:
            await asyncio.wait_for(pool.close(force=True), POOL_CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "oracle: the pool did not close within %g s (a login still waits for the "
                "server); left to the process's exit",
                POOL_CLOSE_TIMEOUT_S,
            )

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """``DBMS_LOCK.REQUEST`` with a numeric id from the user and ``key`` (no
        ``ALLOCATE_UNIQUE``: it commits and writes a row), session-held, tried with timeout 0
        on a pooled connection of its own. A user without EXECUTE on DBMS_LOCK loads without
        a lock (said in the lock's ``how``), and so does thick mode (not built yet)."""
        if self.settings.driver_mode == "thick":
            return no_load_lock("no load lock in Oracle thick mode yet", shared)
        return self._dbms_lock(key, shared, on_wait)

    @contextlib.asynccontextmanager
    async def _dbms_lock(
        self, key: str, shared: bool, on_wait: WaitCallback | None
    ) -> AsyncIterator[LoadLock]:
        if self._pool is None:
            raise TargetError("oracle: target used before open()")
        number = lock_id(self.settings.user.upper(), key, bits=DBMS_LOCK_ID_BITS)
        mode = DBMS_LOCK_S_MODE if shared else DBMS_LOCK_X_MODE
        pool = self._pool
        try:
            raw = await pool.acquire()
        except oracledb.Error as exc:
            raise TargetError(self._hide(f"{self._where()}: {error_text(exc)}")) from exc
        cursor = raw.cursor()

        async def try_acquire() -> bool:
            try:
                answer = await cursor.callfunc("DBMS_LOCK.REQUEST", int, [number, mode, 0, False])
            except oracledb.DatabaseError as exc:
                text = error_text(exc)
                if "PLS-00201" in text or "ORA-06550" in text:  # no EXECUTE on DBMS_LOCK
                    raise LockUnsupported(f"DBMS_LOCK is not available: {text}") from exc
                raise TargetError(self._hide(f"oracle: load lock: {text}")) from exc
            if answer in DBMS_LOCK_GRANTED:
                return True
            if answer == DBMS_LOCK_BUSY:
                return False
            raise TargetError(f"oracle: load lock: DBMS_LOCK.REQUEST answered {answer}")

        async def release() -> None:
            try:
                await cursor.callfunc("DBMS_LOCK.RELEASE", int, [number])
            except oracledb.Error as exc:
                raise TargetError(self._hide(f"oracle: load lock: {error_text(exc)}")) from exc

        what = f"{key}* of {self.settings.user} at {self.settings.host}:{self.settings.port}"
        try:
            async with polled_lock(
                try_acquire,
                release,
                what=what,
                how=f"DBMS_LOCK {number}",
                shared=shared,
                on_wait=on_wait,
            ) as lock:
                yield lock
        finally:
            try:
                cursor.close()
                # Dropped, not given back: a session lock outlives its release call's failure
                # (or a cancelled try that was granted) as long as the session lives.
                await pool.drop(raw)
            except oracledb.Error as exc:
                log.warning("oracle: load lock connection did not close: %s", error_text(exc))

    @property
    def tablespace(self) -> str | None:
        """The tablespace the workload's tables and indexes are created in (None: default)."""
        return self.settings.tablespace

    def storage_paths(self) -> list[Path]:
        directory = self.settings.data_directory
        return [directory] if directory is not None else []

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {
            "kind": self.kind,
            "dialect": self.dialect,
            "address": oracle_address(s),
            "host": dsn_host(s.dsn) if s.dsn else s.host,
            "port": None if s.dsn else s.port,
            "service_name": None if s.dsn or s.sid else s.service_name,
            "sid": s.sid,
            "dsn": s.dsn,
            "protocol": None if s.dsn else s.protocol,
            "config_dir": str(s.config_dir) if s.config_dir else None,
            "wallet_location": str(s.wallet_location) if s.wallet_location else None,
            "driver_mode": s.driver_mode,
            "lib_dir": str(s.lib_dir) if s.lib_dir else None,
            "user": s.user,
            "password_from": (
                f"env:{s.password_env}" if s.password_env else "file" if s.password_file else None
            ),
            "driver": driver_label(s),
            "server_version": self._server_version,
        }
