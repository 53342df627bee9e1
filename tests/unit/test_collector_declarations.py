"""Collectors own their options, scope, display and correlatable figures (sim.registry
``CollectorEntry``): the scenario, the runner, the distributed merge, the console, the report
and the web UI read the declarations. Driven with a collector made up for the test and
registered for its duration, which no other file names."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from sim import registry
from sim.bundle.reader import read_summary
from sim.bundle.writer import BundleWriter
from sim.cli.console import live_tables, summary_tables
from sim.config import resolve as scenario
from sim.config.resolve import validate
from sim.core.metrics import Interval, OpStats
from sim.errors import ScenarioError
from sim.judge.compare import run_figures
from sim.judge.slo import Window
from sim.judge.sweep import BreachMonitor, step_windows
from sim.live.storage_table import storage_columns, storage_rows
from sim.live.worker_samples import merge_samples
from sim.protocols import Collector, Sample, Target
from sim.registry import (
    COLLECTOR_SCOPE_SHARED,
    ROLE_DEVICE,
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
)
from sim.report.data import series_from_bundle
from sim.report.sections import storage as report_storage
from sim.run.calibration import Calibration
from sim.run.runner import build_collectors
from tests.unit.test_devices import PathsTarget


class GaugeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dials: int = Field(default=1, ge=1)


class GaugeCollector(Collector):
    source = "gauge"

    def __init__(self, dials: int) -> None:
        self.dials = dials

    async def start(self, now: float) -> None:
        return None

    async def sample(self, now: float) -> list[Sample]:
        return []


def _auto(target: Target, options: dict[str, Any]) -> list[Collector]:
    chosen = registry.collector_options(GaugeOptions, "gauge", options)
    return [GaugeCollector(chosen.dials)]


GAUGE = CollectorEntry(
    source="gauge",
    auto=_auto,
    summary="a made-up array gauge",
    options_model=GaugeOptions,
    scope=COLLECTOR_SCOPE_SHARED,
    display=Display(
        title="Gauge",
        entity_label="dial",
        live=(Figure("wait_ms", "wait", "ms", 2, grouped=False),),
        console=(Figure("ops_s", "ops/s", digits=1), Figure("wait_ms", "wait ms", digits=2)),
        console_title="gauge dials (mean, measured window)",
        report=(Figure("ops_s", "ops/s", digits=1),),
        ui=(UiFigure("iops", "IOPS", "ops_s"), UiFigure("gauge_wait", "Gauge wait", "wait_ms")),
    ),
    correlate=(Figure("wait_ms", "wait"),),
)


@pytest.fixture
def gauge() -> Iterator[CollectorEntry]:
    registry.collectors()  # the built-in ones first, so the gauge comes last
    registry.register_collector(GAUGE)
    scenario.collector_settings_model.cache_clear()
    scenario.scenario_model.cache_clear()
    try:
        yield GAUGE
    finally:
        registry._collectors.pop("gauge", None)
        scenario.collector_settings_model.cache_clear()
        scenario.scenario_model.cache_clear()


@pytest.fixture
def capture() -> Iterator[str]:
    """A device-level source made up for the test (a capture import, say) that declares the
    device role, which the block collector gives up for the test's duration."""
    block = registry.collectors()["block"]
    entry = CollectorEntry(
        source="capture", auto=lambda t, o: [], summary="a capture", role=ROLE_DEVICE
    )
    registry.register_collector(dataclasses.replace(block, role=""))
    registry.register_collector(entry)
    try:
        yield entry.source
    finally:
        registry._collectors.pop("capture", None)
        registry.register_collector(block)


