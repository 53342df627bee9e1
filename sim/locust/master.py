"""``MasterController``: the Locust master's side of dbsim (``--workers N``, ``--distributed``).

When Locust has placed every user, the master sends each worker that got users a
``dbsim_start`` message — the scenario, validated here, and the total user count — and merges
what comes back into one bundle (:class:`~sim.locust.merge.RunMerger`). Locust's stop first
sends ``dbsim_stop`` to the workers' engines and waits (bounded) for the merged bundle; a run
that ends by itself stops Locust. See :mod:`sim.locust.roles` for the other roles.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import gevent
from locust.env import Environment

from sim.errors import SimError
from sim.locust.form import scenario_from_options
from sim.locust.merge import RunMerger
from sim.locust.roles import (
    MSG_FINAL,
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
from sim.scenario import ScenarioBase

log = logging.getLogger(__name__)


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
        self.stop_reason = STOP_REASON
        self.merger: RunMerger | None = None
        runner = environment.runner
        assert runner is not None
        runner.register_message(MSG_FINAL, self._final)
        events = environment.events
        events.spawning_complete.add_listener(self._spawned)
        events.worker_report.add_listener(self._report)
        events.heartbeat_sent.add_listener(self._heartbeat)
        events.test_stopping.add_listener(self._stopping)

    @property
    def running(self) -> bool:
        return self.merger is not None and not self.merger.finished

    def _spawned(self, user_count: int) -> None:
        runner = self.environment.runner
        assert runner is not None
        if self.running:
            self.notes.append(
                f"users changed to {user_count} during the run: each worker keeps its sessions "
                "until the next start"
            )
            return
        placed = {
            client.id: sum(client.user_classes_count.values())
            for client in runner.clients.values()  # type: ignore[attr-defined]
        }
        workers = {cid: users for cid, users in placed.items() if users > 0}
        total = sum(workers.values())
        if not workers:
            log.error("cannot start: no worker has users")
            return
        try:
            scenario = scenario_from_options(
                self.scenario(), self.environment.parsed_options, total
            )
        except SimError as exc:
            log.error("cannot start: %s", exc)
            stop_runner(self.environment)
            return
        run_id = uuid.uuid4().hex[:12]
        index = {cid: runner.get_worker_index(cid) for cid in workers}  # type: ignore[attr-defined]
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
        data = self.merger.scenario
        for cid in sorted(workers, key=index.__getitem__):
            runner.send_message(
                MSG_START,
                {
                    "run_id": run_id,
                    "scenario": data,
                    "users_total": total,
                    "skip_load": self.skip_load,
                },
                client_id=cid,
            )

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
        merger.on_final(msg.node_id, msg.data["final"])

    def _heartbeat(self, client_id: str, timestamp: float, **_: Any) -> None:
        if self.merger is not None:
            self.merger.seen(client_id)

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
            data = {"run": merger.run_id, "reason": self.stop_reason}
            runner.send_message(MSG_STOP, data, client_id=client_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while merger.summary is None or not merger.summary.get("bundle"):
            if time.monotonic() > deadline:
                break
            gevent.sleep(0.1)

    def _bundle_failed(self, message: str) -> None:
        """The merged bundle cannot be written (disk full, directory locked): stop now, as a
        single-process run does, rather than measure what cannot be kept."""
        self.stop_reason = message
        stop_runner(self.environment)

    def _finished(self, summary: dict[str, Any]) -> None:
        self.last_summary = summary
        stop_runner(self.environment)
        if self.on_finished is not None:
            self.on_finished(summary)

    def samples(self) -> list[Sample]:
        return self.merger.latest_samples if self.merger is not None else []

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
            "bundle": str(merger.bundle) if merger.bundle else None,
            "sessions": sum(w.sessions for w in merger.workers.values()),
            "intervals": merger.next_index,
            "workers": [
                {
                    "index": w.index,
                    "host": w.host,
                    "sessions": w.sessions,
                    "intervals": w.received,
                    "state": "lost" if w.lost else ("finished" if w.final else "running"),
                }
                for w in sorted(merger.workers.values(), key=lambda w: w.index)
            ],
            "notes": list(self.notes),
            "error": summary.get("error"),
        }
