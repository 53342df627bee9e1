"""SQL Server, and any database with an ODBC driver, through pyodbc in the engine's thread pool.

pyodbc blocks in C but releases the GIL during driver calls, so every call hops to the engine's
bounded pool (``EngineContext.run_blocking``) and the loop never waits on the network. Each
session owns one connection (autocommit off, commits are real) and reuses one cursor on it, so
the driver can keep its prepared statement between executions of the same SQL.

``kind: sqlserver`` builds the connection string for Microsoft's ODBC Driver 17/18 (or FreeTDS)
from ``SqlServerSettings``; ``kind: odbc`` takes any installed driver and says which SQL
``dialect`` to send (the test suite runs it against PostgreSQL through psqlODBC). The password
is resolved from its reference when the target opens and is redacted from every message.
"""

from __future__ import annotations

import contextlib
import re
import threading
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import ConfigError, TargetError
from sim.protocols import (
    EngineContext,
    InPlaceSql,
    LoadLock,
    SqlConnection,
    Statement,
    Target,
    WaitCallback,
    no_load_lock,
)
from sim.secrets import redact, resolve_secret
from storage.collectors.view_counters import dict_rows
from storage.targets.locks import polled_lock
from storage.targets.odbc_support import (  # noqa: F401  (LONGEST_ARRAY_TEXT: published here)
    APP_LOCKS,
    LONGEST_ARRAY_TEXT,
    PSQLODBC_MAX_VARCHAR,
    app_lock_name,
    granted,
    microsoft_driver,
    parameter_sizes,
    tls_explanation,
)
from storage.targets.settings import OdbcSettings, SqlServerSettings

UNIXODBC_HINT = "install unixODBC: apt-get install unixodbc"

try:
    import pyodbc
except ImportError as exc:  # pragma: no cover - depends on the machine
    # pyodbc's C extension links libodbc.so.2; without unixODBC the import fails with a
    # loader message that does not say what to install.
    if "libodbc" in str(exc):
        raise ImportError(f"{UNIXODBC_HINT} ({exc})") from exc
    raise

DEFAULT_LOGIN_TIMEOUT_S = 10
# SQLSTATEs a driver returns when it cannot bind parameter arrays; executemany then falls back
# to one execution per row (nothing was sent yet, so retrying cannot duplicate rows).
NO_PARAM_ARRAYS = frozenset({"HYC00", "HY092", "IM001"})
# Keywords of a connection string; anything else could smuggle in another keyword.
_KEYWORD = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]*$")
_SECRET_KEYWORDS = frozenset({"PWD", "PASSWORD"})


def odbc_value(value: str) -> str:
    """Quote a connection-string value when it holds characters with a meaning there."""
    if value != value.strip() or any(ch in value for ch in ";{}="):
        return "{" + value.replace("}", "}}") + "}"
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


_SQLSTATE = re.compile(r"^[0-9A-Z]{5}$")


def translate_error(exc: Exception, where: str, hide: Callable[[str], str]) -> TargetError:
    """A TargetError for a pyodbc error: ``where: SQLSTATE xxxxx: message``, secrets hidden."""
    args: tuple[Any, ...] = tuple(exc.args)
    if len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        # Driver errors come as (SQLSTATE, message); errors pyodbc raises itself (truncation
        # in fast_executemany) as (message, SQLSTATE).
        state, message = (args[0], args[1]) if _SQLSTATE.match(args[0]) else (args[1], args[0])
    else:
        state, message = "?????", str(exc)
    text = f"{where}: SQLSTATE {state}: {_one_line(message)}"
    # unixODBC answers a driver name missing from odbcinst.ini with 01000 "Can't open lib".
    if state == "IM002" or "can't open lib" in message.lower():
        text += " (the ODBC driver is not installed: `odbcinst -q -d` lists those that are)"
    tls = tls_explanation(message)
    if tls is not None:
        text = f"{where}: {tls} (SQLSTATE {state}: {_one_line(message)})"
    return TargetError(hide(text))