def _capture_bundle(root: Path) -> Path:
    """Four measured 1 s intervals of 100 reads each, disk sdz seen only by the capture."""
    (root / "run").mkdir()
    writer = BundleWriter(root / "run", {"name": "capture", "load": {}})
    totals: dict[str, OpStats] = {}
    for i in range(4):
        stats = OpStats()
        stats.histogram.record_value(2000, 100)
        disk = {"r_s": 150.0, "w_s": 50.0, "iops": 200.0, "r_await_ms": 2.0, "w_await_ms": 6.0}
        writer.on_interval(
            Interval(i, float(i), i + 1.0, "measure", 0, {"read": stats}),
            [Sample("capture", "sdz", disk)],
        )
        totals.setdefault("read", OpStats()).merge(stats)
    stages = [{"t": 0.0, "phase": "measure", "step": 0, "sessions": 1, "duration_s": 4.0}]
    writer.close()
    writer.write_summary("completed", totals=totals, measured_s=4.0, extra={"stages": stages})
    return root / "run"


def test_a_new_device_source_feeds_the_slos_sweeps_compare_and_report(
    capture: str, tmp_path: Path
) -> None:
    """Whatever source declares the device role is the one judged, compared and drawn."""
    bundle = _capture_bundle(tmp_path)
    summary = read_summary(bundle)
    assert set(summary["storage"]) == {"capture"}
    measured = Window.from_summary(summary).devices["sdz"]
    assert measured["iops"] == pytest.approx(200.0) and measured["await_ms"] == pytest.approx(3.0)
    (step,) = step_windows(bundle, summary["stages"]).values()
    assert step.devices["sdz"]["iops"] == pytest.approx(200.0)
    assert run_figures(bundle, "baseline")["device"] == "sdz"
    assert series_from_bundle(bundle)["device"]["sdz"]["iops"] == [200.0] * 4
    monitor = BreachMonitor(None, [])  # type: ignore[arg-type]  # the engine is for stopping
    monitor.on_interval(
        Interval(0, 0.0, 1.0, "measure", 0, {}), [Sample("capture", "sdz", {"r_s": 7.0})]
    )
    assert monitor.builders[0].device_seconds == {"sdz": 1.0}
    # Load asked in device IOPS is calibrated on the same source.
    assert Calibration(None).source == "capture"  # type: ignore[arg-type]  # wired later


def test_options_are_a_scenario_section_validated_with_it(gauge: CollectorEntry) -> None:
    chosen = validate({"workload": {"name": "slob"}, "collectors": {"gauge": {"dials": 3}}})
    assert chosen.collectors.gauge == GaugeOptions(dials=3)  # type: ignore[attr-defined]
    with pytest.raises(ScenarioError) as caught:
        validate({"workload": {"name": "slob"}, "collectors": {"gauge": {"dials": 0, "hands": 2}}})
    assert caught.value.problems == [
        "collectors.gauge.dials: Input should be greater than or equal to 1 (got 0)",
        "collectors.gauge.hands: Extra inputs are not permitted",
    ]
    schema = scenario.json_schema()
    assert "gauge" in schema["$defs"]["CollectorSettings"]["properties"]


def test_runner_hands_each_collector_its_own_options(gauge: CollectorEntry) -> None:
    chosen = validate(
        {
            "workload": {"name": "slob"},
            "collectors": {"enabled": ["gauge"], "gauge": {"dials": 4}},
        }
    )
    (collector,) = build_collectors(chosen.collectors, PathsTarget([]))
    assert isinstance(collector, GaugeCollector) and collector.dials == 4


def test_earlier_keys_move_into_their_collector_section() -> None:
    chosen = validate(
        {
            "workload": {"name": "slob"},
            "collectors": {"block_devices": ["vdb"], "nfs_mounts": ["/mnt/a"]},
        }
    )
    assert chosen.collectors.block.devices == ["vdb"]  # type: ignore[attr-defined]
    assert chosen.collectors.nfs.mounts == ["/mnt/a"]  # type: ignore[attr-defined]
    with pytest.raises(ScenarioError) as caught:  # both ways at once: the old one is refused
        validate(
            {
                "workload": {"name": "slob"},
                "collectors": {"block_devices": ["vdb"], "block": {"devices": ["vdc"]}},
            }
        )
    assert caught.value.problems == ["collectors.block_devices: Extra inputs are not permitted"]


