"""A SQL session's native program on PostgreSQL: the workload deals, libpq runs.

:func:`sim.core.session_native.run_native` drives it as it drives an EDA session's file loop:
``deck.ahead(n)`` deals the next ``n`` operations, ``run`` runs a batch in
``storage/targets/native/pgloop.c`` with the GIL released, ``advance`` consumes what ran and
``names``/``error_class``/``message`` let the batch be folded into the session's recorder.

The parameters are the workload's own: every operation comes from the session's
``next_statement()`` (SLOB's keys and update values, the ``sql`` workload's generators), in
batches, so a native run deals exactly what a Python run deals. Each distinct (operation,
statement) pair is prepared once per connection. A batch that loses the connection ends at
that operation; the next ``run`` reconnects first with the engine's backoff, counts failed
attempts as ``connect`` errors and logs the outage in the run's result, as the asyncpg path
does (sim.core.coroutine_sessions). The first connection is made before the stage clock starts
(``connect_first``), as the engine's ``connect_all`` makes the Python path's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.secrets import resolve_secret
from storage.targets import marialoop, odbcloop, pgloop

#: The engine's reconnect backoff (sim.core.coroutine_sessions, which a plugin may not import):
#: the first wait, doubled after each failed attempt up to the second.
RECONNECT_FIRST_DELAY_S = 0.1
RECONNECT_MAX_DELAY_S = 2.0

#: The one-line reasons a PostgreSQL run's sessions stay on asyncpg (summary.json's ``why``).
NOT_POSTGRES = "not a PostgreSQL target"
SHAPE = "statement shape not supported"


def shape_problem(session: Any) -> str:
    """Why this session's operations cannot be dealt to the native loop ('' when they can):
    it must be a SQL session whose operations are one statement each, run as a query or as a
    write committed alone (sqlkit's contract), which libpq's autocommit does exactly."""
    from workloads.sql.session import SqlUserSession
    from workloads.sqlkit import SqlSession

    if not isinstance(session, SqlSession):
        return f"{SHAPE}: not a SQL session"
    if isinstance(session, SqlUserSession):
        modes = sorted({plan.mode for plan in session.plans if plan.mode != "plain"})
        if modes:
            return f"{SHAPE}: statements run in a transaction ({', '.join(modes)})"
        return ""
    if type(session).next_transaction is not SqlSession.next_transaction:
        return f"{SHAPE}: {type(session).__name__} runs its own transactions"
    return ""


def unavailable(load: Any, sessions: Sequence[Any], target: Any) -> str | None:
    """None when this is no PostgreSQL or MariaDB/MySQL SQL run; else why these sessions
    cannot run in the engine's native loop ('' when they can)."""
    kind = getattr(target, "kind", None)
    if kind not in BACKENDS or not sessions:
        return None
    why = BACKENDS[kind].unavailable()
    if why:
        return why
    think = load.think
    if think is not None and think.max_ms > 0:
        return "think time is paced in Python between operations"
    for session in sessions:
        problem = shape_problem(session)
        if problem:
            return problem
    room = getattr(target, "connection_room", None)
    needed = 2 * len(sessions) + 1  # beside each native connection the engine's own; a collector
    if room is not None and needed > room.free:
        return (
            f"the server had room for {room.free} connections, the native loop needs {needed} "
            "(its own and the engine's per session, and the db collector's)"
        )
    return ""


#: target.kind -> its native loop module.
BACKENDS: dict[str, Any] = {
    "postgres": pgloop,
    "mysql": marialoop,
    "odbc": odbcloop,
    "sqlserver": odbcloop,
}

#: Sessions per native thread (see sessions_per_thread): one wake-up of a thread serves every
#: reply that has arrived on its connections, where a thread per session wakes once per reply.
SESSIONS_PER_THREAD = 4
GROUP_SWITCH = "DBSIM_PGLOOP_GROUP"

#: Operations dealt ahead at first; then twice what the last batch ran, up to what is asked.
FIRST_DEAL = 64


class _Deck:
    """The dealt operations not yet run, and the arrays of the batch ``ahead`` built.

    A batch ends at its deadline (just before the interval close for fast closed-loop
    operations, else 50 ms: ``sim.core.session_native.deadline_ns``) or a stage change, often long before the 4096
    operations the runner asks for: dealing and packing them all per batch would cost more
    than running them. So ``ahead`` deals at most twice what the last batch ran (the
    runner takes fewer operations then; what was dealt and not run is run next)."""

    def __init__(self, program: SqlProgram) -> None:
        self.program = program
        self.pending: list[tuple[int, Sequence[Any]]] = []
        self.want = FIRST_DEAL
        self.last: tuple[str, Any, int] = ("", None, 0)

    def ahead(self, n: int) -> np.ndarray:
        program = self.program
        pending = self.pending
        n = min(n, self.want)
        if len(pending) < n:
            next_statement = program.session.next_statement
            code_of = program.code_of
            append = pending.append
            # The last (name, statement) and its code: a session deals the same few statement
            # objects over and over, so most operations skip the (name, sql) lookup.
            last_name, last_statement, last_code = self.last
            for _ in range(n - len(pending)):
                name, statement, params = next_statement()
                if statement is not last_statement or name != last_name:
                    code = code_of.get((name, statement.sql))
                    if code is None:
                        code = program.add(name, statement.sql, len(params))
                    last_name, last_statement, last_code = name, statement, code
                append((last_code, params))
            self.last = (last_name, last_statement, last_code)
        program.pack(pending[:n])
        return program.codes[:n]

    def consume(self, n: int) -> None:
        del self.pending[:n]
        self.want = max(FIRST_DEAL, 2 * n)


class SqlProgram:
    """One SQL session's native loop: its connection, statements and dealt batch. ``backend``
    is the engine's loop module (storage.targets.pgloop, storage.targets.marialoop): its
    ``loop_for`` makes the C loop, its ``failure_*`` read the failure tuples the loop keeps."""

    backend: Any = pgloop

    def __init__(self, threaded: Any, index: int, session: Any, target: Any) -> None:
        self.threaded = threaded
        self.engine = threaded.engine
        self.recorder = threaded.recorders[index]
        self.index = index
        self.session = session
        settings = target.settings
        password = resolve_secret(settings, "target")
        self.secrets = [password] if password else []
        self.loop = self.backend.loop_for(settings, password)
        #: Operation name by code (one code per (operation, statement) pair).
        self.names: list[str] = []
        self.code_of: dict[tuple[str, str], int] = {}
        #: Error id -> the loop's failure tuple; id 0 is success.
        self.failures: list[tuple[Any, ...]] = [()]
        self._failure_id: dict[Any, int] = {}
        self.connected = False
        self.deck = _Deck(self)
        self.codes = np.zeros(0, dtype=np.int32)
        self._offsets = self._ints = self._kinds = self._texts = b""

    # ------------------------------------------------------------------ statements, params

    def add(self, name: str, sql: str, n_params: int) -> int:
        if n_params > self.backend.MAX_PARAMS:
            raise ValueError(f"{name}: more than {self.backend.MAX_PARAMS} parameters")
        # A statement refused now is prepared again by each of its operations, which fail
        # with the server's error meanwhile (as on the asyncpg path): nothing to record here.
        code, _ = self.loop.prepare(self.backend.native_sql(sql), n_params)
        self.names.append(name)
        self.code_of[(name, sql)] = code
        return int(code)

    def pack(self, ops: list[tuple[int, Sequence[Any]]]) -> None:
        """The batch's codes and parameters as the C loop reads them (packed in C: ints as
        int64, None as NULL, bool as true/false, anything else as its text)."""
        codes, self._offsets, self._ints, self._kinds, self._texts = self.loop.pack(ops)
        self.codes = np.frombuffer(codes, dtype=np.int32)

    def advance(self, codes: np.ndarray, done: int) -> None:
        self.deck.consume(done)

    # ------------------------------------------------------------------ the batch

    def run(
        self,
        codes: np.ndarray,
        latency: np.ndarray,
        errors: np.ndarray,
        args: np.ndarray,
        generation: np.ndarray,
        seen: int,
        count: int,
        deadline_ns: int,
        paced: bool,
        period_ns: int,
        due_ns: int,
    ) -> tuple[int, int]:
        if not self.connected and not self._connect():
            return 0, due_ns  # stopping
        count = min(count, len(self.codes))  # ahead() may deal fewer than asked
        done, due_ns = self.loop.run(
            codes, self._offsets, self._ints, self._kinds, self._texts, latency, errors,
            args, generation, seen, count, deadline_ns, paced, period_ns, due_ns,
        )  # fmt: skip
        self._after(errors, done)
        return int(done), int(due_ns)

    def _after(self, errors: np.ndarray, done: int) -> None:
        """The batch's error indices into this session's ids; a lost connection noted."""
        local = self.loop.failures()
        if local:
            ids = np.array([0] + [self._id_of(tuple(f)) for f in local], dtype=np.int32)
            errors[:done] = ids[errors[:done]]
            if any(self.backend.failure_lost(f) for f in local):
                self.connected = False  # reconnect before the next batch, after this fold
                # When it was lost, not when its reconnection starts: sessions sharing a thread
                # reconnect one after another, and the second waits for the first's backoff
                # (its outage read 10.158-10.163 s for a restart at 5.03 s).
                self._lost_at = self.engine.clock()

    def _id_of(self, failure: tuple[Any, ...]) -> int:
        key = self.backend.failure_key(failure)
        found = self._failure_id.get(key)
        if found is None:
            found = self._failure_id[key] = len(self.failures)
            self.failures.append(failure)
        return found

    def error_class(self, error: int) -> str:
        return str(self.backend.failure_class(self.failures[error]))

    def message(self, code: int, error: int, arg: int) -> str:
        failure = self.failures[error]
        return str(self.backend.failure_message(self.names[code], failure, self.secrets))

    def _record_failure(self, what: str, failure: tuple[Any, ...]) -> None:
        cls = self.backend.failure_class(failure)
        line = self.backend.failure_message(what, failure, self.secrets)
        with self.recorder.lock:
            self.recorder.record_error(what, cls, lambda: line)

    # ------------------------------------------------------------------ connection

    def connect_first(self) -> None:
        """The session's first connection, made by its thread before the stage clock starts
        (sim.core.session_threads ``_gate``): one attempt. A refused one is counted as a
        ``connect`` error and the first batch tries again with the engine's backoff, as after
        a loss, so a server that refuses ends the run as it did when the first batch connected."""
        self._attempt()

    def _connect(self) -> bool:
        """(Re)connect with the engine's backoff until it works or the run stops."""
        delay = RECONNECT_FIRST_DELAY_S
        while not self.engine._stopping:
            if self._attempt():
                return True
            self.threaded._sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY_S)
        return False

    def _attempt(self) -> bool:
        """One connection attempt: a failure counted as a ``connect`` error, a reconnection
        logged as an outage from when the loss was found, as Engine._reconnect logs it."""
        engine = self.engine
        if self._lost_at is None:
            self._lost_at = engine.clock()
        self._attempts += 1
        failure = self.loop.connect()
        if failure is not None:
            self._record_failure("connect", tuple(failure))
            return False
        self.connected = True
        if self._ever_connected:
            engine.result.outages.append(
                {
                    "session": self.index,
                    "lost_t": round(self._lost_at - engine._t0, 3),
                    "restored_t": round(engine.clock() - engine._t0, 3),
                    "attempts": self._attempts,
                }
            )
        self._ever_connected = True
        self._lost_at, self._attempts = None, 0
        return True

    _ever_connected = False
    _lost_at: float | None = None
    _attempts = 0

    def close(self) -> None:
        self.loop.close()


