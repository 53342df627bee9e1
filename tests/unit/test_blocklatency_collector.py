"""The block-latency collector: parsing recorded bpftrace output into quantiles and the
request shape (sizes, sequential share, requests in flight — checked by hand against the
recording's lines), the device SLOs judged on its figures, its display through the registry's
declarations alone, and the fallback where bpftrace is not on PATH."""

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
    MEANS_ONLY,
    SOURCE,
    BlockLatencyCollector,
    auto_blocklatency,
    request_shape_captured,
)
from storage.collectors.blocklatency_reader import InflightPeaks
from storage.collectors.blocklatency_script import (
    PRINT_SIGNAL,
    SIZE_KEYS,
    TRACEPOINT_FIELDS,
    LatencyHistogram,
    RequestCounts,
    bpftrace_script,
    device_entities,
    entity_figures,
    field_offsets,
    kernel_dev,
    latency_figures,
    parse_tick,
    shape_figures,
    tick_entities,
)
from tests.unit.test_devices import PathsTarget

# /sys/kernel/tracing/events/block/block_rq_issue/format here (kernel 6.18), its fields.
ISSUE_FORMAT_6_18 = """\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;
"""
OFFSETS_6_18 = {
    "block/block_rq_issue": {"dev": 8, "sector": 16, "nr_sector": 24, "bytes": 28, "rwbs": 34},
    "block/block_rq_complete": {"dev": 8, "sector": 16},
    "signal/signal_generate": {"sig": 8},
}

# Recorded on this machine (kernel 6.18, bpftrace 0.17) with the collector's own script on
# loop0 (7:0, direct I/O onto a 64 MiB file on a virtio disk): `dd bs=4k count=16
# iflag=direct` (16 sequential reads), then `dd bs=128k count=3 oflag=direct,dsync` (3
# sequential writes, each followed by the flush dsync asks for: direction 0, no data), then
# fio's 6 random 64 KiB reads (psync, randseed 7). Blank lines and 20 empty ticks before the
# first dd dropped; the rest as printed. Line numbers below count from "Attaching" as 1.
RECORDED = """\
Attaching 5 probes...
blocklatency-ready
blocklatency-tick
blocklatency-tick
@lat[7340032, 1, 13, 13]: 1
@lat[7340032, 1, 14, 10]: 1
@lat[7340032, 1, 13, 11]: 3
@lat[7340032, 1, 13, 9]: 3
@lat[7340032, 1, 13, 10]: 8
@size[7340032, 1, 0]: 16
@seq[7340032, 1]: 15
@depth[7340032, 1]: 16
blocklatency-tick
blocklatency-tick
@lat[7340032, 0, 13, 12]: 1
@lat[7340032, 2, 14, 13]: 1
@lat[7340032, 2, 14, 15]: 1
@lat[7340032, 0, 13, 8]: 1
@lat[7340032, 2, 14, 8]: 1
@lat[7340032, 0, 19, 9]: 1
@size[7340032, 2, 5]: 3
@seq[7340032, 2]: 2
@depth[7340032, 2]: 3
@depth[7340032, 0]: 3
blocklatency-tick
blocklatency-tick
@lat[7340032, 1, 13, 11]: 1
@lat[7340032, 1, 14, 14]: 1
@lat[7340032, 1, 13, 10]: 2
@lat[7340032, 1, 13, 9]: 2
@size[7340032, 1, 4]: 6
@depth[7340032, 1]: 6
blocklatency-tick
"""
LOOP0 = kernel_dev(7, 0)


def recorded_ticks() -> list[list[str]]:
    """The recording cut at its tick markers, as the reader hands ticks over."""
    ticks: list[list[str]] = [[]]
    for line in RECORDED.splitlines():
        if line == "blocklatency-tick":
            ticks.append([])
        else:
            ticks[-1].append(line)
    return ticks


