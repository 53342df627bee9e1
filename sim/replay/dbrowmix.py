"""The row-update lever of a replay on a database: the SLOB-like workload's own
``row_update_pct`` (not SLOB's), updates of one random row of ``cf1`` (docs/capture.md,
"Writes beyond SLOB's mix").

Why: an OLTP production's updates (pgbench's accounts) dirty single blocks scattered over a
large table, so the kernel's write-back writes them one by one (pgbench -N on the lab: 98 % of
its writes single 8 KiB blocks). The workload's appends make the write share too, but their
blocks are consecutive in ``cf3`` and the write-back merges them (bench/README.md, run E:
24-34 KiB mean writes). A row update reads its block (unless a cache holds it) and dirties it;
with D blocks dirtied over the write-back's 30 s among N, two are neighbours about 2D/N of the
time: single-block writes.

The mix: no SLOB update, a share ``p`` of the operations row updates, and of the reads left a
share ``r`` range reads of :data:`ROW_RANGE_BLOCKS` consecutive blocks (the read size), the
rest plain reads of ``w - 1`` rows (:data:`ROW_WORK_UNIT`: the finest step). With ``h``
device reads a row touched (below one where the caches hold some of the table), ``W``
writes a row update, a range read making ``a`` single-block and ``b`` multi-block requests of
``z`` KiB, and ``n = 1 - p``, per operation::

    reads  = p h + n (r (a + b) + (1 - r) (w - 1) h)
    bytes  = B p h + n (r (B a + b z) + (1 - r) B (w - 1) h)
    writes = p W

(``B`` a block). The captured write/read ratio ``q`` and mean read ``m`` hold when
``writes = q reads`` and ``bytes = m reads``: two equations, two shares. A row update alone
writes ``W / (h + W)`` of its I/Os, so the write share is reachable only below that (a cache
hit makes ``h`` < 1: the lab's 80,000-row table reads about 0.9 a row); every request a range
read adds dilutes the write share, so the reads' size asks for requests carrying many bytes,
but few range reads make a noisy size: 16-block ranges (5-7 requests of ~110 KiB, measured)
took 8-16 range reads in a 20 s run, and the read size missed by 10-12 % in one run of two
(bench/README.md, run F). Four blocks (a block, then two requests of the read-ahead: 74 KiB
mean, sim.replay.dbsize's measurement of k 3 and 4) need about four times as many: half the
noise, with the write share still in reach; two blocks (the append mix's) would need every
read a range and still fall short of pgbench's 11 KiB. The shares move in whole
percents, so :func:`row_mix` takes the pair whose figures are nearest the captured ones, each
distance counted in its tolerance (the write share's 2 points, the read size's 10 %).

A run's costs (:func:`run_row_costs`): ``W`` its writes over its row updates (nothing else
writes), the range cost from its size buckets (:func:`sim.replay.dbsize.measured_cost`), and
``h`` its single-block reads over the rows its row updates and plain reads touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.replay import dbsize
from sim.replay.dbappend import write_checks
from sim.replay.fidelity import READ_SHARE_POINTS, SIZE_TOL

BLOCK_KIB = dbsize.BLOCK_KIB
#: The plain reads' work_unit in a row-update mix: two rows, the finest step of reads.
ROW_WORK_UNIT = 3
#: Consecutive blocks a range read of a row-update mix reads (module docstring: the fewest
#: that keep the write share in reach with the most range reads, so the least noisy size).
ROW_RANGE_BLOCKS = 4
#: Before a run measured it: a block, then two read-ahead requests, 52 KiB mean over the
#: three (dbsize's measurement of k 3 and 4: 156 KiB, 148 of them in two).
ROW_RANGE_MODEL = dbsize.RangeCost(
    1.0, 2.0, 74.0, "model: a block, then two read-ahead requests (52 KiB mean over three)"
)


@dataclass(frozen=True)
class RowCosts:
    """Device reads a row touched, writes a row update, and what a range read costs (None:
    the target has no range reads)."""

    reads_per_row: float
    writes_per_row_update: float
    ranges: dbsize.RangeCost | None
    source: str


def model_costs(ranges_on: bool) -> RowCosts:
    """Before a run measured them: a row read from the device and written back once."""
    return RowCosts(1.0, 1.0, ROW_RANGE_MODEL if ranges_on else None, "model")


def row_updates_on(base: dict[str, Any]) -> str | None:
    """Why the scenario's slob workload cannot update single rows here, None when it can."""
    return dbsize.slob_statement_missing(
        base, "row_update_pct", "update_row", "an update of one random row of cf1"
    )


