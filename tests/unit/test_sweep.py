"""Sweeps: expansion into steps, per-step figures from a bundle written by the real writer,
the highest SLO-meeting load, and the stop-on-breach monitor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.bundle.writer import BundleWriter
from sim.config.resolve import resolved_dict, validate
from sim.config.scenario import Slo, Sweep
from sim.core.events import EngineEvents
from sim.core.metrics import Interval, OpStats, new_histogram
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_INTERRUPTED, RunResult
from sim.core.stages import Stage, plan_stages
from sim.errors import ScenarioError
from sim.judge.sweep import attach, service_levels, step_windows, sweep_line, sweep_sections
from sim.protocols import Sample


def scenario(sweep: dict[str, Any], slos: list[dict[str, Any]] | None = None, **load: Any) -> Any:
    return validate(
        {"workload": {"name": "slob"}, "load": {"sweep": sweep, **load}, "slos": slos or []}
    )


def problems(sweep: dict[str, Any], **load: Any) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        scenario(sweep, **load)
    return info.value.problems


RAMP = {"vary": "sessions", "start": 1, "factor": 2, "max": 4, "step_duration_s": 2}

# --------------------------------------------------------------------------- expansion


@pytest.mark.parametrize(
    ("ramp", "values"),
    [
        ({"vary": "sessions", "start": 1, "factor": 2, "max": 10}, [1, 2, 4, 8]),
        ({"vary": "sessions", "start": 1, "factor": 1.2, "max": 5}, [1, 2, 3, 4, 5]),
        ({"vary": "sessions", "start": 1, "step": 3, "max": 10}, [1, 4, 7, 10]),
        ({"vary": "sessions", "start": 4, "step": 4, "max": 4}, [4]),
        ({"vary": "rate_ops_s", "start": 0.1, "step": 0.1, "max": 0.5}, [0.1, 0.2, 0.3, 0.4, 0.5]),
        ({"vary": "rate_ops_s", "start": 100, "factor": 1.5, "max": 400}, [100, 150, 225, 337.5]),
    ],
)
def test_values_rise_and_never_pass_max(ramp: dict[str, Any], values: list[float]) -> None:
    assert Sweep.model_validate({**ramp, "step_duration_s": 1}).values() == values


def test_a_sweep_becomes_the_steps_the_engine_runs() -> None:
    load = scenario(RAMP).load
    assert [(s.duration_s, s.sessions, s.rate_ops_s) for s in load.steps] == [
        (2, 1, None),
        (2, 2, None),
        (2, 4, None),
    ]
    assert [s.sessions for s in plan_stages(load, default_sessions=1)] == [1, 2, 4]


def test_a_rate_sweep_runs_open_loop() -> None:
    ramp = {"vary": "rate_ops_s", "start": 50, "step": 50, "max": 150, "step_duration_s": 5}
    load = scenario(ramp, mode="open", sessions=4).load
    stages = plan_stages(load, default_sessions=1)
    assert [(s.sessions, s.rate_ops_s) for s in stages] == [(4, 50), (4, 100), (4, 150)]


def test_the_resolved_scenario_validates_again_unchanged() -> None:
    """A bundle's scenario.yaml holds the sweep and its steps: it must run again as is."""
    first = scenario(RAMP, [{"p99_us_max": 1000}])
    again = validate(resolved_dict(first))
    assert again == first


@pytest.mark.parametrize(
    ("ramp", "load", "expected"),
    [
        ({**RAMP, "step": 1}, {}, "load.sweep: give either factor"),
        ({k: v for k, v in RAMP.items() if k != "factor"}, {}, "load.sweep: give either factor"),
        ({**RAMP, "start": 8}, {}, "load.sweep: start (8) is above max (4)"),
        ({**RAMP, "start": 1.5}, {}, "load.sweep: sessions are whole numbers: start"),
        ({**RAMP, "factor": 1.01, "max": 4000}, {}, "load.sweep: more than 100 steps"),
        ({**RAMP, "max": 5000}, {}, "load.sweep.max: at most 4096 sessions"),
        ({**RAMP, "factor": 1}, {}, "load.sweep.factor: Input should be greater than 1"),
        ({**RAMP, "vary": "threads"}, {}, "load.sweep.vary: Input should be"),
        ({**RAMP, "bogus": 1}, {}, "load.sweep.bogus: Extra inputs are not permitted"),
        ({**RAMP, "vary": "rate_ops_s"}, {}, "load: sweep.vary rate_ops_s needs mode: open"),
        (RAMP, {"steps": [{"duration_s": 1}]}, "load: steps and sweep cannot be combined"),
        (RAMP, {"loops_per_session": 5}, "load: steps and loops_per_session cannot be combined"),
    ],
)
def test_a_bad_sweep_is_one_line(ramp: dict[str, Any], load: dict[str, Any], expected: str) -> None:
    lines = problems(ramp, **load)
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected), lines


# --------------------------------------------------------------------------- a bundle


def interval(
    index: int, t0: float, t1: float, step: int, latency_us: int, n: int = 100
) -> Interval:
    stats = OpStats()
    stats.histogram.record_value(latency_us, n)
    return Interval(index, t0, t1, "measure", step, {"read": stats})