def interval_entities(
    ticks: list[list[str]], kernel_inflight: list[int] | None = None
) -> dict[str, RequestCounts]:
    """The entities of ``ticks`` merged as the collector merges an interval's ticks, with
    the kernel's in-flight count of each tick when given."""
    merged: dict[str, RequestCounts] = {}
    for index, lines in enumerate(ticks):
        tick = parse_tick(lines)
        if kernel_inflight is not None:
            tick.kernel_inflight = {LOOP0: kernel_inflight[index]}
        for entity, counts in tick_entities("loop0", tick, LOOP0).items():
            merged.setdefault(entity, RequestCounts()).merge(counts)
    return merged


def midpoint_ms(exponent: int, mantissa: int) -> float:
    """The middle of bucket [m << e, (m + 1) << e) ns, in ms, as the collector rounds it."""
    return round(((mantissa << exponent) + ((mantissa + 1) << exponent)) / 2 / 1e6, 4)


def test_kernel_device_numbers_put_the_major_above_bit_20() -> None:
    assert LOOP0 == 7 * 2**20 == 7340032
    script = bpftrace_script([LOOP0, kernel_dev(253, 0)], 4242, OFFSETS_6_18)
    assert "if ($dev == 7340032 || $dev == 265289728)" in script
    # No field by name: bpftrace 0.17 parses the event's format with clang and rereads the
    # kernel's event list for every ``args->`` it compiles (0.21 CPU-s at each start, 0.17
    # by offset). The offsets are the kernel's (block_rq_issue's rwbs at 34 on 6.18).
    assert "args->" not in script and script.count("(uint64)args") == 3
    assert "$r0 = *(uint8 *)($c + 34); $r1 = *(uint8 *)($c + 35);" in script
    # It prints when process 4242 (the collector's) sends SIGWINCH, and on no timer.
    assert f"/pid == 4242 && *(int32 *)((uint64)args + 8) == {int(PRINT_SIGNAL)}/" in script
    assert int(PRINT_SIGNAL) == 28 and "interval:" not in script


def test_field_offsets_from_a_format_file() -> None:
    wanted = TRACEPOINT_FIELDS["block/block_rq_issue"]
    assert field_offsets(ISSUE_FORMAT_6_18, wanted) == OFFSETS_6_18["block/block_rq_issue"]
    # A kernel without the ioprio field has rwbs at 32.
    older = "\n".join(ln for ln in ISSUE_FORMAT_6_18.splitlines() if "ioprio" not in ln)
    older = older.replace("rwbs[10];\toffset:34", "rwbs[8];\toffset:32")
    assert field_offsets(older, wanted)["rwbs"] == 32
    with pytest.raises(ValueError, match="'bytes'"):
        field_offsets(ISSUE_FORMAT_6_18.replace("bytes", "b"), wanted)
    with pytest.raises(ValueError, match="'sector'"):  # a 32-bit sector_t: not this program
        field_offsets(ISSUE_FORMAT_6_18.replace("offset:16;\tsize:8", "offset:16;\tsize:4"), wanted)
    assert field_offsets("field:int sig;\toffset:8;\tsize:4;\tsigned:1;", {"sig": 4}) == {"sig": 8}


def test_recorded_ticks_give_counts_per_direction() -> None:
    ticks = recorded_ticks()
    assert len(ticks) == 8 and ticks[0] == ["Attaching 5 probes...", "blocklatency-ready"]
    reads = parse_tick(ticks[2]).counts[LOOP0]["r"]  # lines 5-12: the 16 sequential reads
    assert reads.latency.count == 1 + 1 + 3 + 3 + 8 == 16
    assert reads.sizes == [16, 0, 0, 0, 0, 0, 0, 0, 0, 0]  # line 10: bucket 0, <= 4 KiB
    assert (reads.sequential, reads.depth_sum) == (15, 16)  # lines 11, 12
    flushes_and_writes = parse_tick(ticks[4]).counts[LOOP0]  # lines 15-24
    flushes, writes = flushes_and_writes["other"], flushes_and_writes["w"]
    assert flushes.latency.count == 3 and flushes.sizes == [0] * 10  # no data: no size
    assert writes.latency.count == 3 and writes.sizes[5] == 3  # line 21: 128 KiB, bucket 5
    assert (writes.sequential, writes.depth_sum, flushes.depth_sum) == (2, 3, 3)
    assert parse_tick(ticks[1]).counts == {}


