"""The SLOB-like parameters whose device I/O per operation matches a captured profile's mix,
for ``dbsim replay --on SCENARIO.yaml`` (docs/capture.md, "Replaying on a database").

The model of one SLOB-like operation at ``work_unit`` ``w`` (WORKLOADS.md): a read counts
``w - 1`` rows of one block each, scattered, so ``w - 1`` single-block device reads when the
data is several times the caches; an update reads the same range and dirties those blocks,
which reach the device once each (written back on eviction or at a checkpoint), plus its
commit's log write. With ``u`` updates in every 100 operations, per operation::

    reads  = w - 1
    writes = u / 100 * (w - 1 + 1)

so the device's write-to-read ratio is ``q = u / 100 * w / (w - 1)`` and the update share that
gives a captured ratio is ``u = 100 * q * (w - 1) / w``. The mix is SLOB's rule: 0 to 50, or
100, updates in every 100 operations; the highest write share it reaches is at 100 (about
half the device I/Os), so a capture that wrote more is out of its reach and the replay says
"the workload cannot reach the write share". A calibration at 1x measures the writes one
update really costs on the target (a checkpoint that did not come, the log's writes merged)
and corrects ``u`` (:func:`corrected`).

**The mean read size.** On a target whose dialect reads consecutive blocks (PostgreSQL's TID
ranges), range reads of two ``cf1`` blocks make it (:mod:`sim.replay.dbsize`: measured, a
block and then the read-ahead's 32 KiB window); elsewhere the scans below are all there is.
An operation's reads of ``cf1`` are single blocks (``BLOCK_KIB``); a
scan of the unindexed ``cf2`` that reaches the device is read ahead in requests of
``READAHEAD_BLOCKS`` blocks (``SCAN_REQUEST_KIB``). A captured mean read of ``m`` KiB (a
database's lookups merged by the kernel's read-ahead: pgbench's 8.3-11.6 KiB) is then a share
``f = (m - B) / (M - B)`` of multi-block requests among single blocks (``B`` a block, ``M`` a
scan's request; the capture's own share of reads above one block, from its size buckets, is
shown beside it). With ``R`` block reads an operation, ``S`` device requests a scan and ``u``
updates in 100 operations, ``f`` holds when the share of reads that scan is
``s = 100 k R / ((100 - u) (S + k R))``, ``k = f / (1 - f)`` (:func:`size_scan_pct`), snapped to
SLOB's 0-50 or 100. ``S`` is the model's ``cf2 blocks / READAHEAD_BLOCKS`` until a run has
measured it: the calibration's device read requests above one block (its mean read size's
excess over a block, in scan requests) over its scans per second, corrected between scales as
the write costs are. Where the calibration's scans reached no device (the caches held
``cf2``: ``S`` near 0) no share of scans makes the size, and the replay says so with the
measured figures (``size_why``) before any verdict. Without a read size to reach, the
capture's sequential share becomes ``scan_pct`` the same way (:func:`scan_pct_for`). The
capture's write size above ``HEAVY_WRITE_KIB`` asks for ``redo_stress: HEAVY`` (19 columns an
update, larger log writes); the writes' sizes are the database's: a block and its log.

**The write path's delay.** A database writes its dirtied blocks into the page cache (when it
evicts them, or at a checkpoint) and the kernel writes them to the device once they have been
dirty ``vm.dirty_expire_centisecs`` (30 s by default), at its flusher's next wake-up
(``vm.dirty_writeback_centisecs``). Measured on the lab (pgbench -N at 41 tps on a
tablespace, docs/capture.md): no device write for the first 26 s, then a steady 64 writes/s
that went on 30 s after pgbench stopped. A run's device writes over its first half-minute
are therefore the writes of what ran before it, not its own: when the capture wrote, every
run of the replay warms up for the host's write-back delay (:func:`writeback_delay_s`, read
from /proc/sys/vm) before its measured stage, so the measured writes are the run's own
updates in their steady state, and the calibration's writes per update are measured there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sim.replay import dbsize
from sim.replay.fidelity import IOPS_TOL, READ_SHARE_POINTS
from sim.replay.shape import Shape

MAX_UPDATE_PCT = 50
ALL_UPDATES = 100
#: Operations per second the rate asks at 1x at least: the closed loop on the delivered IOPS
#: measures the I/Os per operation every interval, and a handful of operations an interval is
#: too few (tests/integration/test_lab_iops.py: ~9 an interval pinned it within ±17 %).
MIN_OPS_S = 20.0
DEFAULT_WORK_UNIT = 64
MIN_WORK_UNIT = 3
#: PostgreSQL's (and the kernel's default) read-ahead of a sequential scan, in 8 KiB blocks.
READAHEAD_BLOCKS = 16
BLOCK_KIB = 8.0
SCAN_REQUEST_KIB = READAHEAD_BLOCKS * BLOCK_KIB
#: A scan that made fewer device requests than this reached no device: its table was cached.
CACHED_SCAN_REQUESTS = 0.5
HEAVY_WRITE_KIB = 16.0
#: A run's warm-up when the capture made no writes to reproduce (the closed loop settles).
SHORT_WARMUP_S = 2.0
#: The flusher's wake-up and the expiry are the kernel's (centiseconds under /proc/sys/vm);
#: their defaults when the files cannot be read.
VM = "/proc/sys/vm"
DEFAULT_EXPIRE_S, DEFAULT_WRITEBACK_S = 30.0, 5.0
#: The warm-up is the write-back delay plus this margin (the run's own interval edges), and
#: at most MAX_WARMUP_S (a host set to hold dirty pages for minutes is said, not waited for).
WARMUP_MARGIN_S = 3.0
MAX_WARMUP_S = 90.0
#: A capture whose writes are below this share of its I/O made none a replay reproduces: its
#: writes are the file system's own (fidelity's STRAY_SHARE, the same rule).
WRITE_SHARE_MIN = 0.01


def writeback_delay_s(vm: str = VM) -> tuple[float, str]:
    """Seconds from a page written into the page cache to the device, at most (the expiry and
    one flusher period), and where the figures came from."""
    got = []
    for name, default in (
        ("dirty_expire_centisecs", DEFAULT_EXPIRE_S),
        ("dirty_writeback_centisecs", DEFAULT_WRITEBACK_S),
    ):
        try:
            with open(f"{vm}/{name}", encoding="ascii") as fh:
                got.append((int(fh.read().strip()) / 100.0, f"{vm}/{name}"))
        except (OSError, ValueError):
            got.append((default, f"{name} unreadable: the kernel's default {default:g} s"))
    (expire, a), (wake, b) = got
    return expire + wake, f"{expire:g} s expiry + {wake:g} s flusher period ({a}, {b})"


def warmup_for(capture: Shape) -> tuple[float, str]:
    """The warm-up each run of the replay needs: the write-back delay when the capture wrote."""
    if capture.iops <= 0 or capture.write_iops < WRITE_SHARE_MIN * capture.iops:
        return SHORT_WARMUP_S, "the capture made no writes to reproduce: the closed loop settles"
    delay, how = writeback_delay_s()
    warmup = min(delay + WARMUP_MARGIN_S, MAX_WARMUP_S)
    return warmup, (
        f"the host's write-back delay ({how}) + {WARMUP_MARGIN_S:g} s, at most "
        f"{MAX_WARMUP_S:g} s: the measured writes are the run's own updates, written back"
    )


@dataclass(frozen=True)
class DbJob:
    scale: float
    rate_iops: float
    parameters: dict[str, Any]
    reads_per_op: float
    writes_per_op: float
    asked_write_pct: float
    reachable: bool
    why: str | None = None
    how: list[str] = field(default_factory=list)
    warmup_s: float = SHORT_WARMUP_S
    #: Why no share of scans makes the captured mean read size (None: derived, or none asked).
    size_why: str | None = None
    #: The costs the job was derived from: block reads an operation on cf1, writes an update.
    block_reads: float = 0.0
    per_update: float = 0.0
    #: What one range read costs at the device as the job counted it (None: no range reads).
    range_cost: dict[str, Any] | None = None

    @property
    def expected_write_pct(self) -> float:
        total = self.reads_per_op + self.writes_per_op
        return 100.0 * self.writes_per_op / total if total > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["expected_write_pct"] = self.expected_write_pct
        return out


def work_unit_for(iops: float) -> int:
    """The widest range (at most SLOB's default 64) that still asks :data:`MIN_OPS_S`."""
    per_op = iops / MIN_OPS_S
    return int(max(MIN_WORK_UNIT, min(DEFAULT_WORK_UNIT, math.floor(per_op) + 1)))


def snap_update_pct(pct: float) -> int:
    """SLOB's rule: 0-50 or 100, the nearest allowed."""
    if pct <= MAX_UPDATE_PCT:
        return max(0, round(pct))
    return MAX_UPDATE_PCT if pct - MAX_UPDATE_PCT <= ALL_UPDATES - pct else ALL_UPDATES


def scan_pct_for(seq_pct: float | None, work_unit: int, scan_blocks: int) -> int:
    """The share of reads that scan ``cf2`` (``scan_blocks`` blocks) so that the sequential
    requests are ``seq_pct`` % of the reads' requests."""
    if not seq_pct or seq_pct <= 0:
        return 0
    s = min(seq_pct, 99.0) / 100.0
    scan_requests = max(scan_blocks / READAHEAD_BLOCKS, 1.0)
    random_requests = work_unit - 1
    p = s * random_requests / (s * random_requests + (1 - s) * scan_requests)
    return snap_update_pct(100.0 * p)


def multiblock_share(read_kib: float | None) -> float:
    """The share of read requests of :data:`SCAN_REQUEST_KIB` among single blocks whose mean
    is ``read_kib`` (0 at a block or less, at most 1)."""
    if not read_kib or read_kib <= BLOCK_KIB:
        return 0.0
    return min((read_kib - BLOCK_KIB) / (SCAN_REQUEST_KIB - BLOCK_KIB), 1.0)


def captured_multiblock_pct(sizes: dict[str, float]) -> float | None:
    """The capture's share of read requests above one block, from its size buckets (None
    without buckets)."""
    total = sum(sizes.values())
    if total <= 0:
        return None
    single = sum(n for b, n in sizes.items() if b in ("le_4", "le_8"))
    return 100.0 * (total - single) / total


def size_scan_pct(read_kib: float | None, reads: float, scan_requests: float, u: int) -> int | None:
    """The share of reads that scan ``cf2`` (SLOB's 0-50 or 100) so that the mean read size
    is ``read_kib`` (module docstring); 0 when the capture read single blocks, None when no
    share does (the scans reach no device, or even every read a scan falls short)."""
    f = multiblock_share(read_kib)
    if f <= 0:
        return 0
    if scan_requests < CACHED_SCAN_REQUESTS or u >= ALL_UPDATES or f >= 1.0:
        return None
    k = f / (1.0 - f)
    s = 100.0 * k * reads / ((100.0 - u) * (scan_requests + k * reads))
    return snap_update_pct(100.0 * s) if s <= 1.0 else None


def reading_share(update_pct: int, scan_pct: int) -> float:
    """The share of operations that read ``cf1``'s blocks: every update, and the reads that do
    not scan ``cf2`` (a scan of that small table reads it from the caches after its first)."""
    u, sc = update_pct / 100.0, scan_pct / 100.0
    return u + (1.0 - u) * (1.0 - sc)


def diluting_scan_pct(q: float, reads: float, per_update: float) -> int | None:
    """At update_pct 50, the share of reads that scan the cached ``cf2`` (SLOB's 0-50 or 100)
    whose device-free operations bring the write/read ratio to ``q``; None when no share does
    (the ratio is below update_pct 50's, or above its own with every read a scan)."""
    if q <= 0 or reads <= 0:
        return None
    u = MAX_UPDATE_PCT / 100.0
    share = u * per_update / (q * reads)  # the reading share that gives q
    if not u < share < 1.0:
        return None
    return snap_update_pct(100.0 * (1.0 - (share - u) / (1.0 - u)))


def derive(
    capture: Shape,
    scale: float,
    costs: tuple[float | None, float | None] = (None, None),
    scan_blocks: int = 128,
    scan_requests: float | None = None,
    ranges: dbsize.RangeCost | None = None,
    no_ranges: str | None = None,
) -> DbJob:
    """The parameters and the rate of one scale; ``costs`` the device reads of an operation
    that reads ``cf1`` and the writes one update cost, ``scan_requests`` the device requests
    one scan of ``cf2`` made, as a calibration measured them (None: the model's ``w - 1``,
    ``w`` and ``scan_blocks / READAHEAD_BLOCKS``).

    A captured write/read ratio above update_pct 50's (SLOB's rule leaves nothing between 50
    and 100) is reached at update_pct 50 by making some reads scans of ``cf2``, which the
    caches hold: operations without device reads, so the writes' share rises
    (:func:`diluting_scan_pct`), when that is nearer the captured share than update_pct 100.
    The sequential share and the read size then are not reproduced (those scans are cached).
    Otherwise range reads (``ranges``: what one costs) make the captured mean read size
    (:mod:`sim.replay.dbsize`), or without them (``no_ranges``: why) scans (:func:`_read_size`)."""
    iops = capture.iops * scale
    w = work_unit_for(capture.iops)
    measured_reads, writes_per_update = costs
    reads = measured_reads if measured_reads and measured_reads > 0 else float(w - 1)
    per_update = writes_per_update if writes_per_update and writes_per_update > 0 else float(w)
    q = capture.write_iops / capture.read_iops if capture.read_iops > 0 else math.inf
    asked_write_pct = 100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0
    wanted = 100.0 * q * reads / per_update if math.isfinite(q) else math.inf
    u = snap_update_pct(wanted) if math.isfinite(wanted) else ALL_UPDATES
    scan = scan_pct_for(capture.seq_pct, w, scan_blocks)
    u, scan, lever = _diluted(u, scan, (q, wanted, asked_write_pct), reads, per_update)
    sized, range_pct, reads_op = _read_size(
        capture, reads, (u, scan), (scan_requests, scan_blocks), lever, (ranges, no_ranges)
    )
    scan = scan if sized.scan_pct is None else sized.scan_pct
    writes = u / 100.0 * per_update
    why = _out_of_reach(capture, iops, reads_op, per_update, u, reads)
    heavy = (capture.write_kib or 0.0) > HEAVY_WRITE_KIB
    params = {
        "update_pct": u,
        "scan_pct": scan,
        "work_unit": w,
        "redo_stress": "HEAVY" if heavy else "LITE",
    }
    if range_pct is not None:
        params.update(range_pct=range_pct, range_blocks=dbsize.RANGE_BLOCKS)
    warmup, why_warmup = warmup_for(capture)
    how = [
        f"work_unit {w}: {reads:.3g} block reads an operation, at least {MIN_OPS_S:g} ops/s at 1x",
        f"update_pct {u}: write/read ratio {q:.3g} captured x {reads:.3g} reads / "
        f"{per_update:.3g} writes an update ({'calibrated' if writes_per_update else 'model'})"
        f" = {wanted:.3g}, snapped to SLOB's 0-50 or 100{lever}",
        sized.how,
        f"warm-up {warmup:g} s: {why_warmup}",
    ]
    return DbJob(
        scale, iops, params, reads_op, writes, asked_write_pct, why is None, why, how, warmup,
        sized.why, reads, per_update, dbsize.as_dict(ranges) if range_pct is not None else None,
    )  # fmt: skip


def _read_size(
    capture: Shape,
    reads: float,
    mix: tuple[int, int],
    scans: tuple[float | None, int],
    lever: str,
    targets: tuple[dbsize.RangeCost | None, str | None],
) -> tuple[SizeScans, int | None, float]:
    """What makes the captured mean read size (:func:`derive`): range reads on a target with
    them, else scans of ``cf2``; the sizing, ``range_pct`` (None: no range reads) and the
    device read requests an operation."""
    (u, scan), (scan_requests, scan_blocks), (ranges, no_ranges) = mix, scans, targets
    sized = _read_size_scans(capture, reads, u, scan_requests, scan_blocks, bool(lever))
    if ranges is None or lever:
        if no_ranges and sized.why:
            sized = SizeScans(sized.scan_pct, sized.per_scan, f"{sized.how}; {no_ranges}",
                              f"{sized.why}; {no_ranges}")  # fmt: skip
        scan = scan if sized.scan_pct is None else sized.scan_pct
        reads_op = reads * reading_share(u, scan) + (1 - u / 100) * scan / 100 * sized.per_scan
        return sized, None, reads_op
    plain = (1 - u / 100) * (1 - scan / 100)
    by_ranges = dbsize.sized_by_ranges(
        capture.read_kib, captured_multiblock_pct(capture.read_sizes), reads, u, plain, ranges
    )
    range_pct = by_ranges.range_pct or 0
    per_scan = float(scan_requests) if scan_requests is not None else 0.0
    sized = SizeScans(None, per_scan, by_ranges.how, by_ranges.why)
    reads_op = dbsize.requests_per_op(reads, u, plain, range_pct, ranges)
    return sized, range_pct, reads_op + (1 - u / 100) * scan / 100 * per_scan


def _diluted(
    u: int, scan: int, asked: tuple[float, float, float], reads: float, per_update: float
) -> tuple[int, int, str]:
    """update_pct 50 with cached scans when the wanted share lies between 50 and 100 and that
    is nearer the captured write share than 100 (:func:`derive`); the lever's words, or ""."""
    q, wanted, asked_write_pct = asked
    if not MAX_UPDATE_PCT < wanted < ALL_UPDATES:
        return u, scan, ""
    diluted = diluting_scan_pct(q, reads, per_update)
    if diluted is None:
        return u, scan, ""
    at_half = _write_pct(MAX_UPDATE_PCT, diluted, reads, per_update)
    at_all = _write_pct(ALL_UPDATES, 0, reads, per_update)
    if abs(at_half - asked_write_pct) > abs(at_all - asked_write_pct):
        return u, scan, ""
    return MAX_UPDATE_PCT, diluted, (
        f"; update_pct 50 with scan_pct {diluted} (reads that scan the cached cf2: "
        f"operations without device reads) gives {at_half:.1f} % writes, nearer "
        f"the captured {asked_write_pct:.1f} % than update_pct 100's {at_all:.1f} %"
    )  # fmt: skip


@dataclass(frozen=True)
class SizeScans:
    scan_pct: int | None  # None: the scans stay as the other levers set them
    per_scan: float  # device requests one scan makes, as the job counts them
    how: str
    why: str | None  # why no share of scans makes the captured mean read size


def _read_size_scans(
    capture: Shape,
    reads: float,
    u: int,
    scan_requests: float | None,
    scan_blocks: int,
    diluting: bool,
) -> SizeScans:
    """The scans that make the captured mean read size, or why none do (module docstring)."""
    f = multiblock_share(capture.read_kib)
    kib = capture.read_kib or 0.0
    buckets = captured_multiblock_pct(capture.read_sizes)
    seen = "" if buckets is None else f"; the capture's reads above one block: {buckets:.1f} %"
    calibrated = scan_requests is not None
    per_scan = (
        float(scan_requests)
        if scan_requests is not None
        else max(scan_blocks / READAHEAD_BLOCKS, 1.0)
    )
    need = (
        f"a mean read of {kib:.3g} KiB is {100 * f:.2f} % of the read requests at "
        f"{SCAN_REQUEST_KIB:g} KiB among {BLOCK_KIB:g} KiB blocks{seen}"
    )
    if f <= 0:
        return SizeScans(None, per_scan if calibrated else 0.0, "read size: single blocks", None)
    if diluting:
        why = f"{need}; the scans of cf2 serve the write share, cached (update_pct 50)"
        return SizeScans(None, per_scan if calibrated else 0.0, f"read size: {why}", why)
    pct = size_scan_pct(kib, reads, per_scan, u)
    source = "calibrated" if calibrated else f"model: {scan_blocks} blocks / {READAHEAD_BLOCKS}"
    if pct is None:
        why = (
            f"{need}; a scan of cf2 made {per_scan:.2g} device requests "
            f"({source}): {'the caches held cf2, ' if per_scan < CACHED_SCAN_REQUESTS else ''}"
            "no share of scans makes that"
        )
        return SizeScans(None, per_scan, f"read size: {why}", why)
    how = f"scan_pct {pct} for the read size: {need}; {per_scan:.3g} requests a scan ({source})"
    return SizeScans(pct, per_scan, how, None)


def write_pct_at(u: int, scan: int, reads: float, per_update: float) -> float:
    """The write share (%) SLOB's mix makes at ``u`` and ``scan`` on these costs (cached
    scans)."""
    return _write_pct(u, scan, reads, per_update)


def _write_pct(u: int, scan: int, reads: float, per_update: float) -> float:
    writes = u / 100.0 * per_update
    total = reads * reading_share(u, scan) + writes
    return 100.0 * writes / total if total > 0 else 0.0


def _out_of_reach(
    capture: Shape, iops: float, reads: float, per_update: float, u: int, block_reads: float
) -> str | None:
    """Why SLOB's update mix cannot make the captured writes, None when it can: the write
    share within the read share's tolerance and the write IOPS within theirs (SLOB's mix
    moves in steps of one update in 100 operations)."""
    asked_pct = 100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0
    writes = u / 100.0 * per_update
    got_pct = 100.0 * writes / (reads + writes)
    asked_w = iops * asked_pct / 100.0
    got_w = iops * got_pct / 100.0
    share_ok = abs(got_pct - asked_pct) <= READ_SHARE_POINTS
    iops_ok = abs(got_w - asked_w) <= IOPS_TOL * asked_w if asked_w > 0 else got_w == 0
    if share_ok and iops_ok:
        return None
    head = "the workload cannot reach the write share"
    top = 100.0 * per_update / (block_reads + per_update)
    if asked_pct > top + READ_SHARE_POINTS:
        return (
            f"{head}: {asked_pct:.1f} % of the device I/Os asked, SLOB's update mix gives at "
            f"most {top:.1f} % (every operation an update, {per_update:.3g} writes each "
            f"against {block_reads:.3g} reads)"
        )
    return (
        f"{head}: {asked_pct:.2f} % of the device I/Os asked ({asked_w:.3g} writes/s); "
        f"SLOB's update mix moves in steps of one update in 100 operations (0-50 or 100): "
        f"update_pct {u} gives {got_pct:.2f} % ({got_w:.3g} writes/s), outside the write "
        f"IOPS' ±{100 * IOPS_TOL:g} %"
    )


def measured_costs(
    device_read_iops: float,
    device_write_iops: float,
    ops_s: float,
    update_pct: int,
    scan_pct: int = 0,
    multiblock_iops: float = 0.0,
) -> tuple[float | None, float | None]:
    """From a run: device reads per operation that reads ``cf1`` (:func:`reading_share`; the
    scans' multi-block requests, ``multiblock_iops``, left out) and writes per update."""
    if ops_s <= 0:
        return None, None
    single = max(device_read_iops - multiblock_iops, 0.0)
    reads = single / (ops_s * reading_share(update_pct, scan_pct))
    per_update = device_write_iops / ops_s / (update_pct / 100.0) if update_pct > 0 else None
    return reads, per_update


def measured_scan_requests(
    device_read_iops: float, read_kib: float | None, scan_ops_s: float
) -> tuple[float | None, float]:
    """From a run: the device requests one scan of ``cf2`` made (None without scans), and the
    run's multi-block read requests per second, both from its mean read size's excess over a
    block counted in scan requests (:func:`multiblock_share`): a run whose scans were served
    by the caches reads single blocks, and its scans made none."""
    multiblock = device_read_iops * multiblock_share(read_kib)
    if scan_ops_s <= 0:
        return None, multiblock
    return multiblock / scan_ops_s, multiblock
