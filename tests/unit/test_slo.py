"""SLOs: the model's validation (through the scenario, as a user meets it), verdicts on a
summary, the window builder, and the console line."""

from __future__ import annotations

from typing import Any

import pytest

from sim.bundle.figures import combined_await_ms
from sim.config.resolve import validate
from sim.config.scenario import Slo
from sim.core.metrics import new_histogram
from sim.errors import ScenarioError
from sim.judge.slo import (
    Window,
    WindowBuilder,
    evaluate,
    missed,
    summary_section,
    unknown_operations,
    verdict_line,
)


def problems(slos: list[dict[str, Any]]) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        validate({"workload": {"name": "slob"}, "slos": slos})
    return info.value.problems


def summary(**overrides: Any) -> dict[str, Any]:
    """A summary of a 10 s run: read 1,000 ops/s, update 100 ops/s with 1 error; vda busy,
    vdb idle."""
    data: dict[str, Any] = {
        "status": "completed",
        "timing": {"measured_s": 10.0},
        "operations": {
            "read": {"count": 10_000, "errors": 0, "ops_s": 1000.0, "p50_us": 200,
                     "p95_us": 900, "p99_us": 2000},
            "update": {"count": 999, "errors": 1, "ops_s": 99.9, "p50_us": 1000,
                       "p95_us": 5000, "p99_us": 9000},
        },
        "storage": {
            "block": {
                "vda": {"iops": 1500.0, "r_s": 1000.0, "w_s": 500.0, "r_await_ms": 1.0,
                        "w_await_ms": 4.0},
                "vdb": {"iops": 3.0, "r_s": 0.0, "w_s": 3.0, "r_await_ms": 0.0,
                        "w_await_ms": 0.5},
            }
        },
    }  # fmt: skip
    data.update(overrides)
    return data


def slos(*entries: dict[str, Any]) -> list[Slo]:
    return [Slo.model_validate(e) for e in entries]


def judge(*entries: dict[str, Any], data: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return evaluate(slos(*entries), Window.from_summary(data or summary()))


# --------------------------------------------------------------------------- validation


def test_a_scenario_accepts_slos_and_keeps_them() -> None:
    scenario = validate(
        {
            "workload": {"name": "slob"},
            "slos": [{"op": "read", "p99_us_max": 5000}, {"await_ms_max": 5, "device": "vda"}],
        }
    )
    assert [s.limits() for s in scenario.slos] == [[("p99_us_max", 5000)], [("await_ms_max", 5)]]


def test_no_slos_by_default() -> None:
    assert validate({"workload": {"name": "slob"}}).slos == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"p99_max": 5}, "slos[0].p99_max: Extra inputs are not permitted"),
        ({"p99_us_max": -1}, "slos[0].p99_us_max: Input should be greater than 0 (got -1)"),
        ({"p50_us_max": 0}, "slos[0].p50_us_max: Input should be greater than 0 (got 0)"),
        ({"error_pct_max": 101}, "slos[0].error_pct_max: Input should be less than or equal"),
        ({"error_pct_max": -0.5}, "slos[0].error_pct_max: Input should be greater than or equal"),
        ({"iops_min": -100}, "slos[0].iops_min: Input should be greater than 0"),
        ({"op": "read"}, "slos[0]: give at least one limit"),
        ({"p99_us_max": 5, "iops_min": 1}, "slos[0]: operation limits (p99_us_max) and storage"),
        ({"device": "vda", "p99_us_max": 5}, "slos[0]: device applies to storage limits"),
        ({"op": "read", "await_ms_max": 5}, "slos[0]: op applies to operation limits only"),
        ({"op": "", "p99_us_max": 5}, "slos[0].op: String should have at least 1 character"),
    ],
)
def test_a_bad_slo_is_one_line_naming_it(entry: dict[str, Any], expected: str) -> None:
    lines = problems([entry])
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected), lines


def test_every_bad_slo_is_reported() -> None:
    lines = problems([{"p99_us_max": 1}, {"p99_us_max": -1}, {"bogus": 1}])
    assert [line.split(":")[0] for line in lines] == ["slos[1].p99_us_max", "slos[2].bogus"]


