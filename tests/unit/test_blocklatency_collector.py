"""The block-latency collector: parsing recorded bpftrace output into quantiles (checked by hand
against the bucket bounds), the device SLOs judged on its figures, its display through the
registry's declarations alone, and the fallback where bpftrace is not on PATH."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sim import registry
from sim.cli.console import summary_tables
from sim.config.resolve import validate
from sim.config.scenario import Slo
from sim.errors import ScenarioError
from sim.judge.slo import Window, WindowBuilder, evaluate, summary_section, verdict_line
from sim.live.storage_table import storage_rows
from sim.protocols import Sample
from sim.report.sections import storage as report_storage
from storage.collectors.blocklatency import (
    SOURCE,
    BlockLatencyCollector,
    LatencyHistogram,
    auto_blocklatency,
    bpftrace_script,
    device_entities,
    direction,
    kernel_dev,
    latency_figures,
    parse_counts,
)
from tests.unit.test_devices import PathsTarget

# Recorded on this machine (kernel 6.18, bpftrace 0.17) with the collector's own script on
# loop1 (7:1, direct I/O onto a file on a virtio disk): 40 reads of 4 KiB with O_DIRECT, then
# 10 writes, across two ticks; blank lines dropped.
RECORDED = """\
Attaching 5 probes...
blocklatency-ready
blocklatency-tick
blocklatency-tick
@lat[7340033, WS, 14, 15]: 1
@lat[7340033, RS, 14, 10]: 1
@lat[7340033, WS, 13, 8]: 1
@lat[7340033, RS, 13, 10]: 1
@lat[7340033, RS, 18, 15]: 1
@lat[7340033, RS, 13, 9]: 3
@lat[7340033, RS, 13, 8]: 4
@lat[7340033, RS, 12, 15]: 14
@lat[7340033, RS, 12, 14]: 16
blocklatency-tick
@lat[7340033, WS, 14, 12]: 1
@lat[7340033, WS, 20, 8]: 1
@lat[7340033, WS, 13, 8]: 3
@lat[7340033, WS, 13, 9]: 3
blocklatency-tick
"""
LOOP1 = kernel_dev(7, 1)


def midpoint_ms(exponent: int, mantissa: int) -> float:
    """The middle of bucket [m << e, (m + 1) << e) ns, in ms, as the collector rounds it."""
    return round(((mantissa << exponent) + ((mantissa + 1) << exponent)) / 2 / 1e6, 4)


def test_kernel_device_numbers_put_the_major_above_bit_20() -> None:
    assert LOOP1 == 7 * 2**20 + 1 == 7340033
    assert "args->dev == 7340033 || args->dev == 265289728" in bpftrace_script(
        [LOOP1, kernel_dev(253, 0)]
    )


@pytest.mark.parametrize(
    ("rwbs", "expected"),
    [("R", "r"), ("RS", "r"), ("RA", "r"), ("WS", "w"), ("WFS", "w"), ("FWS", "w"),
     ("FR", "r"), ("DS", "other"), ("F", "other"), ("N", "other")],
)  # fmt: skip
def test_direction_is_the_first_operation_letter_after_a_preflush(rwbs: str, expected: str) -> None:
    assert direction(rwbs) == expected


def test_recorded_output_gives_counts_per_direction() -> None:
    counts = parse_counts(RECORDED.splitlines())
    assert list(counts) == [LOOP1]
    assert counts[LOOP1]["r"].count == 40 and counts[LOOP1]["w"].count == 10
    assert counts[LOOP1]["w"].buckets[(13, 8)] == 4  # printed in two ticks: 1 + 3


def test_recorded_output_quantiles_by_hand() -> None:
    # Reads by bucket, lowest first: (12,14) 16, (12,15) 14 -> 30, (13,8) 4 -> 34, (13,9) 3
    # -> 37, (13,10) 1 -> 38, (14,10) 1 -> 39, (18,15) 1 -> 40. Nearest rank: p50 is the
    # 20th (12,15), p95 the 38th (13,10), p99 the 40th (18,15: about 4 ms, one slow read).
    # Writes: (13,8) 4, (13,9) 3 -> 7, (14,12) -> 8, (14,15) -> 9, (20,8) -> 10.
    entities = device_entities("loop1", parse_counts(RECORDED.splitlines())[LOOP1])
    values = {entity: latency_figures(hist) for entity, hist in entities.items()}
    means = {entity: figures.pop("mean_ms") for entity, figures in values.items()}
    assert set(means) == set(values)  # the mean: the test below
    assert values == {
        "loop1": {
            "n": 50.0,
            "p50_ms": midpoint_ms(12, 15),  # 25th of 50
            "p95_ms": midpoint_ms(14, 15),  # 48th
            "p99_ms": midpoint_ms(20, 8),  # 50th
        },
        "loop1:read": {
            "n": 40.0,
            "p50_ms": midpoint_ms(12, 15),
            "p95_ms": midpoint_ms(13, 10),
            "p99_ms": midpoint_ms(18, 15),
        },
        "loop1:write": {
            "n": 10.0,
            "p50_ms": midpoint_ms(13, 9),  # 5th of 10
            "p95_ms": midpoint_ms(20, 8),
            "p99_ms": midpoint_ms(20, 8),
        },
    }
    assert values["loop1"]["p50_ms"] == 0.0635 and values["loop1:read"]["p99_ms"] == 4.0632


def test_the_mean_is_over_bucket_midpoints_like_iostats_await() -> None:
    hist = device_entities("loop1", parse_counts(RECORDED.splitlines())[LOOP1])["loop1:write"]
    # Writes: (13,8) 4, (13,9) 3, (14,12) 1, (14,15) 1, (20,8) 1 (see the test above).
    by_hand = (
        4 * midpoint_ms(13, 8)
        + 3 * midpoint_ms(13, 9)
        + midpoint_ms(14, 12)
        + midpoint_ms(14, 15)
        + midpoint_ms(20, 8)
    ) / 10
    assert latency_figures(hist)["mean_ms"] == pytest.approx(by_hand, abs=1e-4)
    assert LatencyHistogram().mean_ns() is None


def test_a_quantile_is_within_a_sixteenth_of_the_value() -> None:
    # 1,000 ns: halved six times to 15 -> bucket (6, 15) = [960, 1024) ns.
    hist = LatencyHistogram({(6, 15): 3})
    value = hist.quantile_ns(0.99)
    assert value == 992.0 and abs(value - 1000) / 1000 < 1 / 16
    assert LatencyHistogram().quantile_ns(0.5) is None


def test_entities_without_requests_are_left_out() -> None:
    reads = LatencyHistogram({(6, 15): 3})
    assert list(device_entities("loop1", {"r": reads})) == ["loop1", "loop1:read"]
    assert device_entities("loop1", {}) == {}


# --------------------------------------------------------------------------- device SLOs


def summary_with(p99_ms: float | None, iops: float) -> dict[str, object]:
    storage: dict[str, object] = {
        "block": {"loop1": {"iops": iops, "r_s": iops, "r_await_ms": 1.0}}
    }
    if p99_ms is not None:
        storage[SOURCE] = {"loop1": {"p99_ms": p99_ms, "p95_ms": p99_ms / 2, "samples": 5}}
    return {"timing": {"measured_s": 5.0}, "storage": storage}


def test_device_p99_at_an_iops_floor_is_one_entry_judged_on_both() -> None:
    slo = Slo(device_p99_ms_max=2, iops_min=20000)
    met = evaluate([slo], Window.from_summary(summary_with(1.5, 21000)))
    assert [(v["slo"], v["device"], v["measured"], v["met"]) for v in met] == [
        ("iops_min", "loop1", 21000.0, True),
        ("device_p99_ms_max", "loop1", 1.5, True),
    ]
    assert verdict_line(met[1]) == "SLO met: loop1 device p99 ≤ 2.00 ms: 1.50 ms (margin +25.0 %)"
    missed = evaluate([slo], Window.from_summary(summary_with(2.5, 19000)))
    assert [v["met"] for v in missed] == [False, False]


def test_a_sweep_step_weighs_each_interval_p99_by_its_length() -> None:
    builder = WindowBuilder()
    builder.add_device("loop1", {"iops": 1000.0, "r_s": 1000.0, "r_await_ms": 1.0}, 3.0)
    builder.add_device_latency("loop1", {"n": 3000.0, "p99_ms": 1.0, "p95_ms": 0.5}, 3.0)
    builder.add_device_latency("loop1", {"n": 1000.0, "p99_ms": 5.0, "p95_ms": 0.5}, 1.0)
    builder.add_device_latency("loop1:read", {"n": 1000.0, "p99_ms": 9.0}, 1.0)
    builder.add_device_latency("loop1", {"n": 0.0}, 1.0)  # no quantiles: not weighed
    window = builder.window("step 1", 4.0)
    assert set(window.devices) == {"loop1"}
    assert window.devices["loop1"]["p99_ms"] == (3 * 1.0 + 1 * 5.0) / 4
    (verdict,) = evaluate([Slo(device_p99_ms_max=2)], window)
    assert verdict["measured"] == 2.0 and verdict["met"] is True


def test_device_p99_without_ebpf_figures_is_not_met_and_says_why() -> None:
    (verdict,) = evaluate([Slo(device_p99_ms_max=2)], Window.from_summary(summary_with(None, 500)))
    assert verdict["met"] is False and verdict["measured"] is None
    assert "no device latency percentiles for loop1" in verdict["note"]


def test_the_verdict_names_why_ebpf_was_unavailable() -> None:
    summary = summary_with(None, 500)
    summary["findings"] = {SOURCE: {"unavailable": "bpftrace not found on PATH"}}
    (verdict,) = summary_section([Slo(device_p99_ms_max=2)], summary)["verdicts"]
    assert verdict["met"] is False
    assert verdict["note"] == "no device latency percentiles: bpftrace not found on PATH"


def test_device_limits_are_storage_limits_in_the_scenario() -> None:
    scenario = validate(
        {"workload": {"name": "slob"}, "slos": [{"device_p99_ms_max": 2, "iops_min": 20000}]}
    )
    assert scenario.slos[0].device_p99_ms_max == 2
    with pytest.raises(ScenarioError) as caught:
        validate({"workload": {"name": "slob"}, "slos": [{"op": "read", "device_p99_ms_max": 2}]})
    assert any("op applies to operation limits only" in p for p in caught.value.problems)


# --------------------------------------------------------------------------- one module only

LATENCY = Sample(SOURCE, "loop1", {"n": 900.0, "p50_ms": 0.25, "p95_ms": 0.75, "p99_ms": 1.5})


def test_it_shows_in_console_report_and_web_ui_from_its_declaration() -> None:
    from rich.console import Console

    console = Console(width=160, record=True)
    for table in summary_tables({"storage": {SOURCE: {"loop1": dict(LATENCY.values)}}}):
        console.print(table)
    text = console.export_text()
    assert "device latency percentiles" in text and "1.500 ms" in text
    html = str(report_storage({"storage": {SOURCE: {"loop1": {**LATENCY.values, "samples": 4}}}}))
    assert "Device latency percentiles" in html and "1.500" in html
    (row,) = storage_rows([LATENCY])
    assert (row["source"], row["entity"], row["device_p99_ms"]) == (SOURCE, "loop1", 1.5)
    entry = registry.collectors()[SOURCE]
    assert entry.role == registry.ROLE_DEVICE_LATENCY
    assert [f.key for f in entry.correlate] == ["p99_ms", "p50_ms"]


# --------------------------------------------------------------------------- fallback


def test_without_bpftrace_on_path_it_runs_without_figures_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no bpftrace, no mount
    collector = BlockLatencyCollector({"loop1": (7, 1)})

    async def drive() -> list[Sample]:
        await collector.start(0.0)
        samples = await collector.sample(1.0)
        await collector.stop()
        return samples

    assert asyncio.run(drive()) == []
    facts, warnings = collector.findings({}, {}, 1.0)
    why = (
        "not running as root (eBPF tracing needs CAP_BPF and CAP_PERFMON)"
        if os.geteuid() != 0
        else "bpftrace not found on PATH (Debian package bpftrace)"
    )
    assert facts == {"unavailable": why}
    assert warnings == [f"device latency percentiles unavailable: {why}; iostat mean await used"]
    assert collector.describe()["unavailable"] == why


def test_auto_watches_the_named_block_devices(tmp_path: Path) -> None:
    (tmp_path / "loop1").mkdir()
    (tmp_path / "loop1" / "dev").write_text("7:1\n")
    (collector,) = auto_blocklatency(
        PathsTarget([]), {"block": {"devices": ["loop1", "gone"]}}, sys_class_block=tmp_path
    )
    assert isinstance(collector, BlockLatencyCollector)
    assert collector.devices == {"loop1": (7, 1)} and collector.names == {LOOP1: "loop1"}
    assert auto_blocklatency(PathsTarget([]), {}) == []