class OdbcConnection(SqlConnection):
    """One session's pyodbc connection; every driver call runs in the engine's thread pool.

    Parameters are positional in the order of ``statement.param_names``; surplus trailing
    ones are not sent, because a workload passes the same arguments to every dialect's version
    of a statement and one dialect may not need them all.
    """

    def __init__(
        self,
        raw: pyodbc.Connection,
        context: EngineContext,
        *,
        label: str,
        fast_executemany: bool,
        hide: Callable[[str], str],
    ) -> None:
        self._raw = raw
        self._cursor = raw.cursor()
        self._run = context.run_blocking
        # One call at a time on the driver's connection, close included: when a run is
        # stopped mid-statement the coroutine is cancelled but its thread runs on, and closing
        # the connection under it from another pool thread crashes the driver (seen: SIGSEGV
        # in sqlite3 during a load interrupted by SIGINT).
        self._lock = threading.Lock()
        self._label = label
        self._fast = fast_executemany
        self._hide = hide

        self.blocking = InPlaceSql(self._now, self._scalar, self._rowcount_committed, self._params)

    def _now(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the driver's connection, one at a time, its error translated."""
        try:
            with self._lock:
                return fn(*args)
        except pyodbc.Error as exc:
            raise translate_error(exc, f"{self._label}: {what}", self._hide) from exc

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._run(self._now, what, fn, *args)

    def _params(self, statement: Statement, params: Sequence[Any]) -> list[Any]:
        wanted = len(statement.param_names)
        if len(params) < wanted:
            raise TargetError(
                f"{self._label}: {statement.name}: {len(params)} parameter(s) for binds "
                f"{', '.join(statement.param_names)}"
            )
        return list(params[:wanted])

    def _execute_blocking(self, sql: str, params: list[Any]) -> pyodbc.Cursor:
        if params:
            return self._cursor.execute(sql, params)
        return self._cursor.execute(sql)

    def _scalar(self, sql: str, params: list[Any]) -> Any:
        row = self._execute_blocking(sql, params).fetchone()
        return None if row is None else row[0]

    def _column(self, sql: str, params: list[Any]) -> list[Any]:
        return [row[0] for row in self._execute_blocking(sql, params).fetchall()]

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cursor = self._execute_blocking(sql, params)
        return dict_rows(cursor.description, cursor.fetchall())

    def _rowcount(self, sql: str, params: list[Any]) -> int:
        return int(self._execute_blocking(sql, params).rowcount)

    def _rowcount_committed(self, sql: str, params: list[Any]) -> int:
        rows = self._rowcount(sql, params)
        self._raw.commit()
        return rows

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # Parameter arrays have one fixed-size buffer per text column, which pyodbc sizes from
        # SQLDescribeParam, silently falling back to VARCHAR(255) when the driver cannot
        # describe. pyodbc does not prepare the same SQL twice on a cursor, and resets the
        # parameters after each batch (SQLFreeStmt SQL_RESET_PARAMS); psqlODBC then has no
        # parameter types left and, the statement being prepared already, does not ask the
        # server again: SQLDescribeParam fails from the second batch on, and SSB's
        # 370-character text failed "length 740 buffer 510". So the sizes are declared from
        # the batch itself, right for any driver, batch and column, and the buffers are only
        # as large as the data (not MaxVarcharSize each).
        sizes = parameter_sizes(rows) if self._fast else None
        if sizes is not None:
            self._cursor.fast_executemany = True
            self._cursor.setinputsizes(sizes)
            try:
                self._cursor.executemany(sql, rows)
                return
            except pyodbc.Error as exc:
                if not (exc.args and exc.args[0] in NO_PARAM_ARRAYS):
                    raise
                self._fast = False  # this driver cannot: stop trying on this connection
            finally:
                # Declared sizes stay on the cursor and would bind every later execute().
                self._cursor.setinputsizes(None)
        # Row by row: pyodbc binds each value at its own length.
        self._cursor.fast_executemany = False
        self._cursor.executemany(sql, rows)

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        args = self._params(statement, params)
        return await self._call(statement.name, self._scalar, statement.sql, args)

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        args = self._params(statement, params)
        return list(await self._call(statement.name, self._column, statement.sql, args))

    async def rows(self, statement: Statement, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Every row as a dict of lower-cased column name to value (the db collector)."""
        args = self._params(statement, params)
        return list(await self._call(statement.name, self._rows, statement.sql, args))

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        args = self._params(statement, params)
        return int(await self._call(statement.name, self._rowcount, statement.sql, args))

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        wanted = len(statement.param_names)
        batch = [tuple(row[:wanted]) for row in rows]
        if batch:
            await self._call(statement.name, self._executemany, statement.sql, batch)

    async def commit(self) -> None:
        await self._call("commit", self._raw.commit)

    async def rollback(self) -> None:
        await self._call("rollback", self._raw.rollback)

    def _close_blocking(self) -> None:
        try:
            self._cursor.close()
        finally:
            self._raw.close()  # rolls back anything uncommitted

    async def close(self) -> None:
        await self._call("close", self._close_blocking)


class PyodbcTarget(Target):
    """What the ODBC kinds share: password handling, connecting, describing.

    Subclasses say how their settings become connection-string keywords.
    """

    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, settings: OdbcSettings | SqlServerSettings) -> None:
        self._settings = settings
        self._context: EngineContext | None = None
        self._password: str | None = None
        self._server: dict[str, str] = {}

    # ------------------------------------------------------------------ for subclasses

    @abstractmethod
    def keywords(self) -> dict[str, str]:
        """Connection-string keywords in order, without the password (the target adds PWD)."""

    # ------------------------------------------------------------------ secrets

    def _hide(self, text: str) -> str:
        return redact(text, [self._password] if self._password else [])

    def _connection_string(self) -> str:
        words = self.keywords()
        if self._password is not None:
            words["PWD"] = self._password
        parts = []
        for key, value in words.items():
            # The driver name and the password are always braced (they may hold anything).
            quoted = "{" + value.replace("}", "}}") + "}" if key in ("DRIVER", "PWD") else None
            parts.append(f"{key}={quoted or odbc_value(value)}")
        return ";".join(parts) + ";"

    # ------------------------------------------------------------------ Target

    async def open(self, context: EngineContext) -> None:
        self._context = context
        self._password = resolve_secret(self._settings, "target")

    def _where(self) -> str:
        s = self._settings
        who = s.user if s.user is not None else "the integrated or Entra ID login"
        return (
            f"{self.kind}: cannot connect to {s.host}:{s.port} database {s.database} "
            f"as {who} with driver {s.driver!r}"
        )

    def _connect_blocking(self) -> pyodbc.Connection:
        raw = pyodbc.connect(
            self._connection_string(), autocommit=False, timeout=DEFAULT_LOGIN_TIMEOUT_S
        )
        if not self._server:
            for key, info in (
                ("dbms_name", pyodbc.SQL_DBMS_NAME),
                ("dbms_version", pyodbc.SQL_DBMS_VER),
                ("driver_file", pyodbc.SQL_DRIVER_NAME),
                ("driver_version", pyodbc.SQL_DRIVER_VER),
            ):
                try:
                    self._server[key] = str(raw.getinfo(info))
                except pyodbc.Error:
                    continue  # an optional fact; some drivers do not answer every info type
        return raw

    async def connect(self) -> OdbcConnection:
        if self._context is None:
            raise TargetError(f"{self.kind}: target used before open()")
        try:
            raw = await self._context.run_blocking(self._connect_blocking)
        except pyodbc.Error as exc:
            raise translate_error(exc, self._where(), self._hide) from exc
        return OdbcConnection(
            raw,
            self._context,
            label=self.kind,
            # Parameter arrays: tried with every driver, dropped per connection if refused.
            fast_executemany=True,
            hide=self._hide,
        )

    async def close(self) -> None:
        self._password = None

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """The dialect's application lock (``sp_getapplock``, PostgreSQL's advisory lock) on
        a connection of its own in autocommit, so the wait holds no transaction open; none for
        a dialect without one here (Oracle through ODBC: the ``oracle`` kind has DBMS_LOCK)."""
        if self.dialect not in APP_LOCKS:
            return no_load_lock(f"no application lock for {self.dialect} through ODBC", shared)
        return self._app_lock(key, shared, on_wait)

    @contextlib.asynccontextmanager
    async def _app_lock(
        self, key: str, shared: bool, on_wait: WaitCallback | None
    ) -> AsyncIterator[LoadLock]:
        if self._context is None:
            raise TargetError(f"{self.kind}: target used before open()")
        context = self._context
        try_sql, release_sql = APP_LOCKS[self.dialect][shared]
        name = app_lock_name(self.dialect, self._settings.database, key)
        try:
            raw = await context.run_blocking(self._connect_blocking)
        except pyodbc.Error as exc:
            raise translate_error(exc, self._where(), self._hide) from exc
        raw.autocommit = True
        mutex = threading.Lock()  # a try still in the pool must finish before the close

        def run(sql: str, answer: bool) -> Any:
            with mutex:
                cursor = raw.cursor().execute(sql, [name])
                row = cursor.fetchone() if answer else None
                return None if row is None else row[0]

        async def call(what: str, sql: str, answer: bool) -> Any:
            try:
                return await context.run_blocking(run, sql, answer)
            except pyodbc.Error as exc:
                raise translate_error(exc, f"{self.kind}: load lock: {what}", self._hide) from exc

        async def try_acquire() -> bool:
            return granted(await call("try", try_sql, True))

        async def release() -> None:
            await call("release", release_sql, False)

        def close() -> None:
            with mutex, contextlib.suppress(pyodbc.Error):
                raw.close()

        where = f"{self._settings.host}:{self._settings.port}/{self._settings.database}"
        try:
            async with polled_lock(
                try_acquire,
                release,
                what=f"{key}* in {where}",
                how=f"{self.dialect} application lock {name}",
                shared=shared,
                on_wait=on_wait,
            ) as lock:
                yield lock
        finally:
            await context.run_blocking(close)

    def is_disconnect(self, exc: BaseException) -> bool:
        """SQLSTATE class 08 (connection exception) or a communication link failure."""
        text = str(exc)
        return "SQLSTATE 08" in text or super().is_disconnect(exc)

    def storage_paths(self) -> list[Path]:
        directory = self._settings.data_directory
        return [directory] if directory is not None else []

    def describe(self) -> dict[str, Any]:
        s = self._settings
        words = {
            k: ("***" if k.upper() in _SECRET_KEYWORDS else v) for k, v in self.keywords().items()
        }
        facts: dict[str, Any] = {
            "kind": self.kind,
            "dialect": self.dialect,
            "driver": s.driver,
            "host": s.host,
            "port": s.port,
            "database": s.database,
            "user": s.user,
            "connection_keywords": words,
            "password_from": (
                f"env:{s.password_env}" if s.password_env else "file" if s.password_file else None
            ),
            "pyodbc_version": pyodbc.version,
            **self._server,
        }
        return {k: self._hide(v) if isinstance(v, str) else v for k, v in facts.items()}


class OdbcTarget(PyodbcTarget):
    """Any ODBC driver; ``settings.dialect`` picks the SQL (``kind: odbc``)."""

    kind: ClassVar[str] = "odbc"

    def __init__(self, settings: OdbcSettings) -> None:
        super().__init__(settings)
        self.settings = settings
        # Target.dialect is a ClassVar, but here it depends on the settings: an instance
        # attribute shadows it (written through vars(), which type checkers accept).
        vars(self)["dialect"] = settings.dialect
        bad = sorted(k for k in settings.extra if not _KEYWORD.match(k))
        if bad:
            raise ConfigError(
                f"target.extra: {', '.join(map(repr, bad))} are not ODBC keywords "
                "(letters, digits, _ and spaces only)"
            )

    def keywords(self) -> dict[str, str]:
        s = self.settings
        words = {"DRIVER": s.driver, "SERVER": s.host, "PORT": str(s.port)}
        if microsoft_driver(s.driver):
            # Microsoft's driver reads the port only after a comma in SERVER, and ignores PORT.
            words = {"DRIVER": s.driver, "SERVER": f"{s.host},{s.port}"}
        words.update({"DATABASE": s.database, "UID": s.user})
        if "postgresql" in s.driver.lower():
            # psqlODBC describes text parameters and unsized varchar as MaxVarcharSize
            # characters, 255 by default, shorter than text dbsim sends. Parameter arrays do
            # not rely on that description (OdbcConnection declares sizes from the data).
            words["MAXVARCHARSIZE"] = str(PSQLODBC_MAX_VARCHAR)
        # ``extra`` wins over the generated keywords (keys compare case-insensitively).
        words.update({key.upper(): value for key, value in s.extra.items()})
        return words


class SqlServerTarget(PyodbcTarget):
    """SQL Server through Microsoft's ODBC driver (``kind: sqlserver``)."""

    kind: ClassVar[str] = "sqlserver"
    dialect: ClassVar[str] = "sqlserver"

    def __init__(self, settings: SqlServerSettings) -> None:
        super().__init__(settings)
        self.settings = settings

    def keywords(self) -> dict[str, str]:
        s = self.settings
        words = {
            "DRIVER": s.driver,
            # SQL Server's drivers take the port after a comma, not as a keyword.
            "SERVER": f"{s.host},{s.port}",
            "DATABASE": s.database,
        }
        if s.user is not None and not s.trusted_connection:
            words["UID"] = s.user
        # Driver 18 spells the three levels strict / yes (mandatory) / no (optional); 17
        # knows only yes and no.
        words["Encrypt"] = {"strict": "strict", "mandatory": "yes", "optional": "no"}[s.encrypt]
        words["TrustServerCertificate"] = "yes" if s.trust_server_certificate else "no"
        if s.host_name_in_certificate is not None:
            words["HostNameInCertificate"] = s.host_name_in_certificate
        if s.server_certificate is not None:
            words["ServerCertificate"] = str(s.server_certificate)
        if s.authentication is not None:
            words["Authentication"] = s.authentication
        if s.trusted_connection:
            words["Trusted_Connection"] = "yes"
        # Shows in sys.dm_exec_sessions.program_name, so a DBA can tell dbsim's sessions.
        words["APP"] = "dbsim"
        words.update(s.extra)
        return words
