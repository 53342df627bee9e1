"""The block collector on recorded /proc/diskstats text (tests/data/diskstats): a device
re-attached or detached, a malformed or cut line, counter wrap at each field's own width.

Each test checks that the interval across the event is a gap (no values, the reason and the
two readings said), that no rate anywhere exceeds 10 × the larger reading per second, that the
next interval is exact again, and that the other devices' figures are those of the clean text.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
from pathlib import Path

import pytest

from sim.baseline.run import BaselineRun
from sim.bundle.writer import BundleWriter
from sim.core.metrics import Interval
from sim.judge.sweep import BreachMonitor
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample, gap_sample
from storage.collectors.block import BlockDeviceCollector
from storage.collectors.diskstats import (
    DiskCounters,
    counter_break,
    iostat_rates,
    parse_diskstats,
    parse_diskstats_line,
    parse_diskstats_table,
)
from tests.support.counters import by_entity, impossible_rates

DATA = Path(__file__).resolve().parents[1] / "data" / "diskstats"
DEVICES = ["vda", "sdb", "nvme0n1"]
# iostat figure -> the counters it is the rate of
RATE_COUNTERS = {
    "r_s": ("rd_ios",),
    "w_s": ("wr_ios",),
    "d_s": ("dc_ios",),
    "f_s": ("fl_ios",),
    "rrqm_s": ("rd_merges",),
    "wrqm_s": ("wr_merges",),
    "rkB_s": ("rd_sectors",),
    "wkB_s": ("wr_sectors",),
    "iops": ("rd_ios", "wr_ios", "dc_ios"),
}


def text(name: str) -> str:
    return (DATA / name).read_text(encoding="ascii")


def replace_line(whole: str, device: str, new: str) -> str:
    """``whole`` with ``device``'s line replaced by ``new`` (no end of line added)."""
    return "\n".join(new if line.split()[2:3] == [device] else line for line in whole.split("\n"))


def drive(readings: list[str], tmp_path: Path) -> list[dict[str, Sample]]:
    """Start on readings[0], then one sample per further reading, one second apart."""
    stats = tmp_path / "diskstats"
    collector = BlockDeviceCollector(DEVICES, diskstats_path=stats, long_bits=64)

    async def run() -> list[dict[str, Sample]]:
        stats.write_text(readings[0])
        await collector.start(now=0.0)
        out = []
        for i, reading in enumerate(readings[1:], start=1):
            stats.write_text(reading)
            out.append(by_entity(await collector.sample(now=float(i))))
        await collector.stop()
        return out

    return asyncio.run(run())


def exact(before: str, after: str, device: str, interval_s: float = 1.0) -> dict[str, float]:
    """The iostat figures of ``device`` between two clean texts."""
    return iostat_rates(
        parse_diskstats(before)[device], parse_diskstats(after)[device], interval_s, 64
    )


def assert_possible(samples: dict[str, Sample], before: str, after: str, age_s: float) -> None:
    old, new = parse_diskstats(before), parse_diskstats(after)
    for name, sample in samples.items():
        if name not in old or name not in new:
            continue
        totals = {
            key: (
                float(sum(getattr(old[name], c) for c in counters)),
                float(sum(getattr(new[name], c) for c in counters)),
            )
            for key, counters in RATE_COUNTERS.items()
        }
        assert impossible_rates(sample.values, totals, age_s) == {}, name


# ------------------------------------------------------------------ re-attached, detached


def test_a_reattached_device_is_a_reset_and_the_next_interval_is_exact(tmp_path: Path) -> None:
    readings = [text("steady.1"), text("reattached.2"), text("reattached.3")]
    across, after = drive(readings, tmp_path)
    sdb = across["sdb"]
    assert (sdb.gap, dict(sdb.values)) == (GAP_RESET, {})
    assert sdb.detail == "rd_ios: 81234567 -> 17"
    # Without the check, sdb's r/s across the re-attach is the wrapped 2**64 - 81234550.
    old, new = (parse_diskstats(r)["sdb"] for r in readings[:2])
    assert iostat_rates(old, new, 1.0, 64)["r_s"] > 1e19
    for device in ("vda", "nvme0n1"):  # untouched by sdb's reset
        assert across[device].gap == ""
        assert dict(across[device].values) == exact(readings[0], readings[1], device)
    assert across["vda"].values["r_s"] == 100.0 and across["nvme0n1"].values["r_s"] == 50000.0
    # The re-attached disk's own second: hand-computed from the README's deltas.
    values = after["sdb"].values
    assert (values["r_s"], values["w_s"], values["f_s"], values["rrqm_s"]) == (400, 200, 4, 100)
    assert (values["rkB_s"], values["r_await_ms"], values["w_await_ms"]) == (3200, 0.5, 3.0)
    assert (values["util_pct"], values["iops"], values["rrqm_pct"]) == (75.0, 600.0, 20.0)
    assert_possible(across, readings[0], readings[1], 1.0)
    assert_possible(after, readings[1], readings[2], 1.0)


