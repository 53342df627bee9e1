"""``MasterController``: the Locust master's side of dbsim (``--workers N``, ``--distributed``).

When Locust has placed every user, the master has the run's data loaded once — by elected
workers, one after another (:class:`~sim.locust.loading.LoadPhase`) — then sends each worker
that got users a ``dbsim_start`` message — the scenario, validated here, the total user count
and ``verify_only`` when the data was loaded for it — and merges what comes back into one
bundle (:class:`~sim.locust.merge.RunMerger`). With more than one worker the start has a
barrier: each worker loads or checks its data and connects its sessions, answers
``dbsim_ready`` and waits; the master sends ``dbsim_go`` to all once every worker of the run
has answered (or has ended, or was lost), so no worker's sessions run while another worker still
checks the data (an EDA session rewrites a file by truncating it: a verify that met one failed
the run, "0 bytes, expected 16384"). Locust's stop first sends ``dbsim_stop`` to the
workers' engines and waits (bounded) for the merged bundle; a run that ends by itself stops
Locust, and so does a worker's failure (the others would measure a run already failed). See
:mod:`sim.locust.roles` for the other roles.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_RUNNING

from sim.config.scenario import ScenarioBase
from sim.core.loading import elect_loaders
from sim.core.metrics import OpStats
from sim.errors import SimError
from sim.live.clock import (
    FIRST_PROBE_GAP_S,
    FIRST_PROBES,
    MSG_CLOCK,
    MSG_CLOCK_REPLY,
    PROBE_EVERY_S,
    probe_from_reply,
)
from sim.locust.loading import LoadPhase
from sim.locust.merge import RunMerger
from sim.locust.roles import (
    MSG_FINAL,
    MSG_GO,
    MSG_LOADED,
    MSG_READY,
    MSG_START,
    MSG_STOP,
    REPORT_KEY,
    STOP_REASON,
    STOP_WAIT_S,
    Controller,
    RunFinished,
    stop_runner,
)
from sim.protocols import Sample
from sim.run.runner import build_target

log = logging.getLogger(__name__)

#: How long the start waits for the workers' reports of the users Locust placed on them.
REPORTS_WAIT_S = 60.0


class MasterController(Controller):
    """A MasterRunner: starts the workers' engines and merges their intervals."""

    def __init__(
        self,
        environment: Environment,
        scenario: Callable[[], ScenarioBase],
        on_finished: RunFinished | None = None,
        *,
        skip_load: bool = False,
    ) -> None:
        self.environment = environment
        self.skip_load = skip_load
        self.scenario = scenario
        self.on_finished = on_finished
        self.notes = []
        #: Why the next stop happens (the web UI's Stop, or what ``run --workers`` was sent).
        self.stop_reason, self.stop_early = STOP_REASON, True
        self.merger: RunMerger | None = None
        self.load_phase: LoadPhase | None = None
        self._awaiting: gevent.Greenlet | None = None
        #: The start barrier of the current run: the workers whose sessions wait, and whether
        #: the go was sent.
        self._ready: set[str] = set()
        self._gone = False
        #: Told each run's merger as it starts (the master's /metrics, sim.locust.exposition).
        self.run_listeners: list[Callable[[RunMerger], None]] = []
        runner = environment.runner
        assert runner is not None
        runner.register_message(MSG_FINAL, self._final)
        runner.register_message(MSG_LOADED, self._loaded)
        runner.register_message(MSG_READY, self._worker_ready)
        runner.register_message(MSG_CLOCK_REPLY, self._clock_reply)
        events = environment.events
        events.spawning_complete.add_listener(self._spawned)
        events.worker_report.add_listener(self._report)
        events.heartbeat_sent.add_listener(self._heartbeat)
        events.test_stopping.add_listener(self._stopping)

    @property
    def running(self) -> bool:
        return self.merger is not None and not self.merger.finished

    def _placed(self) -> dict[str, int]:
        """Users per worker, as the workers reported them."""
        runner = self.environment.runner
        assert runner is not None
        return {
            client.id: sum(client.user_classes_count.values())
            for client in runner.clients.values()  # type: ignore[attr-defined]
        }

    def _spawned(self, user_count: int) -> None:
        if self.running:
            self.notes.append(
                f"users changed to {user_count} during the run: each worker keeps its sessions "
                "until the next start"
            )
            return
        if sum(self._placed().values()) < user_count:
            # Locust fires this after a bounded wait for the workers' reports of their users;
            # on a loaded host they come later (seen: "no worker has users", and a run that
            # never started). Wait for them, bounded, rather than start without them.
            if self._awaiting is None or self._awaiting.dead:
                self._awaiting = gevent.spawn(self._when_reported, user_count)
            return
        self._begin()

    def _when_reported(self, user_count: int) -> None:
        deadline = time.monotonic() + REPORTS_WAIT_S
        while sum(self._placed().values()) < user_count and time.monotonic() < deadline:
            gevent.sleep(0.2)
        runner = self.environment.runner
        if runner is not None and runner.state == STATE_RUNNING and not self.running:
            self._begin()

    def _begin(self) -> None:
        runner = self.environment.runner
        assert runner is not None
        workers = {cid: users for cid, users in self._placed().items() if users > 0}
        total = sum(workers.values())
        if not workers:
            log.error("cannot start: no worker has users")
            return
        try:
            scenario = self.take_scenario(total)
        except SimError as exc:
            log.error("cannot start: %s", exc)
            stop_runner(self.environment)
            return
        run_id = uuid.uuid4().hex[:12]
        index = {cid: runner.get_worker_index(cid) for cid in workers}  # type: ignore[attr-defined]
        try:
            # Only built, never opened: who sees the data it loads decides who loads it. In
            # gevent's thread pool: a target's first build imports its module, which held the
            # hub past the monitor's threshold on a loaded host (heartbeats and the UI wait).
            scope = gevent.get_hub().threadpool.apply(_data_scope, (scenario,))
        except SimError as exc:
            log.error("cannot start: %s", exc)
            stop_runner(self.environment)
            return
        self.notes = []
        try:
            self.merger = RunMerger(
                self.environment,
                scenario,
                run_id,
                {cid: (index[cid], users) for cid, users in workers.items()},
                on_finished=self._finished,
                on_bundle_failure=self._bundle_failed,
            )
        except SimError as exc:  # the bundle directory cannot be created
            log.error("cannot start: %s", exc)
            stop_runner(self.environment)
            return
        gevent.spawn(self._probe_clocks, self.merger)
        for listener in self.run_listeners:
            listener(self.merger)
        loaders = [] if self.skip_load else elect_loaders(index, scope)
        self.load_phase = None
        if not loaders:
            self._start_workers(verify_only=False)
            return
        self.load_phase = LoadPhase(
            self.environment,
            self.merger,
            loaders,
            scope,
            on_ready=lambda: self._start_workers(verify_only=True),
        )
        self.load_phase.begin()

    def _start_workers(self, *, verify_only: bool) -> None:
        """``dbsim_start`` to every worker of the run; ``verify_only``: the data was loaded
        for them (by the load phase), they verify it and start."""
        merger = self.merger
        runner = self.environment.runner
        assert merger is not None and runner is not None
        if merger.finished or merger.stopped_by is not None:
            return  # stopped while loading: nothing to start
        total = sum(w.sessions for w in merger.workers.values())
        ordered = sorted(merger.workers.values(), key=lambda w: w.index)
        self._ready, self._gone = set(), False
        for worker in ordered:
            runner.send_message(
                MSG_START,
                {
                    "run_id": merger.run_id,
                    "scenario": merger.scenario,
                    "users_total": total,
                    "skip_load": self.skip_load,
                    "verify_only": verify_only,
                    # The array's counters (collectors of shared scope) are sampled once for
                    # the run, by the lowest-numbered worker: one set of REST requests to the
                    # array, not one per worker (sim.live.worker_samples keeps one view).
                    "shared_collectors": worker is ordered[0],
                    "barrier": len(ordered) > 1,
                },
                client_id=worker.client_id,
            )

    def _loaded(self, environment: Environment, msg: Any, **_: Any) -> None:
        phase = self.load_phase
        merger = self._merger_for(msg.data.get("run"))
        if phase is not None and merger is not None and phase.merger is merger:
            phase.on_loaded(msg.node_id, msg.data.get("final") or {})

    def _worker_ready(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A worker's sessions have connected and wait at the start barrier."""
        if self._merger_for(msg.data.get("run")) is not None:
            self._ready.add(msg.node_id)
            self._release_if_ready()

    def _release_if_ready(self) -> None:
        """The go to every waiting worker, once no worker of the run is still on its way
        (each has answered ready, sent its final or been given up for lost)."""
        merger, runner = self.merger, self.environment.runner
        if self._gone or not self._ready or merger is None or runner is None:
            return
        if merger.finished or merger.stopped_by is not None:
            return
        workers = merger.workers.values()
        if any(w.final and w.final.get("outcome") == "failed" for w in workers):
            return  # the run has failed: _final stops the waiting workers
        if all(w.client_id in self._ready or w.final or w.lost for w in workers):
            self._gone = True
            for worker in workers:
                if worker.client_id in self._ready and worker.final is None:
                    runner.send_message(MSG_GO, {"run": merger.run_id}, client_id=worker.client_id)

    def _probe_clocks(self, merger: RunMerger) -> None:
        """Clock probes to every worker of the run (sim.live.clock): a few at the start,
        then one every PROBE_EVERY_S until the run has finished."""
        runner = self.environment.runner
        assert runner is not None
        sent = 0
        while not merger.finished:
            for worker in merger.workers.values():
                if worker.lost is None and worker.final is None:
                    data = {"run": merger.run_id, "n": sent, "t1": time.time()}
                    runner.send_message(MSG_CLOCK, data, client_id=worker.client_id)
            sent += 1
            gevent.sleep(FIRST_PROBE_GAP_S if sent < FIRST_PROBES else PROBE_EVERY_S)

    def _clock_reply(self, environment: Environment, msg: Any, **_: Any) -> None:
        t4 = time.time()
        merger = self._merger_for(msg.data.get("run"))
        probe = probe_from_reply(msg.data, t4)
        if merger is not None and probe is not None:
            merger.clock_probe(msg.node_id, probe)

    def _merger_for(self, run_id: Any) -> RunMerger | None:
        merger = self.merger
        return merger if merger is not None and merger.run_id == run_id else None

    def _report(self, client_id: str, data: dict[str, Any]) -> None:
        part = data.get(REPORT_KEY)
        if not part:
            return
        merger = self._merger_for(part.get("run"))
        if merger is not None:
            for packet in part["packets"]:
                merger.on_packet(client_id, packet)

    def _final(self, environment: Environment, msg: Any, **_: Any) -> None:
        merger = self._merger_for(msg.data.get("run"))
        if merger is None:
            return
        for packet in msg.data.get("packets") or []:
            merger.on_packet(msg.node_id, packet)
        final = msg.data["final"]
        merger.on_final(msg.node_id, final)
        self._release_if_ready()
        worker = merger.workers.get(msg.node_id)
        running = [w for w in merger.workers.values() if w.final is None and w.lost is None]
        if final.get("outcome") == "failed" and worker is not None and running:
            # The run has failed: stop the others now rather than measure it to the end.
            self.stop_reason = f"worker {worker.index} failed: {final.get('error') or '?'}"
            self.stop_early = False
            stop_runner(self.environment)

    def _heartbeat(self, client_id: str, timestamp: float, **_: Any) -> None:
        if self.merger is not None:
            self.merger.seen(client_id)
            self._release_if_ready()  # a worker given up for lost no longer holds the others

    def _stopping(self, **_: Any) -> None:
        """Locust is stopping: stop the engines first (Locust's own "stop" to the workers
        comes after this returns) and wait, bounded, for the merged bundle."""
        merger = self.merger
        if merger is None or merger.finished:
            return
        merger.stop_requested(self.stop_reason)
        runner = self.environment.runner
        assert runner is not None
        for client_id in merger.workers:
            data = {"run": merger.run_id, "reason": self.stop_reason, "early": self.stop_early}
            runner.send_message(MSG_STOP, data, client_id=client_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while merger.summary is None or not merger.summary.get("bundle"):
            if time.monotonic() > deadline:
                break
            gevent.sleep(0.1)

    def _bundle_failed(self, message: str) -> None:
        """The merged bundle cannot be written (disk full, directory locked): stop now, as a
        single-process run does, rather than measure what cannot be kept."""
        self.stop_reason, self.stop_early = message, False
        stop_runner(self.environment)

    def _finished(self, summary: dict[str, Any]) -> None:
        self.last_summary = summary
        stop_runner(self.environment)
        if self.on_finished is not None:
            self.on_finished(summary)

    def samples(self) -> list[Sample]:
        return self.merger.latest_samples if self.merger is not None else []

    def totals(self) -> dict[str, OpStats]:
        return dict(self.merger.totals) if self.merger is not None else {}

    def snapshot(self) -> dict[str, Any]:
        merger = self.merger
        if merger is None:
            return {
                "role": "master",
                "state": "idle",
                "status": "idle",
                "workers": [],
                "notes": self.notes,
            }
        summary = merger.summary or {}
        return {
            "role": "master",
            "run_id": merger.run_id,
            "state": merger.state,
            "status": summary.get("status") or ("running" if self.running else "finishing"),
            "stopped_early": bool(summary.get("stopped_early")),
            "bundle": str(merger.bundle) if merger.bundle else None,
            "sessions": sum(w.sessions for w in merger.workers.values()),
            "intervals": merger.next_index,
            "workers": [
                {
                    "index": w.index,
                    "host": w.host,
                    "sessions": w.sessions,
                    "intervals": w.received,
                    # Wall clock of its engine's time 0, on the master's clock (sim.live.clock).
                    "intervals_start": w.clock.to_master(w.wall0) if w.wall0 else None,
                    "clock_offset_s": w.clock.offset if w.clock.probes else None,
                    "state": "lost" if w.lost else ("finished" if w.final else "running"),
                }
                for w in sorted(merger.workers.values(), key=lambda w: w.index)
            ],
            "notes": list(self.notes),
            "error": summary.get("error"),
        }


def _data_scope(scenario: ScenarioBase) -> str:
    """Who sees the data the scenario's target loads (:attr:`sim.protocols.Target.data_scope`)."""
    return build_target(scenario).data_scope
