"""The closed loop on the delivered device IOPS (sim.run.iops_control): the controller's law on
recorded-shape numbers (a jump of the cost per operation, a target too slow, noise), the
tolerance, and the engine holding the IOPS asked while a fake device's I/Os per call drift,
against the open loop measured on the same drift; a curve of short steps followed."""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from sim.config.scenario import Load
from sim.core.engine import Engine
from sim.core.result import OUTCOME_COMPLETED
from sim.protocols import Collector, Sample
from sim.run.calibration import attach
from sim.run.iops_control import MAKEUP_SHARE, STEP_CLAMP, Controller, judge_stage, tolerance
from tests.support.fakes import PingParameters, PingWorkload, TimedTarget

WHERE = (1.0, "measure", 0)
#: The fake runs' collector interval: a cache warming over a minute of 1 s intervals is
#: compressed to 3 s of these, the same 30 intervals.
INTERVAL_S = 0.1


def test_a_jump_of_the_cost_is_followed_within_a_few_intervals() -> None:
    # 400 IOPS asked at 4 I/Os per op: 100 ops/s; then each op costs 2 (a cache warmed).
    control = Controller(4.0)
    rate = control.update(400, 100, 400, 100, WHERE)
    assert rate == pytest.approx(100)
    delivered = []
    for _ in range(15):
        delivered.append(2.0 * rate)  # the sessions realise the rate offered
        rate = control.update(400, rate, delivered[-1], rate, WHERE)
    # The first interval misses by half (200 of 400); the sums halve the cost's error each
    # interval, the trend takes it on further and overshoots a little before settling.
    assert delivered[0] == pytest.approx(200)
    assert abs(delivered[2] - 400) < 0.5 * 200
    assert max(delivered) < 400 * 1.25, delivered
    assert all(abs(d - 400) < 0.02 * 400 for d in delivered[-4:]), delivered
    assert control.io_per_op == pytest.approx(2.0, rel=0.02)


@pytest.mark.timing  # names delivered_iops, the stage's figure; arithmetic only, instant
def test_a_target_too_slow_does_not_wind_the_rate_up() -> None:
    # 1,000 IOPS asked at 2 per op (500 ops/s), the target completes only 50 ops/s: the
    # device delivers 100. The state is the cost (100 / 50 = 2), so the rate stays 500.
    control = Controller(2.0)
    rates = [control.update(1000, 500, 100, 50, WHERE, sessions=2) for _ in range(20)]
    assert rates == pytest.approx([500] * 20)
    assert all(row[-1] for row in control.rows)  # every interval behind its schedule
    entry = {"phase": "measure", "rate_iops": 1000.0, "delivered_iops": 100.0}
    entry.update(duration_s=20.0, io_per_op=2.0)
    judge_stage(entry, behind=20, intervals=20)
    assert entry["iops_held"] is False
    assert entry["iops_unmet"].startswith("target too slow: 100 of 1,000 IOPS asked delivered")


def test_a_stall_of_the_sessions_is_caught_up_by_their_schedule_not_made_up_twice() -> None:
    # CI's failing warming stage: the generator's host did not run it for 0.3 s. 400 IOPS at 2
    # I/Os per op (200 ops/s): a 0.4 s interval completes 20 ops/s (behind, adds nothing),
    # then the open-loop schedule runs its 72 late operations within 0.1 s (920 ops/s, 1,840
    # IOPS). That catch-up repays the stall; counted as a surplus, the make-up took 144 I/Os
    # back at 48 IOPS less for three intervals (176 ops/s), and the stage ended ~7 % short.
    control = Controller(2.0)
    for _ in range(5):
        control.update(400, 200, 400, 200, WHERE)
    control.update(400, 200, 40, 20, WHERE, sessions=2, seconds=0.4)
    assert control.rows[-1][-1]  # behind
    rate = control.update(400, 200, 1840, 920, WHERE, sessions=2, seconds=0.1)
    assert rate == pytest.approx(200, rel=0.01)
    # A shortfall the schedule does not owe is still made up: 360 delivered at 200 ops/s.
    assert control.update(400, 200, 360, 200, WHERE) > 200 * 1.05


