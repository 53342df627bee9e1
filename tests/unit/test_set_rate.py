"""A stage's open-loop rate changed while it runs (``Engine.set_rate``, the device-IOPS
controller's actuator, sim.run.iops_control): each session keeps its place in its schedule
(the wait left to its next operation scaled by the new period over the old), a session
waiting for a slow rate's next operation is woken to replan, and a backlog stays a backlog
(no burst, no skipped operations)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core.coroutine_sessions import CoroutineSessions, OpenLoopPace
from sim.core.engine import Engine
from sim.core.result import OUTCOME_COMPLETED
from sim.core.stages import Stage
from tests.support.fakes import PingParameters, PingWorkload, TimedTarget

S = 1_000_000_000  # ns


def _sessions(rate: float, started_ns: int = 0) -> Any:
    """The pacing part of an engine: one session, a stage at ``rate`` ops/s that started at
    ``started_ns`` on the schedule's clock."""
    host: Any = CoroutineSessions.__new__(CoroutineSessions)
    host._weights = [1.0]
    host._stage = Stage("measure", 0, 10.0, 1, rate)
    host._stage_epoch, host._rate_epoch = 1, 0
    host._stage_started_ns = started_ns
    host._paces, host._threaded = [], None
    return host


@pytest.mark.timing  # reads the clock the schedule is kept on
def test_the_wait_left_is_scaled_and_a_backlog_stays() -> None:
    host = _sessions(1.0, time.perf_counter_ns())
    pace = OpenLoopPace()
    host.repace(0, pace)
    assert pace.period_ns == S
    now = time.perf_counter_ns()
    pace.next_due_ns = now + S // 2  # half a period to wait at 1 op/s
    host.set_rate(4.0)
    host.repace(0, pace)
    assert pace.period_ns == S // 4
    # Half a 1 s period left becomes half a 0.25 s period: ~0.125 s from now.
    assert pace.next_due_ns - now == pytest.approx(S // 8, abs=S // 100)
    behind = time.perf_counter_ns() - S  # a second behind schedule (a slow target)
    pace.next_due_ns = behind
    host.set_rate(8.0)
    host.repace(0, pace)
    assert pace.next_due_ns == behind and pace.period_ns == S // 8


def test_a_new_stage_plans_afresh() -> None:
    host = _sessions(2.0)
    pace = OpenLoopPace()
    host.repace(0, pace)
    host._stage = Stage("measure", 1, 10.0, 1, 10.0)
    host._stage_epoch += 1
    host.repace(0, pace)
    assert pace.period_ns == S // 10 and pace.next_due_ns == host._stage_started_ns


def test_set_rate_wakes_the_sleeping_session_and_the_threads() -> None:
    host = _sessions(1.0)
    woken: list[bool] = []
    host._threaded = SimpleNamespace(wake=lambda: woken.append(True))

    async def go() -> None:
        pace = OpenLoopPace()
        host._paces.append(pace)
        loop = asyncio.get_running_loop()
        pace.sleeper = loop.create_future()
        host.set_rate(5.0)
        assert pace.sleeper.done()

    asyncio.run(go())
    assert woken == [True] and host._stage.rate_ops_s == 5.0 and host._rate_epoch == 1


@pytest.mark.timing
def test_a_run_follows_a_rate_raised_mid_stage_at_once_without_a_burst() -> None:
    # One session at 2 ops/s; 0.2 s into the 1.5 s stage the rate becomes 50 ops/s. The
    # session, asleep until its next operation 0.5 s in, is woken and replans: ~0.2 s at 2
    # ops/s (1 operation) then ~1.3 s at 50 (65): about 66. Not woken, it would wait to 0.5 s
    # (~51); planned afresh from the stage's start, it would burst the 10 operations of the
    # first 0.2 s at 50 ops/s (~76). ±4: an operation at each edge, timers late under load.
    load = Load(mode="open", rate_ops_s=2.0, duration_s=1.5)
    target = TimedTarget(service_s=0.001)
    engine = Engine(PingWorkload(PingParameters(sessions=1), target), target, load)

    def on_stage(stage: Stage, log: dict[str, Any]) -> None:
        asyncio.get_running_loop().call_later(0.2, engine.set_rate, 50.0)

    engine.events.stage.add_listener(on_stage)
    result = asyncio.run(engine.run())
    assert result.outcome == OUTCOME_COMPLETED, result.error
    (entry,) = result.stage_log
    assert sum(entry["session_ops"]) == pytest.approx(66, abs=4), entry


@pytest.mark.timing  # judges where stages start on the run's clock
def test_steps_end_on_their_schedule_so_late_boundaries_do_not_add_up() -> None:
    # Ten 0.2 s steps, each one's end made ~40 ms late on purpose: 10 ms before it is due,
    # the loop is blocked for 50 ms (a busy host, a slow interval close), so the timer that
    # ends the step fires late. A step's end is due on the schedule (the first step's start
    # plus the durations before it), so each step starts ~40 ms after its place and the
    # lateness does not add up; ended a duration after its own late start, the tenth would
    # start 9 x 40 = 360 ms late. Bound: 40 ms plus 100 ms of timer and scheduling slop for a
    # host under load, far from the 360 ms of the drift.
    steps = [{"duration_s": 0.2} for _ in range(10)]
    load = Load(mode="open", rate_ops_s=20.0, duration_s=0.2, warmup_s=0.2, steps=steps)
    target = TimedTarget(service_s=0.001)
    engine = Engine(PingWorkload(PingParameters(sessions=1), target), target, load)

    def late_end(stage: Stage, log: dict[str, Any]) -> None:
        if stage.step is not None:
            asyncio.get_running_loop().call_later(0.19, time.sleep, 0.05)

    engine.events.stage.add_listener(late_end)
    result = asyncio.run(engine.run())
    assert result.outcome == OUTCOME_COMPLETED, result.error
    starts = [e["t"] for e in result.stage_log if e["phase"] == "measure"]
    assert len(starts) == 10, result.stage_log
    lateness = [t - (starts[0] + 0.2 * i) for i, t in enumerate(starts)]
    assert max(lateness) < 0.04 + 0.1, lateness