def test_shared_scope_is_taken_once_for_the_run(gauge: CollectorEntry) -> None:
    dial = Sample("gauge", "d1", {"ops_s": 5.0})
    disk = Sample("block", "vda", {"iops": 7.0})
    merged = merge_samples([(0, "a", [dial, disk]), (1, "b", [dial, disk])])
    assert sorted((s.source, s.entity) for s in merged) == [
        ("block", "a/vda"),
        ("block", "b/vda"),
        ("gauge", "d1"),
    ]


def test_console_report_and_web_ui_follow_the_display(gauge: CollectorEntry) -> None:
    sample = Sample("gauge", "d1", {"ops_s": 1234.5, "wait_ms": 3.25})
    out = Console(width=120, record=True)
    for table in live_tables([sample]):
        out.print(table)
    for table in summary_tables({"storage": {"gauge": {"d1": dict(sample.values)}}}):
        out.print(table)
    text = out.export_text()
    assert "dial" in text and "3.25 ms" in text and "1,234.5" in text
    assert "gauge dials (mean, measured window)" in " ".join(text.split())  # title wraps
    html = str(report_storage({"storage": {"gauge": {"d1": {"ops_s": 1234.5, "samples": 4}}}}))
    assert "Gauge (mean of the intervals; samples d1: 4)" in html
    columns = storage_columns()
    assert columns[-1] == ("gauge_wait", "Gauge wait")
    assert [k for k, _ in columns].count("iops") == 1  # shared with the block devices
    (row,) = storage_rows([sample])
    assert (row["iops"], row["gauge_wait"], row["util_pct"]) == (1234.5, 3.25, "")


def test_block_display_keeps_the_console_table() -> None:
    means = {"r_s": 1500.25, "w_s": 2.0, "iops": 1502.25, "rkB_s": 12000.4, "wkB_s": 8.0}
    means |= {"r_await_ms": 0.456, "w_await_ms": 1.5, "aqu_sz": 0.75, "util_pct": 42.4}
    out = Console(width=140, record=True)
    for table in summary_tables({"storage": {"block": {"vda": means}}}):
        out.print(table)
    text = out.export_text()
    assert "block devices (mean per second, measured window)" in text
    header = next(line for line in text.splitlines() if line.startswith("┃ device"))
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == [
        "device", "r/s", "w/s", "IOPS", "rkB/s", "wkB/s", "r_await", "w_await", "aqu-sz", "%util",
    ]  # fmt: skip
    row = next(line for line in text.splitlines() if "vda" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")] == [
        "vda", "1,500.2", "2.0", "1,502.2", "12,000", "8", "0.46", "1.50", "0.75", "42",
    ]  # fmt: skip


def test_no_product_file_outside_the_plugins_names_a_collector() -> None:
    """The consumers read declarations: none compares a sample's source with a name."""
    root = Path(__file__).resolve().parents[2]
    consumers = [
        "sim/run/runner.py",
        "sim/run/finish.py",
        "sim/cli/console.py",
        "sim/locust/packets.py",
        "sim/locust/webui.py",
        "sim/live/storage_table.py",
        "sim/live/worker_samples.py",
        "sim/report/collector_charts.py",
        "sim/report/charts.py",
        "sim/locust/live.py",
        "sim/analysis/series.py",
        "sim/analysis/verdict.py",
        "sim/analysis/analyze.py",
        "sim/report/sections.py",
        "sim/report/data.py",
        "sim/judge/slo.py",
        "sim/judge/sweep.py",
        "sim/judge/compare.py",
        "sim/judge/compare_rows.py",
        "sim/judge/compare_pool.py",
        "sim/judge/compare_levels.py",
        "sim/run/calibration.py",
        "sim/cli/size.py",
    ]
    # "host" is also the machine's name in packets and the summary: its source is checked
    # through the comparison a consumer would make.
    names = [f'"{e}"' for e in registry.collectors() if e != "host"]
    names += ['source == "host"', 'sources.get("host")']
    for path in consumers:
        text = (root / path).read_text()
        assert not [name for name in names if name in text], path
