"""Parse ``/proc/diskstats`` and turn two readings into the figures of ``iostat -x``.

The arithmetic reproduces sysstat 12.6 (``iostat.c: write_ext_stat`` and
``write_json_ext_stat``, ``rd_stats.c: compute_ext_disk_stats``, ``common.h: S_VALUE``).
sysstat measures its interval ``itv`` in hundredths of a second (from ``/proc/uptime``) and
computes a rate as ``delta / itv * 100``; :func:`iostat_rates` takes the interval in seconds
and computes ``delta / (interval_s * 100) * 100``, so passing ``itv / 100`` gives iostat's
numbers to the last printed digit.

Keys returned by :func:`iostat_rates` and the ``iostat -x`` column each one reproduces
(kB means 1024 bytes; a sector is 512 bytes whatever the device's block size)::

    r_s           r/s        reads completed per second
    w_s           w/s        writes completed per second
    d_s           d/s        discards completed per second
    f_s           f/s        flushes completed per second
    rkB_s         rkB/s      sectors read / 2 per second
    wkB_s         wkB/s      sectors written / 2 per second
    dkB_s         dkB/s      sectors discarded / 2 per second
    rrqm_s        rrqm/s     read requests merged per second
    wrqm_s        wrqm/s     write requests merged per second
    drqm_s        drqm/s     discard requests merged per second
    rrqm_pct      %rrqm      merged / (merged + completed) reads * 100, 0 when both are 0
    wrqm_pct      %wrqm      same for writes
    drqm_pct      %drqm      same for discards
    r_await_ms    r_await    read ticks delta (ms) / reads delta, 0 when no read completed
    w_await_ms    w_await    write ticks delta / writes delta, or 0
    d_await_ms    d_await    discard ticks delta / discards delta, or 0
    f_await_ms    f_await    flush ticks delta / flushes delta, or 0
    rareq_sz_kB   rareq-sz   sectors read delta / reads delta / 2, or 0
    wareq_sz_kB   wareq-sz   sectors written delta / writes delta / 2, or 0
    dareq_sz_kB   dareq-sz   sectors discarded delta / discards delta / 2, or 0
    aqu_sz        aqu-sz     time_in_queue delta (ms) / interval (ms)
    util_pct      %util      io_ticks delta (ms) / interval (ms) * 100 (not capped: sysstat
                             12.6 prints values above 100 as they come)
    iops          tps        (reads + writes + discards) delta per second; flushes are not
                             counted, as in iostat

Counter wrap: sysstat keeps sectors, I/Os and merges in ``unsigned long`` (64 bits on the
64-bit builds that run on servers) and the tick fields in ``unsigned int`` (32 bits), and takes
differences in the field's own type, so a counter that wrapped still gives the right delta.
:func:`iostat_rates` does the same: deltas modulo 2**64 for counts, modulo 2**32 for ticks
(the kernel's millisecond tick fields wrap after about 49.7 days).

``iostat DEVICE`` reads ``/sys/block/DEVICE/stat`` rather than this file (``-p ALL`` reads this
file); both print the same kernel counters, without and with the three leading fields.

Line formats (fields counted including major, minor and name), read like sysstat does:
14 fields (kernels before 4.18), 18 fields (4.18+, discards), 20 fields (5.5+, flushes);
15–17 fields are read as 14, 19 as 18. Lines with fewer than 14 fields (the 7-field partition
lines of 2.6 kernels) carry no extended statistics and are skipped, as ``iostat -x`` skips them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")

_U32 = 1 << 32
_U64 = 1 << 64

RATE_KEYS: tuple[str, ...] = (
    "r_s",
    "w_s",
    "d_s",
    "f_s",
    "rkB_s",
    "wkB_s",
    "dkB_s",
    "rrqm_s",
    "wrqm_s",
    "drqm_s",
    "rrqm_pct",
    "wrqm_pct",
    "drqm_pct",
    "r_await_ms",
    "w_await_ms",
    "d_await_ms",
    "f_await_ms",
    "rareq_sz_kB",
    "wareq_sz_kB",
    "dareq_sz_kB",
    "aqu_sz",
    "util_pct",
    "iops",
)
"""Every key :func:`iostat_rates` returns, in ``iostat -x`` column order (``iops`` last)."""


@dataclass(frozen=True, slots=True)
class DiskCounters:
    """One line of ``/proc/diskstats``: cumulative counters since the device appeared.

    Ticks are milliseconds. Fields a kernel does not report (discards before 4.18, flushes
    before 5.5) are 0; ``fields`` says how many fields the line had.
    """

    major: int
    minor: int
    name: str
    rd_ios: int
    rd_merges: int
    rd_sectors: int
    rd_ticks: int
    wr_ios: int
    wr_merges: int
    wr_sectors: int
    wr_ticks: int
    ios_in_progress: int
    io_ticks: int
    time_in_queue: int
    dc_ios: int = 0
    dc_merges: int = 0
    dc_sectors: int = 0
    dc_ticks: int = 0
    fl_ios: int = 0
    fl_ticks: int = 0
    fields: int = 14


def parse_diskstats_line(line: str) -> DiskCounters | None:
    """Parse one line; ``None`` for a line without extended statistics or not a stats line."""
    parts = line.split()
    n = len(parts)
    if n < 14:
        return None
    try:
        major, minor = int(parts[0]), int(parts[1])
        nums = [int(p) for p in parts[3:n]]
    except ValueError:
        return None
    discards = nums[11:15] if n >= 18 else [0, 0, 0, 0]
    flushes = nums[15:17] if n >= 20 else [0, 0]
    return DiskCounters(
        major=major,
        minor=minor,
        name=parts[2],
        rd_ios=nums[0],
        rd_merges=nums[1],
        rd_sectors=nums[2],
        rd_ticks=nums[3],
        wr_ios=nums[4],
        wr_merges=nums[5],
        wr_sectors=nums[6],
        wr_ticks=nums[7],
        ios_in_progress=nums[8],
        io_ticks=nums[9],
        time_in_queue=nums[10],
        dc_ios=discards[0],
        dc_merges=discards[1],
        dc_sectors=discards[2],
        dc_ticks=discards[3],
        fl_ios=flushes[0],
        fl_ticks=flushes[1],
        fields=n,
    )


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """Parse the whole file; keys are device names as the kernel prints them."""
    out: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        counters = parse_diskstats_line(line)
        if counters is not None:
            out[counters.name] = counters
    return out


def read_diskstats(path: Path = DISKSTATS) -> dict[str, DiskCounters]:
    """Read and parse a diskstats file (one ``read`` of a few kilobytes)."""
    return parse_diskstats(Path(path).read_text(encoding="ascii", errors="replace"))


def _d64(curr: int, prev: int) -> int:
    """``curr - prev`` in C ``unsigned long`` (64-bit) arithmetic."""
    return (curr - prev) % _U64


def _d32(curr: int, prev: int) -> int:
    """``curr - prev`` in C ``unsigned int`` arithmetic (the tick fields)."""
    return ((curr % _U32) - (prev % _U32)) % _U32


def _per_ios(numerator: int, ios: int) -> float:
    return numerator / float(ios) if ios else 0.0


def _merge_pct(merges: int, ios: int) -> float:
    # Computed in unsigned long like sysstat: (merges + ios) wraps the same way.
    total = (merges + ios) % _U64
    return merges / total * 100 if total else 0.0


def iostat_rates(prev: DiskCounters, curr: DiskCounters, interval_s: float) -> dict[str, float]:
    """The ``iostat -x`` figures for one device between two readings ``interval_s`` apart.

    Raises ``ValueError`` when ``interval_s`` is not positive.
    """
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    itv = interval_s * 100.0  # sysstat's interval unit: 1/100 s

    def s_value(delta: int) -> float:  # common.h S_VALUE(m, n, p)
        return float(delta) / itv * 100

    rd_ios = _d64(curr.rd_ios, prev.rd_ios)
    wr_ios = _d64(curr.wr_ios, prev.wr_ios)
    dc_ios = _d64(curr.dc_ios, prev.dc_ios)
    fl_ios = _d64(curr.fl_ios, prev.fl_ios)
    rd_merges = _d64(curr.rd_merges, prev.rd_merges)
    wr_merges = _d64(curr.wr_merges, prev.wr_merges)
    dc_merges = _d64(curr.dc_merges, prev.dc_merges)
    rd_sectors = _d64(curr.rd_sectors, prev.rd_sectors)
    wr_sectors = _d64(curr.wr_sectors, prev.wr_sectors)
    dc_sectors = _d64(curr.dc_sectors, prev.dc_sectors)
    rd_ticks = _d32(curr.rd_ticks, prev.rd_ticks)
    wr_ticks = _d32(curr.wr_ticks, prev.wr_ticks)
    dc_ticks = _d32(curr.dc_ticks, prev.dc_ticks)
    fl_ticks = _d32(curr.fl_ticks, prev.fl_ticks)
    io_ticks = _d32(curr.io_ticks, prev.io_ticks)
    time_in_queue = _d32(curr.time_in_queue, prev.time_in_queue)

    return {
        "r_s": s_value(rd_ios),
        "w_s": s_value(wr_ios),
        "d_s": s_value(dc_ios),
        "f_s": s_value(fl_ios),
        "rkB_s": s_value(rd_sectors) / 2,
        "wkB_s": s_value(wr_sectors) / 2,
        "dkB_s": s_value(dc_sectors) / 2,
        "rrqm_s": s_value(rd_merges),
        "wrqm_s": s_value(wr_merges),
        "drqm_s": s_value(dc_merges),
        "rrqm_pct": _merge_pct(rd_merges, rd_ios),
        "wrqm_pct": _merge_pct(wr_merges, wr_ios),
        "drqm_pct": _merge_pct(dc_merges, dc_ios),
        "r_await_ms": _per_ios(rd_ticks, rd_ios),
        "w_await_ms": _per_ios(wr_ticks, wr_ios),
        "d_await_ms": _per_ios(dc_ticks, dc_ios),
        "f_await_ms": _per_ios(fl_ticks, fl_ios),
        "rareq_sz_kB": _per_ios(rd_sectors, rd_ios) / 2,
        "wareq_sz_kB": _per_ios(wr_sectors, wr_ios) / 2,
        "dareq_sz_kB": _per_ios(dc_sectors, dc_ios) / 2,
        "aqu_sz": s_value(time_in_queue) / 1000.0,
        "util_pct": s_value(io_ticks) / 10.0,
        "iops": s_value((rd_ios + wr_ios + dc_ios) % _U64),
    }