def write_sweep_bundle(
    root: Path,
    latencies: list[int],
    iops: list[float],
    durations: list[float] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """A bundle of a sweep of 1, 2, 4 … sessions, 2 s per step in two 1 s intervals, the
    step boundary exactly at an interval's end (it belongs to the earlier step)."""
    (root / "run").mkdir(parents=True)
    writer = BundleWriter(root / "run", {"name": "sweep", "load": {}})
    stages: list[dict[str, Any]] = []
    totals: dict[str, OpStats] = {}
    index = 0
    t = 0.0
    for step, (latency, rate) in enumerate(zip(latencies, iops, strict=True)):
        duration = (durations or [2.0] * len(latencies))[step]
        stages.append(
            {"t": t, "phase": "measure", "step": step, "sessions": 2**step,
             "rate_ops_s": None, "duration_s": duration}
        )  # fmt: skip
        end = t + duration
        while t < end - 1e-9:
            t1 = min(t + 1.0, end)
            iv = interval(index, t, t1, step, latency)
            sample = Sample("block", "vda", {"iops": rate, "r_s": rate, "w_s": 0.0,
                                             "r_await_ms": latency / 1000, "w_await_ms": 0.0})  # fmt: skip
            writer.on_interval(iv, [sample])
            for name, stats in iv.ops.items():
                totals.setdefault(name, OpStats()).merge(stats)
            index, t = index + 1, t1
    writer.write_summary("completed", totals=totals, measured_s=t, extra={"stages": stages})
    writer.close()
    return root / "run", json.loads((root / "run" / "summary.json").read_text())


SLOS = [Slo(op="read", p99_us_max=1000)]
SWEEP = Sweep.model_validate({**RAMP, "max": 64})


def test_step_windows_hold_each_steps_own_figures(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 200, 5000], [100, 200, 210])
    windows = step_windows(bundle, summary["stages"])
    assert sorted(windows) == [0, 1, 2]
    for step, latency in enumerate([100, 200, 5000]):
        read = windows[step].ops["read"]
        # Both intervals of the step, including the one ending exactly at the boundary.
        assert read["count"] == 200, (step, read)
        assert read["ops_s"] == 100.0
        assert read["p99_us"] == pytest.approx(latency, rel=1e-3)
    assert windows[1].devices["vda"]["iops"] == pytest.approx(200)
    assert windows[2].devices["vda"]["await_ms"] == pytest.approx(5.0)


def test_the_highest_load_below_the_first_breach(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 200, 5000], [100, 200, 210])
    result, section = sweep_sections(SWEEP, SLOS, summary, bundle)
    assert [p["slo_met"] for p in result["points"]] == [True, True, False]
    best = result["highest_passing"]
    assert (best["step"], best["sessions"], best["load"]) == (1, 2, 2)
    assert result["device_iops_at_highest_passing"] == pytest.approx(200)
    assert best["device_rates"]["r_s"] == pytest.approx(200) and best["device_rates"]["w_s"] == 0
    assert result["max_device_iops"] == pytest.approx(210)
    assert result["first_breach"]["step"] == 2
    assert result["first_breach"]["breaches"][0]["slo"] == "p99_us_max"
    assert (result["steps_planned"], result["steps_run"], result["device"]) == (7, 3, "vda")
    assert section["met"] is True and section["window"].startswith("step 2 ")
    assert section["verdicts"][0]["measured"] == pytest.approx(200, rel=1e-3)
    assert "2 sessions (step 2)" in sweep_line(result)


def test_a_pass_after_a_breach_is_noise_not_the_answer(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 5000, 200], [100, 200, 300])
    result, _ = sweep_sections(SWEEP, SLOS, summary, bundle)
    assert result["highest_passing"]["step"] == 0
    assert result["passing_after_breach"] == [2]


def test_points_are_read_on_the_device_a_storage_slo_names(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 200], [100, 200])
    result, section = sweep_sections(SWEEP, [Slo(device="vdb", iops_min=1)], summary, bundle)
    assert result["device"] == "vdb"
    assert [p["device_iops"] for p in result["points"]] == [None, None]
    assert section["met"] is False and "vdb" in section["verdicts"][0]["note"]


def test_every_step_met(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 200, 300], [100, 200, 300])
    result, section = sweep_sections(SWEEP, SLOS, summary, bundle)
    assert result["highest_passing"]["step"] == 2 and result["first_breach"] is None
    assert section["met"] is True


def test_when_the_first_step_misses_nothing_passes(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [5000, 6000], [100, 200])
    result, section = sweep_sections(SWEEP, SLOS, summary, bundle)
    assert result["highest_passing"] is None
    assert result["device_iops_at_highest_passing"] is None
    assert section["met"] is False and section["window"] == "step 1 (first step, missed)"
    assert sweep_line(result) == "sweep: no step met every SLO"