@dataclass(frozen=True)
class Figures:
    reads_op: float
    writes_op: float
    read_kib: float

    @property
    def write_pct(self) -> float:
        total = self.reads_op + self.writes_op
        return 100.0 * self.writes_op / total if total > 0 else 0.0


def figures(row_pct: int, range_pct: int, costs: RowCosts) -> Figures:
    """Device reads, writes and the mean read size an operation of the mix makes (module
    docstring's model)."""
    p, r = row_pct / 100.0, range_pct / 100.0
    n, h = 1.0 - p, costs.reads_per_row
    plain = (ROW_WORK_UNIT - 1) * h
    a, b, z = (
        (costs.ranges.single, costs.ranges.multi, costs.ranges.multi_kib)
        if (costs.ranges is not None)
        else (0.0, 0.0, 0.0)
    )
    if costs.ranges is None:
        r = 0.0
    reads = p * h + n * (r * (a + b) + (1.0 - r) * plain)
    kib = BLOCK_KIB * p * h + n * (r * (BLOCK_KIB * a + b * z) + (1.0 - r) * BLOCK_KIB * plain)
    return Figures(reads, p * costs.writes_per_row_update, kib / reads if reads > 0 else 0.0)


def distance(got: Figures, write_pct: float, read_kib: float | None) -> float:
    """How far a mix's figures are from the captured ones, each in its tolerance (squared)."""
    share = (got.write_pct - write_pct) / READ_SHARE_POINTS
    if not read_kib or read_kib <= BLOCK_KIB:
        size = 0.0
    else:
        size = (got.read_kib / read_kib - 1.0) / SIZE_TOL
    return share * share + size * size


@dataclass(frozen=True)
class RowMix:
    row_update_pct: int
    range_pct: int
    got: Figures
    words: str
    why: str | None  # why the write share is out of reach (None: it is not)
    size_why: str | None  # why the read size is (None: it is not)


def rows_preferred(write_pct: float, write_kib: float | None, costs: RowCosts | None) -> bool:
    """Whether row updates are taken even though their mix leaves the captured write share
    out of reach: the capture's writes are single database blocks (their mean within the
    size tolerance of one) and its write share is within the share's tolerance of what row
    updates alone write. Appends cannot make single blocks where the kernel merges their
    consecutive blocks (bench/README.md run E: 16-44 KiB writes for 8.2), row updates'
    scattered blocks can; and the share they reach rises once the calibration measures a
    row's reads below one (a cache holds part of the table: 52 % at 0.92). Run G (51.6 %
    writes captured) took appends on the model's 50 % and missed every figure but the read
    size."""
    if costs is None:
        return False
    h, w_row = costs.reads_per_row, costs.writes_per_row_update
    top = 100.0 * w_row / (h + w_row) if h + w_row > 0 else 0.0
    single = write_kib is not None and write_kib <= BLOCK_KIB * (1.0 + SIZE_TOL)
    return single and write_pct <= top + READ_SHARE_POINTS


def row_mix(write_pct: float, read_kib: float | None, iops: float, costs: RowCosts) -> RowMix:
    """The whole-percent row_update_pct and range_pct whose figures are nearest the captured
    write share (%) and mean read (KiB) at ``iops`` device I/Os a second (module docstring);
    a mix the captured read size does not ask sets no range read."""
    sized = bool(read_kib and read_kib > BLOCK_KIB and costs.ranges is not None)
    best: tuple[float, int, int] | None = None
    for p in range(0, 101):
        for r in range(0, 101) if sized else (0,):
            d = distance(figures(p, r, costs), write_pct, read_kib)
            if best is None or d < best[0]:
                best = (d, p, r)
    assert best is not None
    _, p, r = best
    got = figures(p, r, costs)
    h, w_row = costs.reads_per_row, costs.writes_per_row_update
    top = 100.0 * w_row / (h + w_row) if h + w_row > 0 else 0.0
    words = (
        f"row_update_pct {p}, range_pct {r} (range_blocks {ROW_RANGE_BLOCKS}), work_unit "
        f"{ROW_WORK_UNIT}: a row update reads {h:.3g} and writes {w_row:.3g} ({costs.source}), "
        f"so row updates alone write {top:.1f} % of their I/Os; the pair nearest the "
        f"captured {write_pct:.1f} % writes and {read_kib or BLOCK_KIB:.3g} KiB reads makes "
        f"{got.write_pct:.1f} % and {got.read_kib:.3g} KiB"
    )
    why = None
    checks = write_checks(write_pct, got.write_pct, iops)
    if not all(checks):
        why = (
            f"the workload cannot reach the write share: {write_pct:.2f} % of the device I/Os "
            f"asked; row updates of {h:.3g} reads and {w_row:.3g} writes each, with the reads "
            f"that size the mean read, make {got.write_pct:.2f} % at best (row_update_pct {p}, "
            f"range_pct {r})"
        )
    size_why = None
    if read_kib and read_kib > BLOCK_KIB and abs(got.read_kib / read_kib - 1.0) > SIZE_TOL:
        ranges = (
            "the target has no range reads"
            if costs.ranges is None
            else f"a range read makes {costs.ranges.single:.3g} + {costs.ranges.multi:.3g} "
            f"requests, the latter {costs.ranges.multi_kib:.3g} KiB ({costs.ranges.source})"
        )
        size_why = (
            f"a mean read of {read_kib:.3g} KiB with the write share held: {ranges}; the "
            f"nearest mix reads {got.read_kib:.3g} KiB"
        )
    return RowMix(p, r, got, words, why, size_why)


