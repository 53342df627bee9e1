"""What each kind of Locust process does with dbsim: wiring Locust's events to the engine.

* :class:`LocalController` (a LocalRunner, ``dbsim ui`` without workers): when Locust has
  spawned the users, one engine starts here with that many sessions and writes the bundle.
* :class:`~sim.locust.master.MasterController` (``--workers N``): when Locust has placed every
  user, it sends each worker that got users a ``dbsim_start`` message (the scenario, validated
  there, and the total user count); it merges what comes back into one bundle
  (:class:`~sim.locust.merge.RunMerger`) and stops Locust when the run is over.
* :class:`WorkerController` (``dbsim worker``): on ``dbsim_load`` (the master elected it to
  load the run's data, :mod:`sim.locust.loading`) it runs a load-only engine and answers
  ``dbsim_loaded`` with its final report; on ``dbsim_start`` it runs an engine with the
  users Locust placed on this worker and its share of any target rate (with ``barrier``, its
  connected sessions wait for ``dbsim_go``, which the master sends once every worker has
  answered ``dbsim_ready``: no session runs while another worker still checks the data); it
  ships each interval on Locust's worker-report channel (``report_to_master``) and its final
  report as a ``dbsim_final`` message (which carries any interval not yet shipped, so none is
  lost to ordering).

Locust's own statistics travel as Locust ships them; the engine feeds them on the process that
runs it (:mod:`sim.locust.stats`).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from sim.bundle.summary import status_text
from sim.config.resolve import validate
from sim.config.scenario import ScenarioBase
from sim.core.metrics import OpStats
from sim.errors import SimError
from sim.live.clock import MSG_CLOCK, MSG_CLOCK_REPLY
from sim.live.clock import reply as clock_reply
from sim.live.phase import describe
from sim.locust.form import scenario_from_options, share_scenario
from sim.locust.host import ROLE_LOCAL, ROLE_WORKER, EngineHost
from sim.locust.packets import Packet, decode_ops, wire_safe
from sim.protocols import Sample

log = logging.getLogger(__name__)

MSG_START = "dbsim_start"
MSG_FINAL = "dbsim_final"
MSG_STOP = "dbsim_stop"
MSG_LOAD = "dbsim_load"
MSG_LOADED = "dbsim_loaded"
#: The start barrier: a worker's sessions have connected (``dbsim_ready``) and start when the
#: master has heard it from every worker of the run (``dbsim_go``).
MSG_READY = "dbsim_ready"
MSG_GO = "dbsim_go"
REPORT_KEY = "dbsim"
STOP_REASON = "stopped from Locust"
#: How long Locust's stop waits for the run's bundle (the web UI polls while it waits, so the
#: Run tab shows the finished bundle rather than a run "still running").
STOP_WAIT_S = 60.0
#: One line per finished worker run on stderr (tests and people compare it with the bundle).
WORKER_REPORT_PREFIX = "dbsim-worker-report "
#: How long ``dbsim_start`` waits for this worker's load-only engine to wind down after it
#: answered ``dbsim_loaded`` (it answers from inside the run's last callback).
LOAD_HANDOVER_S = 10.0

RunFinished = Callable[[dict[str, Any]], None]


def stop_runner(environment: Environment) -> None:
    """Stop Locust (users), in its own greenlet: ``runner.stop`` waits for the workers."""
    runner = environment.runner
    if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
        gevent.spawn(runner.stop)


class Controller:
    """What the web UI asks of any role: the current run's figures."""

    environment: Environment
    #: The scenario whose values a start begins from (a web UI's controller has one).
    scenario: Callable[[], ScenarioBase]
    last_summary: dict[str, Any] | None = None
    notes: list[str]
    #: Why the next stop happens, and whether it is a person's Stop (the web UI's button:
    #: the run ends ``completed`` with ``stopped_early``) or a signal's (``interrupted``).
    stop_reason: str = STOP_REASON
    stop_early: bool = True
    #: The scenario dbsim's start form validated (sim.locust.start): the next start runs it
    #: as it is (Locust's own form's custom parameters are not applied to it).
    next_scenario: ScenarioBase | None = None

    def stop_for_signal(self, signum: int) -> None:
        """The next stop is a signal's: the run is ``interrupted``, not stopped early."""
        self.stop_reason = f"stopped by {signal.Signals(signum).name}"
        self.stop_early = False

    def snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def take_scenario(self, users: int) -> ScenarioBase:
        """The scenario of the run starting now with ``users`` sessions: the start form's
        (used once), else the scenario with Locust's form's custom parameters applied."""
        form, self.next_scenario = self.next_scenario, None
        if form is not None:
            return scenario_from_options(form, None, users)
        return scenario_from_options(self.scenario(), self.environment.parsed_options, users)

    def samples(self) -> list[Sample]:
        raise NotImplementedError

    def totals(self) -> dict[str, OpStats]:
        """The measured window's per-operation figures so far (dbsim's HDR histograms)."""
        return {}


