"""The live page's strip (sim.live.now): latency beside the limiting device with units, SLOs
against their targets "so far", the cache check as soon as it can tell, the verdict honest
about the run's phase, every latest value with its unit, and the start form's SLO fields."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim.config.resolve import default_scenario_data, validate
from sim.config.scenario import Slo
from sim.live.now import csv_window, exercised_now, live_extras, now_panel, slo_lines
from sim.live.start_form import FormErrors, form_fields, scenario_data
from sim.live.storage_table import storage_rows
from sim.live.wording import value_text, verdict
from sim.protocols import Sample
from sim.report.scales import fmt_ms, fmt_us
from sim.report.svg import Panel

OPS = ("t", "interval", "phase", "step", "op", "ops_s", "count", "errors", "p99_us")
BLOCK = ("t", "interval", "phase", "entity", "iops", "r_s", "w_s", "r_await_ms", "w_await_ms",
         "util_pct")  # fmt: skip


def _write(path: Path, header: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """One warm-up second, then two measured seconds: reads 1,000 then 3,000 per second;
    the device 100 then 300 reads/s at 2 then 4 ms await, 20 then 40 % busy."""
    series = tmp_path / "run" / "timeseries"
    _write(series / "ops.csv", OPS, [
        (1.0, 0, "warmup", "", "read", 500, 500, 0, 9000),
        (2.0, 1, "measure", "", "read", 1000, 1000, 0, 4000),
        (3.0, 2, "measure", "", "read", 3000, 3000, 0, 6000),
    ])  # fmt: skip
    _write(series / "block.csv", BLOCK, [
        (1.0, 0, "warmup", "vda", 50, 50, 0, 1.0, 0.0, 10),
        (2.0, 1, "measure", "vda", 100, 100, 0, 2.0, 0.0, 20),
        (3.0, 2, "measure", "vda", 300, 300, 0, 4.0, 0.0, 40),
        (3.0, 2, "measure", "vdb", 1, 1, 0, 1.0, 0.0, 1),
    ])  # fmt: skip
    return tmp_path / "run"


def test_the_window_and_the_strip_carry_units_and_the_limiting_device(bundle: Path) -> None:
    window = csv_window(bundle)
    measured = window["measured"]
    assert measured["seconds"] == pytest.approx(2.0)
    assert measured["ops"]["read"]["ops_s"] == pytest.approx(2000.0)
    vda = measured["devices"]["vda"]
    # The window's means: IOPS over time, await weighted by I/Os, %util over time.
    assert vda["iops"] == pytest.approx(200.0)
    assert vda["await_ms"] == pytest.approx((100 * 2.0 + 300 * 4.0) / 400)
    assert vda["util_pct"] == pytest.approx(30.0)
    panel = now_panel(window, {"read": {"p99": 5.789}}, running=True)
    texts = [item["text"] for item in panel["items"]]
    assert texts == [
        "read p99 5.79 ms",
        "2,000 ops/s",
        "vda 200 IOPS",
        "await 3.50 ms",
        "util 30 %",
    ]
    assert panel["scope"] == "measured window so far, 2 s" and panel["device"] == "vda"
    # The analysis' device is used when it names one.
    assert now_panel(window, {}, running=False, device="vdb")["device"] == "vdb"


def test_before_the_window_the_strip_says_so(bundle: Path) -> None:
    (bundle / "timeseries" / "ops.csv").write_text(
        ",".join(OPS) + "\n1.0,0,warmup,,read,500,500,0,9000\n", encoding="utf-8"
    )
    (bundle / "timeseries" / "block.csv").unlink()
    window = csv_window(bundle)
    panel = now_panel(window, {}, running=True)
    assert panel["scope"] == "warm-up, latest interval: not measured"
    assert [i["text"] for i in panel["items"]][:2] == ["read p99 9.00 ms", "500 ops/s"]
    assert panel["items"][-1]["text"] == "no block device figures yet"
    slos = [Slo(op="read", p99_us_max=5000)]
    (line,) = slo_lines(slos, window, {}, running=True)
    assert line == {"met": None, "text": "SLO read p99 ≤ 5.00 ms: waiting for the measured window"}
    assert exercised_now(window, {"read"}) is None
    empty = now_panel({}, {}, running=False)
    assert (empty["scope"], empty["items"]) == ("no interval yet", [])


def test_failed_operations_are_said_beside_the_latency(bundle: Path) -> None:
    rows = (bundle / "timeseries" / "ops.csv").read_text(encoding="utf-8").splitlines()
    rows[-1] = rows[-1].replace(",3000,3000,0,", ",3000,3000,1000,")
    (bundle / "timeseries" / "ops.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    items = now_panel(csv_window(bundle), {}, running=True)["items"]
    errors = next(i for i in items if i["key"] == "errors")
    assert errors["text"] == "errors 20 % of operations"


def test_slos_are_judged_on_the_window_so_far_then_without_so_far(bundle: Path) -> None:
    window = csv_window(bundle)
    slos = [Slo(op="read", p99_us_max=5000), Slo(await_ms_max=3.0, iops_min=100)]
    latency = {"read": {"p99_us": 5789.0}}
    lines = {line["text"].split(" (")[0]: line["met"] for line in slo_lines(
        slos, window, latency, running=True)}  # fmt: skip
    assert lines == {
        "SLO MISSED so far: read p99 ≤ 5.00 ms: 5.79 ms": False,
        "SLO MISSED so far: vda await ≤ 3.00 ms: 3.50 ms": False,
        "SLO met so far: vda IOPS ≥ 100: 200": True,
    }
    ended = slo_lines(slos, window, latency, running=False)
    assert all("so far" not in line["text"] for line in ended)


def test_the_cache_check_follows_the_end_of_runs_rule(bundle: Path) -> None:
    window = csv_window(bundle)
    # 200 device reads/s for 2,000 reading operations/s: 10 %, exercised.
    found = exercised_now(window, {"read"})
    assert found is not None and found["exercised"] is True
    # Each device's mean over the intervals it was seen in (vdb: one second at 1 read/s).
    assert found["text"].startswith("storage exercised so far: vda, vdb read 201.0/s for 2,0")
    # Reading operations the window never saw: nothing to tell.
    assert exercised_now(window, {"scan"}) is None
    # Almost no device reads against the same operations: not exercised, said at once.
    rows = (bundle / "timeseries" / "block.csv").read_text(encoding="utf-8").splitlines()
    quiet = [rows[0]] + [r.replace(",100,100,", ",1,1,").replace(",300,300,", ",2,2,")
                         for r in rows[1:]]  # fmt: skip
    (bundle / "timeseries" / "block.csv").write_text("\n".join(quiet) + "\n", encoding="utf-8")
    cold = exercised_now(csv_window(bundle), {"read"}, running=False)
    assert cold is not None and cold["exercised"] is False
    assert cold["text"].startswith("STORAGE NOT EXERCISED: ")


def test_live_extras_reads_the_web_uis_percentiles(bundle: Path) -> None:
    view = {"window": csv_window(bundle), "slos": [{"op": "read", "p99_us_max": 7000.0}]}
    figures = {
        "read": {"response_time_percentile_0.99": 5.789, "response_time_percentile_0.5": 0.2},
        "Aggregated": {"response_time_percentile_0.99": 9.0},
    }
    extras = live_extras(view, figures, running=True, read_ops={"read"})
    assert extras["now"]["items"][0]["text"] == "read p99 5.79 ms"
    assert extras["slos"][0]["text"].startswith("SLO met so far: read p99 ≤ 7.00 ms: 5.79 ms")
    assert extras["cache"]["exercised"] is True


def test_the_verdict_is_honest_about_the_phase() -> None:
    analysis = {"verdict": {"call": "inconclusive", "summary": "Inconclusive: no knee"}}
    warm = verdict(analysis, False, "warm-up", True)
    assert (warm["kind"], warm["call"]) == ("verdict", "waiting for the measured window")
    assert verdict(analysis, False, "measuring", True)["kind"] == "verdict so far"
    ended = verdict(analysis, False, "finished", False)
    assert "so far" not in ended["kind"] and ended["call"] == "inconclusive"
    assert verdict(None, False, "finishing", False)["call"] == "being written"
    assert verdict(analysis, True, "finished", False)["kind"] == "final verdict"


@pytest.mark.parametrize(
    ("panel", "value", "text"),
    [
        (Panel("Latency: p99 solid, p50 dashed (log)", [], y_format=fmt_us), 5789.0, "5.79 ms"),
        (Panel("Latency", [], y_format=fmt_us), 250.0, "250 µs"),
        (Panel("Read await (ms)", [], y_format=fmt_ms), 0.456, "0.46 ms"),
        (Panel("IOPS", []), 7942.4, "7,942 IOPS"),
        (Panel("Throughput (ops/s)", []), 62.33, "62.3 ops/s"),
        (Panel("Util %", []), 33.2, "33 %"),
        (Panel("Write MB/s", []), 2.414, "2.41 MB/s"),
        (Panel("Errors (failed operations/s)", []), 0.0, "0 errors/s"),
        (Panel("IOPS", []), None, "–"),
    ],
)
def test_every_latest_value_has_its_unit(panel: Panel, value: float | None, text: str) -> None:
    assert value_text(panel, value) == text


def test_the_start_forms_slo_fields_become_the_scenarios_slos() -> None:
    base = validate(default_scenario_data())
    names = [f.name for f in form_fields(base)]
    assert names[-4:] == ["slo.op", "slo.p99_ms", "slo.await_ms", "slo.iops_min"]
    values = {"slo.op": "read", "slo.p99_ms": "5", "slo.await_ms": "2.5", "slo.iops_min": ""}
    data, _ = scenario_data(base, values)
    assert data["slos"] == [
        {"name": "form", "op": "read", "p99_us_max": 5000.0},
        {"name": "form", "await_ms_max": 2.5},
    ]
    scenario = validate(data)
    assert [s.p99_us_max for s in scenario.slos] == [5000.0, None]
    # Filled again, the form's SLOs replace its earlier ones; the fields show them.
    again = validate(scenario_data(scenario, {"slo.p99_ms": "7"})[0])
    shown = {f.name: f.value for f in form_fields(again)}
    assert (shown["slo.p99_ms"], shown["slo.op"]) == ("7", "*")
    # Pre-filled from a scenario's objective, the fields replace it rather than add a copy;
    # emptied, they remove it; a body without them (a script's) leaves the SLOs alone.
    own = validate({**default_scenario_data(), "slos": [{"op": "read", "p99_us_max": 4000}]})
    shown = {f.name: f.value for f in form_fields(own)}
    assert (shown["slo.op"], shown["slo.p99_ms"]) == ("read", "4")
    kept = scenario_data(own, shown)[0]["slos"]
    assert kept == [{"name": "form", "op": "read", "p99_us_max": 4000.0}]
    assert scenario_data(own, {**shown, "slo.p99_ms": ""})[0]["slos"] == []
    assert len(scenario_data(own, {"load.duration_s": "5"})[0]["slos"]) == 1
    with pytest.raises(FormErrors) as caught:
        scenario_data(base, {"slo.p99_ms": "-5", "slo.iops_min": "many"})
    assert caught.value.by_field == {
        "slo.p99_ms": ["slo.p99_ms: a number above 0, got '-5'"],
        "slo.iops_min": ["slo.iops_min: a number above 0, got 'many'"],
    }


def test_no_row_of_blanks_in_the_storage_table() -> None:
    rows = storage_rows(
        [Sample("block", "vda", {"iops": 10.0}), Sample("nowhere", "db", {"unknown": 1.0})]
    )
    assert [r["entity"] for r in rows] == ["vda"]


def test_a_margin_of_millions_of_percent_is_said_as_a_ratio(bundle: Path) -> None:
    window = csv_window(bundle)
    (line,) = slo_lines([Slo(await_ms_max=0.001)], window, {}, running=True)
    assert line["text"] == "SLO MISSED so far: vda await ≤ 1.0 µs: 3.50 ms (3,500 times the target)"