@pytest.mark.timing  # names delivered_iops, the stage's figure; arithmetic only, instant
def test_operations_never_run_by_a_stages_end_name_it_unmet() -> None:
    # 400 IOPS for 4 s (tolerance 5.4 %), 345 delivered with 3 of 40 intervals behind: the
    # sessions' host stopped for 0.6 s at the stage's end, and 220 device I/Os of operations
    # offered were never run (55 IOPS). 345 + 55 is what the loop asked: the host's, said.
    entry = {"phase": "measure", "rate_iops": 400.0, "delivered_iops": 345.0}
    entry.update(duration_s=4.0, io_per_op=2.0)
    judge_stage(entry, behind=3, intervals=40, owed=220.0)
    assert entry["iops_held"] is False and entry["iops_not_run"] == 55.0
    assert entry["iops_unmet"].startswith("target too slow: 345 of 400 IOPS asked delivered")
    assert entry["iops_unmet"].endswith(", 55 IOPS of them not run by the stage's end")
    # A shortfall they do not account for is the loop's own: not held, and not excused.
    entry = {"phase": "measure", "rate_iops": 400.0, "delivered_iops": 345.0}
    entry.update(duration_s=4.0, io_per_op=2.0)
    judge_stage(entry, behind=3, intervals=40, owed=40.0)
    assert entry["iops_held"] is False and "iops_unmet" not in entry


def test_one_burst_moves_the_cost_by_at_most_the_step_clamp() -> None:
    control = Controller(2.0)
    control.update(200, 100, 200, 100, WHERE)
    control.update(200, 100, 200_000, 100, WHERE)  # a checkpoint's writes in one interval
    assert control.io_per_op == pytest.approx(2.0 * STEP_CLAMP)


def test_no_device_figure_or_no_operation_leaves_the_estimate() -> None:
    control = Controller(3.0)
    assert control.update(300, 100, None, 100, WHERE) == pytest.approx(100)
    assert control.update(300, 100, 250, 0.0, WHERE) == pytest.approx(100)
    assert control.io_per_op == 3.0 and control.rows[0][4] is None


def test_the_open_loop_keeps_the_calibrations_rate() -> None:
    control = Controller(4.0, closed=False)
    assert control.update(400, 100, 200, 100, WHERE) == 100
    assert control.io_per_op == 4.0


def test_the_tolerance_is_poisson_plus_one_operation_at_each_edge() -> None:
    # 300 IOPS for 5 s: 1,500 I/Os, 1.96 / sqrt(1500) = 5.06 %; 2 * 8 / 1500 = 1.07 %.
    assert tolerance(300, 5, 8) == pytest.approx(1.96 / math.sqrt(1500) + 16 / 1500)
    assert tolerance(300, 5, 8) == pytest.approx(0.0613, abs=1e-4)
    # Longer stages are held tighter.
    assert tolerance(300, 60, 8) < tolerance(300, 5, 8) / 3


# --------------------------------------------------------------------------- the engine


class DriftingDevice(Collector):
    """A device doing ``cost(t)`` reads per call the target served, ``t`` the run clock."""

    source: ClassVar[str] = "block"

    def __init__(self, target: TimedTarget, cost: Callable[[float], float]) -> None:
        self.target, self.cost = target, cost
        self._last = (0, 0.0)

    async def start(self, now: float) -> None:
        self._last = (self.target.calls, now)

    async def sample(self, now: float) -> list[Sample]:
        calls, then = self._last
        self._last = (self.target.calls, now)
        rate = (self.target.calls - calls) / (now - then) * self.cost((now + then) / 2)
        return [Sample("block", "fake0", {"r_s": rate, "w_s": 0.0}, t=now)]


