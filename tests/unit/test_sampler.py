"""The collector sampler shared by the engine and the baseline: failures cost a sample, never
the run; a hung collector is cut off at its timeout; messages are masked; everything stops."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from sim.core.sampler import CollectorSampler
from sim.protocols import Collector, Sample
from sim.secrets import SecretRef, resolve_secret

TIMEOUT_S = 0.2


class Counting(Collector):
    """Reports how many times it was sampled and the interval it was given."""

    source = "counting"

    def __init__(self) -> None:
        self.prev: float | None = None
        self.stopped = 0

    async def start(self, now: float) -> None:
        self.prev = now

    async def sample(self, now: float) -> list[Sample]:
        assert self.prev is not None
        span, self.prev = now - self.prev, now
        return [Sample(self.source, "dev", {"span_s": span})]

    async def stop(self) -> None:
        self.stopped += 1


class Hanging(Counting):
    source = "hanging"

    async def sample(self, now: float) -> list[Sample]:
        await asyncio.sleep(3600)
        return []


class FailsToStart(Counting):
    """Takes a resource, then fails: stop() must still be called to give it back."""

    source = "half-started"

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message
        self.holding = False

    async def start(self, now: float) -> None:
        self.holding = True
        raise OSError(self.message)

    async def stop(self) -> None:
        await super().stop()
        self.holding = False


def test_a_failed_start_drops_the_collector_but_still_stops_it(monkeypatch) -> None:
    monkeypatch.setenv("DBSIM_TEST_SAMPLER_SECRET", "s3cr3t-Sampler")
    secret = resolve_secret(SecretRef(password_env="DBSIM_TEST_SAMPLER_SECRET"), "test")
    errors: list[tuple[str, str]] = []
    good, bad = Counting(), FailsToStart(f"cannot connect to user=x password={secret}")
    sampler = CollectorSampler([good, bad], TIMEOUT_S, lambda s, m: errors.append((s, m)))

    async def go() -> tuple[list[dict[str, Any]], list[Sample]]:
        described = await sampler.start(0.0)
        samples = await sampler.sample(1.0)
        await sampler.stop()
        return described, samples

    described, samples = asyncio.run(go())
    assert described == [{"source": "counting"}]
    assert sampler.started == [good]
    assert [s.source for s in samples] == ["counting"]
    assert errors == [("half-started", "OSError: cannot connect to user=x password=***")]
    assert (good.stopped, bad.stopped, bad.holding) == (1, 1, False)


@pytest.mark.timing
def test_a_hanging_collector_costs_one_timeout_per_sample_and_is_counted_each_time() -> None:
    errors: list[tuple[str, str]] = []
    good, hung = Counting(), Hanging()
    sampler = CollectorSampler([good, hung], TIMEOUT_S, lambda s, m: errors.append((s, m)))

    async def go() -> tuple[list[list[Sample]], list[float]]:
        await sampler.start(0.0)
        out, took = [], []
        for now in (1.0, 2.0, 3.0):
            t0 = time.perf_counter()
            out.append(await sampler.sample(now))
            took.append(time.perf_counter() - t0)
        await sampler.stop()
        return out, took

    out, took = asyncio.run(go())
    # The good collector's readings arrive every time, each over its own one-second span.
    assert [[s.values["span_s"] for s in samples] for samples in out] == [[1.0], [1.0], [1.0]]
    assert errors == [("hanging", "timed out")] * 3
    # Sampled concurrently: each call waits for the hung one's timeout, not longer.
    assert all(TIMEOUT_S * 0.9 <= t < TIMEOUT_S + 0.5 for t in took), took


def test_cancellation_propagates_instead_of_counting_as_a_failure() -> None:
    errors: list[tuple[str, str]] = []
    sampler = CollectorSampler([Hanging()], 60.0, lambda s, m: errors.append((s, m)))

    async def go() -> str:
        await sampler.start(0.0)
        task = asyncio.create_task(sampler.sample(1.0))
        await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "finished"

    assert asyncio.run(go()) == "cancelled"
    assert errors == []


class Exclusive(Counting):
    """A collector on one connection: a second sample while one is in flight is an error."""

    source = "exclusive"

    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.spans: list[float] = []

    async def sample(self, now: float) -> list[Sample]:
        if self.busy:
            raise RuntimeError("another operation is in progress")
        self.busy = True
        try:
            await asyncio.sleep(0.05)
            samples = await super().sample(now)
            self.spans.append(samples[0].values["span_s"])
            return samples
        finally:
            self.busy = False


def test_samples_closed_milliseconds_apart_run_one_after_the_other_in_order() -> None:
    """The engine's ticker and a stage boundary can close intervals a few ms apart."""
    errors: list[tuple[str, str]] = []
    collector = Exclusive()
    sampler = CollectorSampler([collector], TIMEOUT_S, lambda s, m: errors.append((s, m)))

    async def go() -> None:
        await sampler.start(0.0)
        await asyncio.gather(sampler.sample(1.0), sampler.sample(1.01), sampler.sample(2.0))

    asyncio.run(go())
    assert errors == []
    assert collector.spans == pytest.approx([1.0, 0.01, 0.99])