def test_a_step_cut_short_is_shown_but_not_judged(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 5000], [100, 200], [2.0, 0.2])
    result, section = sweep_sections(SWEEP, SLOS, summary, bundle)
    last = result["points"][-1]
    assert last["complete"] is False and last["slo_met"] is None and last["breaches"] == []
    assert result["highest_passing"]["step"] == 0 and result["first_breach"] is None
    assert section["met"] is True


def test_service_levels_of_a_sweep_and_of_a_plain_run(tmp_path: Path) -> None:
    bundle, summary = write_sweep_bundle(tmp_path, [100, 200, 5000], [100, 200, 210])
    swept = scenario({**RAMP, "max": 64}, [{"op": "read", "p99_us_max": 1000}])
    levels = service_levels(swept, summary, bundle)
    assert levels["slos"]["met"] is True and levels["sweep"]["highest_passing"]["step"] == 1
    plain = validate({"workload": {"name": "slob"}, "slos": [{"op": "read", "p99_us_max": 1}]})
    levels = service_levels(plain, summary, bundle)
    assert set(levels) == {"slos"} and levels["slos"]["met"] is False
    assert service_levels(validate({"workload": {"name": "slob"}}), summary, bundle) == {}
    without_slos = service_levels(scenario(RAMP), summary, bundle)
    assert set(without_slos) == {"sweep"}


def test_service_levels_of_a_failed_run_judge_nothing(tmp_path: Path) -> None:
    plain = validate({"workload": {"name": "slob"}, "slos": [{"p99_us_max": 1}]})
    levels = service_levels(plain, {"status": "failed"}, tmp_path)
    assert levels == {"slos": {"met": None, "note": "the run failed: nothing to judge"}}


def test_service_levels_never_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("sim.judge.slo.summary_section", broken)
    plain = validate({"workload": {"name": "slob"}, "slos": [{"p99_us_max": 1}]})
    levels = service_levels(plain, {"status": "completed"}, tmp_path)
    assert levels == {"slos": {"met": None, "error": "RuntimeError: boom"}}


# --------------------------------------------------------------------------- the live monitor


class FakeEngine:
    def __init__(self) -> None:
        self.events = EngineEvents()
        self.stops: list[str] = []

    def request_stop(self, reason: str) -> None:
        self.stops.append(reason)


def stage(step: int) -> Stage:
    return Stage("measure", step, 2.0, 2**step, None)


def test_the_monitor_stops_at_the_first_breach_and_the_run_completes() -> None:
    engine = FakeEngine()
    monitor = attach(engine, scenario(RAMP, [{"op": "read", "p99_us_max": 1000}]))  # type: ignore[arg-type]
    assert monitor is not None
    engine.events.stage.fire(stage=stage(0), log={})
    engine.events.interval.fire(interval=interval(0, 0, 1, 0, 100), samples=[])
    engine.events.stage.fire(stage=stage(1), log={})
    assert engine.stops == []
    engine.events.interval.fire(interval=interval(1, 2, 3, 1, 5000), samples=[])
    log: dict[str, Any] = {}
    engine.events.stage.fire(stage=stage(2), log=log)
    assert engine.stops == ["sweep: step 2 missed p99_us_max read; later steps not run"]
    assert log["sweep_stop"] == engine.stops[0]
    engine.events.stage.fire(stage=stage(3), log={})
    assert len(engine.stops) == 1  # one request, not one per later boundary
    result = RunResult(outcome=OUTCOME_INTERRUPTED, reason=engine.stops[0])
    engine.events.finished.fire(result=result)
    assert result.outcome == OUTCOME_COMPLETED
    assert engine.events.failures() == []


def test_a_signal_stop_stays_interrupted() -> None:
    engine = FakeEngine()
    attach(engine, scenario(RAMP, [{"p99_us_max": 1000}]))  # type: ignore[arg-type]
    result = RunResult(outcome=OUTCOME_INTERRUPTED, reason="stopped by SIGINT")
    engine.events.finished.fire(result=result)
    assert result.outcome == OUTCOME_INTERRUPTED


def test_no_monitor_without_slos_or_when_asked_not_to_stop() -> None:
    assert attach(FakeEngine(), scenario(RAMP)) is None  # type: ignore[arg-type]
    no_stop = scenario({**RAMP, "stop_on_breach": False}, [{"p99_us_max": 1}])
    assert attach(FakeEngine(), no_stop) is None  # type: ignore[arg-type]


def test_monitor_merges_histograms_not_interval_percentiles() -> None:
    """One slow interval among many fast ones: the step's p99 is the merged one."""
    engine = FakeEngine()
    attach(engine, scenario(RAMP, [{"op": "read", "p99_us_max": 1000}]))  # type: ignore[arg-type]
    for i in range(10):
        engine.events.interval.fire(interval=interval(i, i, i + 1, 0, 100, n=1000), samples=[])
    slow = OpStats()
    slow.histogram = new_histogram()
    slow.histogram.record_value(50_000, 5)  # 5 of 10,005: under 1 %
    engine.events.interval.fire(
        interval=Interval(10, 10, 11, "measure", 0, {"read": slow}), samples=[]
    )
    engine.events.stage.fire(stage=stage(1), log={})
    assert engine.stops == []