def test_recorded_quantiles_by_hand() -> None:
    # Reads (lines 5-9 and 27-30) by bucket, lowest first: (13,9) 3+2 = 5, (13,10) 8+2 -> 15,
    # (13,11) 3+1 -> 19, (13,13) 1 -> 20, (14,10) 1 -> 21, (14,14) 1 -> 22. Nearest rank of
    # 22: p50 the 11th (13,10), p95 the 21st (14,10), p99 the 22nd (14,14).
    # Writes (lines 16, 17, 19): (14,8), (14,13), (14,15); flushes (lines 15, 18, 20): (13,8),
    # (13,12), (19,9) — one flush took about 5 ms.
    values = {e: latency_figures(c.latency) for e, c in interval_entities(recorded_ticks()).items()}
    for figures in values.values():
        figures.pop("mean_ms")  # the mean: the test below
    assert values == {
        "loop0": {
            # 28 requests: (13,8) a flush 1, (13,9) 5 -> 6, (13,10) 10 -> 16 holds the 14th;
            # the 27th is the write (14,15), the 28th the flush (19,9).
            "n": 28.0,
            "p50_ms": midpoint_ms(13, 10),
            "p95_ms": midpoint_ms(14, 15),
            "p99_ms": midpoint_ms(19, 9),
        },
        "loop0:read": {
            "n": 22.0,
            "p50_ms": midpoint_ms(13, 10),
            "p95_ms": midpoint_ms(14, 10),
            "p99_ms": midpoint_ms(14, 14),
        },
        "loop0:write": {
            "n": 3.0,
            "p50_ms": midpoint_ms(14, 13),
            "p95_ms": midpoint_ms(14, 15),
            "p99_ms": midpoint_ms(14, 15),
        },
    }
    assert values["loop0"]["p99_ms"] == 4.9807 and values["loop0:read"]["p50_ms"] == 0.086


def test_the_mean_is_over_bucket_midpoints_like_iostats_await() -> None:
    writes = interval_entities(recorded_ticks())["loop0:write"]
    by_hand = (midpoint_ms(14, 8) + midpoint_ms(14, 13) + midpoint_ms(14, 15)) / 3  # 16-19
    assert latency_figures(writes.latency)["mean_ms"] == pytest.approx(by_hand, abs=1e-4)
    assert LatencyHistogram().mean_ns() is None


def test_recorded_request_shape_by_hand() -> None:
    shapes = {e: shape_figures(c) for e, c in interval_entities(recorded_ticks()).items()}
    sizes = {e: {k: v for k, v in s.items() if k.startswith("size_")} for e, s in shapes.items()}
    zero = dict.fromkeys(SIZE_KEYS, 0.0)
    # Reads: 16 of <= 4 KiB (line 10), 6 of 64 KiB (line 31: bucket 4, <= 64 KiB).
    assert sizes["loop0:read"] == {**zero, "size_kib_le_4": 16.0, "size_kib_le_64": 6.0}
    # Writes: 3 of 128 KiB (line 21); the flushes carry no data and have no size.
    assert sizes["loop0:write"] == {**zero, "size_kib_le_128": 3.0}
    assert sizes["loop0"] == {
        **zero, "size_kib_le_4": 16.0, "size_kib_le_64": 6.0, "size_kib_le_128": 3.0,
    }  # fmt: skip
    # Sequential: reads 15 of 22 (line 11; fio's random reads none), writes 2 of 3 (line
    # 22), the device 17 of the 25 with data.
    assert shapes["loop0:read"]["seq_pct"] == round(100 * 15 / 22, 2) == 68.18
    assert shapes["loop0:write"]["seq_pct"] == round(100 * 2 / 3, 2) == 66.67
    assert shapes["loop0"]["seq_pct"] == 68.0
    # One request at a time (dd, psync): every completion saw itself alone at its issue,
    # depth sums 16 + 6 (lines 12, 32), 3 + 3 (lines 23, 24) over 28 completions.
    for entity in ("loop0", "loop0:read", "loop0:write"):
        assert shapes[entity]["inflight_mean"] == 1.0
        assert "inflight_max" not in shapes[entity]  # no kernel count read with the recording


