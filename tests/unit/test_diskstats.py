"""/proc/diskstats parsing, iostat arithmetic and the block collector on a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from sim.errors import CollectorError
from sim.protocols import GAP_UNREADABLE
from storage.collectors.block import BlockDeviceCollector
from storage.collectors.diskstats import (
    RATE_KEYS,
    DiskCounters,
    iostat_rates,
    parse_diskstats,
    parse_diskstats_line,
)
from storage.devices import BlockDevice

# major minor name | rd_ios rd_merges rd_sectors rd_ticks | wr_ios wr_merges wr_sectors wr_ticks |
# in_progress io_ticks time_in_queue | dc_ios dc_merges dc_sectors dc_ticks | fl_ios fl_ticks
LINE_14 = "   8       0 sda 11 12 13 14 21 22 23 24 1 30 40"
LINE_18 = "   8       1 sda1 11 12 13 14 21 22 23 24 1 30 40 51 52 53 54"
LINE_20 = " 254       0 vda 11 12 13 14 21 22 23 24 1 30 40 51 52 53 54 61 62"
LINE_7 = "   3       1 hda1 35486 38030 38030 38030"  # 2.6-era partition line: no extended stats


COUNTER_FIELDS = [
    f.name for f in dataclasses.fields(DiskCounters) if f.name not in ("major", "minor", "name")
]


def counters(**kw: int) -> DiskCounters:
    """A reading of ``sda`` with every counter 0 except those given."""
    values = dict.fromkeys(COUNTER_FIELDS, 0) | {"fields": 20} | kw
    return DiskCounters(8, 0, "sda", *(values[name] for name in COUNTER_FIELDS))


# ----------------------------------------------------------------------------------- parsing


def test_parse_14_fields_old_kernel() -> None:
    c = parse_diskstats_line(LINE_14)
    assert c is not None
    assert (c.major, c.minor, c.name, c.fields) == (8, 0, "sda", 14)
    assert (c.rd_ios, c.rd_merges, c.rd_sectors, c.rd_ticks) == (11, 12, 13, 14)
    assert (c.wr_ios, c.wr_merges, c.wr_sectors, c.wr_ticks) == (21, 22, 23, 24)
    assert (c.ios_in_progress, c.io_ticks, c.time_in_queue) == (1, 30, 40)
    assert (c.dc_ios, c.dc_merges, c.dc_sectors, c.dc_ticks, c.fl_ios, c.fl_ticks) == (0,) * 6


def test_parse_18_fields_with_discards() -> None:
    c = parse_diskstats_line(LINE_18)
    assert c is not None
    assert (c.name, c.fields) == ("sda1", 18)
    assert (c.dc_ios, c.dc_merges, c.dc_sectors, c.dc_ticks) == (51, 52, 53, 54)
    assert (c.fl_ios, c.fl_ticks) == (0, 0)


def test_parse_20_fields_with_flushes() -> None:
    c = parse_diskstats_line(LINE_20)
    assert c is not None
    assert (c.major, c.minor, c.name, c.fields) == (254, 0, "vda", 20)
    assert (c.dc_ios, c.dc_merges, c.dc_sectors, c.dc_ticks) == (51, 52, 53, 54)
    assert (c.fl_ios, c.fl_ticks) == (61, 62)


def test_parse_whole_file_skips_lines_without_extended_stats() -> None:
    table = parse_diskstats("\n".join([LINE_14, LINE_18, LINE_20, LINE_7, "", "garbage"]))
    assert sorted(table) == ["sda", "sda1", "vda"]


def test_parse_real_proc_diskstats() -> None:
    text = Path("/proc/diskstats").read_text()
    table = parse_diskstats(text)
    assert table, "no device parsed from the real /proc/diskstats"
    assert all(c.fields >= 14 for c in table.values())


# ----------------------------------------------------------------------------------- arithmetic

# Two readings of one device, 2.0 s apart (sysstat: itv = 200 hundredths).
PREV = counters(
    rd_ios=1000,
    rd_merges=100,
    rd_sectors=80000,
    rd_ticks=500,
    wr_ios=2000,
    wr_merges=50,
    wr_sectors=160000,
    wr_ticks=3000,
    ios_in_progress=2,
    io_ticks=10000,
    time_in_queue=20000,
    dc_ios=10,
    dc_merges=0,
    dc_sectors=2048,
    dc_ticks=5,
    fl_ios=100,
    fl_ticks=50,
)
CURR = counters(
    rd_ios=1800,
    rd_merges=300,
    rd_sectors=86400,
    rd_ticks=900,
    wr_ios=2400,
    wr_merges=150,
    wr_sectors=172800,
    wr_ticks=4000,
    ios_in_progress=1,
    io_ticks=11500,
    time_in_queue=23000,
    dc_ios=14,
    dc_merges=0,
    dc_sectors=10240,
    dc_ticks=11,
    fl_ios=150,
    fl_ticks=75,
)
EXPECTED = {
    "r_s": 400.0,  # 800 reads / 2 s
    "w_s": 200.0,  # 400 writes / 2 s
    "d_s": 2.0,  # 4 discards / 2 s
    "f_s": 25.0,  # 50 flushes / 2 s
    "rkB_s": 1600.0,  # 6400 sectors / 2 (kB) / 2 s
    "wkB_s": 3200.0,  # 12800 sectors / 2 / 2 s
    "dkB_s": 2048.0,  # 8192 sectors / 2 / 2 s
    "rrqm_s": 100.0,  # 200 merges / 2 s
    "wrqm_s": 50.0,  # 100 merges / 2 s
    "drqm_s": 0.0,
    "rrqm_pct": 20.0,  # 200 / (200 + 800) * 100
    "wrqm_pct": 20.0,  # 100 / (100 + 400) * 100
    "drqm_pct": 0.0,  # 0 / (0 + 4)
    "r_await_ms": 0.5,  # 400 ms of read ticks / 800 reads
    "w_await_ms": 2.5,  # 1000 ms / 400 writes
    "d_await_ms": 1.5,  # 6 ms / 4 discards
    "f_await_ms": 0.5,  # 25 ms / 50 flushes
    "rareq_sz_kB": 4.0,  # 6400 sectors / 800 reads / 2
    "wareq_sz_kB": 16.0,  # 12800 / 400 / 2
    "dareq_sz_kB": 1024.0,  # 8192 / 4 / 2
    "aqu_sz": 1.5,  # 3000 ms in queue / 2000 ms
    "util_pct": 75.0,  # 1500 ms busy / 2000 ms * 100
    "iops": 602.0,  # 400 + 200 + 2 (flushes are not counted, as in iostat's tps)
}


def test_iostat_rates_hand_computed() -> None:
    rates = iostat_rates(PREV, CURR, 2.0)
    assert tuple(rates) == RATE_KEYS
    for key, want in EXPECTED.items():
        assert rates[key] == pytest.approx(want, rel=1e-12, abs=1e-12), key


def test_iostat_rates_idle_device_is_all_zero() -> None:
    rates = iostat_rates(PREV, PREV, 1.0)
    assert all(v == 0.0 for v in rates.values())


def test_iostat_rates_32_bit_tick_wrap() -> None:
    # Ticks are C unsigned int in sysstat: 2**32 - 100 -> 300 is +400 ms, not -(2**32 - 400).
    prev = counters(rd_ios=0, rd_ticks=2**32 - 100, io_ticks=2**32 - 500)
    curr = counters(rd_ios=800, rd_ticks=300, io_ticks=1000)
    rates = iostat_rates(prev, curr, 2.0)
    assert rates["r_await_ms"] == pytest.approx(0.5)  # 400 ms / 800 reads
    assert rates["util_pct"] == pytest.approx(75.0)  # 1500 ms / 2000 ms


def test_iostat_rates_64_bit_counter_wrap() -> None:
    # I/O and sector counts are C unsigned long (64 bits): they wrap modulo 2**64.
    prev = counters(rd_ios=2**64 - 10, rd_sectors=2**64 - 400)
    curr = counters(rd_ios=790, rd_sectors=6000)
    rates = iostat_rates(prev, curr, 2.0)
    assert rates["r_s"] == pytest.approx(400.0)  # 800 / 2 s
    assert rates["rkB_s"] == pytest.approx(1600.0)  # 6400 sectors / 2 / 2 s


def test_iostat_rates_util_is_not_capped() -> None:
    # sysstat 12.6 prints io_ticks / interval as it comes, above 100 % included.
    rates = iostat_rates(counters(io_ticks=0), counters(io_ticks=1010), 1.0)
    assert rates["util_pct"] == pytest.approx(101.0)


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_iostat_rates_rejects_non_positive_interval(interval: float) -> None:
    with pytest.raises(ValueError):
        iostat_rates(PREV, CURR, interval)


# ----------------------------------------------------------------------------------- collector


def _line(name: str, c: DiskCounters, major: int = 8, minor: int = 0) -> str:
    nums = [
        c.rd_ios,
        c.rd_merges,
        c.rd_sectors,
        c.rd_ticks,
        c.wr_ios,
        c.wr_merges,
        c.wr_sectors,
        c.wr_ticks,
        c.ios_in_progress,
        c.io_ticks,
        c.time_in_queue,
        c.dc_ios,
        c.dc_merges,
        c.dc_sectors,
        c.dc_ticks,
        c.fl_ios,
        c.fl_ticks,
    ]
    return f"{major:4d} {minor:7d} {name} " + " ".join(str(n) for n in nums)


def test_collector_on_fake_clock_and_rewritten_file(tmp_path: Path) -> None:
    stats = tmp_path / "diskstats"
    idle = counters()
    stats.write_text(_line("sda", PREV) + "\n" + _line("sdb", idle, minor=16) + "\n")
    dev = BlockDevice("sda", 8, 0, "filesystem")
    collector = BlockDeviceCollector([dev, "sdb"], diskstats_path=stats)

    async def run() -> None:
        await collector.start(now=100.0)
        stats.write_text(_line("sda", CURR) + "\n" + _line("sdb", idle, minor=16) + "\n")
        samples = await collector.sample(now=102.0)  # 2.0 s on the fake clock
        assert [(s.source, s.entity, s.t) for s in samples] == [
            ("block", "sda", 102.0),
            ("block", "sdb", 102.0),
        ]
        assert samples[0].meta == {"role": "filesystem"}
        for key, want in EXPECTED.items():
            assert samples[0].values[key] == pytest.approx(want), key
        assert all(v == 0.0 for v in samples[1].values.values())

        # Next interval: 4 s later, only 400 more reads -> 100 r/s; baseline moved on.
        later = counters(**{**_fields(CURR), "rd_ios": CURR.rd_ios + 400})
        stats.write_text(_line("sda", later) + "\n" + _line("sdb", idle, minor=16) + "\n")
        samples = await collector.sample(now=106.0)
        assert samples[0].values["r_s"] == pytest.approx(100.0)
        assert samples[0].values["w_s"] == 0.0

        stats.write_text(_line("sdb", idle, minor=16) + "\n")  # sda detached: sdb goes on
        gone, still = await collector.sample(now=107.0)
        assert (gone.entity, gone.gap, dict(gone.values)) == ("sda", GAP_UNREADABLE, {})
        assert "not listed" in gone.detail
        assert (still.entity, still.gap) == ("sdb", "") and still.values["r_s"] == 0.0
        await collector.stop()

    asyncio.run(run())
    described = collector.describe()
    assert described["source"] == "block"
    assert described["devices"][0] == {
        "name": "sda",
        "dev": "8:0",
        "role": "filesystem",
        "type": "disk",
    }
    assert "one read of" in described["load"]


def _fields(c: DiskCounters) -> dict[str, int]:
    return {name: getattr(c, name) for name in COUNTER_FIELDS}


def test_collector_errors(tmp_path: Path) -> None:
    stats = tmp_path / "diskstats"
    stats.write_text(_line("sda", PREV) + "\n")

    async def run() -> None:
        with pytest.raises(CollectorError, match="before start"):
            await BlockDeviceCollector(["sda"], diskstats_path=stats).sample(now=1.0)
        with pytest.raises(CollectorError, match="nvme9n1 not found"):
            await BlockDeviceCollector(["nvme9n1"], diskstats_path=stats).start(now=1.0)
        collector = BlockDeviceCollector(["sda"], diskstats_path=stats)
        await collector.start(now=5.0)
        with pytest.raises(CollectorError, match="did not advance"):
            await collector.sample(now=5.0)
        with pytest.raises(CollectorError, match="cannot read"):
            await BlockDeviceCollector(["sda"], diskstats_path=tmp_path / "nope").start(0.0)

    asyncio.run(run())
    with pytest.raises(CollectorError, match="no devices"):
        BlockDeviceCollector([], diskstats_path=stats)


def test_collector_uses_the_reading_taken_at_the_close(tmp_path: Path) -> None:
    """``read_at(now)`` is the reading ``sample(now)`` reports (I/O after it, before the sample
    runs, belongs to the next interval); at the start's ``now`` it replaces the baseline; a
    reading no sample asked for (a boundary's fragment) is covered by the next one."""
    stats = tmp_path / "diskstats"

    def write(rd_ios: int) -> None:
        stats.write_text(_line("sda", counters(rd_ios=rd_ios)) + "\n")

    collector = BlockDeviceCollector(["sda"], diskstats_path=stats)

    async def run() -> None:
        write(0)
        await collector.start(now=0.0)
        write(50)  # before time 0: not the run's
        collector.read_at(0.0)
        write(150)
        collector.read_at(1.0)
        write(999)  # after the close, before the sampler's turn: the next interval's I/O
        (first,) = await collector.sample(now=1.0)
        assert first.values["r_s"] == pytest.approx(100.0)
        collector.read_at(1.5)  # a fragment, never sampled
        write(1249)
        collector.read_at(2.0)
        (second,) = await collector.sample(now=2.0)
        assert second.values["r_s"] == pytest.approx(1099.0)  # (1249 - 150) / 1.0 s
        write(1300)
        (third,) = await collector.sample(now=3.0)  # no read_at: read in sample, as before
        assert third.values["r_s"] == pytest.approx(51.0)
        await collector.stop()

    asyncio.run(run())
