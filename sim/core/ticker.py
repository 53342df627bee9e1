"""The engine's ticker: an interval closed every ``interval_s`` on the run clock (a stage
boundary closes one early, so no interval mixes phases), the collectors sampled at the same
instant (those reading a local file read it at the close itself, see
:meth:`sim.protocols.Collector.read_at`), and the interval handed to the listeners in order."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sim.core.events import EngineEvents
from sim.core.sampler import CollectorSampler
from sim.core.stages import Stage

if TYPE_CHECKING:
    # Annotations only: a capture reads MIN_INTERVAL_FRACTION here and needs no numpy (#25).
    from sim.core.metrics import Interval, IntervalRecorder

MIN_INTERVAL_FRACTION = 0.05  # shorter leftovers are merged into the next interval


class IntervalTicker:
    """The engine's intervals (a part of :class:`sim.core.engine.Engine`, which owns the
    state below)."""

    interval_s: float
    clock: Any
    events: EngineEvents
    recorder: IntervalRecorder
    _sampler: CollectorSampler
    _publishing: asyncio.Lock
    _stage: Stage
    _stage_started: float
    _stage_due: float | None
    _interval_start: float
    _interval_seq: int
    _tick: int
    _ticker_done: bool
    _tick_sleep: asyncio.Future[None] | None
    _t0: float

    def tick_at(self, tick: int) -> float:
        """When the ``tick``-th interval closes on the run clock (a stage boundary may close
        one earlier). Session threads read it too (``sim.core.session_native.deadline_ns``:
        ``tick_at(_tick + 1)`` is the next close); plain attribute reads, no lock."""
        return self._t0 + tick * self.interval_s

    async def _ticker(self) -> None:
        """Close an interval every ``interval_s`` on the run clock. Stopped only while it
        sleeps (see _stop_ticker): an interval it has closed is always published."""
        while not self._ticker_done:
            tick = self._tick + 1
            delay = max(self.tick_at(tick) - self.clock(), 0)
            self._tick_sleep = asyncio.ensure_future(asyncio.sleep(delay))
            try:
                await self._tick_sleep
            except asyncio.CancelledError:
                if self._ticker_done:
                    return
                raise
            self._tick = tick
            if self._stage_ends_just_after(self.tick_at(tick)):
                continue  # the boundary closes this interval, a few ms longer than usual
            interval = self._close_interval()
            if interval is not None:
                await self._publish(interval)

    def _stage_ends_just_after(self, tick_due: float) -> bool:
        """Whether the current stage is due to end less than MIN_INTERVAL_FRACTION after this
        tick (a warm-up of a whole number of intervals ends a hair after its last tick).

        Closing here would leave the boundary a fragment of a few ms; whether that fragment
        exists would then depend on which of two timers fired first, and the workers of a
        distributed run, whose intervals are merged by index, could disagree on it.
        """
        if self._stage_due is None:
            return False
        ends_after = self._stage_due - tick_due
        return 0 <= ends_after < MIN_INTERVAL_FRACTION * self.interval_s

    def _close_interval(self, *, stage_ends: bool = False) -> Interval | None:
        """Hand the current interval over, synchronously: no transaction can complete between
        this and what the caller does next (a stage boundary enters the new stage at once, so
        every completion lands in the interval and the phase it belongs to).

        A leftover shorter than MIN_INTERVAL_FRACTION (a tick just after a stage boundary) is
        merged into the next interval, which is of the same stage. When the stage itself ends
        (``stage_ends``: a boundary, or the end of the run) a leftover holding completions is
        closed on its own however short: merged, a warm-up's last milliseconds would count as
        measured (and a sweep step's as the next step's) and the mix would no longer match
        its rule to the op.
        """
        now = self.clock()
        if now - self._interval_start < MIN_INTERVAL_FRACTION * self.interval_s and not (
            stage_ends and self.recorder.pending
        ):
            return None
        # The counters read from local files are read now, before anything else runs: this
        # instant is the interval's end for its operations and its storage rates alike.
        t_end = now - self._t0
        self._sampler.read_at(t_end)
        stage = self._stage
        interval = self.recorder.rotate(
            self._interval_seq, self._interval_start - self._t0, t_end, stage.phase, stage.step
        )
        self._interval_seq += 1
        self._interval_start = now
        return interval

    def _is_fragment(self, interval: Interval) -> bool:
        return interval.t_end - interval.t_start < MIN_INTERVAL_FRACTION * self.interval_s

    async def _publish(self, interval: Interval, *, sample: bool = True) -> None:
        """Sample the collectors for the interval just closed and tell the listeners.

        ``sample=False`` for a boundary's fragment (a few ms after a tick, common when a
        warm-up is a whole number of intervals): its storage rates over milliseconds would be
        noise, and the collectors' next reading covers it, as iostat's next report would.
        """
        # In interval order: a fragment closed while the tick's interval is still being
        # sampled must not reach the listeners (the bundle's CSVs) before it.
        async with self._publishing:
            samples = await self._sampler.sample(interval.t_end) if sample else []
            self.events.interval.fire(interval=interval, samples=samples)
