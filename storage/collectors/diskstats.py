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

Counter widths follow the kernel's own types (``block/genhd.c: diskstats_show``): the I/O,
merge and sector counts are printed with ``%lu`` from ``unsigned long`` fields (64 bits on
64-bit kernels, 32 on 32-bit ones: :data:`KERNEL_LONG_BITS`); the five millisecond fields
(``rd_ticks`` … ``fl_ticks``, ``io_ticks``, ``time_in_queue``) are ``%u`` of an ``unsigned int``
(``(unsigned int)div_u64(nsecs, NSEC_PER_MSEC)``, ``jiffies_to_msecs``), so they wrap after
2**32 ms (about 49.7 days of summed time); ``ios_in_progress`` is ``%u`` too, but kernels
before 5.0 printed a signed sum of two ``atomic_t`` with it, so a transient underflow shows as
4294967295: it is read back as the signed 32-bit value it was.

Resets: a counter that went down was either wrapped at its width or restarted (the device was
detached and re-attached under the same name, the machine rebooted). :func:`counter_break`
tells them apart: a decrease counts as a wrap only when the wrapped difference is one the
device could have made in the interval (:data:`MAX_IOPS`, :data:`MAX_SECTORS_PER_S`, I/O times
bounded by the I/Os that completed); anything else, and any change of the device number, is a
reset, and the collector gives no rate for that interval. (sysstat 12.6 differences every
field modulo its type and prints the wrapped figure, about 1.8e19 / interval, for a re-attached
device; 12.7.3 prints 0.0 for a field that went down, a genuine tick wrap included.)
:func:`iostat_rates` itself differences modulo the field's width, as sysstat does.

``iostat DEVICE`` reads ``/sys/block/DEVICE/stat`` rather than this file (``-p ALL`` reads this
file); both print the same kernel counters, without and with the three leading fields.

Line formats (fields counted including major, minor and name): 14 fields (kernels before
4.18), 18 fields (4.18+, discards), 20 fields (5.5+, flushes); a longer line (a later kernel's
additions) is read for its first 20. Lines of 7 fields (the partition lines of 2.6 kernels)
carry no extended statistics and are skipped, as ``iostat -x`` skips them. Any other count, a
field that is not a plain decimal number or is wider than its type, and a last line without
its end of line (a read cut short) make that line *unreadable*: :func:`parse_diskstats_table`
sets it aside under its device's name, and every other line is read as usual. (sysstat reads
15–17 fields as 14 and 19 as 18; no kernel prints those counts, so here they mean a mangled
line.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

DISKSTATS = Path("/proc/diskstats")


def _kernel_long_bits(machine: str) -> int:
    """Width of the kernel's ``unsigned long`` on ``machine`` (``uname -m``): LP64 kernels
    (x86_64, aarch64, ppc64le, s390x, riscv64 …) have 64 bits, the others 32."""
    return 64 if "64" in machine or machine in ("s390x", "alpha") else 32


#: Width of the ``%lu`` counters on this machine's kernel.
KERNEL_LONG_BITS = _kernel_long_bits(os.uname().machine)
#: The fastest devices complete a few million I/Os per second; a wrap is accepted only for a
#: difference below this many per second (generous, so a real wrap is never taken for a reset).
MAX_IOPS = 100_000_000
#: 1 TB/s in 512-byte sectors, for the sector counts.
MAX_SECTORS_PER_S = 2 * 10**9
#: The longest one I/O can take before the block layer's timeouts (30 s, a few retries) end
#: it, with margin: bounds the time fields' difference per completed I/O.
MAX_IO_MS = 600_000
#: Each line is cut to this many characters in what is reported as unreadable.
DETAIL_CHARS = 200

_U32 = 1 << 32

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
    before 5.5) are 0; ``fields`` says how many fields the line had. ``ios_in_progress`` is
    signed (see the module's notes).
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


#: The counters in line order (after major, minor, name).
COUNTER_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(DiskCounters) if f.name not in ("major", "minor", "name", "fields")
)
#: Fields printed with ``%u`` (unsigned int); the others are ``%lu`` (unsigned long).
INT_FIELDS = frozenset(
    {"rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks", "io_ticks", "time_in_queue",
     "ios_in_progress"}
)  # fmt: skip
_VALID_LENGTHS = (14, 18, 20)


class DiskstatsLineError(ValueError):
    """A line that no kernel prints: wrong field count, a non-number, a number too wide."""


def field_bits(name: str, long_bits: int = KERNEL_LONG_BITS) -> int:
    """Width in bits of counter ``name`` as the kernel prints it."""
    return 32 if name in INT_FIELDS else long_bits


def _number(text: str, name: str, bits: int) -> int:
    # str.isdigit() also accepts other scripts' digits and superscripts; the kernel prints ASCII.
    if not text.isascii() or not text.isdigit():
        raise DiskstatsLineError(f"{name} is {text[:40]!r}, not a decimal number")
    value = int(text)
    if value >> bits:
        raise DiskstatsLineError(f"{name} = {text} does not fit its {bits}-bit field")
    return value