class LocalController(Controller):
    """A LocalRunner: the engine runs in this process and writes the bundle."""

    def __init__(
        self,
        environment: Environment,
        scenario: Callable[[], ScenarioBase],
        on_finished: RunFinished | None = None,
    ) -> None:
        self.environment = environment
        self.scenario = scenario
        self.on_finished = on_finished
        self.notes = []
        self.host = EngineHost(environment, role=ROLE_LOCAL, on_final=self._final)
        events = environment.events
        events.spawning_complete.add_listener(self._spawned)
        events.test_stopping.add_listener(self._stopping)

    def _spawned(self, user_count: int) -> None:
        if self.host.active:
            self.notes.append(
                f"users changed to {user_count} during the run: sessions stay "
                f"{self.host.engine.max_sessions if self.host.engine else '?'} until the next start"
            )
            return
        try:
            scenario = self.take_scenario(user_count)
        except SimError as exc:
            log.error("cannot start: %s", exc)
            stop_runner(self.environment)
            return
        self.notes = []
        self.stop_reason, self.stop_early = STOP_REASON, True
        self.host.start(scenario, uuid.uuid4().hex[:12])

    def _stopping(self, **_: Any) -> None:
        # Waited for here, before Locust calls the test stopped: see STOP_WAIT_S.
        if self.host.active:
            self.host.stop(self.stop_reason, early=self.stop_early)
            self.host.wait(STOP_WAIT_S)

    def _final(self, final: dict[str, Any]) -> None:
        self.last_summary = final
        stop_runner(self.environment)
        if self.on_finished is not None:
            self.on_finished(final)

    def samples(self) -> list[Sample]:
        return self.host.latest_samples

    def totals(self) -> dict[str, OpStats]:
        engine = self.host.engine
        return dict(engine.recorder.totals) if engine is not None else {}

    def snapshot(self) -> dict[str, Any]:
        host = self.host
        final = host.final or {}
        bundle = host.bundle or (Path(final["bundle"]) if final.get("bundle") else None)
        snapshot = {
            "role": "local",
            "run_id": host.run_id,
            "state": host.state,
            "status": final.get("status") or ("running" if host.active else "idle"),
            "stopped_early": bool(final.get("stopped_early")),
            "bundle": str(bundle) if bundle else None,
            "sessions": host.engine.max_sessions if host.engine else None,
            "intervals": host.packets,
            "workers": [],
            "notes": list(self.notes),
            "error": final.get("error"),
        }
        snapshot["phase"] = describe(host, status_text(snapshot) if host.final else "")
        return snapshot