def _run(load: Load, cost: Callable[[float], float], service_s: float = 0.002) -> Any:
    target = TimedTarget(service_s=service_s)
    engine = Engine(
        PingWorkload(PingParameters(sessions=2), target),
        target,
        load,
        [DriftingDevice(target, cost)],
        interval_s=INTERVAL_S,
    )
    attach(engine)
    return asyncio.run(engine.run())


def _warming(t: float) -> float:
    """4 device I/Os per call for the calibration's second, then falling linearly to 2 over
    the next 3 s (30 intervals), as a cache warms: each call finds more of its blocks cached."""
    return 4.0 - 2.0 * min(max(t - 1.0, 0.0), 3.0) / 3.0


@pytest.mark.timing
def test_a_warming_cost_is_held_closed_loop_and_missed_open_loop() -> None:
    # 400 IOPS asked for 4 s while the cost per call halves over the first 3: open loop runs
    # at the calibration's 100 ops/s throughout and delivers ~(3 * 300 + 200) / 4 = 275.
    runs = {}
    for mode in ("closed", "open"):
        load = Load(
            mode="open",
            iops_control=mode,
            calibration_s=1.0,
            steps=[{"duration_s": 4.0, "rate_iops": 400}],
        )
        result = _run(load, _warming)
        assert result.outcome == OUTCOME_COMPLETED, result.error
        (step,) = [e for e in result.stage_log if e["phase"] == "measure"]
        runs[mode] = (step, result.calibration)
    closed, control = runs["closed"]
    opened, _ = runs["open"]
    print(f"\nclosed {closed['delivered_iops']} open {opened['delivered_iops']} of 400 asked")
    # The stage's own tolerance (Poisson on 1,600 I/Os, 4.9 %, and an operation at each
    # edge): the closed loop lags a cost halving over 30 intervals by ~3 % while it falls
    # (sim.run.iops_control), ~2 % over the stage. What the loop sets is the schedule; the
    # fake's calls are timed waits, and a host too busy to wake its sessions (beside
    # stress-ng --cpu 2 --iomix 2: 15-19 of 40 intervals behind, 279-377 IOPS delivered)
    # leaves operations of it never run. The stage then says so (iops_unmet), and what its
    # schedule offered, delivered plus the IOPS of those operations, is held all the same.
    offered = closed["delivered_iops"] + closed["iops_not_run"]
    print(f"closed: {closed['iops_not_run']} IOPS not run, {closed.get('iops_unmet')}")
    assert closed["iops_held"] or closed["iops_unmet"], closed
    assert abs(offered - 400) <= closed["iops_tolerance"] * 400, closed
    assert opened["delivered_iops"] < 400 * (1 - 2 * closed["iops_tolerance"]), opened
    assert "iops_held" in opened and not opened["iops_held"]
    rows = control["control"]["rows"]
    assert control["control"]["columns"][3:5] == ["asked_iops", "delivered_iops"]
    measured = [r for r in rows if r[1] == "measure"]
    # The controller's rate rose as the cost fell: from ~100 ops/s to ~200 once the cost has
    # settled at 2 (t >= 4 s). Judged on the median of the settled intervals, not on one: an
    # interval whose sample a busy host took late skews its estimate (beside stress-ng --cpu 2
    # the second-to-last read 179.0 ops/s while the stage delivered 400.8 IOPS of 400).
    settled = [r[8] for r in measured[:-1] if r[0] >= 4.2]
    assert measured[0][8] < 130 and statistics.median(settled) > 180, measured


