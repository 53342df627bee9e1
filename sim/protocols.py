"""The interfaces that workloads, targets and collectors implement.

``sim`` depends only on these shapes; the implementations live in ``workloads/`` and
``storage/`` and are found through ``sim.registry``.

Words (see docs/glossary.md): a *target* is the system under test (a database or a file tree);
a *connection* is one session's handle on it; a *workload* decides what load is applied; a
*workload session* picks each session's next *transaction*; a *collector* samples counters of
the storage underneath once per interval.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel

from sim.errors import TargetError
from sim.sql import Statement

if TYPE_CHECKING:
    import asyncio  # annotations only: reading a scenario or a bundle needs no event loop

# --------------------------------------------------------------------------- engine context


@dataclass
class EngineContext:
    """What the engine lends to targets and collectors: its loop and its bounded thread pool.

    Blocking drivers (sqlite3, pyodbc) and file-system calls must run through
    :meth:`run_blocking`, never directly on the loop. ``sessions``: the most session
    connections the caller holds at once, beside the few of its set-up steps and collectors
    (a target's pool keeps room for those); None when it cannot say (as many as a scenario
    may have).
    """

    loop: asyncio.AbstractEventLoop
    executor: concurrent.futures.ThreadPoolExecutor
    sessions: int | None = None

    def run_blocking(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        return self.loop.run_in_executor(self.executor, fn, *args)


ProgressCallback = Callable[[str, int, int], None]
"""``progress(what, done, total)``: called by long set-up steps (loading, verifying)."""


# --------------------------------------------------------------------------- targets

#: Who sees the data a target loads (:attr:`Target.data_scope`): only this process (a private
#: temporary database: every process loads its own), the processes of one host (a local path;
#: on NFS other hosts may see it too), or everyone who reaches the target (a database server).
SCOPE_PROCESS = "process"
SCOPE_HOST = "host"
SCOPE_SHARED = "shared"

WaitCallback = Callable[[str], None]
"""``on_wait(what)``: another loader holds ``what``'s load lock; this one waits for it."""


@dataclass
class LoadLock:
    """The load lock a loader holds (see :meth:`Target.load_lock`), as the bundle records it.

    ``held`` is False when the target has nothing to lock (a private database) or its storage
    refused (a file system without ``flock``); ``how`` says which, or what was locked."""

    held: bool
    how: str
    shared: bool = False
    waited_s: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {
            "held": self.held,
            "how": self.how,
            "mode": "shared" if self.shared else "exclusive",
            "waited_s": round(self.waited_s, 3),
        }


@contextlib.asynccontextmanager
async def no_load_lock(why: str, shared: bool = False) -> AsyncIterator[LoadLock]:
    """The lock of a target that has none: yields at once."""
    yield LoadLock(False, f"none: {why}", shared)


class Connection(ABC):
    """One session's handle on a target: a database connection, or a file-tree session."""

    @abstractmethod
    async def close(self) -> None: ...