def parse_diskstats_line(line: str, long_bits: int = KERNEL_LONG_BITS) -> DiskCounters | None:
    """Parse one line; ``None`` for an empty line or one without extended statistics (7
    fields). Raises :class:`DiskstatsLineError` for a line no kernel prints."""
    parts = line.split()
    n = len(parts)
    if n == 0:
        return None
    if n < 3:
        raise DiskstatsLineError(f"{n} field(s), not a diskstats line")
    major = _number(parts[0], "major", 32)
    minor = _number(parts[1], "minor", 32)
    if n == 7:
        return None
    if n not in _VALID_LENGTHS and n < 20:
        raise DiskstatsLineError(f"{n} fields, where a kernel prints 14, 18 or 20")
    width = min(n, 20) - 3
    nums = {
        name: _number(text, name, field_bits(name, long_bits))
        for name, text in zip(COUNTER_FIELDS[:width], parts[3 : 3 + width], strict=True)
    }
    # Printed with %u from a signed sum before 5.0: an underflow of -1 reads 4294967295.
    in_progress = nums["ios_in_progress"]
    nums["ios_in_progress"] = in_progress - _U32 if in_progress >> 31 else in_progress
    return DiskCounters(major=major, minor=minor, name=parts[2], fields=min(n, 20), **nums)


@dataclass(frozen=True)
class DiskstatsTable:
    """A whole file: the counters of every readable line, and the unreadable lines by the
    device they name (``""`` for a line that names none), each with why."""

    counters: dict[str, DiskCounters] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


def _attribution(line: str) -> str:
    parts = line.split()
    if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
        return parts[2]
    return ""


def parse_diskstats_table(text: str, long_bits: int = KERNEL_LONG_BITS) -> DiskstatsTable:
    """Parse the whole file, line by line: a malformed line costs only its own device."""
    table = DiskstatsTable()
    lines = text.split("\n")
    # The kernel ends every line; a last line without one is what a short read left.
    cut = lines.pop() if lines else ""
    entries = [(line, "") for line in lines]
    if cut.strip():
        entries.append((cut, "cut short (no end of line)"))
    for line, problem in entries:
        try:
            counters = parse_diskstats_line(line, long_bits)
        except DiskstatsLineError as exc:
            problem = str(exc)
            counters = None
        name = counters.name if counters is not None else _attribution(line)
        if not problem and name in table.counters:
            problem = "the device is listed twice"
        if problem:
            table.counters.pop(name, None)
            table.unreadable.setdefault(name, f"{problem}: {line.strip()[:DETAIL_CHARS]}")
        elif counters is not None and name not in table.unreadable:
            table.counters[name] = counters
    return table


def parse_diskstats(text: str, long_bits: int = KERNEL_LONG_BITS) -> dict[str, DiskCounters]:
    """The readable lines of the whole file; keys are device names as the kernel prints them."""
    return parse_diskstats_table(text, long_bits).counters


def read_diskstats_table(path: Path = DISKSTATS) -> DiskstatsTable:
    """Read and parse a diskstats file (one ``read`` of a few kilobytes)."""
    return parse_diskstats_table(Path(path).read_text(encoding="ascii", errors="replace"))


def read_diskstats(path: Path = DISKSTATS) -> dict[str, DiskCounters]:
    """The readable lines of a diskstats file."""
    return read_diskstats_table(path).counters


# ----------------------------------------------------------------------------- resets


_IOS = ("rd_ios", "wr_ios", "dc_ios", "fl_ios")


def _span_s(interval_s: float) -> float:
    # The engine's clock and the kernel's accounting need not agree to the millisecond.
    return interval_s * 2 + 1.0


def _wrap_bounds(
    prev: DiskCounters, curr: DiskCounters, interval_s: float, ios: dict[str, int]
) -> dict[str, float]:
    """The most each counter other than the I/O counts can grow in ``interval_s``: what a
    wrapped difference must stay under to count as a wrap. ``ios``: the I/O count
    differences, already known good."""
    span_s = _span_s(interval_s)
    span_ms = span_s * 1000.0
    completed = sum(ios.values())
    in_flight = abs(prev.ios_in_progress) + abs(curr.ios_in_progress)
    bounds = dict.fromkeys(("rd_merges", "wr_merges", "dc_merges"), MAX_IOPS * span_s)
    bounds |= dict.fromkeys(("rd_sectors", "wr_sectors", "dc_sectors"), MAX_SECTORS_PER_S * span_s)
    # A request's time is added when it completes: at most MAX_IO_MS per completed request.
    for kind in ("rd", "wr", "dc", "fl"):
        bounds[f"{kind}_ticks"] = ios[f"{kind}_ios"] * MAX_IO_MS
    bounds["io_ticks"] = span_ms  # wall time the device was busy
    # Summed request times (5.0+), or in-flight count times elapsed time (before 5.0).
    bounds["time_in_queue"] = completed * MAX_IO_MS + (completed + in_flight + 1) * span_ms
    return bounds


