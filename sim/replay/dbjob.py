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

Every run of the replay warms up for the host's write-back delay when the capture wrote
(:mod:`sim.replay.dbwarmup`). Where SLOB's mix cannot make the captured writes, the workload's
own appends make the rest (:mod:`sim.replay.dbappend`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sim.replay import dbappend, dbrowmix, dbsize
from sim.replay.dbrules import (
    ALL_UPDATES,
    BLOCK_KIB,
    CACHED_SCAN_REQUESTS,
    MAX_UPDATE_PCT,
    MIN_OPS_S,
    MIN_WORK_UNIT,
    READAHEAD_BLOCKS,
    SCAN_REQUEST_KIB,
    captured_multiblock_pct,
    diluting_scan_pct,
    multiblock_share,
    reading_share,
    scan_pct_for,
    size_scan_pct,
    slob_out_of_reach,
    snap_update_pct,
    stray_writes,
    work_unit_for,
    write_pct_at,
)
from sim.replay.dbwarmup import MAX_WARMUP_S as MAX_WARMUP_S
from sim.replay.dbwarmup import SHORT_WARMUP_S, WRITE_SHARE_MIN, warmup_for
from sim.replay.dbwarmup import writeback_delay_s as writeback_delay_s
from sim.replay.shape import Shape

HEAVY_WRITE_KIB = 16.0


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
    #: The writes one append cost as the job counted them (0: the workload has no appends).
    per_append: float = 0.0
    #: A row-update mix's costs as the job counted them (None: not one).
    row_costs: dict[str, Any] | None = None

    @property
    def expected_write_pct(self) -> float:
        total = self.reads_per_op + self.writes_per_op
        return 100.0 * self.writes_per_op / total if total > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["expected_write_pct"] = self.expected_write_pct
        return out


def derive(
    capture: Shape,
    scale: float,
    costs: tuple[float | None, float | None] = (None, None),
    scan_blocks: int = 128,
    scan_requests: float | None = None,
    ranges: dbsize.RangeCost | None = None,
    no_ranges: str | None = None,
    per_append: float | None = None,
    rows: dbrowmix.RowCosts | None = None,
) -> DbJob:
    """The parameters and the rate of one scale; ``costs`` the device reads of an operation
    that reads ``cf1`` and the writes one update cost, ``scan_requests`` the device requests
    one scan of ``cf2`` made, ``per_append`` the writes one append cost, as a calibration
    measured them (None: the model's ``w - 1``, ``w`` and ``scan_blocks / READAHEAD_BLOCKS``;
    ``per_append`` None: the workload has no appends here).

    A captured write/read ratio above update_pct 50's (SLOB's rule leaves nothing between 50
    and 100) is reached at update_pct 50 by making some reads scans of ``cf2``, which the
    caches hold: operations without device reads, so the writes' share rises
    (:func:`diluting_scan_pct`), when that is nearer the captured share than update_pct 100.
    The sequential share and the read size then are not reproduced (those scans are cached).
    Otherwise range reads (``ranges``: what one costs) make the captured mean read size
    (:mod:`sim.replay.dbsize`), or without them (``no_ranges``: why) scans (:func:`_read_size`).
    Where the workload appends and SLOB's mix alone does not make the captured writes (or
    makes them only by those cached scans), row updates make them (``rows``: their costs,
    None where the workload has none; :mod:`sim.replay.dbrowmix`), else appends make the rest
    (:func:`_append_mix`)."""
    iops = capture.iops * scale
    widest = work_unit_for(capture.iops)
    sizing = ((scan_requests, scan_blocks), (ranges, no_ranges))
    w = widest
    if per_append is not None:
        w = _append_work_unit(capture, widest, scan_blocks, ranges is not None)
    measured_reads, writes_per_update = costs
    reads = measured_reads if measured_reads and measured_reads > 0 else float(w - 1)
    per_update = writes_per_update if writes_per_update and writes_per_update > 0 else float(w)
    q = capture.write_iops / capture.read_iops if capture.read_iops > 0 else math.inf
    asked_write_pct = 100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0
    wanted = 100.0 * q * reads / per_update if math.isfinite(q) else math.inf
    source = "calibrated" if writes_per_update else "model"
    asked = (q, wanted, asked_write_pct)
    mix = _slob_mix(capture, iops, w, (reads, per_update), asked, sizing, source)
    rowed = None
    if rows is not None and _appends_wanted(capture, mix):
        rowed = _row_mix(capture, iops, rows)
    if rowed is not None and (
        rowed.why is None
        or per_append is None
        or dbrowmix.rows_preferred(asked_write_pct, capture.write_kib, rows)
    ):
        mix, w = rowed, dbrowmix.ROW_WORK_UNIT
    elif per_append is not None and _appends_wanted(capture, mix):
        appended = _append_mix(capture, iops, w, (reads, per_update, per_append), asked, sizing)
        if appended.why is None or mix.why is not None:
            mix = appended
    range_cost = dbsize.as_dict(ranges) if mix.range_pct is not None else None
    if rowed is not None and mix is rowed:
        range_cost = dbsize.as_dict(rows.ranges) if rows is not None else None
    return _job(capture, scale, (w, widest), mix, (reads, per_update, per_append), range_cost)


def _job(
    capture: Shape,
    scale: float,
    ranges: tuple[int, int],
    mix: Mix,
    costs: tuple[float, float, float | None],
    range_cost: dict[str, Any] | None,
) -> DbJob:
    """The job of one scale from the mix chosen: its parameters, its ``how`` and its costs
    (``ranges``: the work_unit and the widest it could have been)."""
    (w, widest), (reads, per_update, per_append) = ranges, costs
    heavy = (capture.write_kib or 0.0) > HEAVY_WRITE_KIB
    params: dict[str, Any] = {
        "update_pct": mix.update_pct,
        "scan_pct": mix.scan_pct,
        "work_unit": w,
        "redo_stress": "HEAVY" if heavy else "LITE",
    }
    if mix.range_pct is not None:
        params.update(range_pct=mix.range_pct, range_blocks=mix.range_blocks)
    if mix.append_pct:
        params["append_pct"] = mix.append_pct
    if mix.row_costs is not None:
        params["row_update_pct"] = mix.row_update_pct
    warmup, why_warmup = warmup_for(capture)
    narrowed = f"; narrowed from {widest}: {NARROWED}" if w < widest else ""
    if mix.row_costs is not None:  # the plain reads fill in the row updates' finest steps
        narrowed = f"; the row-update mix's plain reads: {ROW_NARROWED}"
        reads = (w - 1) * mix.row_costs.reads_per_row
    how = [
        f"work_unit {w}: {reads:.3g} block reads an operation, at least {MIN_OPS_S:g} ops/s "
        f"at 1x{narrowed}",
        mix.words,
        mix.sized.how,
        f"warm-up {warmup:g} s: {why_warmup}",
    ]
    return DbJob(
        scale, capture.iops * scale, params, mix.reads_op, mix.writes_op,
        100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0,
        mix.why is None, mix.why, how, warmup, mix.sized.why, reads, per_update, range_cost,
        per_append if per_append is not None else 0.0, dbrowmix.as_dict(mix.row_costs),
    )  # fmt: skip


#: Why a job with appends may read fewer rows an operation than the widest range allows.
NARROWED = (
    "each append in 100 of the other operations trades the reads of one for a write, so "
    "fewer reads an operation make finer steps of the write share (the widest range whose "
    "steps reach it on the model's costs)"
)


#: Why a row-update mix's plain reads read two rows.
ROW_NARROWED = "two rows, so each in 100 operations moves the reads by the least"


@dataclass(frozen=True)
class Mix:
    """One way of making the captured writes: the parameters, the device reads and writes an
    operation, the sizing of the reads, the words of the update (and append) lever, and why
    it cannot make them (None: it can)."""

    update_pct: int
    scan_pct: int
    append_pct: int
    range_pct: int | None
    reads_op: float
    writes_op: float
    sized: SizeScans
    words: str
    why: str | None
    diluted: bool = False
    row_update_pct: int = 0
    range_blocks: int = dbsize.RANGE_BLOCKS
    #: The costs a row-update mix was derived from (None: not one).
    row_costs: dbrowmix.RowCosts | None = None


def _slob_mix(
    capture: Shape,
    iops: float,
    w: int,
    costs: tuple[float, float],
    asked: tuple[float, float, float],
    sizing: tuple[tuple[float | None, int], tuple[dbsize.RangeCost | None, str | None]],
    source: str,
) -> Mix:
    """SLOB's own mix: update_pct snapped to 0-50 or 100, and the cached scans' dilution."""
    (reads, per_update), (q, wanted, _) = costs, asked
    scans, targets = sizing
    stray = stray_writes(capture)  # writes that are the file system's own: none asked
    u = 0 if stray else snap_update_pct(wanted) if math.isfinite(wanted) else ALL_UPDATES
    scan = scan_pct_for(capture.seq_pct, w, scans[1])
    u, scan, lever = _diluted(u, scan, asked, reads, per_update)
    sized, range_pct, reads_op = _read_size(capture, reads, (u, scan, 0.0), scans, lever, targets)
    scan = scan if sized.scan_pct is None else sized.scan_pct
    words = (
        f"update_pct {u}: write/read ratio {q:.3g} captured x {reads:.3g} reads / "
        f"{per_update:.3g} writes an update ({source}) = {wanted:.3g}, snapped to SLOB's "
        f"0-50 or 100{lever}"
    )
    why = slob_out_of_reach(capture, iops, reads_op, per_update, u, reads)
    words, why = stray or (words, why)
    return Mix(u, scan, 0, range_pct, reads_op, u / 100.0 * per_update, sized, words, why,
               bool(lever))  # fmt: skip


def _row_mix(capture: Shape, iops: float, rows: dbrowmix.RowCosts) -> Mix:
    """Row updates and range reads that make the captured writes and read size with writes
    of scattered single blocks (:func:`sim.replay.dbrowmix.row_mix`)."""
    asked_pct = 100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0
    made = dbrowmix.row_mix(asked_pct, capture.read_kib, iops, rows)
    ranged = rows.ranges is not None and made.range_pct > 0
    how = "read size: single blocks" if not ranged else f"read size: {made.words}"
    sized = SizeScans(None, 0.0, made.size_why or how, made.size_why)
    return Mix(0, 0, 0, made.range_pct if ranged else None, made.got.reads_op,
               made.got.writes_op, sized, made.words, made.why, False, made.row_update_pct,
               dbrowmix.ROW_RANGE_BLOCKS, rows)  # fmt: skip


def _appends_wanted(capture: Shape, mix: Mix) -> bool:
    """Appends make the writes where the capture wrote (at least :data:`WRITE_SHARE_MIN` of
    its I/Os: below, its writes are the file system's own) and SLOB's mix alone does not make
    them, or makes them only with cached scans (which leave the read size unreachable)."""
    wrote = capture.iops > 0 and capture.write_iops >= WRITE_SHARE_MIN * capture.iops
    return wrote and (mix.why is not None or mix.diluted)


def _append_mix(
    capture: Shape,
    iops: float,
    w: int,
    costs: tuple[float, float, float],
    asked: tuple[float, float, float],
    sizing: tuple[tuple[float | None, int], tuple[dbsize.RangeCost | None, str | None]],
) -> Mix:
    """The largest of SLOB's 0-50 updates below the captured writes, and appends for the rest
    (:func:`sim.replay.dbappend.append_mix`), the reads sized as :func:`_read_size` does."""
    scans, targets = sizing
    seq_scan = scan_pct_for(capture.seq_pct, w, scans[1])

    def size_at(u: int, append_pct: float) -> tuple[SizeScans, int | None, float]:
        return _read_size(capture, costs[0], (u, seq_scan, append_pct), scans, "", targets)

    made = dbappend.append_mix(asked, iops, costs, capture.read_iops > 0, size_at)
    sized, range_pct, reads_op = made.sizing
    scan = seq_scan if sized.scan_pct is None else sized.scan_pct
    return Mix(made.update_pct, scan, made.append_pct, range_pct, reads_op, made.writes_op,
               sized, made.words, made.why)  # fmt: skip


def _append_work_unit(capture: Shape, widest: int, scan_blocks: int, ranged: bool) -> int:
    """The widest work_unit whose appends make the captured writes on the model's costs
    (:data:`NARROWED`); when none does, the one whose write share is nearest the captured;
    ``widest`` when SLOB's own mix makes them there. The model's costs, not a calibration's,
    so the calibration and every scale read the same range."""
    q = capture.write_iops / capture.read_iops if capture.read_iops > 0 else math.inf
    asked_pct = 100.0 * capture.write_iops / capture.iops if capture.iops > 0 else 0.0
    sizing = ((None, scan_blocks), (dbsize.MODEL if ranged else None, None))
    nearest: tuple[float, int] = (math.inf, widest)
    for w in range(widest, MIN_WORK_UNIT - 1, -1):
        reads, per_update = float(w - 1), float(w)
        wanted = 100.0 * q * reads / per_update if math.isfinite(q) else math.inf
        asked = (q, wanted, asked_pct)
        if w == widest:
            own = _slob_mix(capture, capture.iops, w, (reads, per_update), asked, sizing, "")
            if not _appends_wanted(capture, own):
                return widest
        costs = (reads, per_update, dbappend.MODEL_WRITES_PER_APPEND)
        mix = _append_mix(capture, capture.iops, w, costs, asked, sizing)
        if mix.why is None:
            return w
        off = abs(100.0 * mix.writes_op / (mix.reads_op + mix.writes_op) - asked_pct)
        nearest = min(nearest, (off, -w))  # the wider of two as near
    return -nearest[1] if math.isfinite(nearest[0]) else widest


def _read_size(
    capture: Shape,
    reads: float,
    mix: tuple[int, int, float],
    scans: tuple[float | None, int],
    lever: str,
    targets: tuple[dbsize.RangeCost | None, str | None],
) -> tuple[SizeScans, int | None, float]:
    """What makes the captured mean read size (:func:`derive`): range reads on a target with
    them, else scans of ``cf2``; the sizing, ``range_pct`` (None: no range reads) and the
    device read requests an operation. ``mix``: update_pct, scan_pct and append_pct (the
    appends read nothing: only the other operations that do not update read or scan)."""
    (u, scan, a), (scan_requests, scan_blocks), (ranges, no_ranges) = mix, scans, targets
    sized = _read_size_scans(capture, reads, (u, a), scan_requests, scan_blocks, bool(lever))
    reading = (1 - u / 100) * (1 - a / 100)  # the share of operations that read or scan
    if ranges is None or lever:
        if no_ranges and sized.why:
            sized = SizeScans(sized.scan_pct, sized.per_scan, f"{sized.how}; {no_ranges}",
                              f"{sized.why}; {no_ranges}")  # fmt: skip
        scan = scan if sized.scan_pct is None else sized.scan_pct
        reads_op = reads * reading_share(u, scan, a) + reading * scan / 100 * sized.per_scan
        return sized, None, reads_op
    plain = reading * (1 - scan / 100)
    by_ranges = dbsize.sized_by_ranges(
        capture.read_kib, captured_multiblock_pct(capture.read_sizes), reads, u, plain, ranges
    )
    range_pct = by_ranges.range_pct or 0
    per_scan = float(scan_requests) if scan_requests is not None else 0.0
    sized = SizeScans(None, per_scan, by_ranges.how, by_ranges.why)
    reads_op = dbsize.requests_per_op(reads, u, plain, range_pct, ranges)
    return sized, range_pct, reads_op + reading * scan / 100 * per_scan


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
    at_half = write_pct_at(MAX_UPDATE_PCT, diluted, reads, per_update)
    at_all = write_pct_at(ALL_UPDATES, 0, reads, per_update)
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
    mix: tuple[int, float],
    scan_requests: float | None,
    scan_blocks: int,
    diluting: bool,
) -> SizeScans:
    """The scans that make the captured mean read size, or why none do (module docstring);
    ``mix``: update_pct and append_pct."""
    u, a = mix
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
    pct = size_scan_pct(kib, reads, per_scan, u, a)
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


def measured_costs(
    device_read_iops: float,
    device_write_iops: float,
    ops_s: float,
    update_pct: int,
    scan_pct: int = 0,
    multiblock_iops: float = 0.0,
    append_pct: int = 0,
) -> tuple[float | None, float | None]:
    """From a run: device reads per operation that reads ``cf1`` (:func:`reading_share`: the
    appends read nothing; the scans' multi-block requests, ``multiblock_iops``, left out) and
    writes per update (None when the run appended too: its writes are split by
    :func:`sim.replay.dbappend.split_writes`)."""
    share = reading_share(update_pct, scan_pct, append_pct)
    if ops_s <= 0 or share <= 0:
        return None, None
    single = max(device_read_iops - multiblock_iops, 0.0)
    reads = single / (ops_s * share)
    per_update = device_write_iops / ops_s / (update_pct / 100.0) if update_pct > 0 else None
    return reads, per_update if not append_pct else None


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
