"""``LoadPhase``: a distributed run loads each target once, before any worker's engine starts.

Without it every worker loaded the same data at the same moment and the run raced itself
(``table slob1_cf1 already exists`` or ``no such table``, depending on which worker won). Now
the master, once Locust has placed the users, elects one *loader* per scope of the target's
data (:attr:`sim.protocols.Target.data_scope`): one worker for a database server, one per host
for a local path (an SQLite file, a file tree — on NFS the second host's loader finds the data
built and only checks it), none for a private temporary database (every worker loads its own,
as before). Each loader gets ``dbsim_load`` and runs a load-only engine: the build and its
verification under the target's load lock (:mod:`sim.core.loading`), nothing measured. Loaders run
one after another, so two hosts never build one NFS tree together even where ``flock`` cannot
reach across hosts. When every loader has answered ``dbsim_loaded`` with its data verified,
the master sends ``dbsim_start`` to every worker with ``verify_only``: the engines verify
(under the lock, shared), connect, and start together at the master's start barrier
(:mod:`sim.locust.master`), so no session runs while another worker still verifies.

A failed (or stopped) load ends the run there: the loader's final report is the run's, with its
error line; the other workers, never started, are settled as "not started" so the merged bundle
is finished at once; the master stops Locust and exits as a single-process run that failed
while loading would. A loader lost while loading (killed: no heartbeat) fails the run the same
way. The summary's ``distributed.loading`` says who loaded, what was built, how long it took
and how many loads ran in all (``loads``: load-only jobs plus engines that ran a build).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust.env import Environment

from sim.core.loading import built_anything, host_of
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED
from sim.locust.merge import RunMerger
from sim.locust.roles import MSG_LOAD

log = logging.getLogger(__name__)

WATCH_S = 0.5  # how often the load phase looks for a lost loader


class LoadPhase:
    """The loaders of one run, one after another; then ``on_ready`` (start every worker)."""

    def __init__(
        self,
        environment: Environment,
        merger: RunMerger,
        loaders: list[str],
        scope: str,
        on_ready: Callable[[], None],
    ) -> None:
        self.environment = environment
        self.merger = merger
        self.loaders = loaders
        self.scope = scope
        self.on_ready = on_ready
        self.position = 0
        self.done = False
        self.results: list[dict[str, Any]] = []
        #: The exit code the failed load's error asks for (2: a refusal, bad input), or None.
        self.exit_code: int | None = None
        self._sent_at = 0.0
        self._watcher: gevent.Greenlet | None = None

    @property
    def current(self) -> str | None:
        return None if self.done else self.loaders[self.position]

    def begin(self) -> None:
        self.merger.set_state("loading")
        self._send()
        self._watcher = gevent.spawn(self._watch)

    def _send(self) -> None:
        cid = self.loaders[self.position]
        runner = self.environment.runner
        assert runner is not None
        self._sent_at = time.monotonic()
        data = {"run_id": self.merger.run_id, "scenario": self.merger.scenario}
        log.info("worker %d loads", self.merger.workers[cid].index)
        runner.send_message(MSG_LOAD, data, client_id=cid)

    def on_loaded(self, client_id: str, final: dict[str, Any]) -> None:
        """A loader's answer (``dbsim_loaded``): its load-only engine's final report."""
        if self.done or client_id != self.current:
            return
        worker = self.merger.workers[client_id]
        worker.last_seen = time.monotonic()
        load = final.get("load") or {}
        self.results.append(
            {
                "index": worker.index,
                "host": final.get("host") or host_of(client_id),
                "outcome": final.get("outcome"),
                "built": built_anything(load),
                "load_s": round(time.monotonic() - self._sent_at, 3),
                "lock": load.get("lock"),
                "error": final.get("error"),
                "load": load,
                "verify": final.get("verify") or {},
            }
        )
        if final.get("outcome") != OUTCOME_COMPLETED:
            self._end(client_id, final)
            return
        self.position += 1
        if self.position < len(self.loaders):
            self._send()
            return
        self.done = True
        self.merger.loading = self.section()
        self.on_ready()

    def _watch(self) -> None:
        while not self.done:
            gevent.sleep(WATCH_S)
            cid = self.current
            if cid is None:
                return
            worker = self.merger.workers[cid]
            if worker.lost is not None:
                error = f"worker {worker.index} was lost while loading: {worker.lost}"
                self.results.append({"index": worker.index, "outcome": "lost", "error": error})
                final = {
                    "outcome": OUTCOME_FAILED,
                    "error": error,
                    "reason": f"loading: {error}",
                    "last_state": "loading",
                    "packets": 0,
                }
                self._end(cid, final)

    def _end(self, loader: str, final: dict[str, Any]) -> None:
        """The load failed or was stopped: the loader's report is the run's; the others were
        never started, and are settled so the merged bundle finishes now."""
        self.done = True
        self.merger.loading = self.section()
        if final.get("error_exit_code") is not None:
            self.exit_code = int(final["error_exit_code"])
        index = self.merger.workers[loader].index
        outcome = final.get("outcome") or OUTCOME_FAILED
        why = f"not started: worker {index} did not load ({outcome})"
        # Marked: this final is the load-only job's, not an engine run of the measurement.
        self.merger.on_final(loader, {**final, "packets": 0, "load_job": True})
        for cid, worker in self.merger.workers.items():
            if cid != loader and worker.final is None:
                self.merger.on_final(
                    cid,
                    {"outcome": outcome, "reason": why, "last_state": "loading", "packets": 0},
                )

    def section(self) -> dict[str, Any]:
        """``summary.distributed.loading`` (the engines' own builds are added at the end)."""
        return {
            "scope": self.scope,
            "loaders": [
                {k: v for k, v in r.items() if k not in ("load", "verify")} for r in self.results
            ],
            "load": next((r["load"] for r in self.results if r.get("load")), {}),
            "verify": next((r["verify"] for r in self.results if r.get("verify")), {}),
        }
