"""analyze_bundle on awkward but valid bundles (never raises) and on unreadable ones
(BundleError with a one-line message)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.analysis import analyze_bundle
from sim.analysis.analyze import sessions_per_interval
from sim.analysis.series import load_bundle
from sim.errors import BundleError
from tests.unit.test_analysis import assert_json_ready, cpu, device, op, write_bundle


@pytest.mark.parametrize("n", [1, 2, 3])
def test_runs_of_one_to_three_intervals(tmp_path: Path, n: int) -> None:
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([100.0 * (i + 1) for i in range(n)], [1000.0 * (i + 1) for i in range(n)])},
        block={"sda": device([50.0 * (i + 1) for i in range(n)], util=10.0)},
        host=cpu(n, 20, 10),
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["intervals"] == n
    corr = result["correlation"]["read"]["p99_us"]["iops"]
    assert corr["n"] == n
    if n < 3:
        assert corr["pearson"] is None  # two points always lie on a line: not reported
    else:
        assert corr["pearson"] == pytest.approx(1.0)
    assert result["lag"]["read"]["leader"] is None
    assert result["curve"]["knee"] is None
    assert result["verdict"]["call"] in {"inconclusive", "database-bound", "client-bound"}
    assert 1 <= len(result["segments"]) <= 2


def test_no_block_and_no_host_files(tmp_path: Path) -> None:
    n = 8
    path = write_bundle(
        tmp_path / "b", ops={"read": op([100.0] * n, [900.0 + i for i in range(n)])}
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["primary_device"] is None
    assert result["correlation"] == {} and result["lag"] == {} and result["regression"] == {}
    assert result["curve"]["x"] == "ops_s"
    assert result["series"]["device"] == {} and "host" not in result["series"]
    assert result["io_per_op"]["device_ios_per_op"] is None
    assert result["verdict"]["call"] == "inconclusive"
    assert "no storage figures" in result["verdict"]["summary"]


def test_devices_that_appear_and_disappear(tmp_path: Path) -> None:
    n = 10
    early = [100.0 if i < 6 else None for i in range(n)]
    late = [None if i < 4 else 900.0 for i in range(n)]
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([100.0] * n, [1000.0 + 10 * i for i in range(n)])},
        block={"sda": device(early, util=5.0), "sdb": device(late, util=5.0)},
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["primary_device"] == "sdb"
    iops = result["series"]["device"]["sda"]["iops"]
    assert iops[:6] == [100.0] * 6 and iops[6:] == [None] * 4
    assert result["correlation"]["read"]["p99_us"]["iops"]["n"] == 6


def test_ops_with_zero_count_and_empty_percentiles(tmp_path: Path) -> None:
    n = 6
    count = [10.0, 0.0, None, 10.0, 10.0, 10.0]  # 0: errors only; None: no row at all
    p99: list[float | None] = [1000.0, None, None, 1200.0, 1100.0, 1300.0]
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([500.0] * n, [800.0] * n), "scan": op(count, p99)},
        block={"sda": device([20.0] * n, util=1.0)},
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["series"]["ops_s"]["scan"][1:3] == [0.0, 0.0]
    assert result["series"]["p99_us"]["scan"][1:3] == [None, None]
    assert result["primary_op"] == "read"


def test_constant_series_give_null_correlations_not_nan(tmp_path: Path) -> None:
    n = 10
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([100.0] * n, [1000.0] * n)},
        block={"sda": device([50.0] * n, util=[float(i) for i in range(n)])},
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    corr = result["correlation"]["read"]["p99_us"]["util_pct"]
    assert corr == {"pearson": None, "spearman": None, "n": n}
    assert result["regression"]["read"]["slope_us_per_ms"] is None  # await is constant too
    assert result["lag"]["read"] == {
        "metric": "await_ms",
        "best_lag_s": None,
        "r": None,
        "leader": None,
    }


def test_interrupted_run_without_totals(tmp_path: Path) -> None:
    n = 4
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([100.0] * n, [1000.0, 2000.0, 1500.0, 1700.0])},
        block={"sda": device([50.0, 60.0, 55.0, 52.0], util=5.0)},
        sessions=None,
        scenario={"load": {"sessions": None}},
        summary={"status": "interrupted", "reason": "stopped by SIGINT"},
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["littles_law"]["sessions"] is None and result["littles_law"]["ratio"] is None
    assert result["littles_law"]["concurrency_measured"] == pytest.approx(0.1 / 3 * 1.0, abs=0.1)


def test_empty_run_has_an_answer(tmp_path: Path) -> None:
    path = write_bundle(tmp_path / "b", ops={}, t=[])
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["intervals"] == 0 and result["primary_op"] is None
    assert result["segments"] == [] and result["verdict"]["call"] == "inconclusive"


def test_short_intervals_and_reused_indexes_are_aligned_by_time(tmp_path: Path) -> None:
    # A step boundary at t = 3.05 closes interval 3 early; the next tick reuses index 3.
    root = tmp_path / "b"
    write_bundle(
        root,
        ops={"read": op([100.0] * 5, [1000.0] * 5)},
        block={"sda": device([10.0] * 5, util=1.0)},
    )
    ops = root / "timeseries" / "ops.csv"
    lines = ops.read_text().splitlines()
    lines.append("3.05,3,measure,,read,40.0,2,0,99999,99999,99999,99999,99999,99999,99999")
    lines.append("4.0,3,measure,,read,100,100,0,1000,1000,1000,1000,1000,1000,1000")
    rows = sorted(lines[1:], key=lambda row: float(row.split(",")[0]))
    ops.write_text("\n".join([lines[0], *rows]) + "\n")
    series = load_bundle(root)
    assert 3.05 not in series.t.tolist()  # 50 ms is too short to say anything
    assert series.t.tolist().count(4.0) == 1
    assert np.nanmax(series.ops["read"]["p99_us"]) == 1000


def test_damaged_collector_file_costs_only_that_view(tmp_path: Path) -> None:
    n = 5
    path = write_bundle(
        tmp_path / "b", ops={"read": op([100.0] * n, [1000.0] * n)}, host=cpu(n, 10, 5)
    )
    (path / "timeseries" / "block.csv").write_text("garbage,without,columns\n1,2,3\n")
    result = analyze_bundle(path)
    assert result["primary_device"] is None
    assert result["series"]["host"]["cpu_busy_pct"] == [10.0] * n


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "no such directory"),
        ("no-summary", "no summary.json"),
        ("bad-summary", "summary.json"),
        ("no-ops", "no timeseries/ops.csv"),
        ("bad-ops", "not a dbsim time series"),
        ("bad-scenario", "scenario.yaml"),
    ],
)
def test_unreadable_bundles_raise_bundle_error(tmp_path: Path, damage: str, message: str) -> None:
    root = write_bundle(tmp_path / "b", ops={"read": op([1.0, 2.0], [10.0, 20.0])})
    if damage == "missing":
        root = tmp_path / "nowhere"
    elif damage == "no-summary":
        (root / "summary.json").unlink()
    elif damage == "bad-summary":
        (root / "summary.json").write_text("{not json")
    elif damage == "no-ops":
        (root / "timeseries" / "ops.csv").unlink()
    elif damage == "bad-ops":
        (root / "timeseries" / "ops.csv").write_text("a,b\n1,2\n")
    elif damage == "bad-scenario":
        (root / "scenario.yaml").write_text("load: [unclosed\n")
    with pytest.raises(BundleError) as info:
        analyze_bundle(root)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_summary_that_is_not_an_object_is_unreadable(tmp_path: Path) -> None:
    root = write_bundle(tmp_path / "b", ops={"read": op([1.0], [10.0])})
    (root / "summary.json").write_text(json.dumps([1, 2]))
    with pytest.raises(BundleError, match="not a JSON object"):
        analyze_bundle(root)


maybe = st.one_of(st.none(), st.floats(min_value=0, max_value=1e7, allow_nan=False))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(min_value=0, max_value=12), steps=st.booleans())
def test_any_valid_bundle_gets_a_json_answer(data: st.DataObject, n: int, steps: bool) -> None:
    def column() -> list[float | None]:
        return data.draw(st.lists(maybe, min_size=n, max_size=n))

    ops = {name: {"count": column(), "p50_us": column(), "p99_us": column()} for name in ("a", "b")}
    block = {
        dev: {c: column() for c in ("iops", "r_s", "w_s", "util_pct", "r_await_ms")}
        for dev in ("sda", "sdb")
    }
    host = {"cpu_busy_pct": column(), "process_cpu_pct": column()}
    step_of = [i * 3 // max(n, 1) for i in range(n)] if steps else None
    scenario = {"load": {"steps": [{"duration_s": 1, "sessions": 2}] * 3}} if steps else None
    with tempfile.TemporaryDirectory() as tmp:
        path = write_bundle(
            Path(tmp) / "b",
            ops=ops,
            block=block,
            host=host,
            steps=step_of,
            t=[float(i + 1) for i in range(n)],
            scenario=scenario,
        )
        result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["verdict"]["call"] in {
        "storage-bound",
        "client-bound",
        "database-bound",
        "inconclusive",
    }


def test_sessions_come_from_the_stage_log_else_from_the_scenario(tmp_path: Path) -> None:
    steps = [0, 0, 1, 1, 2, 2]
    n = len(steps)
    common: dict[str, Any] = {
        "ops": {"read": op([10.0] * n, [1000.0] * n)},
        "steps": steps,
        "sessions": 6,
    }
    # The scenario names no sessions per step; the stage log knows what ran.
    stages = [{"t": 0.0, "phase": "warmup", "step": None, "sessions": 9}] + [
        {"t": 2.0 * i, "phase": "measure", "step": i, "sessions": s}
        for i, s in enumerate((1, 3, 6))
    ]
    logged = write_bundle(tmp_path / "logged", summary={"stages": stages}, **common)
    assert sessions_per_interval(load_bundle(logged)).tolist() == [1, 1, 3, 3, 6, 6]
    # Killed before the end: no stage log, so the scenario's steps (2 unnamed → load.sessions).
    scenario = {"load": {"sessions": 2, "steps": [{"sessions": 1}, {}, {"sessions": 4}]}}
    rebuilt = write_bundle(tmp_path / "rebuilt", scenario=scenario, **common)
    assert sessions_per_interval(load_bundle(rebuilt)).tolist() == [1, 1, 2, 2, 4, 4]
    result = analyze_bundle(rebuilt)
    assert result["littles_law"]["sessions"] == pytest.approx(7 / 3, abs=1e-3)


@pytest.mark.parametrize(("n", "points"), [(3, 3), (4, 4), (5, 5), (14, 5), (24, 8), (60, 10)])
def test_curve_bins_intervals_by_load(tmp_path: Path, n: int, points: int) -> None:
    iops = [100.0 + 10 * i for i in range(n)]
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([50.0] * n, [1000.0 + i for i in range(n)])},
        block={"sda": device(iops, util=5.0)},
    )
    curve = analyze_bundle(path)["curve"]
    assert len(curve["points"]) == points
    assert sum(p["n"] for p in curve["points"]) == n
    xs = [p["x"] for p in curve["points"]]
    assert xs == sorted(xs)
    flat = write_bundle(
        tmp_path / "flat",
        ops={"read": op([50.0] * n, [1000.0] * n)},
        block={"sda": device([100.0] * n, util=5.0)},
    )
    assert len(analyze_bundle(flat)["curve"]["points"]) == 1