class WorkerController(Controller):
    """A WorkerRunner: runs the master's runs here and ships what they measure."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.notes = []
        self.run_id: str | None = None
        #: Whether the run in the host is a load-only job (its end answers dbsim_loaded).
        self.loading = False
        self.outbox: list[Packet] = []
        self.host = EngineHost(
            environment, role=ROLE_WORKER, on_packet=self.outbox.append, on_final=self._final
        )
        runner = environment.runner
        assert runner is not None
        runner.register_message(MSG_START, self._start)
        runner.register_message(MSG_STOP, self._stop)
        runner.register_message(MSG_LOAD, self._load)
        runner.register_message(MSG_CLOCK, self._clock)
        runner.register_message(MSG_GO, self._go)
        self.host.on_ready = self._ready
        events = environment.events
        events.report_to_master.add_listener(self._report)
        events.test_stopping.add_listener(lambda **_: self.host.stop("stopped by the master"))

    def _start(self, environment: Environment, msg: Any, **_: Any) -> None:
        data = msg.data
        runner = self.environment.runner
        assert runner is not None
        if self.host.active and not self.loading and data.get("run_id") == self.run_id:
            self.host.wait(LOAD_HANDOVER_S)  # this run's load job, just answered: let it end
        if self.host.active:  # still finishing the previous run: refuse, so the master won't wait
            error = f"worker busy with run {self.run_id}"
            final = {"outcome": "failed", "error": error, "packets": 0}
            runner.send_message(
                MSG_FINAL, {"run": data.get("run_id"), "packets": [], "final": final}
            )
            return
        self.run_id = str(data["run_id"])
        self.outbox.clear()
        sessions = runner.user_count
        total = max(int(data.get("users_total") or sessions), 1)
        if sessions <= 0:
            self._send_final({"outcome": "completed", "packets": 0, "sessions": 0})
            return
        try:
            scenario = validate(share_scenario(data["scenario"], sessions, sessions / total))
        except SimError as exc:
            self._send_final({"outcome": "failed", "error": str(exc), "packets": 0})
            return
        self.host.start(
            scenario,
            self.run_id,
            skip_load=bool(data.get("skip_load")),
            verify_only=bool(data.get("verify_only")),
            # Absent (a master before it elected one): every worker samples them, as then.
            shared_collectors=bool(data.get("shared_collectors", True)),
            barrier=bool(data.get("barrier")),
        )

    def _ready(self) -> None:
        """This run's sessions have connected and wait at the start barrier."""
        runner = self.environment.runner
        assert runner is not None
        runner.send_message(MSG_READY, {"run": self.run_id})

    def _go(self, environment: Environment, msg: Any, **_: Any) -> None:
        if msg.data.get("run") == self.run_id:
            self.host.release()

    def _load(self, environment: Environment, msg: Any, **_: Any) -> None:
        """The master elected this worker to load the run's data (sim.locust.loading)."""
        data = msg.data
        runner = self.environment.runner
        assert runner is not None
        run_id = str(data.get("run_id"))
        if self.host.active:
            final = {"outcome": "failed", "error": f"worker busy with run {self.run_id}"}
            runner.send_message(MSG_LOADED, {"run": run_id, "final": final})
            return
        self.run_id = run_id
        self.loading = True
        try:
            scenario = validate(data["scenario"])
        except SimError as exc:
            self._final({"outcome": "failed", "error": str(exc), "packets": 0})
            return
        self.host.start(scenario, run_id, load_only=True)

    def _stop(self, environment: Environment, msg: Any, **_: Any) -> None:
        if msg.data.get("run") == self.run_id:
            reason = str(msg.data.get("reason") or STOP_REASON)
            self.host.stop(reason, early=bool(msg.data.get("early")))

    def _report(self, client_id: str, data: dict[str, Any]) -> None:
        if self.outbox:
            packets = [wire_safe(p, f"interval {p.get('i')}") for p in self.outbox]
            data[REPORT_KEY] = {"run": self.run_id, "packets": packets}
            self.outbox.clear()

    def _final(self, final: dict[str, Any]) -> None:
        if self.loading:  # the load job's end: the master starts the run (or ends it) on this
            self.loading = False
            runner = self.environment.runner
            assert runner is not None
            runner.send_message(MSG_LOADED, {"run": self.run_id, "final": final})
            return
        counts = {}
        for name, item in (final.get("totals") or {}).items():
            counts[name] = _count(item)
        line = {
            "run": self.run_id,
            "worker_index": getattr(self.environment.runner, "worker_index", -1),
            "outcome": final.get("outcome"),
            "sessions": final.get("sessions"),
            "intervals": final.get("packets"),
            "operations": counts,
        }
        # Said before the final goes: once the master has every final it ends the run and
        # quits the workers, and a worker quit while sending never wrote its line (seen in CI).
        sys.stderr.write(WORKER_REPORT_PREFIX + json.dumps(line, sort_keys=True) + "\n")
        sys.stderr.flush()
        self._send_final(final)

    def _clock(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A clock probe (sim.live.clock): answered at once with this host's clock."""
        received = time.time()
        runner = self.environment.runner
        assert runner is not None
        runner.send_message(MSG_CLOCK_REPLY, clock_reply(msg.data, received, time.time()))

    def _send_final(self, final: dict[str, Any]) -> None:
        runner = self.environment.runner
        assert runner is not None
        packets, self.outbox[:] = list(self.outbox), []
        message = {"run": self.run_id, "packets": packets, "final": final}
        runner.send_message(MSG_FINAL, wire_safe(message, "the final report"))

    def samples(self) -> list[Sample]:
        return self.host.latest_samples

    def snapshot(self) -> dict[str, Any]:
        return {"role": "worker", "run_id": self.run_id, "state": self.host.state}


def _count(item: dict[str, Any]) -> dict[str, int]:
    stats: OpStats = decode_ops({"op": item})["op"]
    return {"count": stats.count, "errors": stats.error_count}
