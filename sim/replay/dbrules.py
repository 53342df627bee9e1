"""SLOB's rules and the model's formulas a replay on a database derives its parameters with
(sim.replay.dbjob's docstring gives the model; docs/capture.md, "Replaying on a database"):
the update and scan shares' steps, the range of an operation, the scans that make a mean read
size, the cached scans that dilute the reads, and the write share SLOB's update mix makes and
whether it is the captured one."""

from __future__ import annotations

import math

from sim.replay import dbappend
from sim.replay.dbappend import MAX_UPDATE_PCT
from sim.replay.dbwarmup import WRITE_SHARE_MIN
from sim.replay.fidelity import IOPS_TOL, READ_SHARE_POINTS
from sim.replay.shape import Shape

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


def size_scan_pct(
    read_kib: float | None, reads: float, scan_requests: float, u: int, append_pct: float = 0.0
) -> int | None:
    """The share of reads that scan ``cf2`` (SLOB's 0-50 or 100) so that the mean read size
    is ``read_kib`` (module docstring; with a share ``a`` of the other operations appending,
    the operations that read are ``r = (1 - u)(1 - a)`` and ``s = k R (u + r) / (r (S + k R))``);
    0 when the capture read single blocks, None when no share does (the scans reach no device,
    or even every read a scan falls short)."""
    f = multiblock_share(read_kib)
    if f <= 0:
        return 0
    reading = (1.0 - u / 100.0) * (1.0 - append_pct / 100.0)
    if scan_requests < CACHED_SCAN_REQUESTS or reading <= 0 or f >= 1.0:
        return None
    k = f / (1.0 - f)
    s = k * reads * (u / 100.0 + reading) / (reading * (scan_requests + k * reads))
    return snap_update_pct(100.0 * s) if s <= 1.0 else None


def reading_share(update_pct: int, scan_pct: int, append_pct: float = 0.0) -> float:
    """The share of operations that read ``cf1``'s blocks: every update, and the reads that do
    not scan ``cf2`` (a scan of that small table reads it from the caches after its first);
    appends read nothing (sim.replay.dbappend)."""
    u, sc = update_pct / 100.0, scan_pct / 100.0
    return u + (1.0 - u) * (1.0 - append_pct / 100.0) * (1.0 - sc)


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


def write_pct_at(
    u: int, scan: int, reads: float, per_update: float, appends: tuple[int, float] = (0, 0.0)
) -> float:
    """The write share (%) SLOB's mix makes at ``u`` and ``scan`` on these costs (cached
    scans), with ``appends`` (append_pct, writes an append) when the mix appends."""
    return _write_pct(u, scan, reads, per_update, appends)


def _write_pct(
    u: int, scan: int, reads: float, per_update: float, appends: tuple[int, float] = (0, 0.0)
) -> float:
    a, per_append = appends
    writes = u / 100.0 * per_update
    if a:
        writes = dbappend.writes_per_op(u, a, per_update, per_append)
    total = reads * reading_share(u, scan, a) + writes
    return 100.0 * writes / total if total > 0 else 0.0


def slob_out_of_reach(
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
    if all(dbappend.write_checks(asked_pct, got_pct, iops)[:2]):
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


def stray_writes(capture: Shape) -> tuple[str, str] | None:
    """The words and the why of SLOB's mix for a capture whose writes are under
    :data:`~sim.replay.dbwarmup.WRITE_SHARE_MIN` of its I/Os: the file system's own, as the
    warm-up and the appends take them, so no update is asked for them (None: a capture with no
    writes, or with writes to reproduce). A pgbench -S capture holding 0.86 % of the host's
    writes got update_pct 1 (1.85 % writes asked), whose updates wrote 14.2/s and moved the read
    share 4.4 points; unasked, the reads stay the capture's and the writes are judged, and
    named when they depart, as the rest are."""
    if capture.iops <= 0 or not 0 < capture.write_iops < WRITE_SHARE_MIN * capture.iops:
        return None
    pct, floor = 100.0 * capture.write_iops / capture.iops, 100 * WRITE_SHARE_MIN
    words = (
        f"update_pct 0: the capture's writes ({pct:.2f} % of its I/Os) are under {floor:g} %, "
        "the file system's own: no update is asked for them"
    )
    why = (
        f"the workload cannot reach the write share: {pct:.2f} % of the device I/Os asked "
        f"({capture.write_iops:.3g} writes/s) are under {floor:g} %, the file system's own, for "
        "which no update is asked (SLOB's update mix moves in steps of one update in 100 "
        "operations)"
    )
    return words, why
