"""Sessions on their own OS threads: blocking calls without a hop per operation.

A session whose transactions are plain blocking calls — file-system calls, ``sqlite3``,
``pyodbc`` — pays, on the event loop, a hand-over to a pool thread and back for every
operation: 30–80 µs of wake-ups per call on a 2-CPU VM (bench/README.md), more than the call
itself against a page-cached tree or a local SQLite file. Here each such session runs its own
loop on its own thread instead: deal → time → call → record, with no loop, no future and no
queue in between. The GIL is released inside every system call, so sessions overlap wherever
the storage has latency.

The asyncio loop still owns everything else: stages, the ticker, collectors, stops. Threads
read the engine's stage as it changes (plain attribute reads) and record into their own
:class:`ThreadRecorder`, which the engine's :class:`~sim.core.metrics.IntervalRecorder` folds at each
interval's close. A stage boundary takes every session's recorder lock while it closes the
interval and enters the new stage, so an operation's latency and its phase are decided
together: no completion is counted in one phase and recorded in another. The threads start in
the engine's connecting state: each makes its native sessions' connections, then waits at a
gate the engine opens as the first stage starts (``_gate``), so no connect is timed in a stage.

A session offers this path by having ``next_call() -> (name, callable)`` besides
``next_transaction()`` (see :class:`sim.protocols.BlockingSession`); the engine uses it when
every session has one and ``load.session_runner`` allows it (``auto``, the default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sim.core.engine import Engine

log = logging.getLogger(__name__)

#: Runs session ``index`` of the ThreadedSessions with its native program to the end.
NativeRunner = Callable[["ThreadedSessions", int, Any], None]
#: Runs several sessions ((index, program) pairs) on one thread; the callable settles each.
NativeGroupRunner = Callable[
    ["ThreadedSessions", list[tuple[int, Any]], Callable[[int], None]], None
]


class ThreadRecorder:
    """One session thread's latencies and errors since the engine last folded them.

    ``lock`` is held by the thread for each record and by the engine to take the buffers (and,
    at a stage boundary, across the whole change of stage); it is never contended otherwise.
    """

    __slots__ = ("errors", "examples", "lock", "raw")

    def __init__(self) -> None:
        # Re-entrant: the engine holds every session's lock across a stage change and takes
        # the buffers (IntervalRecorder.rotate) inside that.
        self.lock = threading.RLock()
        self.raw: dict[str, array[int]] = {}
        self.errors: dict[str, dict[str, int]] = {}
        #: op -> class -> first message, kept for the run (as IntervalRecorder's).
        self.examples: dict[str, dict[str, str]] = {}

    @property
    def pending(self) -> bool:
        return bool(self.raw) or bool(self.errors)

    def record(self, name: str, latency_us: int, failure: BaseException | None) -> None:
        """One operation's outcome (call with ``lock`` held)."""
        if failure is None:
            raw = self.raw.get(name)
            if raw is None:
                raw = self.raw[name] = array("q")
            raw.append(latency_us)
            return
        from sim.core.op_errors import error_class, error_message

        self.record_error(name, error_class(failure), lambda: error_message(failure))

    def record_error(self, name: str, cls: str, message: Callable[[], str], n: int = 1) -> None:
        """``n`` failures of ``name`` in class ``cls`` (call with ``lock`` held)."""
        by_class = self.errors.setdefault(name, {})
        by_class[cls] = by_class.get(cls, 0) + n
        examples = self.examples.setdefault(name, {})
        if cls not in examples:
            examples[cls] = message()

    def take(self) -> tuple[dict[str, array[int]], dict[str, dict[str, int]]]:
        """The buffers so far, leaving empty ones (call with ``lock`` held)."""
        raw, errors = self.raw, self.errors
        self.raw, self.errors = {}, {}
        return raw, errors


