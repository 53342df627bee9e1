"""``EngineHost``: dbsim's engine inside one Locust process (a LocalRunner or a WorkerRunner).

One engine per test start per process, with as many sessions as Locust placed users on this
process. The engine runs on its own asyncio loop on a native OS thread
(:func:`sim.core.loops.run_on_native_thread` with gevent's original ``start_new_thread``), so its
sessions never wait for the gevent hub and the hub never waits for them. Everything that
touches files — preparing the run (bundle directory, scenario.yaml with fsync) and finishing
it (summary, histograms, report.html) — runs off the hub too: preparation in gevent's native
thread pool, finishing on the engine's thread after its loop has closed.

Crossing back to the hub: the engine's ``interval`` listener (engine thread) turns each closed
interval into a packet (:mod:`sim.locust.packets`) and appends it to a deque — an append
needs no lock and cannot block either thread. A greenlet drains the deque a few times a
second, feeds Locust's statistics with the measured intervals, keeps the latest storage
samples for the web UI, and hands packets and, at the end, the final result to the callbacks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from gevent.monkey import get_original
from locust.env import Environment

from sim import registry
from sim.config.scenario import ScenarioBase
from sim.core.engine import Engine
from sim.core.loops import run_on_native_thread
from sim.core.metrics import Interval
from sim.core.progress import ProgressMeter
from sim.errors import SimError
from sim.locust.packets import (
    Packet,
    final_report,
    interval_packet,
    packet_batches,
    packet_samples,
    packet_wall,
)
from sim.locust.stats import feed
from sim.protocols import Collector, Sample
from sim.registry import COLLECTOR_SCOPE_SHARED
from sim.run.finish import finish_summary
from sim.run.preload import run_machinery
from sim.run.runner import (
    PreparedRun,
    attach_lab,
    build_collectors,
    build_target,
    build_workload,
    prepare_run,
)
from sim.secrets import redact_known

log = logging.getLogger(__name__)

PUMP_INTERVAL_S = 0.2  # how often the hub side drains the engine's packets
ROLE_LOCAL = "local"  # this process writes the bundle (prepare_run / finish_summary)
ROLE_WORKER = "worker"  # this process ships packets to the master, which writes the bundle

PacketListener = Callable[[Packet], None]
#: ``(engine, scenario, bundle)``: an engine was built for a run (native thread; add listeners
#: to its events here, e.g. the Prometheus exporter's); ``bundle`` is None on a worker.
EngineListener = Callable[[Engine, ScenarioBase, Path | None], None]
FinalListener = Callable[[dict[str, Any]], None]


def build_engine(
    scenario: ScenarioBase,
    *,
    skip_load: bool = False,
    verify_only: bool = False,
    load_only: bool = False,
    shared_collectors: bool = True,
) -> Engine:
    """An engine for ``scenario`` without a bundle (a worker's): what ``prepare_run`` builds,
    minus the bundle directory, which is the master's. ``load_only``: the elected loader's
    job (sim.locust.loading), which samples no collector; ``shared_collectors`` False: leave
    out the collectors of a system every worker reaches (scope ``shared``: the array's
    counters, a database server's statistics), which the master has one worker sample."""
    # Off the hub (gevent's thread pool), before any session (sim.run.preload): what a worker's
    # start left out, SQLAlchemy and this target's dialect, if the workload needs SQL.
    run_machinery(scenario)
    target = build_target(scenario)
    workload = build_workload(scenario, target)
    settings = scenario.collectors
    prefix = getattr(workload.parameters, "table_prefix", None)
    options = {"table_prefix": prefix} if prefix else {}
    engine = Engine(
        workload,
        target,
        scenario.load,
        collector_factory=None
        if load_only
        else lambda t: _own_collectors(build_collectors(settings, t, options), shared_collectors),
        interval_s=settings.interval_s,
        collector_timeout_s=settings.timeout_s,
        skip_load=skip_load,
        verify_only=verify_only,
        load_only=load_only,
    )
    if load_only:
        return engine
    if any(stage.lab for stage in engine.stages):
        attach_lab(engine)
    return engine


def _own_collectors(collectors: list[Collector], shared: bool) -> list[Collector]:
    """``collectors``, without those of shared scope unless this worker samples them."""
    if shared:
        return collectors
    return [c for c in collectors if not _is_shared(c.source)]


def _is_shared(source: str) -> bool:
    entry = registry.collector(source)
    return entry is not None and entry.scope == COLLECTOR_SCOPE_SHARED


class EngineHost:
    """Runs one engine at a time for a Locust process and reports back on the hub."""

    def __init__(
        self,
        environment: Environment,
        *,
        role: str,
        on_packet: PacketListener | None = None,
        on_final: FinalListener | None = None,
    ) -> None:
        if role not in (ROLE_LOCAL, ROLE_WORKER):
            raise ValueError(f"role must be {ROLE_LOCAL!r} or {ROLE_WORKER!r}")
        self.environment = environment
        self.role = role
        self.on_packet = on_packet
        self.on_final = on_final
        self.run_id: str | None = None
        #: "idle", "preparing", then the engine's states, then "finished".
        self.state = "idle"
        self.engine: Engine | None = None
        self.prepared: PreparedRun | None = None
        self.bundle: Path | None = None
        self.latest_samples: list[Sample] = []
        self.final: dict[str, Any] | None = None
        self.packets = 0
        self.fed_operations = 0
        self.engine_listeners: list[EngineListener] = []
        #: The load's progress (rate, ETA) and when each state was first entered (monotonic):
        #: the web UI's phase indicator (sim.live.phase).
        self.meter = ProgressMeter()
        self.entered: dict[str, float] = {}
        self._queue: collections.deque[Packet] = collections.deque()
        self._done: dict[str, Any] | None = None
        self._stop_reason: str | None = None
        self._greenlet: gevent.Greenlet | None = None
        #: The start barrier of a distributed run (sim.locust.master): told on the hub when
        #: this run's sessions have connected and wait; :meth:`release` lets them start.
        self.on_ready: Callable[[], None] | None = None
        self._barrier = False
        self._ready = False  # set on the engine's thread, told by the pump on the hub
        self._release: Callable[[], None] | None = None

    @property
    def active(self) -> bool:
        """Whether a run is being prepared or is running (a new one cannot start)."""
        return self._greenlet is not None and not self._greenlet.dead

    def start(
        self,
        scenario: ScenarioBase,
        run_id: str,
        *,
        skip_load: bool = False,
        verify_only: bool = False,
        load_only: bool = False,
        shared_collectors: bool = True,
        barrier: bool = False,
    ) -> None:
        """Prepare and start a run (returns at once; the work happens in a greenlet).
        ``skip_load``: use the data as loaded (``dbsim run --skip-load``); ``verify_only``:
        another worker loaded it; ``load_only``: load and verify it for the others (a worker
        only, see build_engine); ``shared_collectors`` False: this worker leaves the
        shared-scope collectors to the one the master elected (a worker only); ``barrier``:
        once connected, the sessions wait for :meth:`release` (the master's go) to start."""
        if self.active:
            raise RuntimeError("a run is already active in this process")
        self.run_id = run_id
        self.state = "preparing"
        self.meter, self.entered = ProgressMeter(), {"preparing": time.monotonic()}
        self.engine = self.prepared = self.bundle = self.final = self._done = None
        self.latest_samples = []
        self.packets = self.fed_operations = 0
        self._queue.clear()
        self._stop_reason = None
        self._barrier, self._ready, self._release = barrier, False, None
        modes = {
            "skip_load": skip_load,
            "verify_only": verify_only,
            "load_only": load_only,
            "shared_collectors": shared_collectors,
        }
        self._greenlet = gevent.spawn(self._run, scenario, modes)

    def stop(self, reason: str, *, early: bool = False) -> None:
        """Ask the run to stop gracefully (safe at any moment, even before it started);
        ``early``: a person's Stop (Engine.request_stop)."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self.engine is not None:
            self.engine.request_stop(reason, early=early)

    def release(self) -> None:
        """The master's go (hub): the sessions waiting at the start barrier start."""
        release = self._release
        if release is not None:
            with contextlib.suppress(RuntimeError):  # the run ended meanwhile: its loop closed
                release()

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Block this greenlet until the run has finished; returns the final result."""
        if self._greenlet is not None:
            self._greenlet.join(timeout)
        return self.final

    # ------------------------------------------------------------------ hub side

    def _run(self, scenario: ScenarioBase, modes: dict[str, bool]) -> None:
        pool = gevent.get_hub().threadpool
        try:
            engine = pool.apply(self._prepare, (scenario, modes))
        except SimError as exc:
            self._finish_failed(str(exc))
            return
        except Exception as exc:  # a bug while preparing: report it, never kill the runner
            log.exception("preparing the run failed")
            self._finish_failed(redact_known(f"unexpected {type(exc).__name__}: {exc}"))
            return
        self.engine = engine
        if self._stop_reason is not None:
            engine.request_stop(self._stop_reason)  # honoured as soon as the loop starts
        run_on_native_thread(
            engine,
            start_new_thread=get_original("_thread", "start_new_thread"),
            on_done=self._on_done,
        )
        while True:
            self._drain()
            if self._ready:
                self._ready = False
                if self.on_ready is not None:
                    self.on_ready()
            if self._done is not None and not self._queue:
                break
            gevent.sleep(PUMP_INTERVAL_S)
        self._deliver(self._done)

    def _finish_failed(self, message: str) -> None:
        log.error("run %s could not start: %s", self.run_id, message)
        self._deliver({"outcome": "failed", "status": "failed", "error": message, "packets": 0})

    def _deliver(self, final: dict[str, Any]) -> None:
        self.final = final
        self.entered.setdefault("finished", time.monotonic())
        self.state = "finished"
        if self.on_final is not None:
            try:
                self.on_final(final)
            except Exception:
                log.exception("final-result listener failed")

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            packet = queue.popleft()
            self.latest_samples = packet_samples(packet)
            try:
                batches = packet_batches(packet)
                if batches:
                    method = self.engine.workload.name if self.engine is not None else "dbsim"
                    self.fed_operations += feed(
                        self.environment.stats, method, batches, *packet_wall(packet)
                    )
            except Exception:  # Locust's table misses it; the packet still goes on (an
                # exception here ended this pump: nothing more shipped, the run never ended)
                log.exception("feeding Locust's statistics failed (interval %s)", packet.get("i"))
            if self.on_packet is not None:
                try:
                    self.on_packet(packet)
                except Exception:
                    log.exception("packet listener failed")

    # ------------------------------------------------------------------ native threads

    def _prepare(self, scenario: ScenarioBase, modes: dict[str, bool]) -> Engine:
        """Build the engine (gevent's thread pool: bundle creation writes and fsyncs)."""
        if self.role == ROLE_LOCAL:
            self.prepared = prepare_run(scenario, skip_load=modes["skip_load"])
            self.bundle = self.prepared.bundle.path
            engine = self.prepared.engine
        else:
            engine = build_engine(scenario, **modes)
        if self._barrier:
            engine.before_sessions = self._wait_for_go
        engine.events.state.add_listener(self._on_state)
        engine.events.interval.add_listener(self._on_interval)
        engine.events.progress.add_listener(self._on_progress)
        for listener in self.engine_listeners:
            listener(engine, scenario, self.bundle if self.role == ROLE_LOCAL else None)
        # The run's own modules are imported now (a worker's SQLAlchemy: hundreds of modules);
        # their files are checked here, off the hub.
        warm_inspect_caches()
        return engine

    async def _wait_for_go(self) -> None:
        """Engine thread: every session has connected; they start on :meth:`release`, once
        every worker of the run is as far (so no worker checks the data while another's
        sessions change it: an EDA session's rewrite leaves a file briefly empty)."""
        loop = asyncio.get_running_loop()
        go: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not go.done():
                go.set_result(None)

        def release() -> None:  # from the hub
            loop.call_soon_threadsafe(resolve)

        self._release = release
        self._ready = True
        try:
            await go
        finally:
            self._release = None

    def _on_state(self, state: str, detail: str = "") -> None:
        self.entered.setdefault(state, time.monotonic())
        self.state = state  # engine thread; a plain attribute store is atomic

    def _on_progress(self, what: str, done: int, total: int) -> None:
        self.meter.update(what, done, total)

    def _on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        engine = self.engine
        wall0 = (
            engine.result.sessions_started_wall
            if engine is not None and engine.result.sessions_started_wall
            else time.time() - interval.t_end
        )
        packet = interval_packet(
            interval, samples, wall0=wall0, with_histograms=self.role == ROLE_WORKER
        )
        self.packets += 1
        self._queue.append(packet)

    def _on_done(self) -> None:
        """Engine thread, after the loop has closed: finish the bundle or the report."""
        engine = self.engine
        assert engine is not None
        try:
            if self.role == ROLE_LOCAL:
                assert self.prepared is not None
                summary = finish_summary(self.prepared)
                summary["bundle"] = str(self.prepared.bundle.path)
                final = summary
            else:
                final = final_report(engine, self.packets)
        except Exception as exc:  # the bundle writer failed: say so rather than hang
            log.exception("finishing the run failed")
            final = {"outcome": "failed", "status": "failed", "error": str(exc), "packets": 0}
        final.setdefault("run_id", self.run_id)
        self._done = final


def warm_inspect_caches() -> None:
    """Fill ``inspect``'s module-file cache now, while no session runs.

    Locust's ``Runner.stop`` calls ``inspect.stack()`` to log its caller; the first such call
    checks the source file of every loaded module (a syscall each, each giving up the GIL). Made
    for the first time during a run, those hand-offs queue behind the session threads that hold
    the GIL, and Stop took tens of seconds with four SQLite sessions. Made here, later calls only
    look at modules imported since.
    """
    inspect.stack()
