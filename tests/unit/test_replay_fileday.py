"""The day shape of a file tree on paper: the captured fileops curve cut into steps as fio's
day shape cuts its IOPS, the run's load steps at the deck's rate per captured call, the
steps' windows from the run's stage log, and the judgement (sim.replay.day's) in calls/s."""

from __future__ import annotations

from typing import Any

import pytest

from sim.config.scenario import Load
from sim.replay.day import judge_steps, step_means
from sim.replay.fileday import (
    FILE_WORDS,
    IDLE_RATE_OPS_S,
    calls_series,
    day_scenario,
    stage_windows,
)

#: Reproduced calls per second, one row a second: 400/s with a burst to 1,200/s at 12-18 s.
CURVE = [400.0] * 12 + [1200.0] * 6 + [400.0] * 12


def _rows(calls: list[float], t0: float = 0.0, step: float = 1.0) -> list[dict[str, float]]:
    # Three quarters GETATTR, a quarter READ (and OPENs, which are not reproduced).
    return [
        {"t": t0 + (i + 1) * step, "getattr_s": 0.75 * c, "read_s": 0.25 * c, "open_s": 0.25 * c}
        for i, c in enumerate(calls)
    ]


def test_the_curve_is_the_reproduced_calls_cut_as_fio_s_steps() -> None:
    series = calls_series(_rows(CURVE))
    assert series["calls_s"] == CURVE  # OPEN left out: not reproduced
    assert series["interval_s"] == [1.0] * len(CURVE)
    steps = step_means(series, ("calls_s",), compress=3, step_s=2)  # 6 captured s a step
    assert [round(m["calls_s"]) for _, _, _, m in steps] == [400, 400, 1200, 400, 400]
    assert [(first, last) for _, first, last, _ in steps][2] == (12.0, 18.0)


def _base() -> dict[str, Any]:
    return {
        "name": "day-1x",
        "load": {"mode": "open", "sessions": 2, "rate_ops_s": 1200.0, "warmup_s": 2.0,
                 "duration_s": 2.0},
    }  # fmt: skip


def test_each_step_is_a_load_step_at_the_deck_s_rate_per_call() -> None:
    steps = [(0, 0.0, 6.0, 400.0), (1, 6.0, 12.0, 1200.0), (2, 12.0, 18.0, 0.0)]
    doc = day_scenario(_base(), steps, rate_per_call=0.5, step_s=2.0)
    load = doc["load"]
    assert "rate_ops_s" not in load and "duration_s" not in load
    assert load["steps"] == [
        {"duration_s": 2.0, "rate_ops_s": 200.0},
        {"duration_s": 2.0, "rate_ops_s": 600.0},
        {"duration_s": 2.0, "rate_ops_s": IDLE_RATE_OPS_S},  # an idle step still has a rate
    ]
    Load.model_validate(load)  # a load dbsim run accepts


def test_the_windows_are_the_run_s_own_stage_log() -> None:
    summary = {"stages": [
        {"phase": "warmup", "step": None, "t": 0.0, "duration_s": 2.0},
        {"phase": "measure", "step": 0, "t": 2.001, "duration_s": 2.003},
        {"phase": "measure", "step": 1, "t": 4.004, "duration_s": 2.002},
        {"phase": "measure", "step": 2, "t": 6.006},  # stopped: no length, no window
    ]}  # fmt: skip
    windows = stage_windows(summary)
    assert windows == {0: pytest.approx((2.001, 4.004)), 1: pytest.approx((4.004, 6.006))}


def test_the_burst_is_judged_in_calls_per_second() -> None:
    asked = [(k, 6.0 * k, 6.0 * k + 6, c) for k, c in enumerate([400.0, 1200.0, 400.0])]
    windows = {k: (2.0 + 2 * k, 4.0 + 2 * k) for k in range(3)}
    # The run's rows every 0.5 s from t = 2 s: each step delivered as asked, then the burst
    # at 80 %.
    good = calls_series(_rows([c for *_, c in asked for _ in range(4)], t0=2.0, step=0.5))
    judged = judge_steps(asked, good, windows, 2.0, 0.5, FILE_WORDS)
    assert judged["faithful"] and judged["unit"] == "calls/s"
    assert judged["peak"]["asked_step"] == 1
    assert judged["peak"]["delivered_at_asked_step"] == pytest.approx(1200.0)
    assert judged["total"]["delivered_calls_s"] == pytest.approx(2000.0)
    short = [c * (0.8 if k == 1 else 1.0) for k, *_, c in asked for _ in range(4)]
    judged = judge_steps(asked, calls_series(_rows(short, 2.0, 0.5)), windows, 2.0, 0.5, FILE_WORDS)
    assert not judged["faithful"] and "burst height" in judged["failed"]
    assert judged["cause"] == "target too slow to deliver the asked calls/s at the burst"
    late = dict(windows)
    late[2] = (late[2][0] + 0.7, late[2][1] + 0.7)
    judged = judge_steps(asked, good, late, 2.0, 0.5, FILE_WORDS)
    assert judged["failed"][0] == "step boundaries"
    assert "the run's own stage log" in judged["cause"]