def test_a_detached_device_is_unreadable_and_its_return_a_reset(tmp_path: Path) -> None:
    readings = [text("steady.1"), text("detached.2"), text("reattached.3"), text("reattached.3")]
    gone, back, steady = drive(readings, tmp_path)
    assert gone["sdb"].gap == GAP_UNREADABLE and "not listed" in gone["sdb"].detail
    assert dict(gone["vda"].values) == exact(readings[0], readings[1], "vda")
    assert back["sdb"].gap == GAP_RESET and "listed again" in back["sdb"].detail
    assert dict(back["nvme0n1"].values) == exact(readings[1], readings[2], "nvme0n1")
    assert steady["sdb"].gap == "" and all(v == 0.0 for v in steady["sdb"].values.values())


def test_a_changed_device_number_is_a_reset_even_with_counters_going_up(tmp_path: Path) -> None:
    moved = text("steady.2").replace("   8      16 sdb", "   8      32 sdb")
    [samples] = drive([text("steady.1"), moved], tmp_path)
    assert samples["sdb"].gap == GAP_RESET
    assert samples["sdb"].detail == "device number: 8:16 -> 8:32"


# ------------------------------------------------------------------ malformed lines

CLEAN_SDB = next(line for line in text("steady.2").split("\n") if " sdb " in line)
MANGLED = {
    "cut mid-line": " ".join(CLEAN_SDB.split()[:12]),  # 9 counters of 17
    "not a number": CLEAN_SDB.replace(" 3401", " 34x01"),
    "negative": CLEAN_SDB.replace(" 81234967 ", " -81234967 "),
    "tick wider than 32 bits": CLEAN_SDB.replace(" 45679701 ", " 4294967296 "),
    "19 fields": " ".join(CLEAN_SDB.split()[:19]),
}


@pytest.mark.parametrize("how", sorted(MANGLED))
def test_a_malformed_line_costs_only_its_device(how: str, tmp_path: Path) -> None:
    bad = replace_line(text("steady.2"), "sdb", MANGLED[how])
    assert bad != text("steady.2"), how
    readings = [text("steady.1"), bad, text("steady.3")]
    during, after = drive(readings, tmp_path)
    sdb = during["sdb"]
    assert (sdb.gap, dict(sdb.values)) == (GAP_UNREADABLE, {})
    assert MANGLED[how].strip()[:100] in sdb.detail and len(sdb.detail) < 320
    for device in ("vda", "nvme0n1"):  # the very figures of the clean text
        assert dict(during[device].values) == exact(text("steady.1"), text("steady.2"), device)
    # The baseline stayed: the next good reading covers both seconds, exactly.
    assert dict(after["sdb"].values) == exact(text("steady.1"), text("steady.3"), "sdb", 2.0)
    assert after["sdb"].meta == {"span_s": "2"}
    assert after["vda"].meta == {}


def test_a_last_line_cut_mid_field_is_unreadable(tmp_path: Path) -> None:
    clean = text("steady.2")
    cut = clean.rstrip("\n")[:-2]  # nvme0n1's last field loses its last digits, and the newline
    [samples] = drive([text("steady.1"), cut], tmp_path)
    assert samples["nvme0n1"].gap == GAP_UNREADABLE
    assert samples["nvme0n1"].detail.startswith("cut short (no end of line): 259")
    assert dict(samples["sdb"].values) == exact(text("steady.1"), clean, "sdb")
    table = parse_diskstats_table(clean)
    assert table.unreadable == {} and sorted(table.counters) == ["loop0", "nvme0n1", "sdb", "vda"]


def test_a_line_naming_no_device_is_kept_aside() -> None:
    table = parse_diskstats_table(text("steady.1") + "garbage\n")
    assert sorted(table.counters) == ["loop0", "nvme0n1", "sdb", "vda"]
    assert list(table.unreadable) == [""]
    twice = parse_diskstats_table(text("steady.1") + text("steady.1").split("\n")[1] + "\n")
    assert "vda" not in twice.counters and "listed twice" in twice.unreadable["vda"]


# ------------------------------------------------------------------ widths and wrap