def test_inflight_max_is_the_highest_kernel_count_of_the_ticks_with_requests() -> None:
    # Made up (the recording has one request at a time): a tick where 10 reads saw 3 in
    # flight each, then one where 10 saw 1, and a completion whose count came out below 1;
    # the kernel's counts read at the ends of the two ticks 7 and 2, then 9 at a tick
    # without requests, which no entity of the interval has.
    busy = ["@lat[7340032, 1, 13, 9]: 10", "@depth[7340032, 1]: 30", "@clamped[7340032]: 1"]
    quiet = ["@lat[7340032, 1, 13, 9]: 10", "@depth[7340032, 1]: 10"]
    merged = interval_entities([busy, quiet, []], kernel_inflight=[7, 2, 9])
    figures = entity_figures(merged["loop0:read"])
    assert (figures["inflight_mean"], figures["inflight_max"]) == ((30 + 10) / 20, 7.0)
    assert entity_figures(merged["loop0"])["inflight_max"] == 7.0
    assert "seq_pct" not in figures  # no request with data issued: no share to give
    assert parse_tick(busy).clamped == {LOOP0: 1}
    assert parse_tick(["@size[7340032, 1]: 4", "@depth[x]: 1"]).counts == {}  # malformed


def test_the_kernels_inflight_file_is_reads_plus_writes_and_its_peak_is_kept(
    tmp_path: Path,
) -> None:
    # /sys/class/block/<name>/inflight as the kernel prints it: two right-aligned counts.
    (tmp_path / "loop0").mkdir()
    loop0 = tmp_path / "loop0" / "inflight"
    loop0.write_text("       5        3\n")
    (tmp_path / "loop1").mkdir()
    (tmp_path / "loop1" / "inflight").write_text("garbage\n")
    files = {
        LOOP0: loop0,
        kernel_dev(7, 1): tmp_path / "loop1" / "inflight",
        kernel_dev(7, 2): tmp_path / "gone" / "inflight",
    }
    peaks = InflightPeaks(files)
    try:
        peaks.read()
        loop0.write_text("       1        0\n")  # fewer since: the 8 read before stays the peak
        assert peaks.take() == {LOOP0: 8}
        assert peaks.take() == {LOOP0: 1}  # a take starts over from a reading of its own
    finally:
        peaks.close()


def test_a_quantile_is_within_a_sixteenth_of_the_value() -> None:
    # 1,000 ns: halved six times to 15 -> bucket (6, 15) = [960, 1024) ns.
    hist = LatencyHistogram({(6, 15): 3})
    value = hist.quantile_ns(0.99)
    assert value == 992.0 and abs(value - 1000) / 1000 < 1 / 16
    assert LatencyHistogram().quantile_ns(0.5) is None


def test_entities_without_requests_are_left_out() -> None:
    reads = RequestCounts(latency=LatencyHistogram({(6, 15): 3}))
    assert list(device_entities("loop1", {"r": reads})) == ["loop1", "loop1:read"]
    assert device_entities("loop1", {"w": RequestCounts()}) == {}


def test_request_shape_captured_reads_the_summarys_descriptions() -> None:
    ran = {"source": SOURCE, "devices": {"loop0": "7:0"}}
    refused = {**ran, "unavailable": "bpftrace not found on PATH (Debian package bpftrace)"}
    assert request_shape_captured([{"source": "block"}, ran]) is True
    assert request_shape_captured([{"source": "block"}, refused]) is False
    assert request_shape_captured([]) is False
    assert MEANS_ONLY == "block: no request-size distribution (iostat means only)"


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
    assert collector.devices == {"loop1": (7, 1)} and collector.names == {kernel_dev(7, 1): "loop1"}
    assert auto_blocklatency(PathsTarget([]), {}) == []
