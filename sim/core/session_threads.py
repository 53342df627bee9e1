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
together: no completion is counted in one phase and recorded in another.

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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.core.engine import Engine

log = logging.getLogger(__name__)

RUNNER_THREADS = "threads"
RUNNER_LOOP = "event loop"
#: What the summary says of each runner.
RUNNER_DESCRIPTIONS = {
    RUNNER_THREADS: "one OS thread per session, blocking calls made in place",
    RUNNER_LOOP: "coroutines on the engine's event loop (blocking calls through its pool)",
}


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

    def __init__(self, engine: Engine, sessions: list[Any]) -> None:
        self.engine = engine
        self.sessions = sessions
        self.recorders = [ThreadRecorder() for _ in sessions]
        # Set whenever the stage changes or the run stops: wakes parked and pacing sessions.
        self._changed = threading.Condition(threading.Lock())
        self._finished: list[asyncio.Future[None]] = []
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ engine side

    def start(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[None]]:
        """Start every session's thread; one task per session resolves when it returns."""
        tasks = []
        for index, session in enumerate(self.sessions):
            done: asyncio.Future[None] = loop.create_future()
            self._finished.append(done)
            thread = threading.Thread(
                target=self._run, args=(index, session, loop, done), name=f"dbsim-session-{index}"
            )
            thread.daemon = True  # a call hung on a dead server must not keep the process
            self._threads.append(thread)
            tasks.append(asyncio.ensure_future(self._wait(done)))
        for thread in self._threads:
            thread.start()
        return tasks

    @staticmethod
    async def _wait(done: asyncio.Future[None]) -> None:
        # Cancelling the task (the engine's grace ran out) must not cancel the future the
        # thread will still resolve; the thread ends after its current call.
        await asyncio.shield(done)

    def wake(self) -> None:
        """The stage changed or the run is stopping: every waiting session looks again."""
        with self._changed:
            self._changed.notify_all()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No session records while the caller closes an interval and changes the stage."""
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

    def _loop(self, index: int, session: Any, loop: asyncio.AbstractEventLoop) -> None:
        # Mirrors Engine._session (pacing, phases, bookkeeping) for a blocking session; the
        # hot path reads plain attributes and locals only.
        from sim.core.engine import error_class, error_message

        engine = self.engine
        recorder = self.recorders[index]
        lock = recorder.lock
        next_call = session.next_call
        perf_ns = time.perf_counter_ns
        rng = random.Random(index)
        loops_limit = engine.load.loops_per_session
        think = engine.load.think
        open_loop = engine.load.mode == "open"
        epoch = -1
        next_due_ns = period_ns = 0
        loops = issued = 0
        while not engine._stopping:
            stage = engine._stage
            if index >= stage.sessions:  # parked: this stage runs fewer sessions
                with self._changed:
                    self._changed.wait_for(
                        lambda: engine._stopping or engine._stage.sessions > index, timeout=1.0
                    )
                continue
            if open_loop:
                if epoch != engine._stage_epoch:
                    epoch = engine._stage_epoch
                    period_ns, next_due_ns = engine.schedule(index, stage)
                delay_ns = next_due_ns - perf_ns()
                if delay_ns > 0:
                    self._sleep(delay_ns / 1e9)
                    if engine._stopping or epoch != engine._stage_epoch or perf_ns() < next_due_ns:
                        continue  # woken early: by a stage change, a stop, or spuriously
                    start_ns = perf_ns()
                else:
                    start_ns = next_due_ns  # behind schedule: time from the intended start
                next_due_ns += period_ns
            else:
                start_ns = perf_ns()
            name, call = next_call()
            issued += 1
            engine._stage_ops[index] += 1
            failure: BaseException | None = None
            try:
                call()
            except Exception as exc:
                failure = exc
            end_ns = perf_ns()
            with lock:  # the record and the phase it counts in, together (see held())
                if failure is None:
                    raw = recorder.raw.get(name)
                    if raw is None:
                        raw = recorder.raw[name] = array("q")
                    raw.append((end_ns - start_ns) // 1000)
                else:
                    cls = error_class(failure)
                    by_class = recorder.errors.setdefault(name, {})
                    by_class[cls] = by_class.get(cls, 0) + 1
                    examples = recorder.examples.setdefault(name, {})
                    if cls not in examples:
                        examples[cls] = error_message(failure)
                measuring = engine._measuring
                if measuring:
                    if loops == 0:
                        engine._first_measured[index] = issued - 1
                    loops += 1
                    engine.result.loops_completed[index] = loops
                    engine._issued[index] = issued
            if failure is not None and engine.target.is_disconnect(failure):
                reconnect = asyncio.run_coroutine_threadsafe(
                    engine._reconnect(index, session), loop
                )
                with contextlib.suppress(Exception):
                    reconnect.result()
            if measuring and loops_limit is not None and loops >= loops_limit:
                return
            if think is not None and think.max_ms > 0 and loops % think.every_n_loops == 0:
                self._sleep(rng.uniform(think.min_ms, think.max_ms) / 1000)


def _settle(done: asyncio.Future[None], exc: BaseException | None) -> None:
    if done.done():
        return
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)


def choose_runner(wanted: str, sessions: list[Any]) -> str:
    """``load.session_runner`` (auto, threads, loop) for these sessions: threads when every
    one offers blocking calls and the scenario does not ask for the loop."""
    threads = wanted != "loop" and bool(sessions) and all(map(offers_blocking_calls, sessions))
    if wanted == "threads" and not threads:
        log.warning(
            "load.session_runner threads: this workload and target have no blocking "
            "sessions; running them on the event loop"
        )
    return RUNNER_THREADS if threads else RUNNER_LOOP


def offers_blocking_calls(session: Any) -> bool:
    """Whether a workload session can run on its own thread: it has ``next_call`` and, where
    that depends on its connection (a SQL session on asyncpg has none), says it is ready."""
    return callable(getattr(session, "next_call", None)) and bool(
        getattr(session, "blocking_ready", True)
    )


__all__ = [
    "RUNNER_DESCRIPTIONS",
    "RUNNER_LOOP",
    "RUNNER_THREADS",
    "ThreadRecorder",
    "ThreadedSessions",
    "choose_runner",
    "offers_blocking_calls",
]
