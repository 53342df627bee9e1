"""The embedded default target: SQLite through the standard library, in the engine's pool.

Every call hops to the engine's bounded thread pool (sqlite3 releases the GIL while a statement
steps), so the loop never blocks on the file. Each session owns one connection; a connection is
only ever used by one session at a time, so ``check_same_thread`` is relaxed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

from sim.dialects import PageFit, SqlDialect
from sim.errors import TargetError
from sim.protocols import (
    SCOPE_HOST,
    SCOPE_PROCESS,
    EngineContext,
    InPlaceSql,
    LoadLock,
    SqlConnection,
    Statement,
    Target,
    WaitCallback,
    no_load_lock,
)
from storage.targets.first_contact import SQLITE as FIRST_CONTACT
from storage.targets.locks import directory_lock
from storage.targets.paths import check_owner
from storage.targets.settings import SqliteSettings
from storage.targets.sqlite_file import check_sqlite_path, create_database

DEFAULT_DB_NAME = "dbsim.sqlite"
# SQLite keeps a row on its page up to ~page-35 bytes; a row longer than half the usable page
# cannot share it. The padding brings the row's data past that half.
SQLITE_ROW_OVERHEAD = 40


def sqlite_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    """A padding column, filled by the loader, that makes two rows overflow a page."""
    pad = max(page_bytes // 2 + 64 - row_bytes - SQLITE_ROW_OVERHEAD, 0)
    return PageFit(pad_column="pad", pad_chars=pad)


#: SQLite has no identifier limit; 128 keeps its names portable to the others. The ownership
#: token goes inside the CREATE TABLE text, which sqlite_master keeps.
SQLITE_DIALECT = SqlDialect(
    name="sqlite",
    sqlalchemy_module="sqlalchemy.dialects.sqlite",
    sqlglot="sqlite",
    max_identifier_chars=128,
    marker="create_text",
    one_row_per_page=sqlite_page_fit,
    after_drop=("VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"),
    # SQLite runs inside dbsim and reads through the host's page cache, charged to dbsim's
    # memory cgroup (whose limit sim.core.cache then counts instead of the host's RAM).
    cache_recipe=(
        "dbsim run in a memory cgroup of its own memory + {cap_mb}M (SQLite's reads go "
        "through the page cache charged to that group)"
    ),
    first_contact=FIRST_CONTACT,
)


#: How often a committing session looks at the WAL's size (one stat, not one per commit).
WAL_CHECK_S = 0.25


class WalBound:
    """Keeps a WAL-mode database's write-ahead log near ``limit_bytes``.

    SQLite's automatic checkpoint is PASSIVE: it copies frames no reader still needs, but the
    log only starts again from its beginning when no reader is using it. With sessions reading
    all the time (SLOB's closed loop, four sessions), some reader always is: the log grew by
    25-100 MB/s here without end (1.35 GB in 14 s on one netns test host, until its 2 GiB
    disk was full and the updates failed with "database or disk is full"). A database's log
    is bounded (Oracle's redo logs are a fixed ring, PostgreSQL's max_wal_size), so the session
    that commits and finds the log past the bound runs ``wal_checkpoint(RESTART)``: it waits
    for the readers of the old log (the busy timeout), copies it back, and the next writer
    starts the log again; ``journal_size_limit`` then cuts the file back to the bound. Writers
    wait while it runs: the stall is the run's, measured like any other."""

    def __init__(self, wal: Path, limit_bytes: int, check_every_s: float = WAL_CHECK_S) -> None:
        self.wal, self.limit_bytes, self.check_every_s = wal, limit_bytes, check_every_s
        self.restarts = 0
        self._next_check = 0.0

    def after_commit(self, raw: sqlite3.Connection) -> None:
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + self.check_every_s
        try:
            size = os.stat(self.wal, follow_symlinks=False).st_size
        except FileNotFoundError:
            return
        if size > self.limit_bytes:
            # (busy, frames in the log, frames copied back); busy: a reader still needed the
            # log when the busy timeout ran out, and the next check tries again.
            busy = raw.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0]
            self.restarts += not busy


