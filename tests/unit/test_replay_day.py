"""The day shape on paper: the captured curve cut into steps, the schedule's job file (parsed
by fio), the steps' windows read from fio's logs and report, and the burst and the step
boundaries judged on a replay's series made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.replay.day import day_text, fio_windows, judge_day, steps_of
from sim.replay.shape import Shape, Window
from tests.unit.test_replay_derive import assert_fio_parses


def _profile(reads: list[float], t0: float = 0.0) -> dict[str, Any]:
    n = len(reads)
    return {
        "devices": {
            "series": {
                "t": [t0 + i + 1.0 for i in range(n)],
                "interval_s": [1.0] * n,
                "iops": list(reads),
                "read_iops": list(reads),
                "write_iops": [0.0] * n,
            }
        }
    }


CURVE = [100.0] * 12 + [400.0] * 6 + [100.0] * 12  # a burst from t = 12 to 18 s


def test_steps_hold_the_mean_of_their_captured_seconds() -> None:
    steps = steps_of(_profile(CURVE), compress=3, step_s=2)  # 6 captured seconds a step
    assert len(steps) == 5
    for step in steps:
        first = int(step.first_t)
        assert step.read_iops == pytest.approx(sum(CURVE[first : first + 6]) / 6)
    assert max(steps, key=lambda s: s.read_iops).index == 2


def test_the_schedule_starts_each_step_at_its_place(tmp_path: Path) -> None:
    steps = steps_of(_profile(CURVE), compress=3, step_s=2)
    shape = Shape(Window(0, 30, 30, 30, "t"), 160.0, 0.0, 8.0, None, {"le_8": 1.0}, {}, 0.0, 1.0)
    text = day_text(shape, steps, 2.0, {}, (tmp_path / "f", 1 << 24), 2, (tmp_path / "logs", 50))
    for step in steps:
        assert f"[step{step.index}-randread]" in text
        assert f"startdelay={2 * step.index}s" in text
        assert f"write_iops_log={tmp_path / 'logs' / f'step{step.index}-randread'}" in text
    assert "log_alternate_epoch_clock_id=1" in text  # CLOCK_MONOTONIC: the capture's clock
    assert f"rate={(400 * 2 * 8 * 1024)}" in text  # the burst's step, at 2x
    assert_fio_parses(text, tmp_path / "day.fio")


def _on_time(n: int, start: float = 5.0, step_s: float = 2.0) -> dict[int, tuple[float, float]]:
    return {k: (start + k * step_s, start + (k + 1) * step_s) for k in range(n)}


def test_the_burst_is_judged_by_its_step_and_height() -> None:
    steps = steps_of(_profile(CURVE), compress=3, step_s=2)
    asked = [s.read_iops for s in steps]
    # The replay's own series: one-second intervals from t = 5 s (its start), each step's
    # two intervals at the asked rate times 1.04, then the same with the burst cut to half.
    good = [a * 1.04 for a in asked for _ in range(2)]
    judged = judge_day(steps, _profile(good, t0=5.0), _on_time(len(steps)), 2, 1.0, 0.5)
    assert judged["faithful"] and judged["peak"]["asked_step"] == 2
    assert judged["peak"]["delivered_at_asked_step"] == pytest.approx(asked[2] * 1.04)
    assert judged["schedule"]["origin_t"] == pytest.approx(5.0)
    short = [a * (0.5 if k == 2 else 1.0) for k, a in enumerate(asked) for _ in range(2)]
    judged = judge_day(steps, _profile(short, t0=5.0), _on_time(len(steps)), 2, 1.0, 0.5)
    assert not judged["faithful"] and "burst height" in judged["failed"]
    assert judged["cause"].startswith("target too slow")


def test_a_step_off_its_place_by_more_than_an_interval_is_unfaithful() -> None:
    """The windows are fio's; the series delivers every step exactly, so only the boundary
    judges: 0.4 s late is inside one 0.5 s interval, 0.7 s late is not, and is said."""
    steps = steps_of(_profile(CURVE), compress=3, step_s=2)
    series = _profile([s.read_iops for s in steps for _ in range(2)], t0=5.0)
    late = _on_time(len(steps))
    late[1] = (late[1][0] + 0.4, late[1][1] + 0.4)
    judged = judge_day(steps, series, late, 2, 1.0, 0.5)
    assert judged["faithful"], judged["failed"]
    assert judged["steps"][1]["boundary_off_s"] == pytest.approx(0.4)
    late[1] = (late[1][0] + 0.3, late[1][1] + 0.3)
    judged = judge_day(steps, series, late, 2, 1.0, 0.5)
    assert judged["failed"] == ["step boundaries"]
    assert judged["cause"].startswith("step 1 ran 0.70 s off its place")
    missing = _on_time(len(steps))
    del missing[3]
    judged = judge_day(steps, series, missing, 2, 1.0, 0.5)
    assert "step boundaries" in judged["failed"]
    assert judged["cause"].startswith("fio logged no window for step 3")


def _log(path: Path, first_ms: int, samples: int) -> None:
    path.write_text("".join(f"{first_ms + 50 * k}, 300, 0, 8192, 0\n" for k in range(samples)))


def test_the_windows_are_read_from_fio_s_logs_on_the_capture_s_clock(tmp_path: Path) -> None:
    """A step's start: its first log sample (ms, monotonic) less one period, on the capture's
    t (its t = 0 at monotonic 1000 s); its end: that plus fio's runtime. A sparse log (a
    sample in fewer than half its periods: fio logs none without I/O) is left out: its first
    sample is late."""
    _log(tmp_path / "step0-randread_iops.log", 1005050, 40)
    _log(tmp_path / "step1-randread_iops.log", 1007080, 39)
    _log(tmp_path / "step1-randwrite_iops.log", 1008000, 3)
    report = {"jobs": [{"jobname": "step0-randread", "job_runtime": 2000},
                       {"jobname": "step1-randread", "job_runtime": 2000},
                       {"jobname": "step1-randwrite", "job_runtime": 2001}]}  # fmt: skip
    windows = fio_windows(tmp_path, report, 1000.0, 50)
    assert windows[0] == pytest.approx((5.0, 7.0))
    assert windows[1] == pytest.approx((7.03, 9.03))


def test_a_late_sample_is_judged_over_its_real_span() -> None:
    """A live row's IOPS are over the time since the previous reading: a sampler 1.5 s late
    (the row at t = 12 covers 9.5 to 12 s, the profile says 0.5 s) is not put on the last
    half second of the next step, whose delivered stays its own."""
    steps = steps_of(_profile(CURVE), compress=3, step_s=2)
    asked = [s.read_iops for s in steps]
    t = [5.5 + 0.5 * i for i in range(20)]
    iops = [asked[int((x - 5.0 - 1e-9) // 2)] for x in t]
    late = [x for x in t if not 9.5 < x < 12.0]  # rows at 10, 10.5, 11, 11.5 s never taken
    rate = [r for x, r in zip(t, iops, strict=True) if not 9.5 < x < 12.0]
    rate[late.index(12.0)] = (asked[2] * 1.0 + asked[3] * 1.5) / 2.5  # 9.5-12: burst, then step 3
    n = len(late)
    series = {"t": late, "interval_s": [0.5] * n, "iops": rate, "read_iops": rate,
              "write_iops": [0.0] * n}  # fmt: skip
    judged = judge_day(steps, {"devices": {"series": series}}, _on_time(len(steps)), 2, 1.0, 0.5)
    row = judged["steps"][3]
    assert row["intervals"] == 2 and row["delivered_iops"] == pytest.approx(asked[3])


def test_the_peak_job_logs_each_direction_on_the_monotonic_clock(tmp_path: Path) -> None:
    from sim.replay.fiojob import derive, job_text

    shape = Shape(Window(0, 30, 30, 30, "t"), 300.0, 100.0, 8.0, 8.0, {}, {}, 0.0, 1.0)
    text = job_text(derive(shape, 1.0), tmp_path / "f", 1 << 24, 5, 1, (), (tmp_path, 50))
    assert f"write_iops_log={tmp_path / 'randread'}" in text
    assert f"write_iops_log={tmp_path / 'randwrite'}" in text
    assert "log_alternate_epoch_clock_id=1" in text and "log_avg_msec=50" in text
    assert_fio_parses(text, tmp_path / "peak.fio")
