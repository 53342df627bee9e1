"""The live capture itself: the collectors alone, sampled on a clock, into a capture bundle.

No engine, no session, no workload: :class:`Capture` opens the :class:`~sim.capture.watch.
WatchedTarget`, builds the collectors the way a run does (:func:`sim.run.runner.
build_collectors`, told ``capture`` so the database collectors read their sessions' activity
and check their grants), samples them with the run's :class:`~sim.core.sampler.
CollectorSampler` and hands each interval to the run's :class:`~sim.bundle.writer.
BundleWriter`, so the bundle is a run bundle (appended per interval, readable while the capture
goes) with ``kind: capture`` and no operations.

The clock: intervals end on a grid of ``interval_s`` from the first reading (t = 0); a sample
that takes long delays its own row, not the grid. ``--max-bytes`` may double the interval
(:mod:`sim.capture.budget`) from the next interval on. A stop (SIGINT/SIGTERM, a full disk)
closes the interval in progress when it is at least 5 % long, and the bundle is finished
whole either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sim import registry
from sim.bundle.files import new_bundle_dir
from sim.bundle.writer import BundleWriter
from sim.capture.budget import SizeBudget
from sim.capture.own import OwnUsage
from sim.capture.plan import CapturePlan
from sim.capture.summary import CaptureFacts, bundle_bytes, final_extra
from sim.capture.watch import WatchedTarget
from sim.core.intervals import Interval  # not sim.core.metrics: a capture needs no numpy
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED, OUTCOME_INTERRUPTED
from sim.core.sampler import CollectorSampler
from sim.core.ticker import MIN_INTERVAL_FRACTION
from sim.errors import ConfigError, OutputDirectoryError
from sim.protocols import EngineContext
from sim.run.runner import build_collectors
from sim.secrets import redact_known

log = logging.getLogger(__name__)

PHASE = "measure"
#: Threads for the collectors' blocking reads and the bundle's writes.
POOL_THREADS = 4
#: Collector context key: the database collectors add their sessions' activity and check
#: the grants it needs (storage.collectors.database, storage.collectors.innodb).
CAPTURE_OPTION = "capture"


class Capture:
    """One live capture, from the first reading to the finished bundle."""

    def __init__(
        self, plan: CapturePlan, target: WatchedTarget, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.plan = plan
        self.target = target
        self.clock = clock
        self.facts = CaptureFacts(interval_s=plan.interval_s)
        section = plan.section
        self.budget = SizeBudget(section.max_bytes, plan.interval_s) if section.max_bytes else None
        self.own = OwnUsage()
        self.bundle: BundleWriter | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending_stop: tuple[str, str] | None = None
        self._start_errors: list[tuple[str, str]] = []
        #: Told once the bundle exists: what is watched, by which collectors, into which bundle.
        self.on_started: Callable[[dict[str, Any]], None] | None = None

    # ------------------------------------------------------------------ control

    def request_stop(self, reason: str, outcome: str = OUTCOME_INTERRUPTED) -> None:
        """Stop after the interval in progress (any thread); the first reason stands."""
        if self._loop is None or self._stop is None:
            self._pending_stop = self._pending_stop or (reason, outcome)
            return
        self._loop.call_soon_threadsafe(self._stop_now, reason, outcome)

    def _stop_now(self, reason: str, outcome: str) -> None:
        assert self._stop is not None
        if not self._stop.is_set():
            self.facts.outcome, self.facts.reason = outcome, reason
            self._stop.set()

    def _collector_failed(self, source: str, message: str) -> None:
        self.facts.collector_errors[source] = self.facts.collector_errors.get(source, 0) + 1
        if self.bundle is None:
            self._start_errors.append((source, message))
        else:
            self.bundle.on_collector_error(source, message)

    # ------------------------------------------------------------------ the capture

    async def run(self) -> dict[str, Any]:
        """Capture until the duration, the size cap or a stop; returns the final summary.
        Raises (nothing written) when the capture is refused before its first interval."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._pending_stop is not None:
            self._stop_now(*self._pending_stop)
        executor = concurrent.futures.ThreadPoolExecutor(POOL_THREADS, "dbsim-capture")
        sampler = CollectorSampler(
            [], self.plan.scenario.collectors.timeout_s, self._collector_failed
        )
        try:
            await self.target.open(EngineContext(self._loop, executor))
            try:
                await self._start(sampler)
                return await self._capture(sampler)
            finally:
                await sampler.stop()
                with contextlib.suppress(Exception):
                    await self.target.close()
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    async def _start(self, sampler: CollectorSampler) -> None:
        """Build and start the collectors (their first reading is t = 0), refuse the capture
        when the database's statistics cannot be read, then create the bundle."""
        settings = self.plan.scenario.collectors
        sampler.collectors.extend(build_collectors(settings, self.target, {CAPTURE_OPTION: True}))
        self.own.start()
        self.facts.started_wall = time.time()
        self._t0 = self.clock()
        with _sampler_log_quiet():  # start failures are said below: a refusal or a note
            self.facts.collectors = await sampler.start(0.0)
        database = registry.collector_with_role(registry.ROLE_DATABASE)
        refused = [
            message.removeprefix("CollectorError: ")
            for source, message in self._start_errors
            if source == database
        ]
        if refused and self.plan.target is not None:
            raise ConfigError("\n".join(refused))
        if not sampler.started:
            raise ConfigError(
                "collectors: none could start, so there is nothing to capture"
                + "".join(f"\n{source}: {message}" for source, message in self._start_errors)
            )
        self.bundle = self._new_bundle()
        for source, message in self._start_errors:
            self.bundle.on_collector_error(source, message)
        if self.on_started is not None:
            self.on_started(
                {
                    "bundle": str(self.bundle.path),
                    "target": self.target.describe(),
                    "sources": [c.get("source") for c in self.facts.collectors],
                    "not_started": list(self._start_errors),
                }
            )

    def _new_bundle(self) -> BundleWriter:
        output = self.plan.scenario.output
        path = new_bundle_dir(Path(output.directory), output.name or self.plan.scenario.name)
        try:
            bundle = BundleWriter(
                path, self.plan.resolved, output.flush_interval_s, on_failure=self._bundle_failed
            )
        except OutputDirectoryError:
            shutil.rmtree(path, ignore_errors=True)  # made a moment ago for this capture alone
            raise
        bundle.running_extra = self.facts.running(self.target.describe(), self.budget, self.own)
        bundle.on_state(PHASE)
        if self.budget is not None:
            self.budget.last_size = bundle_bytes(path)
        return bundle

    def _bundle_failed(self, message: str) -> None:
        self.request_stop(message, OUTCOME_FAILED)

    async def _capture(self, sampler: CollectorSampler) -> dict[str, Any]:
        try:
            await self._intervals(sampler)
        except Exception as exc:  # a bug or a collector's surprise: the bundle is finished anyway
            log.exception("capture failed")
            self.facts.outcome, self.facts.reason = (
                OUTCOME_FAILED,
                f"unexpected {type(exc).__name__}",
            )
            self.facts.error = redact_known(f"{type(exc).__name__}: {exc}")
        return self._finish()

    async def _intervals(self, sampler: CollectorSampler) -> None:
        assert self.bundle is not None and self._stop is not None
        duration = self.plan.section.duration_s
        due = t_prev = 0.0
        index = 0
        while True:
            due = min(due + self._interval_s(), duration) if duration else due + self._interval_s()
            await self._wait_until(due)
            now = self.clock() - self._t0
            if self._stop.is_set() and now - t_prev < MIN_INTERVAL_FRACTION * self._interval_s():
                break  # a stop just after an interval closed: no fragment of a few ms
            sampler.read_at(now)  # local files read at the interval's end (Collector.read_at)
            samples = await sampler.sample(now)
            self.bundle.on_interval(Interval(index, t_prev, now, PHASE, None, {}), samples)
            index, t_prev = index + 1, now
            self.facts.measured_s = now
            if self._after_interval(now) or self._stop.is_set():
                break
            if duration and now >= duration - 1e-6:
                self.facts.outcome, self.facts.reason = OUTCOME_COMPLETED, "duration reached"
                return

    def _interval_s(self) -> float:
        return self.budget.interval_s if self.budget is not None else self.plan.interval_s

    async def _wait_until(self, due: float) -> None:
        assert self._stop is not None
        delay = self._t0 + due - self.clock()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    def _after_interval(self, now: float) -> bool:
        """Refresh the running facts; apply the size cap. True when the capture must stop."""
        assert self.bundle is not None
        self.facts.refresh(self.own)
        if self.budget is None:
            return False
        action = self.budget.after_interval(bundle_bytes(self.bundle.path), now)
        if action == "coarsen":
            step = self.budget.steps[-1]
            self.bundle.add_message(
                f"capture.max_bytes: the bundle held {step['bundle_bytes']:,} of "
                f"{self.budget.max_bytes:,} bytes at t={step['t']:.1f} s; sampling every "
                f"{step['interval_s']:g} s from then on"
            )
        elif action == "stop":
            self.facts.outcome, self.facts.reason = OUTCOME_COMPLETED, self.budget.stopped
            self.bundle.add_message(self.budget.stopped)
            return True
        return False

    def _finish(self) -> dict[str, Any]:
        """The final summary, written once; the time series are closed first."""
        assert self.bundle is not None
        bundle = self.bundle
        bundle.on_failure = None
        bundle.on_state("finished")
        bundle.close()
        if bundle.failure is not None:
            self.facts.outcome = OUTCOME_FAILED
            self.facts.error = f"{bundle.failure}; the bundle keeps what was written before"
        extra = final_extra(self.facts, self.target.describe(), self.own, bundle.storage_summary())
        summary = bundle.write_summary(self.facts.outcome, extra=extra)
        summary["bundle"] = str(bundle.path)
        return summary


@contextlib.contextmanager
def _sampler_log_quiet() -> Iterator[None]:
    sampler_log = logging.getLogger(CollectorSampler.__module__)
    level = sampler_log.level
    sampler_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        sampler_log.setLevel(level)


__all__ = ["CAPTURE_OPTION", "Capture"]