class PgProgram(SqlProgram):
    """A PostgreSQL session's program: several share a thread (run_group)."""

    backend = pgloop

    @staticmethod
    def reconnect_group(programs: list[PgProgram]) -> bool:
        """When a member of a thread's group has lost its connection, every other member's is
        checked in the same pass (pgloop.c ``check``: an idle socket that hung up) and every
        lost one reconnected in that pass, with the engine's backoff between passes. So one
        server restart is found by all the members within a pass, not by each one when its
        next batch comes after the others' reconnection (a restart at 5.05 s was found by
        two of four at 12.198 s, 1 ms after the first two were back). False: the run stops."""
        if all(p.connected for p in programs):
            return True
        engine = programs[0].engine
        delay = RECONNECT_FIRST_DELAY_S
        while not engine._stopping:
            found = engine.clock()  # the pass's: every loss it finds, found at once
            for program in programs:  # first: a member's loss is found before any waiting
                if program.connected and program.loop.check() is not None:
                    program.connected = False
                    program._lost_at = found
            for program in programs:
                if not program.connected:
                    program._attempt()
            if all(p.connected for p in programs):
                return True
            programs[0].threaded._sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY_S)
        return False

    @staticmethod
    def run_group(
        programs: list[PgProgram],
        batches: list[Any],
        generation: np.ndarray,
        seen: int,
        deadline_ns: int,
    ) -> list[tuple[int, int]]:
        """Several sessions' batches on this thread, one statement in flight per connection
        (pggroup.c): ``batches[k]`` holds program k's codes, arrays, count and pacing as
        :meth:`run` takes them. Returns each one's (done, next due)."""
        entries, outcomes, ran = [], [(0, b.due_ns) for b in batches], []
        for k, (program, b) in enumerate(zip(programs, batches, strict=True)):
            if not program.connected and not program._connect():
                continue  # stopping
            count = min(b.count, len(program.codes))
            entries.append((program.loop, b.codes, program._offsets, program._ints, program._kinds,
                            program._texts, b.latency, b.errors, b.args, count,
                            b.paced is not None, b.period_ns, b.due_ns))  # fmt: skip
            ran.append(k)
        if entries:
            results = pgloop.run_group(entries, generation, seen, deadline_ns)
            for k, (done, due_ns) in zip(ran, results, strict=True):
                programs[k]._after(batches[k].errors, done)
                outcomes[k] = (int(done), int(due_ns))
        return outcomes