class SqliteConnection(SqlConnection):
    def __init__(
        self, raw: sqlite3.Connection, context: EngineContext, wal: WalBound | None = None
    ) -> None:
        self._raw = raw
        self._run = context.run_blocking
        self._wal = wal
        # One call at a time on the driver's connection, close included: when a run is
        # stopped mid-statement the coroutine is cancelled but its thread runs on, and closing
        # the connection under it from another pool thread crashes the driver (seen: SIGSEGV
        # in sqlite3 during a load interrupted by SIGINT).
        self._lock = threading.Lock()

        self.blocking = InPlaceSql(self._now, self._scalar, self._execute_committed)

    def _now(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the driver's connection, one at a time, its error translated."""
        try:
            with self._lock:
                return fn(*args)
        except sqlite3.Error as exc:
            raise TargetError(f"sqlite: {what}: {exc}") from exc

    async def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._run(self._now, what, fn, *args)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        row = self._raw.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _column(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return [row[0] for row in self._raw.execute(sql, params).fetchall()]

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        return self._raw.execute(sql, params).rowcount

    def _execute_committed(self, sql: str, params: Sequence[Any]) -> int:
        rows = self._raw.execute(sql, params).rowcount
        self._commit()
        return rows

    def _commit(self) -> None:
        self._raw.commit()
        if self._wal is not None:
            self._wal.after_commit(self._raw)

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        return await self._call(statement.name, self._scalar, statement.sql, params)

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        return list(await self._call(statement.name, self._column, statement.sql, params))

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        return int(await self._call(statement.name, self._execute, statement.sql, params))

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        await self._call(statement.name, self._raw.executemany, statement.sql, rows)

    async def commit(self) -> None:
        await self._call("commit", self._commit)

    async def rollback(self) -> None:
        await self._call("rollback", self._raw.rollback)

    async def close(self) -> None:
        await self._call("close", self._raw.close)


class SqliteTarget(Target):
    kind: ClassVar[str] = "sqlite"
    dialect: ClassVar[str] = "sqlite"
    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, settings: SqliteSettings) -> None:
        self.settings = settings
        self._tempdir: Path | None = None
        self.path: Path | None = settings.path
        self._context: EngineContext | None = None
        self._wal: WalBound | None = None

    async def open(self, context: EngineContext) -> None:
        self._context = context
        if self.path is None:
            self._tempdir = Path(tempfile.mkdtemp(prefix="dbsim-sqlite-"))
            self.path = self._tempdir / DEFAULT_DB_NAME
        else:
            self.check_paths()
            if not self.path.parent.is_dir():  # a run that could not start: exit 3, as before
                raise TargetError(f"target.path: directory {self.path.parent} does not exist")

    def check_paths(self) -> None:
        if self.settings.path is not None:
            check_sqlite_path(self.settings.path)
            check_owner(self.settings.path)  # another user's database is not dbsim's to write

    def data_absent(self) -> str | None:
        path = self.settings.path
        missing = path is not None and not os.path.lexists(path)
        return f"target.path: {path} does not exist" if missing else None

    def _connect_blocking(self) -> sqlite3.Connection:
        assert self.path is not None
        if not os.path.lexists(self.path):
            # Never seen empty at its name (check_sqlite_path refuses an empty file).
            create_database(self.path, self._prepare)
        raw = sqlite3.connect(
            self.path, timeout=self.settings.busy_timeout_ms / 1000, check_same_thread=False
        )
        self._prepare(raw)
        return raw

    def _prepare(self, raw: sqlite3.Connection) -> None:
        # page_size only takes effect on a new, empty database, and must precede WAL.
        raw.execute(f"PRAGMA page_size = {int(self.settings.page_size_bytes)}")
        # A negative cache_size is in KiB; small on purpose so reads reach the file (SLOB method).
        raw.execute(f"PRAGMA cache_size = -{int(self.settings.cache_size_kib)}")
        raw.execute(f"PRAGMA busy_timeout = {int(self.settings.busy_timeout_ms)}")
        raw.execute(f"PRAGMA synchronous = {self.settings.synchronous.upper()}")
        if self.settings.wal_limit_bytes:
            raw.execute(f"PRAGMA journal_size_limit = {int(self.settings.wal_limit_bytes)}")
        mode = raw.execute(f"PRAGMA journal_mode = {self.settings.journal_mode.upper()}").fetchone()
        if mode and str(mode[0]).lower() != self.settings.journal_mode:
            raise TargetError(
                f"sqlite: journal_mode {self.settings.journal_mode} refused ({mode[0]})"
            )

    async def connect(self) -> SqliteConnection:
        if self._context is None:
            raise TargetError("sqlite: target used before open()")
        try:
            raw = await self._context.run_blocking(self._connect_blocking)
        except sqlite3.Error as exc:
            raise TargetError(f"sqlite: cannot open {self.path}: {exc}") from exc
        return SqliteConnection(raw, self._context, self._wal_bound())

    def _wal_bound(self) -> WalBound | None:
        """One bound per database, shared by its sessions (they share one log)."""
        limit = self.settings.wal_limit_bytes
        if not limit or self.settings.journal_mode != "wal" or self.path is None:
            return None
        if self._wal is None:
            self._wal = WalBound(self.path.with_name(self.path.name + "-wal"), limit)
        return self._wal

    async def close(self) -> None:
        if self._tempdir is not None and not self.settings.keep:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    @property
    def data_scope(self) -> str:
        # Without a path, every process gets its own temporary database.
        return SCOPE_PROCESS if self.settings.path is None else SCOPE_HOST

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """``flock`` on the database's directory (storage.targets.locks says why not on the
        file); none for a private temporary database."""
        if self._tempdir is not None or self.path is None or self._context is None:
            return no_load_lock("a private temporary database", shared)
        return directory_lock(
            self._context,
            self.path.parent,
            what=str(self.path),
            shared=shared,
            on_wait=on_wait,
            label="sqlite",
        )

    def storage_paths(self) -> list[Path]:
        return [self.path.parent] if self.path is not None else []

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path) if self.path else None,
            "temporary": self._tempdir is not None,
            "sqlite_version": sqlite3.sqlite_version,
            "cache_size_kib": self.settings.cache_size_kib,
            "journal_mode": self.settings.journal_mode,
            "synchronous": self.settings.synchronous,
        }