def counters(**kw: int) -> DiskCounters:
    base = parse_diskstats(text("steady.1"))["sdb"]
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_a_32_bit_tick_field_wraps_where_64_bit_counts_reset() -> None:
    prev = counters(io_ticks=2**32 - 400, rd_ticks=2**32 - 100)
    # 1 s later: io_ticks +900 ms and rd_ticks +300 ms through the wrap, 400 more reads.
    curr = dataclasses.replace(prev, rd_ios=prev.rd_ios + 400, io_ticks=500, rd_ticks=200)
    assert counter_break(prev, curr, 1.0, 64) is None
    rates = iostat_rates(prev, curr, 1.0, 64)
    assert rates["util_pct"] == pytest.approx(90.0) and rates["r_await_ms"] == 0.75
    # The same drop far from the top of the field: no device is busy 2**32 - 5e6 ms in 1 s.
    mid = counters(io_ticks=5_000_500)
    assert counter_break(mid, dataclasses.replace(mid, io_ticks=500), 1.0, 64) == (
        "io_ticks: 5000500 -> 500"
    )
    # rd_ticks grew through the wrap with no read completed: a reset.
    assert counter_break(prev, dataclasses.replace(prev, rd_ticks=200), 1.0, 64) == (
        f"rd_ticks: {2**32 - 100} -> 200"
    )


def test_unsigned_long_counts_wrap_only_at_the_kernels_width() -> None:
    near = counters(rd_ios=2**32 - 10)
    wrapped = dataclasses.replace(near, rd_ios=390)
    # A 32-bit kernel's unsigned long wraps at 2**32: 400 reads.
    assert counter_break(near, wrapped, 1.0, 32) is None
    assert iostat_rates(near, wrapped, 1.0, 32)["r_s"] == 400.0
    # On a 64-bit kernel the same drop is a restart: 2**64 - 2**32 reads in a second are not.
    assert counter_break(near, wrapped, 1.0, 64) == f"rd_ios: {2**32 - 10} -> 390"
    top = counters(rd_ios=2**64 - 10)
    assert counter_break(top, dataclasses.replace(top, rd_ios=390), 1.0, 64) is None


def test_in_flight_is_read_as_the_signed_value_the_kernel_had() -> None:
    line = CLEAN_SDB.replace(" 3 ", " 4294967295 ", 1)
    parsed = parse_diskstats_line(line, 64)
    assert parsed is not None and parsed.ios_in_progress == -1
    assert parse_diskstats_line(CLEAN_SDB, 64).ios_in_progress == 3  # type: ignore[union-attr]


# ------------------------------------------------------------------ into the bundle


def test_the_bundle_marks_the_reset_and_keeps_the_other_devices_rows(tmp_path: Path) -> None:
    readings = [text("steady.1"), text("reattached.2"), text("reattached.3")]
    rounds = drive(readings, tmp_path)
    (tmp_path / "run").mkdir()
    bundle = BundleWriter(tmp_path / "run", {"name": "resets"})
    for index, samples in enumerate(rounds):
        interval = Interval(index, float(index), float(index + 1), "measure", None, {})
        bundle.on_interval(interval, list(samples.values()))
    bundle.close()
    summary = bundle.write_summary("completed")
    assert summary["resets"] == {"block": {"sdb": {"count": 1, "intervals": [0]}}}
    assert (
        "block sdb: reset at interval 0, no rate for that interval (rd_ios: 81234567 -> 17)"
        in (summary["messages"])
    )
    with (tmp_path / "run" / "timeseries" / "block.csv").open() as handle:
        rows = [(r["interval"], r["entity"], float(r["r_s"])) for r in csv.DictReader(handle)]
    assert rows == [
        ("0", "vda", 100.0), ("0", "nvme0n1", 50000.0),
        ("1", "vda", 300.0), ("1", "sdb", 400.0), ("1", "nvme0n1", 40000.0),
    ]  # fmt: skip
    assert summary["storage"]["block"]["sdb"]["r_s"] == 400.0  # the reset costs no mean


def test_a_gap_weighs_nothing_in_the_baseline_and_sweep_device_means() -> None:
    good = Sample("block", "vda", {"r_s": 400.0, "iops": 400.0, "r_await_ms": 0.5})
    gap = gap_sample("block", "vda", GAP_RESET, "rd_ios: 81234567 -> 17")
    baseline = BaselineRun.__new__(BaselineRun)  # only its sample store is needed here
    baseline.samples = [(0.0, 1.0, [good]), (1.0, 2.0, [gap])]
    assert baseline.device_means(0.0, 2.0)["vda"]["r_s"] == 400.0  # not 200: no figures, no time
    monitor = BreachMonitor(engine=None, slos=[])  # type: ignore[arg-type]
    for index, sample in enumerate([good, gap]):
        interval = Interval(index, float(index), float(index + 1), "measure", 0, {})
        monitor.on_interval(interval, [sample])
    assert monitor.builders[0].device_seconds["vda"] == 1.0
