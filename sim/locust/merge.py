"""``RunMerger``: the master's side of a distributed run — one bundle from many workers.

Each worker's engine numbers its intervals 0, 1, 2 … on its own clock; all of them start when
Locust has placed every user, run the same stages and close intervals on the same one-second
grid, so interval *k* of the bundle is the sum of interval *k* of every worker. Interval *k* is
merged and written as soon as every worker of the run has sent it, has finished with fewer
intervals, or is lost — so the master's bundle trails the workers by about one Locust report
period (3 s) and is always whole.

Counts are exact: an interval's histogram is the sum (``HdrHistogram.add``) of the workers'
histograms, and the run totals are the sum of every worker's measured intervals, which is what
each worker's own engine counts (its final report's totals are compared with them and any
difference is written into the summary's messages). Storage samples are merged by
:func:`sim.live.worker_samples.merge_samples`. A worker that stops sending heartbeats for
``LOST_AFTER_S`` (killed, crashed, cut off) is recorded as lost: what it sent until then is
counted, the run goes on without it, and the summary's ``distributed`` section says what was
lost and when. The scenario's SLOs are judged on the merged bundle by the same function as a
single-process run's (:func:`sim.run.finish.write_final_summary`). Every file write goes through
one native thread (gevent's thread pool of size one, in order), never on the hub.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from gevent.threadpool import ThreadPool
from locust.env import Environment

from sim.bundle.files import iso, new_bundle_dir
from sim.bundle.writer import BundleWriter
from sim.config.resolve import resolved_dict
from sim.config.scenario import ScenarioBase
from sim.core.metrics import Interval, OpStats
from sim.core.validity import failure_line
from sim.live.clock import ClockEstimate, Probe
from sim.live.clock import messages as clock_messages
from sim.live.lateness import Lateness
from sim.live.worker_samples import merge_samples
from sim.locust.packets import Packet, decode_ops, packet_ops, packet_samples
from sim.locust.summary import STATUS_COMPLETED, STATUS_FAILED, distributed_extra, run_status
from sim.protocols import Sample
from sim.run.finish import judge_errors, write_final_summary

log = logging.getLogger(__name__)
#: The key under which a pending packet keeps its operations, decoded off the hub on arrival.
DECODED = "_decoded_ops"

LOST_AFTER_S = 10.0  # no heartbeat nor report from a worker this long: it is lost
FINAL_WAIT_S = 45.0  # after a stop, how long workers get to send their final report
WATCH_INTERVAL_S = 0.5
LOCUST_CATCHUP_S = 8.0  # at the end, how long to wait for Locust's table to catch up

FinishedListener = Callable[[dict[str, Any]], None]


@dataclass
class WorkerRun:
    """One worker's part of a run, as the master sees it."""

    client_id: str
    index: int
    sessions: int
    host: str = ""
    pending: dict[int, Packet] = field(default_factory=dict)
    received: int = 0
    last_interval: int = -1
    measured: dict[str, OpStats] = field(default_factory=dict)
    latest_samples: list[Sample] = field(default_factory=list)
    final: dict[str, Any] | None = None
    lost: str | None = None
    last_seen: float = field(default_factory=time.monotonic)
    #: This worker's clock offset from the master's (sim.live.clock).
    clock: ClockEstimate = field(default_factory=ClockEstimate)
    #: Wall clock of its engine's time 0, on its own clock (from its first packet).
    wall0: float | None = None

    def done_before(self, index: int) -> bool:
        """Whether this worker will never send interval ``index``."""
        if self.lost is not None:
            return index not in self.pending
        return self.final is not None and int(self.final.get("packets", 0)) <= index

    @property
    def settled(self) -> bool:
        return self.lost is not None or (
            self.final is not None and not self.pending and self.received >= self.final["packets"]
        )


