"""Sessions as coroutines on the engine's loop (asyncpg, python-oracledb's async mode): the
transaction loop with its closed- or open-loop pacing, and reconnecting a session whose
connection was lost. Session threads (blocking drivers) are :mod:`sim.core.session_threads`;
both follow the same open-loop :meth:`CoroutineSessions.schedule`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from sim.config.scenario import Load
from sim.core.metrics import IntervalRecorder
from sim.core.op_errors import error_class, error_message
from sim.core.result import RunResult
from sim.core.stages import Stage
from sim.protocols import Connection, Target

RECONNECT_FIRST_DELAY_S = 0.1  # doubled after each failed attempt …
RECONNECT_MAX_DELAY_S = 2.0  # … up to this, so a returning server is found within ~2 s
YIELD_EVERY_MASK = 63  # yield to the loop at least every 64 transactions


@dataclass
class OpenLoopPace:
    """An open-loop session's place in its schedule: the stage epoch and rate epoch it was
    planned for, its period and its next due time (ns, ``perf_counter_ns``), and the future
    its wait for that time sleeps on (a rate change wakes it)."""

    epoch: int = -1
    rate_epoch: int = -1
    period_ns: int = 0
    next_due_ns: int = 0
    sleeper: asyncio.Future[None] | None = None


class CoroutineSessions:
    """The engine's coroutine sessions (a part of :class:`sim.core.engine.Engine`, which owns
    the state below)."""

    load: Load
    target: Target
    recorder: IntervalRecorder
    result: RunResult
    clock: Any
    _stopping: bool
    _stage: Stage
    _stage_epoch: int
    _rate_epoch: int
    _paces: list[OpenLoopPace]
    _threaded: Any
    _stage_started_ns: int
    _measuring: bool
    _active_changed: asyncio.Event | None
    _weights: list[float]
    _stage_ops: list[int]
    _first_measured: list[int]
    _issued: list[int]
    _connections: list[Connection]
    _t0: float

    def schedule(self, index: int, stage: Stage) -> tuple[int, int]:
        """Open loop: session ``index``'s period in this stage and its first due time (ns,
        ``perf_counter_ns``) — its weighted share of the rate, the sessions spread evenly
        over one period. The same for coroutine sessions and session threads."""
        assert stage.rate_ops_s is not None
        share = self._weights[index] / sum(self._weights[: stage.sessions])
        period_ns = int(1e9 / (stage.rate_ops_s * share))
        return period_ns, self._stage_started_ns + period_ns * index // stage.sessions

    def set_rate(self, rate_ops_s: float) -> None:
        """Change the current stage's open-loop rate while it runs (the device-IOPS controller,
        sim.run.iops_control; on the loop's thread). Each session keeps its place: the wait
        left to its next due time is scaled by the new period over the old, so a change
        neither bursts a backlog nor skips operations; waiting sessions are woken to replan."""
        self._stage = dataclasses.replace(self._stage, rate_ops_s=rate_ops_s)
        self._rate_epoch += 1  # after the stage: a session seeing the new epoch sees its rate
        for pace in self._paces:
            if pace.sleeper is not None and not pace.sleeper.done():
                pace.sleeper.set_result(None)
        if self._threaded is not None:
            self._threaded.wake()

    def repace(self, index: int, pace: Any) -> None:
        """Bring session ``index``'s schedule (an :class:`OpenLoopPace` or a session thread's
        pacer) up to the current stage and rate."""
        if pace.epoch != self._stage_epoch:
            pace.epoch, pace.rate_epoch = self._stage_epoch, self._rate_epoch
            pace.period_ns, pace.next_due_ns = self.schedule(index, self._stage)
        elif pace.rate_epoch != self._rate_epoch:
            pace.rate_epoch = self._rate_epoch
            period_ns, _ = self.schedule(index, self._stage)
            left_ns = pace.next_due_ns - time.perf_counter_ns()
            if left_ns > 0:  # behind schedule, the due time stands: the backlog is the target's
                pace.next_due_ns += left_ns * period_ns // pace.period_ns - left_ns
            pace.period_ns = period_ns

    def _start_coroutines(self, sessions: list[Any]) -> list[asyncio.Task[None]]:
        """A task per session on this loop (the stage clock is running: they start now)."""
        return [
            asyncio.create_task(self._session(i, s), name=f"session-{i}")
            for i, s in enumerate(sessions)
        ]

    async def _session(self, index: int, session: Any) -> None:
        record = self.recorder.record
        record_error = self.recorder.record_error
        perf_ns = time.perf_counter_ns
        rng = random.Random(index)
        loops_limit = self.load.loops_per_session
        think = self.load.think
        pace = OpenLoopPace() if self.load.mode == "open" else None
        if pace is not None:
            self._paces.append(pace)
        loops = 0
        issued = 0  # transactions this session has started, warm-up included
        while not self._stopping:
            stage = self._stage
            if index >= stage.sessions:  # parked: this stage runs fewer sessions
                assert self._active_changed is not None
                await self._active_changed.wait()
                continue
            if pace is not None and stage.rate_ops_s is not None:  # None: calibration
                due_start_ns = await self._open_loop_start(index, pace)
                if due_start_ns is None:
                    continue
                start_ns = due_start_ns
            else:
                start_ns = perf_ns()
            name, transaction = session.next_transaction()
            issued += 1
            self._stage_ops[index] += 1
            try:
                await transaction
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                record_error(name, error_class(exc), partial(error_message, exc))
                if self.target.is_disconnect(exc):
                    await self._reconnect(index, session)
            else:
                record(name, (perf_ns() - start_ns) // 1000)
            if self._measuring:
                loops = self._count_measured(index, issued, loops)
                if loops_limit is not None and loops >= loops_limit:
                    return
            if think is not None and think.max_ms > 0 and loops % think.every_n_loops == 0:
                await asyncio.sleep(rng.uniform(think.min_ms, think.max_ms) / 1000)
            elif not issued & YIELD_EVERY_MASK:
                # A transaction that completes without suspending (a cached answer) would
                # otherwise starve the ticker and the stage timer.
                await asyncio.sleep(0)

    async def _reconnect(self, index: int, session: Any) -> None:
        """The session lost its connection (server restarted, network cut): reconnect with
        exponential backoff until it works or the run stops, and log the outage."""
        lost = self.clock()
        old = self._connections[index]
        with contextlib.suppress(Exception):
            await old.close()
        delay = RECONNECT_FIRST_DELAY_S
        attempts = 0
        while not self._stopping:
            attempts += 1
            try:
                conn = await self.target.connect()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.recorder.record_error("connect", error_class(exc), partial(error_message, exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY_S)
                continue
            self._connections[index] = conn
            session.replace_connection(conn)
            self.result.outages.append(
                {
                    "session": index,
                    "lost_t": round(lost - self._t0, 3),
                    "restored_t": round(self.clock() - self._t0, 3),
                    "attempts": attempts,
                }
            )
            return

    async def _open_loop_start(self, index: int, pace: OpenLoopPace) -> int | None:
        """When the session's next transaction counts as started (ns), after waiting for its
        due time; None when a stop or a new stage cut the wait short (the caller looks again)."""
        self.repace(index, pace)
        delay_ns = pace.next_due_ns - time.perf_counter_ns()
        if delay_ns > 0:
            # On schedule: the timer may wake us up to a millisecond late; that is the
            # client's slop, not the target's, so time from the actual start.
            await _pace_sleep(pace, delay_ns / 1e9)
            if (
                self._stopping
                or pace.epoch != self._stage_epoch
                or pace.rate_epoch != self._rate_epoch
            ):
                return None
            start_ns = time.perf_counter_ns()
        else:
            # Behind schedule because earlier transactions were slow: time from the
            # intended start, or the stall would vanish (coordinated omission).
            start_ns = pace.next_due_ns
        pace.next_due_ns += pace.period_ns
        return start_ns

    def _count_measured(self, index: int, issued: int, loops: int) -> int:
        """Count a measured transaction of session ``index``: its loops so far, its first
        and last measured operation (for the exact-mix check)."""
        if loops == 0:
            self._first_measured[index] = issued - 1
        loops += 1
        self.result.loops_completed[index] = loops
        self._issued[index] = issued
        return loops


async def _pace_sleep(pace: OpenLoopPace, seconds: float) -> None:
    """``asyncio.sleep(seconds)`` that :meth:`CoroutineSessions.set_rate` can end early (the
    same future and timer asyncio.sleep makes, kept where set_rate finds it)."""
    loop = asyncio.get_running_loop()
    pace.sleeper = future = loop.create_future()
    handle = loop.call_later(seconds, _wake, future)
    try:
        await future
    finally:
        handle.cancel()
        pace.sleeper = None


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