def test_unknown_operations_names_the_entry_and_the_known_ones() -> None:
    entries = slos({"op": "raed", "p99_us_max": 1}, {"op": "*", "p99_us_max": 1}, {"iops_min": 1})
    assert unknown_operations(entries, ["read", "update"]) == [
        "slos[0].op: unknown operation 'raed' (this workload has: read, update)"
    ]


# --------------------------------------------------------------------------- verdicts


def test_a_met_latency_limit_has_positive_margin() -> None:
    [verdict] = judge({"op": "read", "p99_us_max": 5000})
    assert verdict == {
        "slo": "p99_us_max",
        "op": "read",
        "limit": 5000,
        "measured": 2000,
        "met": True,
        "margin_pct": 60.0,
    }


def test_a_missed_latency_limit_has_negative_margin() -> None:
    [verdict] = judge({"op": "read", "p99_us_max": 1000, "name": "read latency"})
    assert verdict["met"] is False
    assert verdict["margin_pct"] == -100.0  # 2,000 µs is 100 % over a 1,000 µs limit
    assert verdict["name"] == "read latency"


def test_a_minimum_counts_headroom_above_it() -> None:
    [verdict] = judge({"op": "read", "ops_s_min": 800})
    assert verdict["met"] is True and verdict["margin_pct"] == 25.0
    [verdict] = judge({"op": "read", "ops_s_min": 2000})
    assert verdict["met"] is False and verdict["margin_pct"] == -50.0


def test_the_limit_itself_is_met() -> None:
    [verdict] = judge({"op": "read", "p99_us_max": 2000})
    assert verdict["met"] is True and verdict["margin_pct"] == 0.0


def test_star_latency_applies_to_every_operation() -> None:
    verdicts = judge({"p99_us_max": 5000})  # op defaults to "*"
    assert [(v["op"], v["met"]) for v in verdicts] == [("read", True), ("update", False)]


def test_star_throughput_and_errors_are_all_operations_together() -> None:
    ops_s, errors = judge({"op": "*", "ops_s_min": 1050, "error_pct_max": 0.01})
    assert ops_s["op"] == "*" and ops_s["measured"] == pytest.approx(1099.9) and ops_s["met"]
    # 1 error in 11,000 issued.
    assert errors["measured"] == pytest.approx(100 / 11_000, abs=1e-3) and errors["met"]


def test_error_pct_of_one_operation() -> None:
    [verdict] = judge({"op": "update", "error_pct_max": 0})
    assert verdict["measured"] == pytest.approx(0.1) and verdict["met"] is False
    assert verdict["margin_pct"] is None  # no relative margin to a limit of 0


def test_an_operation_not_measured_is_not_met_and_says_why() -> None:
    [verdict] = judge({"op": "scan", "p99_us_max": 1e9})
    assert verdict["met"] is False and verdict["measured"] is None
    assert "no operation 'scan' was measured (measured: read, update)" in verdict["note"]


def test_an_operation_with_only_errors_has_no_latency_to_meet() -> None:
    data = summary(operations={"read": {"count": 0, "errors": 5, "ops_s": 0.0}})
    [verdict] = judge({"op": "read", "p99_us_max": 1e9}, data=data)
    assert verdict["met"] is False and "no successful operation" in verdict["note"]


def test_no_operation_at_all() -> None:
    [verdict] = judge({"p99_us_max": 1e9}, data=summary(operations={}))
    assert verdict["op"] == "*" and verdict["met"] is False


def test_storage_defaults_to_the_busiest_device() -> None:
    iops, wait = judge({"iops_min": 1000, "await_ms_max": 3})
    assert iops["device"] == "vda" and iops["measured"] == 1500 and iops["met"]
    # Reads' and writes' awaits weighted by their rates: (1000·1 + 500·4) / 1500 = 2 ms.
    assert wait["measured"] == pytest.approx(2.0) and wait["met"]


def test_storage_of_a_named_device() -> None:
    [verdict] = judge({"device": "vdb", "iops_min": 10})
    assert verdict["device"] == "vdb" and verdict["measured"] == 3 and not verdict["met"]


def test_storage_without_block_figures_is_not_met() -> None:
    [verdict] = judge({"await_ms_max": 100}, data=summary(storage={}))
    assert verdict["met"] is False and verdict["device"] is None
    assert "no block figures" in verdict["note"]
    [verdict] = judge({"device": "sdz", "await_ms_max": 100})
    assert verdict["met"] is False and "sdz" in verdict["note"]


