"""The session engine: one asyncio loop, every session a coroutine.

The engine owns the loop-side life of a run: open the target, load and verify the workload's
data, connect every session (they all connect before any starts), then run the phases —
warm-up (measured but excluded from results) and one or more measured stages — while a ticker
rotates the latency intervals and samples the collectors on the same clock.

Pacing:

* closed loop: a session starts its next transaction when the last one ends, plus optional
  think time;
* open loop: transactions are scheduled at ``rate_ops_s`` over the active sessions, and latency
  is measured from each transaction's *intended* start, so a stall shows in the percentiles
  instead of silently lowering the offered load (no coordinated omission).

The engine imports nothing from Locust or gevent. A gevent process hosts it by running
:func:`run_on_native_thread` on a thread it obtained with gevent's ``get_original``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sim.config.scenario import Load
from sim.core.connecting import connect_all
from sim.core.coroutine_sessions import CoroutineSessions
from sim.core.events import EngineEvents
from sim.core.loading import LoadReports, load_and_verify
from sim.core.loops import all_done_future
from sim.core.metrics import IntervalRecorder
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED, OUTCOME_INTERRUPTED, RunResult
from sim.core.sampler import CollectorSampler
from sim.core.session_choice import RUNNER_LOOP, RUNNER_NATIVE, choose_runner
from sim.core.session_native import run_native, run_native_group
from sim.core.session_threads import ThreadedSessions
from sim.core.stages import PHASE_CALIBRATE, Stage, plan_stages
from sim.core.ticker import IntervalTicker
from sim.errors import SimError
from sim.protocols import Collector, Connection, EngineContext, Target, Workload
from sim.secrets import redact_known

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_STOP_GRACE_S = 10.0
POOL_DRAIN_S = 5.0  # how long the end of a run waits for driver calls still on the pool
EXTRA_POOL_THREADS = 4  # collectors and bundle writes beside one thread per session


class _StopRequested(Exception):
    pass


class Engine(CoroutineSessions, IntervalTicker):
    """Runs one workload against one target with one load plan."""

    #: Awaited when every session has connected, before any starts (sim.locust.host: barrier).
    before_sessions: Callable[[], Awaitable[None]] | None = None

    def __init__(
        self,
        workload: Workload,
        target: Target,
        load: Load,
        collectors: list[Collector] | None = None,
        *,
        collector_factory: Callable[[Target], list[Collector]] | None = None,
        interval_s: float = 1.0,
        collector_timeout_s: float = 2.0,
        stop_grace_s: float = DEFAULT_STOP_GRACE_S,
        skip_load: bool = False,
        verify_only: bool = False,
        load_only: bool = False,
        clock: Callable[[], float] = time.perf_counter,  # for phases, ticks and collectors
        before_load: Callable[[Target], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """``skip_load``: use the data as it is (no build, no verification); ``verify_only``:
        another process loaded it, verify only; ``load_only``: load and verify, then end the
        run without a session (a distributed run's elected loader). ``before_load``: run on
        the opened target before the data is built or checked; its facts go to ``result.cache``."""
        self.before_load = before_load
        #: Called when the calibration stage ends with the stages; returns them with rates
        #: (sim.run.calibration). Raising a SimError there fails the run.
        self.on_calibrated: Callable[[list[Stage]], list[Stage]] | None = None
        self.workload = workload
        self.target = target
        self.load = load
        self.collectors = list(collectors or [])
        # Collectors that need the opened target (its temporary path) are built after open().
        self.collector_factory = collector_factory
        self.interval_s = interval_s
        self._sampler = CollectorSampler(
            self.collectors, collector_timeout_s, self._collector_failed
        )
        self._publishing = asyncio.Lock()
        self.stop_grace_s = stop_grace_s
        self.skip_load = skip_load
        self.verify_only = verify_only
        self.load_only = load_only
        self.clock = clock
        self.events = EngineEvents()
        self.recorder = IntervalRecorder()
        self.stages = plan_stages(load, workload.default_sessions())
        self.max_sessions = max(stage.sessions for stage in self.stages)
        self.result = RunResult(sessions=self.max_sessions)
        self._init_run_state()

    def _init_run_state(self) -> None:
        """The state the run's parts share: stopping, the current stage, intervals, sessions."""
        self.context: EngineContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._stopping = False
        # Set once every stage has run its full duration: the measurement is whole, and a
        # signal from then on only hurries the teardown; it does not make the run interrupted.
        self._measured_whole = False
        self._pending_stop: str | None = None
        # Set by the stage runner; read by sessions on every transaction.
        self._stage: Stage = self.stages[0]
        self._stage_epoch = 0
        self._rate_epoch = 0  # bumped by set_rate (a rate changed within a stage)
        self._paces: list[Any] = []  # coroutine sessions' open-loop schedules (set_rate)
        self._stage_started = 0.0
        self._stage_started_ns = 0
        #: The current stage's due end on the run clock (None: no duration): the schedule's,
        #: not its start plus its duration — a boundary starts the next stage ms late, and a
        #: day shape's 120 steps drifted by their sum (3 ms a step at load average 12).
        self._stage_due: float | None = None
        self._measuring = False
        self._interval_start = 0.0
        self._interval_seq = 0  # intervals closed so far: the next one's number
        self._tick = 0  # whole intervals of the run clock reached by the ticker
        self._ticker_done = False
        self._tick_sleep: asyncio.Future[None] | None = None
        self._issued: list[int] = []
        self._connections: list[Connection] = []
        self._stage_ops: list[int] = []
        weights = self.workload.session_weights(self.max_sessions)
        if weights is not None and (len(weights) < self.max_sessions or min(weights) <= 0):
            raise ValueError(
                f"{self.workload.name}: session_weights must give each session a share > 0"
            )
        self._weights = list(weights or [1.0] * self.max_sessions)
        self._first_measured: list[int] = []
        self._threaded: ThreadedSessions | None = None
        self._active_changed: asyncio.Event | None = None
        self._t0 = 0.0

    # ------------------------------------------------------------------ control

    def request_stop(self, reason: str, *, early: bool = False) -> None:
        """Stop gracefully (any thread; a second call while stopping aborts). ``early``, a
        person's Stop once measuring: ``completed`` + ``stopped_early``; else ``interrupted``."""
        loop = self._loop
        if loop is None:
            self._pending_stop = reason  # before run(): honoured as soon as it starts
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(self._stop_now, reason, early)

    def _stop_now(self, reason: str, early: bool = False) -> None:
        if self._stop_event is None:
            return
        if self._stop_event.is_set():
            self.stop_grace_s = 0.0  # second request: do not wait for in-flight transactions
            return
        if self._measured_whole:
            self.stop_grace_s = 0.0
            self._stop_event.set()
            return
        early = early and self._measuring  # a later failure still makes it failed
        self.result.outcome = OUTCOME_COMPLETED if early else OUTCOME_INTERRUPTED
        self.result.reason, self.result.stopped_early = reason, early
        self._stop_event.set()

    def _set_state(self, state: str, detail: str = "") -> None:
        if state not in ("stopping", "finished"):
            self.result.last_state = state  # where the run was when it ended
        self.events.state.fire(state=state, detail=detail)

    async def _unless_stopped(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless a stop is requested first (then cancel it)."""
        assert self._stop_event is not None
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise _StopRequested

    # ------------------------------------------------------------------ the run

    async def run(self) -> RunResult:
        """Run to the end (or until stopped); always returns a result, never raises SimError."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._active_changed = asyncio.Event()
        if self._pending_stop is not None:
            self._stop_now(self._pending_stop)
        executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_sessions + EXTRA_POOL_THREADS, thread_name_prefix="dbsim-io"
        )
        self.context = EngineContext(self._loop, executor, sessions=self.max_sessions)
        self._connections = []
        target_open = False
        try:
            self._set_state("setup", self.target.kind)
            await self._unless_stopped(self.target.open(self.context))
            target_open = True
            self._target_opened()
            await self._prepare_data()
            if not self.load_only:
                self._set_state("connecting", f"{self.max_sessions} sessions")
                self._connections = await self._unless_stopped(
                    connect_all(self.target, self.max_sessions)
                )
                if self.before_sessions is not None:
                    await self._unless_stopped(self.before_sessions())
                await self._run_sessions(self._connections)
            if self.result.outcome != OUTCOME_INTERRUPTED:
                self.result.outcome = OUTCOME_COMPLETED
        except _StopRequested:
            pass  # outcome and reason were set by _stop_now
        except SimError as exc:
            self.result.outcome = OUTCOME_FAILED
            self.result.error = str(exc)
            self.result.error_exit_code = exc.exit_code
            self.result.reason = f"{self.result.last_state}: {exc}"
        except Exception as exc:  # a bug or an untranslated driver error: still finish the bundle
            log.exception("run failed")
            self.result.outcome = OUTCOME_FAILED
            # Untranslated: the driver's own text, which may echo its connection string.
            self.result.error = redact_known(f"{type(exc).__name__}: {exc}")
            self.result.reason = f"{self.result.last_state}: unexpected {type(exc).__name__}"
        finally:
            await self._tear_down(executor, target_open=target_open)
        return self.result

    def _target_opened(self) -> None:
        """Describe the open target and build the collectors that needed it open."""
        self.result.target = self.target.describe()
        if self.collector_factory is not None:
            try:
                self.collectors.extend(self.collector_factory(self.target))
            except SimError as exc:  # never fatal: run without that storage view
                self.result.collector_errors["setup"] = 1
                self.events.collector_error.fire(source="setup", message=str(exc))

    async def _prepare_data(self) -> None:
        """Load and verify the workload's data, or with --skip-load check it is there."""
        if self.before_load is not None:
            self.result.cache = await self._unless_stopped(self.before_load(self.target))
        if not self.skip_load:
            # Under the target's load lock (sim.core.loading); filled in place, so a failed
            # verification still records what the load did.
            reports = LoadReports(self.result.load_report, self.result.verify_report)
            await self._unless_stopped(
                load_and_verify(
                    self.workload,
                    self.target,
                    self._progress,
                    build=not self.verify_only,
                    on_state=self._set_state,
                    reports=reports,
                )
            )
        else:
            # --skip-load still checks, cheaply and before any session connects, that the
            # data is there and dbsim's (MissingDataError / OwnershipError: exit 2).
            self._set_state("checking", self.workload.name)
            self.result.load_report.update(await self._unless_stopped(self.workload.check_loaded()))

    async def _tear_down(
        self, executor: concurrent.futures.ThreadPoolExecutor, *, target_open: bool
    ) -> None:
        """However the run ended: close the sessions, collectors, pool and target, and say so."""
        self._set_state("stopping", self.result.outcome)
        await asyncio.gather(*(c.close() for c in self._connections), return_exceptions=True)
        await self._sampler.stop()
        await self._drain_pool(executor)  # before the target closes: see there
        if target_open:
            try:
                self.result.target = self.target.describe()
                await self.target.close()
            except Exception as exc:
                log.warning("target did not close cleanly: %s", exc)
        self._set_state("finished", self.result.outcome)
        self.events.finished.fire(result=self.result)

    async def _drain_pool(self, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        """Drop the pool's queued calls and wait, bounded, for the running ones to return.

        A stop cancels coroutines, not the driver calls they await: those run on in the pool's
        threads and would race with the target's close (a ``sqlite3.connect()`` abandoned by a
        stop while sessions connect re-creates ``dbsim.sqlite`` in the temporary directory
        the SQLite target is removing; tests/e2e/test_signal_sweep.py). Bounded because a call
        stuck on a dead server must not turn a stop into a hang; the target is closed anyway.
        """
        executor.shutdown(wait=False, cancel_futures=True)
        try:
            await asyncio.wait_for(asyncio.to_thread(executor.shutdown, wait=True), POOL_DRAIN_S)
        except TimeoutError:
            log.warning("driver calls still running %.0f s after the run ended", POOL_DRAIN_S)

    def _progress(self, what: str, done: int, total: int) -> None:
        self.events.progress.fire(what=what, done=done, total=total)

    async def _run_sessions(self, connections: list[Connection]) -> None:
        assert self._stop_event is not None
        seed = self.load.seed if self.load.seed is not None else random.randrange(2**31)
        sessions = [
            self.workload.new_session(i, conn, seed + i) for i, conn in enumerate(connections)
        ]
        self.result.loops_completed = [0] * len(sessions)
        self._issued = [0] * len(sessions)
        self._first_measured = [-1] * len(sessions)
        tasks = self._start_sessions(sessions)  # session threads: connect, then wait
        ticker: asyncio.Task[None] | None = None
        try:
            if self._threaded is not None:  # still "connecting": the native sessions connect
                await self._unless_stopped(self._threaded.connected())
            self.result.collectors.extend(await self._sampler.start(0.0))
            self._t0 = self.clock()
            self._interval_start = self._t0
            self.result.sessions_started_wall = time.time()
            self._sampler.read_at(0.0)  # the baselines of local files, at time 0 itself
            self._enter_stage(self.stages[0], self._t0)
            # All sessions were connected above; they start together now (the SLOB barrier).
            if self._threaded is None:
                tasks = self._start_coroutines(sessions)
            else:
                self._threaded.go()
            ticker = asyncio.create_task(self._ticker(), name="ticker")
            await self._run_stages(tasks)
        finally:
            await self._end_sessions(tasks)
            if ticker is not None:  # the stage clock ran
                await self._end_stages(ticker)

    async def _end_sessions(self, tasks: list[asyncio.Task[None]]) -> None:
        """Stop the sessions and wait for them, up to the stop's grace (threads: bounded)."""
        self._stopping = True
        self._active_changed_set()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.stop_grace_s or None)
            if self.stop_grace_s == 0:
                pending = {t for t in tasks if not t.done()}
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._threaded is not None and not await self._threaded.join(POOL_DRAIN_S):
            log.warning("session calls still running %.0f s after the stop", POOL_DRAIN_S)

    async def _end_stages(self, ticker: asyncio.Task[None]) -> None:
        """Stop the ticker and hand over the last interval and each session's measured ops."""
        self._ticker_done = True
        if self._tick_sleep is not None:
            self._tick_sleep.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        self.result.op_ranges = [
            (first, end) if first >= 0 else (0, 0)
            for first, end in zip(self._first_measured, self._issued, strict=True)
        ]
        closed = self._close_interval(stage_ends=True)
        if closed is not None:
            await self._publish(closed)

    def _enter_stage(self, stage: Stage, now: float, due_start: float | None = None) -> None:
        """Enter ``stage`` at ``now``; its end is due ``duration_s`` after ``due_start``."""
        self._stage = stage
        self._stage_epoch += 1
        self._stage_started = now
        start = now if due_start is None else due_start
        self._stage_due = None if stage.duration_s is None else start + stage.duration_s
        self._stage_started_ns = time.perf_counter_ns()
        # A fresh count per stage (the stage log keeps the previous list).
        self._stage_ops = [0] * len(self._weights)
        self._measuring = stage.phase == "measure"
        entry: dict[str, Any] = {
            "t": round(now - self._t0, 3),
            "phase": stage.phase,
            "step": stage.step,
            "sessions": stage.sessions,
            "rate_ops_s": stage.rate_ops_s,
        }
        if stage.rate_iops is not None:
            entry["rate_iops"] = stage.rate_iops
        # Listeners may act on the stage (set the lab's ceilings) and note what they did.
        self.events.stage.fire(stage=stage, log=entry)
        self.result.stage_log.append(entry)
        self._set_state(stage.phase, "" if stage.step is None else f"step {stage.step + 1}")
        self._active_changed_set()

    def _active_changed_set(self) -> None:
        assert self._active_changed is not None
        self._active_changed.set()
        self._active_changed = asyncio.Event()
        if self._threaded is not None:
            self._threaded.wake()

    def _sessions_held(self) -> contextlib.AbstractContextManager[None]:
        """Session threads record nothing inside this (a stage boundary): see
        sim.core.session_threads. Coroutine sessions need nothing: they run on this loop."""
        return self._threaded.held() if self._threaded is not None else contextlib.nullcontext()

    def _start_sessions(self, sessions: list[Any]) -> list[asyncio.Task[None]]:
        """A task per session on a thread of its own, when every session makes blocking calls and
        ``load.session_runner`` allows it: started now, each connects its native program and
        waits for the stage clock (ThreadedSessions.go). Else none yet: coroutines, made then."""
        runner, self.result.session_runner_why = choose_runner(self.load, sessions, self.target)
        self.result.session_runner = runner
        if runner == RUNNER_LOOP:
            return []
        assert self._loop is not None
        native = run_native if runner == RUNNER_NATIVE else None
        group = run_native_group if runner == RUNNER_NATIVE else None
        self._threaded = ThreadedSessions(self, sessions, native=native, native_group=group)
        self.recorder.attach(self._threaded.recorders)
        return self._threaded.start(self._loop)

    async def _run_stages(self, tasks: list[asyncio.Task[None]]) -> None:
        assert self._stop_event is not None
        # Resolves when every session returned (loops_per_session).
        all_done = all_done_future(tasks)
        stop = asyncio.ensure_future(self._stop_event.wait())
        try:
            for index in range(len(self.stages)):
                # The schedule goes on from the previous stage's due end; a calibration
                # takes what it takes, so the stages after it are scheduled from their start.
                due_start = self._stage_due
                if index > 0 and self.stages[index - 1].phase == PHASE_CALIBRATE:
                    await self._calibrated()  # the stages asked in IOPS get their ops/s
                    due_start = None
                stage = self.stages[index]
                if index > 0:
                    # A stage boundary closes the interval early, and the next stage starts
                    # before anything else can run.
                    with self._sessions_held():
                        closed = self._close_interval(stage_ends=True)
                        self._enter_stage(stage, self.clock(), due_start)
                    if closed is not None:
                        await self._publish(closed, sample=not self._is_fragment(closed))
                waiters: set[asyncio.Future[Any]] = {all_done, stop}
                if self._stage_due is not None:
                    remaining = self._stage_due - self.clock()
                    waiters.add(asyncio.ensure_future(asyncio.sleep(max(remaining, 0))))
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for fut in waiters - {all_done, stop}:
                    fut.cancel()
                elapsed = self.clock() - self._stage_started
                # Per-session completions in this stage: a workload's validity rule (EDA: every
                # process reaches 75 % of its requested rate) is judged from these.
                self.result.stage_log[-1]["duration_s"] = round(elapsed, 3)
                self.result.stage_log[-1]["session_ops"] = self._stage_ops[: stage.sessions]
                if stage.phase == "warmup":
                    self.result.warmup_s += elapsed
                elif stage.phase == "measure":  # a calibration's time is neither
                    self.result.measured_s += elapsed
                if stop.done() or all_done.done():
                    return
            self._measured_whole = True
        finally:
            stop.cancel()

    async def _calibrated(self) -> None:
        """The calibration stage's time is up: publish its last whole interval (its sessions
        run on, closed loop, until the next stage starts) and let ``on_calibrated`` turn the
        device IOPS asked into ops/s rates; a calibration that cannot (raises) ends the run."""
        closed = self._close_interval()
        if closed is not None:
            await self._publish(closed)
        async with self._publishing:  # an interval the ticker is still publishing
            pass
        if self.on_calibrated is not None:
            self.stages = self.on_calibrated(self.stages)

    # ------------------------------------------------------------------ sessions

    @property
    def started_collectors(self) -> list[Collector]:
        """The collectors that started (and so sampled) in this run."""
        return self._sampler.started

    def _collector_failed(self, source: str, message: str) -> None:
        """Count a collector's failure (its message already masked by the sampler)."""
        self.result.collector_errors[source] = self.result.collector_errors.get(source, 0) + 1
        self.events.collector_error.fire(source=source, message=message)