class BlockingSql(ABC):
    """A SQL connection's hot-path statements as blocking calls, for workload sessions that
    run on their own threads (sim.core.session_threads). Offered by drivers that block anyway
    (sqlite3, pyodbc); asyncio drivers (asyncpg, python-oracledb) have none. Errors are the
    connection's own (TargetError wrapping the driver's)."""

    @abstractmethod
    def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        """Run a query and return the first column of the first row."""

    @abstractmethod
    def execute_committed(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        """Run a statement and commit it; return the affected row count."""


class InPlaceSql(BlockingSql):
    """:class:`BlockingSql` for a driver that blocks anyway (sqlite3, pyodbc): each statement
    is made in place through the connection's ``now(what, fn, *args)`` — one call at a time on
    the driver's connection, its error translated — with ``scalar_fn`` or ``committed_fn`` and
    the parameters ``bind(statement, params)`` gives the driver."""

    __slots__ = ("_bind", "_committed", "_now", "_scalar")

    def __init__(
        self,
        now: Callable[..., Any],
        scalar_fn: Callable[[str, Any], Any],
        committed_fn: Callable[[str, Any], int],
        bind: Callable[[Statement, Sequence[Any]], Any] = lambda statement, params: params,
    ) -> None:
        self._now, self._scalar, self._committed, self._bind = now, scalar_fn, committed_fn, bind

    def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        args = self._bind(statement, params)
        return self._now(statement.name, self._scalar, statement.sql, args)

    def execute_committed(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        args = self._bind(statement, params)
        return int(self._now(statement.name, self._committed, statement.sql, args))


class SqlConnection(Connection):
    """One session's connection to a SQL target. Parameters are positional, in the
    order of ``statement.param_names``."""

    #: The same connection's statements as blocking calls, where the driver blocks.
    blocking: BlockingSql | None = None

    @abstractmethod
    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        """Run a query and return the first column of the first row."""

    @abstractmethod
    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        """Run a query and return the first column of every row."""

    @abstractmethod
    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        """Run a statement; return the affected row count (-1 when the driver cannot tell)."""

    @abstractmethod
    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement once per row of parameters (bulk loading)."""

    async def bulk_insert(
        self,
        statement: Statement,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        """Load rows fast (PostgreSQL overrides this with COPY); by default ``executemany``.
        ``statement`` is the equivalent INSERT, ``columns`` its column order."""
        await self.executemany(statement, rows)

    @abstractmethod
    async def commit(self) -> None: ...

    @abstractmethod
    async def rollback(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...


class Target(ABC):
    """The system under test. Settings arrive validated; secrets were resolved from the
    environment or files and must never be logged or written to the bundle."""

    kind: ClassVar[str]
    #: SQL dialect key used to look up per-dialect statements (``sqlite``, ``postgres``,
    #: ``oracle``, ``sqlserver``), or ``filetree``.
    dialect: ClassVar[str]
    #: DB-API paramstyle the driver expects: ``qmark``, ``numeric_dollar``, ``named``.
    paramstyle: ClassVar[str]

    @abstractmethod
    async def open(self, context: EngineContext) -> None:
        """Prepare shared resources (pools, temporary directories)."""

    @abstractmethod
    async def connect(self) -> Connection:
        """A new connection for one session."""

    @abstractmethod
    async def close(self) -> None:
        """Release everything ``open`` and ``connect`` acquired."""

    def is_disconnect(self, exc: BaseException) -> bool:
        """Whether ``exc`` (as raised by a connection, usually a TargetError wrapping the
        driver's error) means the connection is gone and the session must reconnect. Drivers
        refine this; the default recognises the operating system's connection errors."""
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        return isinstance(cause, ConnectionError | TimeoutError)

    @property
    def data_scope(self) -> str:
        """Who sees what this target loads: :data:`SCOPE_SHARED` (default), :data:`SCOPE_HOST`
        or :data:`SCOPE_PROCESS`. A distributed run elects one loader per scope (one per host
        for a host's data, none for a process's own)."""
        return SCOPE_SHARED

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """Held around a load and its verification (after ``open``), so that two loaders of
        the same data — two workers, two runs, ``dbsim load`` beside a run — never interleave,
        whoever started them. ``key`` names the data within the target (the workload's table
        prefix); ``shared`` for a verification alone (verifiers share, a loader excludes them).
        Waiting calls ``on_wait`` once and lasts until the holder is done or the caller is
        cancelled (a stopped run). Default: no lock, for targets whose data no other process
        can see."""
        return no_load_lock(f"{self.kind} data is not shared", shared)

    def check_paths(self) -> None:
        """Refuse (ConfigError, one line naming the field) a local path the target would use
        that is not what it needs: a link, a FIFO, a foreign file. Looks without opening or
        creating anything; called by ``dbsim validate``, before a run, and by ``open``.
        Default: no local path."""
        return None

    def data_absent(self) -> str | None:
        """Why none of dbsim's data can be there, known without connecting (the database
        file does not exist), else None: ``drop`` then has nothing to drop, and does not
        create the file by connecting. Default: None."""
        return None

    @abstractmethod
    def storage_paths(self) -> list[Path]:
        """Local paths whose block devices hold the target's data (may be empty)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A description for the bundle, without secrets."""


# --------------------------------------------------------------------------- SQL helpers


async def connect_sql(target: Target) -> SqlConnection:
    """A connection to a SQL target (the SQL workloads refuse any other kind)."""
    conn = await target.connect()
    if not isinstance(conn, SqlConnection):
        await conn.close()
        raise TargetError(f"{target.kind} is not a SQL target")
    return conn


def sql_connection(connection: Connection) -> SqlConnection:
    """``connection`` as a SqlConnection, for a SQL workload's sessions."""
    if not isinstance(connection, SqlConnection):
        raise TargetError(f"a SQL workload got a {type(connection).__name__}")
    return connection


# --------------------------------------------------------------------------- workloads

Transaction = Callable[[], Awaitable[Any]]


class WorkloadSession(Protocol):
    """Per-session state of a workload: picks the next transaction.

    ``next_transaction`` returns the operation name and a coroutine that does exactly one unit
    of work and never sleeps; pacing belongs to the engine.
    """

    def next_transaction(self) -> tuple[str, Awaitable[Any]]: ...

    def replace_connection(self, connection: Connection) -> None:
        """Carry on over a new connection (the engine reconnected after losing the old one);
        the session keeps its place in the mix."""


class Workload(ABC):
    """What load is applied, independent of how it is run."""

    name: ClassVar[str]
    parameters_model: ClassVar[type[BaseModel]]
    #: What the workload needs of a target: ``"sql"`` (any target with a SQL dialect record,
    #: sim.dialects) or one target kind by name.
    needs: ClassVar[str]

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        self.parameters = parameters
        self.target = target

    @abstractmethod
    def operations(self) -> Mapping[str, float]:
        """The transaction mix as named weights (percent), e.g. ``{"read": 90, "update": 10}``."""

    def default_sessions(self) -> int:
        """Sessions to run when the scenario does not say."""
        return 1

    def table_pattern(self) -> str | None:
        """A regular expression (anchored, POSIX- and Python-compatible) matching exactly this
        scenario's table names, so the database collector samples them and no neighbouring
        prefix's (``a`` must not take in ``a_1``'s tables); None: not a table workload."""
        return None

    def load_key(self) -> str:
        """What names this workload's data within its target, for :meth:`Target.load_lock`:
        the table prefix where the parameters have one, else the workload's name."""
        prefix = getattr(self.parameters, "table_prefix", None)
        return str(prefix) if prefix else self.name

    @abstractmethod
    async def load(self, progress: ProgressCallback) -> dict[str, Any]:
        """Create and fill the workload's objects if needed (idempotent); return facts for
        the bundle (rows, sizes, whether anything was built)."""

    @abstractmethod
    async def verify(self) -> dict[str, Any]:
        """Check the loaded data against the workload's rules; raise WorkloadError if wrong."""

    async def check_loaded(self) -> dict[str, Any]:
        """``dbsim run --skip-load``: check, cheaply and without writing, that every object
        the sessions will touch exists, is dbsim's and is loaded as this configuration needs;
        raise MissingDataError (naming what is missing and ``dbsim load``) or OwnershipError.
        Returns facts for the bundle. Default: nothing to check."""
        return {"skipped": True}

    def data_bytes(self) -> int | None:
        """The bytes of data this configuration builds and its sessions read from (what the
        server's and the host's caches are held against, sim.core.cache); None: unknown."""
        return None

    def scale_for_bytes(self, data_bytes: int) -> str | None:
        """The parameter setting (``scale: 12G``) that builds at least ``data_bytes`` of data
        with the rest of this configuration unchanged; None: the workload cannot say."""
        return None

    def cache_recipe(self) -> str:
        """How to make the storage do the work where the workload does its own I/O (a file
        tree's): a format string with ``{cap_mb}`` (sim.core.cache); "" for a SQL workload,
        whose target's dialect record says it."""
        return ""

    def reads_direct(self) -> bool:
        """Whether the workload's own reads bypass the host's page cache (O_DIRECT)."""
        return False

    def read_operations(self) -> frozenset[str]:
        """The operations that read the workload's data, whose rate the device's reads are
        held against to tell whether the storage was exercised at all (sim.core.cache)."""
        return frozenset()

    def session_weights(self, sessions: int) -> list[float] | None:
        """Relative open-loop rates of sessions 0..sessions-1 (EDA: a front-end process asks
        for 100 ops/s, a back-end one for 75); None: every session gets an equal share."""
        return None

    def expected_mix(self, op_ranges: list[tuple[int, int]]) -> dict[str, int] | None:
        """The operation counts the workload's rules demand when each session ``s`` issued its
        operations number ``op_ranges[s][0]`` up to (not including) ``op_ranges[s][1]``;
        None when the mix is random rather than deterministic."""
        return None

    def score(
        self, result: Any, step_ops: Mapping[Any, Mapping[str, Any]]
    ) -> dict[str, Any] | None:
        """The workload's own scoring of a finished run, if it has one (EDA: the reference's
        validity rule per load point). ``result``: the engine's RunResult; ``step_ops``: the
        measured OpStats per step. Default: none."""
        return None

    @abstractmethod
    def statement_inventory(self) -> list[Statement]:
        """Every statement (DDL and DML) the workload can send to its target's dialect, rendered
        without a connection: the contract tests compile and parse these per dialect."""

    @abstractmethod
    def new_session(self, index: int, connection: Connection, seed: int) -> WorkloadSession:
        """Per-session state for session ``index`` (0-based)."""

    @abstractmethod
    async def drop(self) -> list[str]:
        """Remove only objects this tool created; return their names."""


# --------------------------------------------------------------------------- collectors


@dataclass(frozen=True)
class Sample:
    """One interval's figures for one entity of one collector.

    ``source`` names the collector family (``block``, ``nfs``, ``ontap``, ``db``);
    ``entity`` the thing measured (``vda``, ``dm-0``, a mount point, a volume);
    ``values`` the rates and averages for the interval, units in the key (``r_await_ms``).
    """

    source: str
    entity: str
    values: Mapping[str, float]
    t: float = 0.0
    meta: Mapping[str, str] = field(default_factory=dict)
    #: Why this entity has no figures for the interval: "" (it has), :data:`GAP_RESET` (a
    #: counter went down — device re-attached, remount, reboot, node takeover — so no rate can
    #: be formed across it) or :data:`GAP_UNREADABLE` (its section of the counter source was
    #: malformed). ``values`` is then empty and ``detail`` says what was seen (the counter and
    #: its two readings, or the offending line). The bundle counts gaps per source and entity
    #: (``summary.json`` ``resets`` / ``unreadable``) and writes no row for them.
    gap: str = ""
    detail: str = ""


GAP_RESET = "reset"
GAP_UNREADABLE = "unreadable"


def gap_sample(source: str, entity: str, gap: str, detail: str, t: float = 0.0) -> Sample:
    """The sample of an entity that gives no figures this interval (see :attr:`Sample.gap`)."""
    return Sample(source, entity, {}, t=t, gap=gap, detail=detail)


class Collector(ABC):
    """Samples storage counters on the engine's clock.

    The sampler calls ``start(now)`` once, then ``sample(now)`` about once per second, then
    ``stop()``. ``now`` is the engine clock in seconds (monotonic); a collector computes rates
    from the difference of two readings over the difference of two ``now`` values, so tests
    can drive it with a fake clock. A raised exception is logged and counted by the sampler,
    never fatal to the run. Each implementation's docstring says what load it puts on the
    target.

    A collector whose reading is a local file (``/proc/diskstats``) also takes it in
    :meth:`read_at`, which the engine calls synchronously at the instant an interval closes:
    its rates are then counts between two readings over the span between them, and the
    interval's end is where the counters were read (not up to 0.1 s before, as when the read
    waits for the sampler's turn on the event loop; issue #25).
    """

    source: ClassVar[str]

    @abstractmethod
    async def start(self, now: float) -> None:
        """Take the baseline reading."""

    @abstractmethod
    async def sample(self, now: float) -> list[Sample]:
        """Read the counters and return rates since the previous reading."""

    def read_at(self, now: float) -> None:  # noqa: B027 - optional hook
        """Take the reading of the sample for ``now`` at once: called at that very instant
        (synchronously, so nothing runs in between), then ``sample(now)`` uses it. A reading
        for the ``now`` given to ``start`` replaces the baseline. Default: the reading is
        taken in ``sample``. Must not block and must not raise."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release resources (default: nothing to release)."""

    def describe(self) -> dict[str, Any]:
        """Facts for the bundle (devices watched, mount options …)."""
        return {"source": self.source}

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        """What this collector concludes about the measured window, for the summary: facts
        (e.g. physical reads per read statement) and plain-language warnings (e.g. the cache
        served most reads). ``means``: this source's per-entity means over the measured
        intervals; ``op_counts``: completed transactions per operation. Default: nothing."""
        return {}, []