def test_combined_await_without_io_is_zero_like_iostat() -> None:
    assert combined_await_ms({"r_s": 0, "w_s": 0, "r_await_ms": 0, "w_await_ms": 0}) == 0.0
    assert combined_await_ms({}) is None


def test_summary_section_and_missed() -> None:
    good = summary_section(slos({"op": "read", "p99_us_max": 5000}), summary())
    assert good["met"] is True and good["window"] == "measured window"
    assert missed({"slos": good}) is False
    bad = summary_section(slos({"op": "read", "p99_us_max": 1}), summary())
    assert missed({"slos": bad}) is True
    assert missed({}) is None
    assert missed({"slos": {"met": None, "error": "boom"}}) is None


# --------------------------------------------------------------------------- windows


def test_window_builder_merges_histograms_and_weights_devices_by_time() -> None:
    builder = WindowBuilder()
    fast, slow = new_histogram(), new_histogram()
    fast.record_value(100, 99)
    slow.record_value(10_000, 1)
    builder.add_op("read", 99, 0, fast)
    builder.add_op("read", 1, 1, slow)
    builder.add_device("vda", {"iops": 100, "r_s": 100, "w_s": 0, "r_await_ms": 1.0}, 1.0)
    builder.add_device("vda", {"iops": 400, "r_s": 400, "w_s": 0, "r_await_ms": 2.0}, 3.0)
    window = builder.window("step 1", 4.0)
    read = window.ops["read"]
    assert read["count"] == 100 and read["errors"] == 1 and read["ops_s"] == 25.0
    assert read["p50_us"] == 100 and read["p99_us"] == 100
    assert read["p95_us"] == 100
    # 100 IOPS for 1 s and 400 IOPS for 3 s: 1,300 I/Os in 4 s.
    assert window.devices["vda"]["iops"] == pytest.approx(325.0)
    # The mean wait per I/O: (100·1 + 1200·2) / 1300.
    assert window.devices["vda"]["await_ms"] == pytest.approx(2500 / 1300)


def test_window_builder_p99_sees_the_slow_tail() -> None:
    builder = WindowBuilder()
    hist = new_histogram()
    hist.record_value(100, 95)
    hist.record_value(10_000, 5)
    builder.add_op("read", 100, 0, hist)
    figures = builder.window("w", 1.0).ops["read"]
    assert figures["p50_us"] == 100 and figures["p99_us"] == pytest.approx(10_000, rel=1e-3)


# --------------------------------------------------------------------------- text


def test_verdict_lines_say_met_or_missed_in_a_dbas_units() -> None:
    met, miss = judge({"op": "read", "p99_us_max": 5000}, {"op": "update", "p50_us_max": 10})
    assert verdict_line(met) == "SLO met: read p99 ≤ 5.00 ms: 2.00 ms (margin +60.0 %)"
    assert verdict_line(miss).startswith("SLO MISSED: update p50 ≤ 10 µs: 1.00 ms (margin ")
    [iops] = judge({"iops_min": 2000})
    assert verdict_line(iops) == "SLO MISSED: vda IOPS ≥ 2,000: 1,500 (margin -25.0 %)"
    [star] = judge({"ops_s_min": 10, "name": "throughput"})
    assert verdict_line(star).startswith("SLO met [throughput]: all operations ops/s ≥ 10.0")
    [absent] = judge({"op": "scan", "p99_us_max": 1})
    assert "not measured" in verdict_line(absent) and "no operation 'scan'" in verdict_line(absent)


def test_a_device_latency_under_ten_microseconds_is_written_in_microseconds() -> None:
    # A 1 µs device limit was printed "≤ 0.00 ms"; from 10 µs on, ms as iostat writes them.
    from sim.judge.slo import format_value

    assert format_value("device_p99_ms_max", 0.001) == "1.0 µs"
    assert format_value("await_ms_max", 0.0045) == "4.5 µs"
    assert format_value("await_ms_max", 0.06) == "0.06 ms"
    assert format_value("await_ms_max", 1.0) == "1.00 ms"
    assert format_value("await_ms_max", 12.345) == "12.35 ms"
