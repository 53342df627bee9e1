"""Start, sample and stop a run's collectors together, each call bounded by a timeout.

One sampler serves the load engine (``sim.core.engine``: sampled at each interval's close) and the
storage baseline (``sim.baseline.run``: sampled once a second while fio runs), so both treat a
misbehaving collector the same way: a collector that fails to start is dropped, one that fails
or hangs in a sample costs that sample only, and neither ever costs the run. Failure messages
are masked first, because a collector's driver may echo its connection string (or, ONTAP, its
token).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sim.protocols import Collector, Sample
from sim.secrets import redact_known

log = logging.getLogger(__name__)

OnCollectorError = Callable[[str, str], None]  # (source, masked message)


class CollectorSampler:
    """The collectors of one run, sampled concurrently on the caller's clock.

    ``collectors`` is kept, not copied: the engine adds the collectors that need its opened
    target to the same list before ``start``.
    """

    def __init__(
        self, collectors: list[Collector], timeout_s: float, on_error: OnCollectorError
    ) -> None:
        self.collectors = collectors
        self.timeout_s = timeout_s
        self.on_error = on_error
        self.started: list[Collector] = []
        # One sample at a time: the engine publishes from its ticker and from stage
        # boundaries, which can close intervals milliseconds apart; two samples in flight
        # would share a collector's connection ("another operation is in progress") and its
        # previous reading. FIFO, so the readings stay in the order of their intervals.
        self._sampling = asyncio.Lock()

    async def start(self, now: float) -> list[dict[str, Any]]:
        """Start each collector; those that fail are reported and dropped. Returns the
        started collectors' descriptions (for the bundle)."""
        described: list[dict[str, Any]] = []
        for collector in self.collectors:
            try:
                await asyncio.wait_for(collector.start(now), self.timeout_s)
            except Exception as exc:
                self._failed(collector, exc)
                continue
            self.started.append(collector)
            described.append(collector.describe())
        return described

    def read_at(self, now: float) -> None:
        """Have the collectors that read a local file take the reading for ``now`` at once
        (:meth:`sim.protocols.Collector.read_at`); called at the instant ``now`` stands for.
        A failure here costs nothing: that collector reads in ``sample`` instead."""
        for collector in self.started:
            try:
                collector.read_at(now)
            except Exception as exc:
                log.warning("collector %s: reading at %.3f failed: %s", collector.source, now, exc)

    async def sample(self, now: float) -> list[Sample]:
        """Every started collector's samples for the interval ending at ``now``, gathered
        concurrently so one slow collector delays the others by its timeout at most."""
        if not self.started:
            return []
        async with self._sampling:
            results = await asyncio.gather(
                *(asyncio.wait_for(c.sample(now), self.timeout_s) for c in self.started),
                return_exceptions=True,
            )
        samples: list[Sample] = []
        for collector, result in zip(self.started, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancellation and exits propagate
                self._failed(collector, result)
            else:
                samples.extend(result)
        return samples

    async def stop(self) -> None:
        """Stop every collector given, started or not: one that failed half-way through its
        start may already hold a connection or a thread pool."""
        for collector in self.collectors:
            try:
                await asyncio.wait_for(collector.stop(), self.timeout_s)
            except Exception as exc:
                log.warning("collector %s did not stop cleanly: %s", collector.source, exc)

    def _failed(self, collector: Collector, exc: Exception) -> None:
        message = (
            "timed out"
            if isinstance(exc, TimeoutError)
            else redact_known(f"{type(exc).__name__}: {exc}")
        )
        log.warning("collector %s: %s", collector.source, message)
        self.on_error(collector.source, message)