def run_row_costs(
    shape: Any, operations: dict[str, Any], work_unit: int = ROW_WORK_UNIT
) -> RowCosts | None:
    """What a run of a row-update mix measured (module docstring); None without row updates.
    A cost the run could not see (no range reads, no reads) is None in its place."""

    def rate(name: str) -> float:
        return float((operations.get(name) or {}).get("ops_s") or 0.0)

    rows_s, ranges_s, plain_s = rate("row_update"), rate("range"), rate("read")
    if rows_s <= 0:
        return None
    cost = dbsize.measured_cost(shape.read_iops, shape.read_kib, shape.read_sizes, ranges_s)
    multi = cost.multi * ranges_s if cost is not None else 0.0
    single = cost.single * ranges_s if cost is not None else 0.0
    singles = max(shape.read_iops - multi - single, 0.0)
    touched = rows_s + (work_unit - 1) * plain_s
    return RowCosts(
        singles / touched,
        shape.write_iops / rows_s,
        cost,
        "measured: single-block reads over the rows touched, writes over the row updates",
    )


def corrected(old: RowCosts, got: RowCosts | None, gain: float, step: float) -> RowCosts:
    """The next scale's row costs: moved toward the measured by ``gain``, at most ``step``
    times either way (sim.replay.dbplan's rule for every cost)."""
    if got is None:
        return old

    def move(a: float, b: float) -> float:
        if a <= 0:
            return b
        return min(max(a + gain * (b - a), a / step), a * step)

    ranges = dbsize.corrected(old.ranges, got.ranges, gain, step) if old.ranges else got.ranges
    return RowCosts(
        move(old.reads_per_row, got.reads_per_row),
        move(old.writes_per_row_update, got.writes_per_row_update),
        ranges,
        f"corrected at a gain of {gain:g} toward the last run's measured",
    )


def as_dict(costs: RowCosts | None) -> dict[str, Any] | None:
    if costs is None:
        return None
    out = dict(vars(costs))
    out["ranges"] = dbsize.as_dict(costs.ranges)
    return out


def correction_rows(
    before: RowCosts, got: RowCosts | None, after: RowCosts
) -> dict[str, dict[str, float | None]]:
    """A row-update scale's correction as replay.json's ``correction`` records each cost:
    before, measured and after, by name (the range read's among them)."""

    def row(field: str, ranged: bool = False) -> dict[str, float | None]:
        def value(c: RowCosts | None) -> float | None:
            if c is None:
                return None
            source = c.ranges if ranged else c
            return getattr(source, field) if source is not None else None

        return {"before": value(before), "measured": value(got), "after": value(after)}

    return {
        "reads_per_row": row("reads_per_row"),
        "writes_per_row_update": row("writes_per_row_update"),
        "range_multi": row("multi", True),
        "range_multi_kib": row("multi_kib", True),
    }


def moved_words(before: RowCosts, got: RowCosts | None) -> str:
    """Which row cost moved in a run, for the cause of an unfaithful split."""
    if got is None:
        return "no row update measured"
    parts = [
        f"{words} {a:.3g} -> {b:.3g} ({100 * (b / a - 1):+.1f} %)"
        for words, a, b in (
            ("reads a row", before.reads_per_row, got.reads_per_row),
            ("writes a row update", before.writes_per_row_update, got.writes_per_row_update),
        )
        if a > 0
    ]
    return "; ".join(parts)