@pytest.mark.timing
def test_a_curve_of_short_steps_is_followed_within_one_interval() -> None:
    # Six steps of 1 s alternating 100 and 300 IOPS, 2 I/Os per call: each step's IOPS after
    # its first interval within 10 % of those asked (the brief's criterion; Poisson on the
    # 80-240 I/Os of the step's whole intervals after its first would allow 13-22 %; the
    # fake's paced calls have no such noise: one call more or less over 0.8 s is 2.5-7.5 %).
    asked = [100.0, 300.0] * 3
    load = Load(
        mode="open",
        calibration_s=1.0,
        steps=[{"duration_s": 1.0, "rate_iops": a} for a in asked],
    )
    result = _run(load, lambda t: 2.0)
    assert result.outcome == OUTCOME_COMPLETED, result.error
    rows = [r for r in result.calibration["control"]["rows"] if r[1] == "measure"]
    for step, want in enumerate(asked):
        after_first = [r for r in rows if r[2] == step][1:-1]  # whole intervals, not the edge
        assert after_first, rows
        got = sum(r[4] for r in after_first) / len(after_first)
        assert got == pytest.approx(want, rel=0.10), (step, after_first)


@pytest.mark.timing
def test_a_target_too_slow_is_said_and_its_rate_stays_bounded() -> None:
    # Two sessions at 20 ms a call complete at most 100 calls/s: 200 device IOPS at 2 I/Os
    # per call, against 600 asked. The loop offers 600 / 2 = 300 ops/s and no more (the
    # make-up adds nothing while the operations run behind their schedule).
    load = Load(mode="open", calibration_s=1.0, steps=[{"duration_s": 1.5, "rate_iops": 600}])
    result = _run(load, lambda t: 2.0, service_s=0.02)
    assert result.outcome == OUTCOME_COMPLETED, result.error
    (step,) = [e for e in result.stage_log if e["phase"] == "measure"]
    assert step["delivered_iops"] < 600 * 0.5, step
    assert step["iops_held"] is False
    assert step["iops_unmet"].startswith("target too slow: "), step
    # Every rate set before the run's last interval (which holds the sessions' drain: calls
    # complete and none starts, so the fake's I/Os per completed call read low there).
    rows = result.calibration["control"]["rows"][:-1]
    assert len(rows) >= 10 and all(r[-1] for r in rows), rows  # every one behind
    # No windup: behind its schedule, the make-up adds nothing, so each rate is the IOPS asked
    # over that interval's cost estimate (to the record's rounding) ...
    for r in rows:
        assert r[8] == pytest.approx(r[3] / r[7], rel=1e-3), r
    # ... and the estimate is the fake's 2 I/Os per call. Not each interval's: the fake device
    # counts calls over its sample's window, the engine over its interval's, and a host too
    # busy to wake either on time skews one interval's ratio (a fresh-clone CI: 1.89, a rate of
    # 317); the median holds it, and no interval reaches the make-up's +25 % (375 ops/s).
    assert statistics.median(r[7] for r in rows) == pytest.approx(2.0, rel=0.05), rows
    assert max(r[8] for r in rows) < 300 * (1 + MAKEUP_SHARE), rows


def test_a_boundarys_sliver_weighs_by_its_length() -> None:
    """CI's failing curve: a step's last 0.05 s held one operation (19 ops/s) and no device
    I/O yet counted. Weighed as a whole interval it took the cost from 6.4 to 3.2 and the next
    300-IOPS step opened at 599 IOPS; weighed by its length it moves the cost a few per cent."""
    control = Controller(6.4)
    for _ in range(5):
        control.update(100, 15.6, 100, 15.6, WHERE)
    before = control.io_per_op
    control.update(100, 15.6, 0.0, 19.24, WHERE, seconds=0.053)
    assert before == pytest.approx(6.4, rel=0.01)
    assert control.io_per_op > 0.9 * before
    whole = Controller(6.4)
    for _ in range(5):
        whole.update(100, 15.6, 100, 15.6, WHERE)
    whole.update(100, 15.6, 0.0, 19.24, WHERE, seconds=1.0)
    assert whole.io_per_op == pytest.approx(before / STEP_CLAMP)  # a whole interval: clamped