class MariaProgram(SqlProgram):
    """A MariaDB/MySQL session's program: a thread each (Connector/C's calls block)."""

    backend = marialoop


class OdbcProgram(SqlProgram):
    """An ODBC session's program (``kind: odbc``, ``kind: sqlserver``): a thread each, as
    ODBC's calls block. Its backend is the target's (the wording names the target's kind, a
    failed connection the target's own description of it)."""

    def __init__(self, threaded: Any, index: int, session: Any, target: Any) -> None:
        self.backend = odbcloop.OdbcBackend(target)
        super().__init__(threaded, index, session, target)

    def close(self) -> None:
        """The connection and its statements freed now (sim.core.session_threads._close)."""
        self.loop.close()


#: target.kind -> its sessions' program (any other: PostgreSQL's).
PROGRAMS: dict[str, type[SqlProgram]] = {
    "mysql": MariaProgram,
    "odbc": OdbcProgram,
    "sqlserver": OdbcProgram,
}


def sessions_per_thread() -> int:
    """How many sessions share a native thread (``DBSIM_PGLOOP_GROUP``, else 4: pgbench's
    ``-c 8 -j 2`` in bench/pgbench_slob.py); 1 is a thread per session."""
    text = os.environ.get(GROUP_SWITCH, "")
    return max(1, int(text)) if text.isdigit() else SESSIONS_PER_THREAD


def native_program(threaded: Any, index: int, session: Any) -> SqlProgram:
    """Session ``index``'s native program (the engine's target is PostgreSQL, MariaDB or
    ODBC)."""
    target = threaded.engine.target
    program = PROGRAMS.get(getattr(target, "kind", None) or "", PgProgram)
    return program(threaded, index, session, target)


__all__ = [
    "NOT_POSTGRES",
    "SHAPE",
    "MariaProgram",
    "OdbcProgram",
    "PgProgram",
    "SqlProgram",
    "native_program",
    "sessions_per_thread",
    "shape_problem",
    "unavailable",
]