class ThreadedSessions:
    """The sessions of one run, one OS thread each, driven by the engine's stages.

    A friend of :class:`~sim.core.engine.Engine`: it reads the engine's current stage, its pacing
    settings and its stop flag, and keeps the engine's per-session counts (``_stage_ops``,
    ``_issued``, ``_first_measured``, ``result.loops_completed``) exactly as the coroutine
    sessions do, so the mix check and the stage log do not care which runner ran.
    """

    def __init__(
        self,
        engine: Engine,
        sessions: list[Any],
        native: NativeRunner | None = None,
        native_group: NativeGroupRunner | None = None,
    ) -> None:
        self.engine = engine
        self.sessions = sessions
        #: Runs a session's operations in batches in the native file loop (the engine hands
        #: over sim.core.session_native.run_native when that runner was chosen), or None.
        self.native = native
        #: Runs several PostgreSQL sessions' batches on one thread (run_native_group), or None.
        self.native_group = native_group
        self.recorders = [ThreadRecorder() for _ in sessions]
        # Bumped at every stage change and stop: a native batch ends at the first operation
        # after it changes (the loop reads it with the GIL released, so a plain int64 cell).
        self.generation = np.zeros(1, dtype=np.int64)
        # Set whenever the stage changes or the run stops: wakes parked and pacing sessions.
        self._changed = threading.Condition(threading.Lock())
        self._finished: list[asyncio.Future[None]] = []
        self._threads: list[threading.Thread] = []
        # The gate before the stage clock (see _gate): threads yet to arrive at it, the future
        # resolved when none is left, and whether the engine has let them through (go()).
        self._arriving = 0
        self._arrived = threading.Lock()
        self._ready: asyncio.Future[None] | None = None
        self._go = False
        #: Seconds from the threads' start to the last one's arrival at the gate: the native
        #: connects, made before the stage clock (logged; the stages' times exclude it).
        self.connect_s: float | None = None
        self._started_ns = 0

    # ------------------------------------------------------------------ engine side

    def start(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[None]]:
        """Start every session's thread; one task per session resolves when it returns. Each
        thread connects its native programs, then waits for :meth:`go` (see :meth:`_gate`)."""
        self._ready = loop.create_future()
        self._started_ns = time.perf_counter_ns()
        tasks = []
        for _ in self.sessions:
            done: asyncio.Future[None] = loop.create_future()
            self._finished.append(done)
            tasks.append(asyncio.ensure_future(self._wait(done)))
        for members in self._groups():
            target: Callable[..., None]
            if len(members) == 1:
                index = members[0][0]
                name, target = f"dbsim-session-{index}", self._run
                args: tuple[Any, ...] = (index, self.sessions[index], loop, self._finished[index])
            else:
                name, target, args = (
                    f"dbsim-sessions-{members[0][0]}",
                    self._run_group,
                    (members, loop),
                )
            thread = threading.Thread(target=target, args=args, name=name)
            thread.daemon = True  # a call hung on a dead server must not keep the process
            self._threads.append(thread)
        self._arriving = len(self._threads)
        if not self._threads:
            self._ready.set_result(None)
        for thread in self._threads:
            thread.start()
        return tasks

    async def connected(self) -> None:
        """Resolves once every thread has connected its native sessions (or had a connect
        refused: it tries again in the stage, as after a loss) and waits for :meth:`go`."""
        assert self._ready is not None
        # Or once a thread has ended before its gate (a bug): the run goes on to find its
        # failure as in a stage. (asyncio.wait cancels none of these when it is cancelled.)
        await asyncio.wait([self._ready, *self._finished], return_when=asyncio.FIRST_COMPLETED)

    def go(self) -> None:
        """The first stage's clock runs: the threads waiting at the gate start their sessions."""
        self._go = True
        self.wake()

    def _groups(self) -> list[list[tuple[int, Any]]]:
        """The sessions each thread runs: one each, or, for PostgreSQL sessions in the native
        loop, several whose programs run their batches together (``run_group``; the sessions
        dealt round-robin, so a stage running fewer of them still spreads them over threads).
        A session with no such program runs alone (in Python, its thread logs why)."""
        alone: list[list[tuple[int, Any]]] = [[(i, None)] for i in range(len(self.sessions))]
        if (
            self.native is None
            or self.native_group is None
            or any(getattr(s, "native_program", None) is not None for s in self.sessions)
        ):
            return alone
        from storage.targets.pgloop_session import sessions_per_thread

        size = sessions_per_thread()
        if size <= 1:
            return alone
        programs = [(i, self._native_program(i, s)) for i, s in enumerate(self.sessions)]
        # A program runs in a group when it can run its batches together and reconnect
        # together (run_native_group calls both: PgProgram today).
        grouped = [(i, p) for i, p in programs if _groupable(p)]
        n_threads = -(-len(grouped) // size)
        groups = [grouped[k::n_threads] for k in range(n_threads)]
        alone_ids = [i for i, p in programs if (i, p) not in grouped]
        for i in alone_ids:
            _close(programs[i][1])  # its thread makes its own (in _loop)
        singles = [[(i, None)] for i in alone_ids]
        return [g for g in groups if g] + singles

    def _run_group(self, members: list[tuple[int, Any]], loop: asyncio.AbstractEventLoop) -> None:
        assert self.native_group is not None

        def settle(index: int, exc: BaseException | None = None) -> None:
            loop.call_soon_threadsafe(_settle, self._finished[index], exc)

        failure: BaseException | None = None
        try:
            self._gate(loop, [program for _, program in members])
            self.native_group(self, members, settle)
        except BaseException as exc:  # a bug in a session: the engine must still finish
            failure = exc
        finally:
            for _, program in members:
                _close(program)
        for index, _ in members:
            settle(index, failure)

    @staticmethod
    async def _wait(done: asyncio.Future[None]) -> None:
        # Cancelling the task (the engine's grace ran out) must not cancel the future the
        # thread will still resolve; the thread ends after its current call.
        await asyncio.shield(done)

    def wake(self) -> None:
        """The stage changed or the run is stopping: every waiting session looks again."""
        self.generation[0] += 1
        with self._changed:
            self._changed.notify_all()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No session records while the caller closes an interval and changes the stage."""
        self.generation[0] += 1  # native batches end now, not at their deadline
        with contextlib.ExitStack() as stack:
            for recorder in self.recorders:
                stack.enter_context(recorder.lock)
            yield

    async def join(self, timeout_s: float) -> bool:
        """Wait, bounded, for every thread to return; False if some are still in a call."""
        pending = [f for f in self._finished if not f.done()]
        if not pending:
            return True
        _, still = await asyncio.wait(pending, timeout=timeout_s)
        return not still

    # ------------------------------------------------------------------ session threads

    def _sleep(self, seconds: float) -> None:
        """Sleep unless the stage changes or the run stops first. (A Condition, not
        ``time.sleep``: a Locust process has ``time`` patched by gevent.)"""
        with self._changed:
            self._changed.wait(seconds)

    def _run(
        self,
        index: int,
        session: Any,
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[None],
    ) -> None:
        try:
            self._loop(index, session, loop)
        except BaseException as exc:  # a bug in a session: the engine must still finish
            loop.call_soon_threadsafe(_settle, done, exc)
        else:
            loop.call_soon_threadsafe(_settle, done, None)

    def _park(self, index: int) -> None:
        """Wait while this stage runs fewer sessions than ``index + 1`` (or until a stop)."""
        engine = self.engine
        with self._changed:
            self._changed.wait_for(
                lambda: engine._stopping or engine._stage.sessions > index, timeout=1.0
            )

    def _loop(self, index: int, session: Any, loop: asyncio.AbstractEventLoop) -> None:
        program = self._native_program(index, session) if self.native else None
        try:
            self._gate(loop, [] if program is None else [program])
            if program is not None:
                assert self.native is not None
                self.native(self, index, program)
                return
        finally:
            _close(program)
        self._python_loop(index, session, loop)

    def _gate(self, loop: asyncio.AbstractEventLoop, programs: list[Any]) -> None:
        """Connect this thread's native programs, then wait until the engine starts the stage
        clock (:meth:`go`) or stops: as the Python path's sessions, which ``connect_all`` has
        connected before the clock, a native session's connect is timed in no stage (two
        psqlODBC connects on a host 95 % busy took a whole 2 s measured window: 0 operations,
        exit 3). The thread that makes a connection is the one that uses it (libpq and
        Connector/C connections are not to be shared between threads)."""
        engine = self.engine
        try:
            for program in programs:
                connect_first = getattr(program, "connect_first", None)
                if connect_first is not None and not engine._stopping:
                    connect_first()
        finally:  # arrive even if a connect raised: the engine must not wait for this thread
            with self._arrived:
                self._arriving -= 1
                last = self._arriving == 0
            if last and self._ready is not None:
                self.connect_s = (time.perf_counter_ns() - self._started_ns) / 1e9
                if self.native is not None:
                    log.info("native sessions connected in %.3f s, before the stage clock",
                             self.connect_s)  # fmt: skip
                loop.call_soon_threadsafe(_settle, self._ready, None)
        with self._changed:
            self._changed.wait_for(lambda: self._go or engine._stopping)

    def _native_program(self, index: int, session: Any) -> Any:
        """The session's native loop, or None (then it runs in Python, and the log says why)."""
        try:
            if getattr(session, "native_program", None) is None:
                from storage.targets.pgloop_session import native_program

                return native_program(self, index, session)
            return session.native_program()
        except Exception as exc:  # unsupported here, or its tree refused: Python reports it
            log.warning("session %d runs in Python, not the native loop: %s", index, exc)
            return None

    def _python_loop(self, index: int, session: Any, loop: asyncio.AbstractEventLoop) -> None:
        # Mirrors Engine._session (pacing, phases, bookkeeping) for a blocking session; the
        # hot path reads plain attributes and locals only.
        engine = self.engine
        recorder = self.recorders[index]
        next_call = session.next_call
        perf_ns = time.perf_counter_ns
        rng = random.Random(index)
        loops_limit = engine.load.loops_per_session
        think = engine.load.think
        pacer = Pacer(self, index) if engine.load.mode == "open" else None
        tally = Tally(index)
        while not engine._stopping:
            stage = engine._stage
            if index >= stage.sessions:  # parked: this stage runs fewer sessions
                self._park(index)
                continue
            # A stage without a rate (the calibration) runs closed loop in an open-loop run.
            paced = pacer if stage.rate_ops_s is not None else None
            start_ns = paced.start(stage) if paced is not None else perf_ns()
            if start_ns is None:
                continue  # woken early: by a stage change, a stop, or spuriously
            name, call = next_call()
            tally.issued += 1
            engine._stage_ops[index] += 1
            failure: BaseException | None = None
            try:
                call()
            except Exception as exc:
                failure = exc
            end_ns = perf_ns()
            with recorder.lock:  # the record and the phase it counts in, together (see held())
                recorder.record(name, (end_ns - start_ns) // 1000, failure)
                measuring = tally.book(engine, 1)
            if failure is not None and engine.target.is_disconnect(failure):
                reconnect = asyncio.run_coroutine_threadsafe(
                    engine._reconnect(index, session), loop
                )
                with contextlib.suppress(Exception):
                    reconnect.result()
            if measuring and loops_limit is not None and tally.loops >= loops_limit:
                return
            if think is not None and think.max_ms > 0 and tally.loops % think.every_n_loops == 0:
                self._sleep(rng.uniform(think.min_ms, think.max_ms) / 1000)


class Pacer:
    """A session's open-loop schedule: the intended start of its next operation, taken
    afresh from the engine at every stage change."""

    __slots__ = ("engine", "epoch", "index", "next_due_ns", "period_ns", "rate_epoch", "sessions")

    def __init__(self, sessions: ThreadedSessions, index: int) -> None:
        self.sessions = sessions
        self.engine = sessions.engine
        self.index = index
        self.epoch = self.rate_epoch = -1
        self.next_due_ns = self.period_ns = 0

    def refresh(self, stage: Any) -> None:
        """Up to the engine's current stage and rate (``stage``: the one the caller read;
        the rate may have changed since, see Engine.set_rate)."""
        self.engine.repace(self.index, self)

    def start(self, stage: Any) -> int | None:
        """The next operation's start (ns) once it is due; None if woken before it was."""
        self.refresh(stage)
        perf_ns = time.perf_counter_ns
        delay_ns = self.next_due_ns - perf_ns()
        if delay_ns > 0:
            self.sessions._sleep(delay_ns / 1e9)
            engine = self.engine
            if (
                engine._stopping
                or self.epoch != engine._stage_epoch
                or self.rate_epoch != engine._rate_epoch
                or perf_ns() < self.next_due_ns
            ):
                return None
            start_ns = perf_ns()
        else:
            start_ns = self.next_due_ns  # behind schedule: time from the intended start
        self.next_due_ns += self.period_ns
        return start_ns


class Tally:
    """A session's issued and measured operation counts, kept in the engine's lists."""

    __slots__ = ("index", "issued", "loops")

    def __init__(self, index: int) -> None:
        self.index = index
        self.issued = self.loops = 0

    def book(self, engine: Engine, n: int) -> bool:
        """The last ``n`` issued operations were recorded (the recorder's lock held): count
        them as measured if the engine is measuring; returns whether it is."""
        measuring = engine._measuring
        if measuring and n:
            if self.loops == 0:
                engine._first_measured[self.index] = self.issued - n
            self.loops += n
            engine.result.loops_completed[self.index] = self.loops
            engine._issued[self.index] = self.issued
        return bool(measuring)


def _close(program: Any) -> None:
    """Close a native program's connection now its session is done. Not left to the garbage
    collector: a program and its parameter deck refer to each other, so it is freed only when a
    collection runs, and under load that was after the run ended (the test of physical reads
    found every session's connection still open and idle 60 s after its run, 2026-12-06)."""
    close = getattr(program, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as exc:  # the run's figures are taken: a failed goodbye is only logged
        log.warning("a native session's connection did not close cleanly: %s", exc)


def _settle(done: asyncio.Future[None], exc: BaseException | None) -> None:
    if done.done():
        return
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)


__all__ = [
    "Pacer",
    "Tally",
    "ThreadRecorder",
    "ThreadedSessions",
]


def _groupable(program: object) -> bool:
    return all(callable(getattr(program, name, None)) for name in ("run_group", "reconnect_group"))