def counter_break(
    prev: DiskCounters,
    curr: DiskCounters,
    interval_s: float,
    long_bits: int = KERNEL_LONG_BITS,
) -> str | None:
    """Why no rate can be formed between two readings of one device, or ``None``.

    A changed device number means the name now belongs to another device; a counter that went
    down is a wrap only if its wrapped difference is one the device could have made in
    ``interval_s`` (see :func:`_wrap_bounds`), otherwise the counters restarted. The answer
    names the first such counter and its two readings (``rd_ios: 81234 -> 17``).
    """
    if (prev.major, prev.minor) != (curr.major, curr.minor):
        return f"device number: {prev.major}:{prev.minor} -> {curr.major}:{curr.minor}"

    def forward(name: str, limit: float) -> int | None:
        before, after = getattr(prev, name), getattr(curr, name)
        if after >= before:
            return after - before
        wrapped = after + (1 << field_bits(name, long_bits)) - before
        return wrapped if wrapped <= limit else None

    ios: dict[str, int] = {}
    for name in _IOS:  # first: the other counters' bounds depend on how many I/Os completed
        delta = forward(name, MAX_IOPS * _span_s(interval_s))
        if delta is None:
            return f"{name}: {getattr(prev, name)} -> {getattr(curr, name)}"
        ios[name] = delta
    for name, limit in _wrap_bounds(prev, curr, interval_s, ios).items():
        if forward(name, limit) is None:
            return f"{name}: {getattr(prev, name)} -> {getattr(curr, name)}"
    return None


# ----------------------------------------------------------------------------- rates


def _d(curr: int, prev: int, bits: int) -> int:
    """``curr - prev`` in C unsigned arithmetic of ``bits`` bits (a wrapped counter's delta)."""
    return (curr - prev) % (1 << bits)


def _per_ios(numerator: int, ios: int) -> float:
    return numerator / float(ios) if ios else 0.0


def _merge_pct(merges: int, ios: int, bits: int) -> float:
    # Computed in unsigned long like sysstat: (merges + ios) wraps the same way.
    total = (merges + ios) % (1 << bits)
    return merges / total * 100 if total else 0.0


#: The counters the kernel prints as ``%lu`` (the host's long) and as ``%u`` (32 bits).
_LONG = (
    "rd_ios", "wr_ios", "dc_ios", "fl_ios", "rd_merges", "wr_merges", "dc_merges",
    "rd_sectors", "wr_sectors", "dc_sectors",
)  # fmt: skip
_TICKS = (
    "rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks", "io_ticks", "time_in_queue",
)  # fmt: skip


def iostat_rates(
    prev: DiskCounters,
    curr: DiskCounters,
    interval_s: float,
    long_bits: int = KERNEL_LONG_BITS,
) -> dict[str, float]:
    """The ``iostat -x`` figures for one device between two readings ``interval_s`` apart,
    each counter differenced modulo its width (``long_bits`` for the ``%lu`` ones). Whether
    the readings can be differenced at all is :func:`counter_break`'s question.

    Raises ``ValueError`` when ``interval_s`` is not positive.
    """
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    itv = interval_s * 100.0  # sysstat's interval unit: 1/100 s

    def s_value(delta: int) -> float:  # common.h S_VALUE(m, n, p)
        return float(delta) / itv * 100

    delta = {name: _d(getattr(curr, name), getattr(prev, name), long_bits) for name in _LONG}
    delta |= {name: _d(getattr(curr, name), getattr(prev, name), 32) for name in _TICKS}
    rd_ios, wr_ios, dc_ios, fl_ios = (delta[n] for n in ("rd_ios", "wr_ios", "dc_ios", "fl_ios"))
    rd_merges, wr_merges, dc_merges = (delta[n] for n in ("rd_merges", "wr_merges", "dc_merges"))
    rd_sectors, wr_sectors, dc_sectors = (
        delta[n] for n in ("rd_sectors", "wr_sectors", "dc_sectors")
    )
    rd_ticks, wr_ticks, dc_ticks, fl_ticks = (
        delta[n] for n in ("rd_ticks", "wr_ticks", "dc_ticks", "fl_ticks")
    )
    io_ticks, time_in_queue = delta["io_ticks"], delta["time_in_queue"]

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
        "rrqm_pct": _merge_pct(rd_merges, rd_ios, long_bits),
        "wrqm_pct": _merge_pct(wr_merges, wr_ios, long_bits),
        "drqm_pct": _merge_pct(dc_merges, dc_ios, long_bits),
        "r_await_ms": _per_ios(rd_ticks, rd_ios),
        "w_await_ms": _per_ios(wr_ticks, wr_ios),
        "d_await_ms": _per_ios(dc_ticks, dc_ios),
        "f_await_ms": _per_ios(fl_ticks, fl_ios),
        "rareq_sz_kB": _per_ios(rd_sectors, rd_ios) / 2,
        "wareq_sz_kB": _per_ios(wr_sectors, wr_ios) / 2,
        "dareq_sz_kB": _per_ios(dc_sectors, dc_ios) / 2,
        "aqu_sz": s_value(time_in_queue) / 1000.0,
        "util_pct": s_value(io_ticks) / 10.0,
        "iops": s_value((rd_ios + wr_ios + dc_ios) % (1 << long_bits)),
    }
