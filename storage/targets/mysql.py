"""MariaDB and MySQL through asyncmy, on the engine's event loop (``kind: mysql``).

Everything the kind needs lives here: its settings, its dialect record (InnoDB's page facts,
the ownership marker as a table comment), the target and its connections, and the ``db``
collector's InnoDB statistics. It registers itself; sim.registry lists this module once.

Driver: asyncmy (Cython, asyncio-native; docs/databases.md has the measurements against
aiomysql). Transactions: autocommit off, so a statement's work is committed by ``commit()``
as on the other SQL targets. DDL commits implicitly in MySQL; the ownership registry records
a table's identity right after its CREATE, so a failure in between leaves a table that
carries dbsim's token and is rebuilt by the next load.

InnoDB keeps at least two records on every 16 KiB page (a record may take at most about half
a page, 8,126 bytes), so no row size keeps one row per page: SLOB-like rows are padded to
~7 KiB so that exactly two share each page (``min_rows_per_page = 2``; ``dbsim verify`` checks
it from InnoDB's own page counts).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from sim.config.scenario import MAX_SESSIONS
from sim.dialects import PageFit, ServerCache, SqlDialect
from sim.errors import CollectorError, ConfigError, TargetError
from sim.protocols import (
    Collector,
    EngineContext,
    LoadLock,
    Sample,
    SqlConnection,
    Statement,
    Target,
    WaitCallback,
    connect_sql,
)
from sim.registry import TargetEntry, register_target
from sim.secrets import SecretRef, redact, resolve_secret
from storage.targets.locks import polled_lock
from storage.targets.settings import _Settings

INNODB_PAGE_BYTES = 16384
#: A SLOB row padded to this share of a page: above a third (three never fit) and below the
#: half InnoDB allows a record, so exactly two rows share each page.
ROW_SHARE_OF_PAGE = 7 / 16
#: Connections are opened lazily (min 0): sessions plus loader, verifier, collector, spares.
POOL_MAX = MAX_SESSIONS + 8
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


def mysql_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    """A padding column, filled by the loader, that brings the row to ~7/16 of a page."""
    pad = max(int(page_bytes * ROW_SHARE_OF_PAGE) - row_bytes, 0)
    return PageFit(
        table_kwargs={"mysql_engine": "InnoDB", "mysql_charset": "latin1"},
        pad_column="pad",
        pad_chars=pad,
    )


def mysql_stats_collectors(target: Target, options: dict[str, Any]) -> list[Collector]:
    return [InnodbStatsCollector(target)]


MYSQL_DIALECT = SqlDialect(
    name="mysql",
    sqlalchemy_module="sqlalchemy.dialects.mysql",
    sqlglot="mysql",
    max_identifier_chars=64,
    marker="table_option",
    page_bytes=INNODB_PAGE_BYTES,
    one_row_per_page=mysql_page_fit,
    min_rows_per_page=2,
    refresh_page_counts="ANALYZE TABLE {table}",
    stats_collectors=mysql_stats_collectors,
    cache=ServerCache("innodb_buffer_pool_size", "SELECT @@innodb_buffer_pool_size"),
)


class MysqlSettings(SecretRef, _Settings):
    """MariaDB or MySQL through asyncmy."""

    kind: Literal["mysql"] = "mysql"
    sql_dialect_of_kind: ClassVar[str | None] = "mysql"
    host: str = "127.0.0.1"
    port: int = Field(default=3306, ge=1, le=65535)
    database: str = "test"
    user: str = "root"
    connect_timeout_s: float = Field(default=10.0, gt=0)
    data_directory: Path | None = None


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
                await cur.execute("SELECT VERSION(), @@innodb_buffer_pool_size, @@datadir")
                version, pool_bytes, datadir = await cur.fetchone()
                await conn.rollback()
        except DRIVER_ERRORS as exc:
            await self.close()
            raise self._error("cannot connect", exc) from exc
        self.server_version = str(version)
        self.buffer_pool_bytes = int(pool_bytes)
        self.server_data_directory = Path(str(datadir)) if datadir else None

    async def connect(self) -> MysqlConnection:
        if self._pool is None:
            raise TargetError("mysql: target used before open()")
        try:
            conn = await self._pool.acquire()
        except DRIVER_ERRORS as exc:
            raise self._error("cannot connect", exc) from exc
        return MysqlConnection(conn, self._pool.release, self._secrets)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
            await pool.wait_closed()

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


# --------------------------------------------------------------------------- db collector

#: SHOW GLOBAL STATUS counters sampled (cumulative since the server started).
INNODB_COUNTERS = {
    # Named as PostgreSQL's database figure (pages read from storage), which the analysis
    # correlates with latency for the db source.
    "Innodb_buffer_pool_reads": "blks_read_s",
    "Innodb_buffer_pool_read_requests": "buffer_pool_read_requests_s",
    "Innodb_data_reads": "data_reads_s",
    "Innodb_data_writes": "data_writes_s",
    "Innodb_data_read": "data_read_bytes_s",
    "Innodb_data_written": "data_written_bytes_s",
}
STATUS_SQL = (
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME IN ('INNODB_BUFFER_POOL_READS', 'INNODB_BUFFER_POOL_READ_REQUESTS', "
    "'INNODB_DATA_READS', 'INNODB_DATA_WRITES', 'INNODB_DATA_READ', 'INNODB_DATA_WRITTEN')"
)
#: performance_schema file I/O waits on InnoDB's data files (when performance_schema is on).
FILE_WAITS_SQL = (
    "SELECT COALESCE(SUM(COUNT_READ), 0), COALESCE(SUM(SUM_TIMER_READ), 0) "
    "FROM performance_schema.file_summary_by_event_name "
    "WHERE EVENT_NAME = 'wait/io/file/innodb/innodb_data_file'"
)
PICOSECONDS_PER_MS = 1e9


class InnodbStatsCollector(Collector):
    """InnoDB's buffer pool and data file counters as rates per second (entity: the
    database), plus performance_schema's file read waits where it is enabled.

    Load on the target: one extra connection running one information_schema query (and one
    performance_schema query when enabled) per interval. The counters are server-wide, so
    another client's reads count too.
    """

    source: ClassVar[str] = "db"

    def __init__(self, target: Target) -> None:
        self.target = target
        self._conn: MysqlConnection | None = None
        self._waits = False
        self._prev: dict[str, float] | None = None
        self._prev_now: float | None = None

    async def start(self, now: float) -> None:
        conn = await connect_sql(self.target)
        if not isinstance(conn, MysqlConnection):
            await conn.close()
            raise CollectorError("collector db: the target's connection is not asyncmy's")
        self._conn = conn
        enabled = await conn.scalar(Statement("ps", "SELECT @@performance_schema", ()))
        self._waits = bool(int(enabled or 0))
        self._prev, self._prev_now = await self._read(), now

    async def _read(self) -> dict[str, float]:
        conn = self._conn
        if conn is None:
            raise CollectorError("collector db: sample() called before start()")
        rows = await conn.rows(Statement("innodb_status", STATUS_SQL, ()))
        by_upper = {str(r["VARIABLE_NAME"]).upper(): float(r["VARIABLE_VALUE"]) for r in rows}
        values = {name: by_upper.get(name.upper(), 0.0) for name in INNODB_COUNTERS}
        if self._waits:
            row = (await conn.rows(Statement("file_waits", FILE_WAITS_SQL, ())))[0]
            count, timer = (float(v or 0) for v in row.values())
            values["file_reads"], values["file_read_wait_ps"] = count, timer
        await conn.rollback()
        return values

    async def sample(self, now: float) -> list[Sample]:
        if self._conn is None:
            await self.start(now)
            return []
        if self._prev is None or self._prev_now is None:
            raise CollectorError("collector db: sample() called before start()")
        interval = now - self._prev_now
        if not interval > 0:
            raise CollectorError(f"collector db: clock did not advance ({self._prev_now} -> {now})")
        curr = await self._read()
        prev, self._prev, self._prev_now = self._prev, curr, now
        if any(curr[k] < prev[k] for k in INNODB_COUNTERS):
            await self.stop()  # the server restarted: take a fresh baseline next time
            return []
        values = {
            key: (curr[name] - prev[name]) / interval for name, key in INNODB_COUNTERS.items()
        }
        requests = (
            curr["Innodb_buffer_pool_read_requests"] - prev["Innodb_buffer_pool_read_requests"]
        )
        misses = curr["Innodb_buffer_pool_reads"] - prev["Innodb_buffer_pool_reads"]
        values["cache_hit_pct"] = 100.0 * (1 - misses / requests) if requests > 0 else 0.0
        if "file_reads" in curr:
            reads = curr["file_reads"] - prev["file_reads"]
            wait_ms = (curr["file_read_wait_ps"] - prev["file_read_wait_ps"]) / PICOSECONDS_PER_MS
            values["file_reads_s"] = reads / interval
            values["file_read_wait_ms_per_read"] = wait_ms / reads if reads > 0 else 0.0
        values["interval_s"] = interval
        entity = self.target.settings.database  # type: ignore[attr-defined]
        return [Sample(self.source, str(entity), values, t=now, meta={"kind": "database"})]

    async def stop(self) -> None:
        conn, self._conn = self._conn, None
        self._prev = self._prev_now = None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        """InnoDB pages read from storage per read statement (buffer pool misses) and the
        buffer pool's hit share over the measured window."""
        reads = sum(m.get("blks_read_s", 0.0) for m in means.values()) * measured_s
        requests = sum(m.get("buffer_pool_read_requests_s", 0.0) for m in means.values())
        requests *= measured_s
        facts: dict[str, Any] = {
            "tables_blocks_read": round(reads, 1),
            "tables_cache_hit_pct": round(100.0 * (1 - reads / requests), 2) if requests else None,
        }
        if op_counts.get("read"):
            facts["physical_reads_per_read"] = round(reads / op_counts["read"], 2)
        hit = facts["tables_cache_hit_pct"]
        warnings = []
        if hit is not None and hit > 50.0:
            warnings.append(
                f"the InnoDB buffer pool served {hit:.1f} % of page requests: most reads never "
                "reached storage; use a data set several times larger than the buffer pool"
            )
        return facts, warnings

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": "mysql",
            "performance_schema_file_waits": self._waits,
            "load": "one extra connection; one or two status queries per interval",
        }


def _build(settings: BaseModel) -> Target:
    if MISSING_DRIVER is not None:
        raise ConfigError(MISSING_DRIVER)
    assert isinstance(settings, MysqlSettings)
    return MysqlTarget(settings)


register_target(
    TargetEntry("mysql", MysqlSettings, _build, "MariaDB/MySQL via asyncmy", MYSQL_DIALECT)
)