class RunMerger:
    """Merges one distributed run into one bundle, written by the master."""

    def __init__(
        self,
        environment: Environment,
        scenario: ScenarioBase,
        run_id: str,
        workers: dict[str, tuple[int, int]],
        *,
        on_finished: FinishedListener | None = None,
        on_bundle_failure: Callable[[str], None] | None = None,
    ) -> None:
        """``scenario``: the run's (its SLOs are judged on the merged bundle); ``workers``:
        client id → (worker index, sessions) of every worker in the run;
        ``on_bundle_failure``: told (on the hub) the bundle's one-line error the moment the
        merged bundle cannot be written, so the run can stop as a single-process run does."""
        self.environment = environment
        self.spec = scenario
        #: The scenario as sent to the workers and written into the bundle.
        self.scenario: dict[str, Any] = resolved_dict(scenario)
        self.run_id = run_id
        # Locust names a worker "<its host name>_<uuid>": its host until a packet says it.
        self.workers = {
            cid: WorkerRun(cid, index, sessions, host=cid.rpartition("_")[0])
            for cid, (index, sessions) in workers.items()
        }
        self.on_finished = on_finished
        self.on_bundle_failure = on_bundle_failure
        #: The phase the run was in when the bundle failed (None: it has not failed).
        self.failed_during: str | None = None
        self._hub = gevent.get_hub()
        self.next_index = 0
        self.state = "starting"
        self.summary: dict[str, Any] | None = None
        self.bundle: Path | None = None
        self.totals: dict[str, OpStats] = {}
        #: Seconds of measured intervals merged so far (the master's view of the window).
        self.measured_s = 0.0
        #: The workers in the merge's order, those interval ``next_index`` waits for (a
        #: packet costs O(1)) and their latest samples merged, made when asked (None: stale).
        self._ordered = sorted(self.workers.values(), key=lambda w: w.index)
        self._missing: set[str] = set(self.workers)
        self._latest: list[Sample] | None = []
        self.stopped_by: str | None = None
        #: What the run's loaders did (sim.locust.loading), for the summary; None: no loaders.
        self.loading: dict[str, Any] | None = None
        self._deadline: float | None = None
        self._pool = ThreadPool(1)  # one native thread: bundle writes in order, off the hub
        # Decoding a packet's HDR histograms (base64, zlib) costs tens of ms per worker and
        # interval: off the hub too, or a loaded master's hub blocks (seen in CI).
        self._decoder = ThreadPool(1)
        #: How far the merge trails the run (sim.live.lateness): a master short of CPU says so.
        self.lateness = Lateness()
        self._lost_seen = 0
        output = self.scenario.get("output") or {}
        self._writer: BundleWriter = self._pool.apply(self._create_writer, (output,))
        self.bundle = self._writer.path
        self._watcher = gevent.spawn(self._watch)
        #: Told each merged interval (interval, samples) and each state, on the hub (the
        #: master's /metrics, sim.locust.exposition).
        self.interval_listeners: list[Callable[[Interval, list[Sample]], None]] = []
        self.state_listeners: list[Callable[[str], None]] = []

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @property
    def latest_samples(self) -> list[Sample]:
        """Every worker's latest storage samples merged (the live Storage table): merged when
        asked after a packet changed them, not at every packet (N packets an interval, each
        re-merging N workers' samples, made the master's CPU grow as N², bench/README.md)."""
        if self._latest is None:
            self._latest = merge_samples((w.index, w.host, w.latest_samples) for w in self._ordered)
        return self._latest

    def _create_writer(self, output: dict[str, Any]) -> BundleWriter:
        name = output.get("name") or self.scenario.get("name") or "scenario"
        path = new_bundle_dir(Path(output.get("directory") or "runs"), str(name))
        writer = BundleWriter(path, self.scenario, float(output.get("flush_interval_s") or 2.0))
        writer.running_extra = {"sessions": sum(w.sessions for w in self.workers.values())}
        writer.on_failure = self._failed_in_writer_thread
        return writer

    def _failed_in_writer_thread(self, message: str) -> None:
        # The writer runs in the pool's native thread, where no gevent call is safe.
        self._hub.loop.run_callback_threadsafe(self._bundle_failed, message)

    def _bundle_failed(self, message: str) -> None:
        if self.failed_during is not None or self.finished:
            return
        self.failed_during = self.state
        log.error("%s; stopping the run", message)
        if self.on_bundle_failure is not None:
            self.on_bundle_failure(message)

    def _write(self, fn: Callable[..., Any], *args: Any) -> None:
        self._pool.spawn(fn, *args)

    # ------------------------------------------------------------------ from the workers

    def seen(self, client_id: str) -> None:
        """A heartbeat (or anything) arrived from ``client_id``."""
        worker = self.workers.get(client_id)
        if worker is not None:
            worker.last_seen = time.monotonic()

    def on_packet(self, client_id: str, packet: Packet) -> None:
        worker = self.workers.get(client_id)
        if worker is None or self.finished:
            return
        worker.last_seen = time.monotonic()
        worker.host = str(packet.get("host", worker.host))
        if worker.wall0 is None and packet.get("wall0"):
            worker.wall0 = float(packet["wall0"])
        worker.received += 1
        worker.last_interval = max(worker.last_interval, int(packet["i"]))
        worker.latest_samples = packet_samples(packet)
        if int(packet["i"]) < self.next_index:
            self._late(worker, packet)
            return
        packet[DECODED] = self._decoder.apply(packet_ops, (packet,))
        worker.pending[int(packet["i"])] = packet
        self._latest = None
        if int(packet["i"]) == self.next_index:
            self._missing.discard(client_id)
            if not self._missing:
                self._merge_ready()

    def clock_probe(self, client_id: str, probe: Probe) -> None:
        """A clock probe of ``client_id`` answered (sim.live.clock)."""
        worker = self.workers.get(client_id)
        if worker is not None and not self.finished:
            worker.clock.add(probe)

    def on_final(self, client_id: str, final: dict[str, Any]) -> None:
        worker = self.workers.get(client_id)
        if worker is None or self.finished:
            return
        worker.last_seen = time.monotonic()
        worker.final = final
        worker.host = str(final.get("host") or worker.host)
        if final.get("error"):
            log.error("worker %d: %s", worker.index, final["error"])
        self._merge_ready()
        self._maybe_finish()

    def _late(self, worker: WorkerRun, packet: Packet) -> None:
        """An interval from a worker given up for lost that was not lost after all: its
        operations still count in the totals (the time series has moved on without them)."""
        if packet["phase"] == "measure":
            for name, stats in self._decoder.apply(packet_ops, (packet,)).items():
                worker.measured.setdefault(name, OpStats()).merge(stats)
                self.totals.setdefault(name, OpStats()).merge(stats)
        note = f"worker {worker.index}: interval {packet['i']} arrived late; counted in totals only"
        self._write(self._writer.add_message, note)

    def set_state(self, state: str) -> None:
        """A state of the run before its first interval (``loading``), into the bundle."""
        if state != self.state:
            self.state = state
            self._write(self._writer.on_state, state)
            for listener in self.state_listeners:
                listener(state)

    def stop_requested(self, reason: str) -> None:
        """The run is being stopped: wait at most FINAL_WAIT_S for the final reports."""
        if self.stopped_by is None:
            self.stopped_by = reason
            self._deadline = time.monotonic() + FINAL_WAIT_S

    # ------------------------------------------------------------------ merging

    def _merge_ready(self) -> None:
        """Merge every interval from ``next_index`` on that no worker will still send a part
        of; remember which workers the first one not ready waits for (a packet of theirs is
        all :meth:`on_packet` checks; a loss or a final report comes here again)."""
        while True:
            index = self.next_index
            self._missing = {
                w.client_id
                for w in self._ordered
                if index not in w.pending and not w.done_before(index)
            }
            if self._missing:
                return
            parts = [(w, w.pending.pop(index)) for w in self._ordered if index in w.pending]
            if not parts:
                return
            self._merge(index, parts)
            self.next_index += 1

    def _merge(self, index: int, parts: list[tuple[WorkerRun, Packet]]) -> None:
        ops: dict[str, OpStats] = {}
        for worker, packet in parts:
            for name, stats in packet.pop(DECODED).items():
                ops.setdefault(name, OpStats()).merge(stats)
                if packet["phase"] == "measure":
                    worker.measured.setdefault(name, OpStats()).merge(stats)
                    self.totals.setdefault(name, OpStats()).merge(stats)
        first = parts[0][1]
        interval = Interval(
            index,
            sum(p["t0"] for _, p in parts) / len(parts),
            sum(p["t1"] for _, p in parts) / len(parts),
            str(first["phase"]),
            first["step"],
            ops,
        )
        if interval.measured:
            self.measured_s += interval.t_end - interval.t_start
        samples = merge_samples((w.index, w.host, packet_samples(p)) for w, p in parts)
        if interval.phase != self.state:
            self.set_state(interval.phase)
        self._write(self._writer.on_interval, interval, samples)
        for listener in self.interval_listeners:
            listener(interval, samples)
        lost = sum(w.lost is not None for w in self.workers.values())
        rebase, self._lost_seen = lost != self._lost_seen, lost
        late = self.lateness.on_merge(
            index, interval.t_end, time.monotonic(), len(self.workers), rebase=rebase
        )
        if late is not None:
            log.warning(late)
            self._write(self._writer.add_message, late)

    # ------------------------------------------------------------------ losses and the end

    def _watch(self) -> None:
        while not self.finished:
            gevent.sleep(WATCH_INTERVAL_S)
            now = time.monotonic()
            for worker in self.workers.values():
                if worker.final is not None or worker.lost is not None:
                    continue
                if now - worker.last_seen > LOST_AFTER_S:
                    self._lose(worker, f"no heartbeat for {LOST_AFTER_S:g} s")
                elif self._deadline is not None and now > self._deadline:
                    self._lose(worker, f"no final report within {FINAL_WAIT_S:g} s of the stop")
            self._merge_ready()
            self._maybe_finish()

    def _lose(self, worker: WorkerRun, why: str) -> None:
        worker.lost = why
        after = (
            f"after interval {worker.last_interval}"
            if worker.last_interval >= 0
            else "before its first interval"
        )
        note = (
            f"worker {worker.index} ({worker.host or '?'}, {worker.client_id}) was lost {after}: "
            f"{why}; what it sent until then is counted"
        )
        log.warning(note)
        self._write(self._writer.add_message, note)

    def _maybe_finish(self) -> None:
        if self.finished or not all(w.settled for w in self.workers.values()):
            return
        self._merge_ready()
        self.summary = {}  # finishing: later packets are ignored
        gevent.spawn(self._finish)

    def _failure_line(self) -> str:
        """The bundle's error as a single-process run words it."""
        when = f"run stopped during {self.failed_during}, " if self.failed_during else ""
        return f"{self._writer.failure}; {when}the bundle keeps what was written before"

    def _finish(self) -> None:
        self._wait_for_locust_table()
        workers = sorted(self.workers.values(), key=lambda w: w.index)
        self._check_worker_totals(workers)
        status = run_status([w.final for w in workers], self.stopped_by)
        extra = distributed_extra(self, workers)
        for row in extra["distributed"]["workers"]:
            for note in clock_messages(row["index"], row["clock"]):
                log.warning(note)
                self._write(self._writer.add_message, note)
        totals = self.totals
        extra["errors"] = self._judge_errors([w.final for w in workers if w.final is not None])
        if status == STATUS_COMPLETED and extra["errors"]["invalid"]:
            status = STATUS_FAILED
            extra["error"] = failure_line(extra["errors"])
            extra["reason"] = "measure: invalid run"
        measured_s = extra["timing"]["measured_s"]
        behind = self.lateness.closing()
        if behind is not None:
            self._write(self._writer.add_message, behind)

        def finish() -> dict[str, Any]:
            self._writer.on_state("finished")
            self._writer.write_histograms(totals)
            self._writer.close()
            # Written once, with the SLOs judged as a single-process run's are: on the merged
            # histograms' percentiles, the merged counts over the measured window and the
            # merged device samples.
            summary = write_final_summary(
                self.spec, self._writer, status, totals=totals, measured_s=measured_s, extra=extra
            )
            if self._writer.failure is not None:
                # The writer keeps its first failure instead of raising (sim.bundle.writer): a
                # bundle that could not be written makes the run failed, with the in-memory
                # summary and no report.
                return {**summary, "status": "failed", "error": self._failure_line()}
            _write_report(self._writer.path)
            return summary

        try:
            summary = self._pool.apply(finish)
        except Exception as exc:
            log.exception("writing the bundle failed")
            summary = {"status": "failed", "error": f"bundle: {exc}"}
        summary["bundle"] = str(self._writer.path)
        summary["finished_at"] = iso(time.time())
        self.summary = summary
        self.state = "finished"
        for listener in self.state_listeners:
            listener("finished")
        self._pool.kill()
        self._decoder.kill()
        if self.on_finished is not None:
            try:
                self.on_finished(summary)
            except Exception:
                log.exception("run-finished listener failed")

    def _check_worker_totals(self, workers: list[WorkerRun]) -> None:
        """A worker whose own final totals differ from the intervals received from it is
        named in the bundle's messages (an interval lost on the way)."""
        for worker in workers:
            if worker.final is None or not worker.final.get("totals"):
                continue
            own = {n: s.count for n, s in decode_ops(worker.final["totals"]).items() if s.count}
            merged = {n: s.count for n, s in worker.measured.items() if s.count}
            if own != merged:
                self._write(
                    self._writer.add_message,
                    f"worker {worker.index}: its own totals {own} differ from the intervals "
                    f"received from it {merged}",
                )

    def _judge_errors(self, finals: list[dict[str, Any]]) -> dict[str, Any]:
        """The merged run's error section, with the workers' first example of each class and
        the mix they were asked to run."""
        examples: dict[str, dict[str, str]] = {}
        for final in finals:
            for op, by_class in (final.get("error_examples") or {}).items():
                for cls, text in by_class.items():
                    examples.setdefault(op, {}).setdefault(cls, text)
        requested: dict[str, float] = next(
            (f["requested_pct"] for f in finals if f.get("requested_pct")), {}
        )
        return judge_errors(self.spec, self.totals, examples, requested)

    def _wait_for_locust_table(self) -> None:
        """Workers feed Locust's table through Locust's own report, which may trail the final
        report by one report period: wait (bounded) so the table ends complete."""
        expected = sum(s.count + s.error_count for s in self.totals.values())
        deadline = time.monotonic() + LOCUST_CATCHUP_S
        stats = self.environment.stats
        while stats.total.num_requests < expected and time.monotonic() < deadline:
            gevent.sleep(0.2)


def _write_report(path: Path) -> None:
    """analysis.json and report.html, as for every bundle; never fatal to the run."""
    from sim.report import write_report

    try:
        _, problem = write_report(path)
    except Exception:
        log.warning("report.html not written", exc_info=True)
        return
    if problem:
        log.warning("report.html written without analysis: %s", problem)
