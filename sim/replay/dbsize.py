"""The mean read size of a replay on a database: range reads of consecutive ``cf1`` blocks
(SLOB-like ``range_pct`` / ``range_blocks``, the ``range_read`` statement) whose device
requests the kernel's read-ahead makes larger than a block (docs/capture.md, "The mean read
size").

A database's random lookups are single-block device reads, but where two of them fall on
neighbouring blocks the kernel reads ahead: pgbench -S on the lab captured 9.27 KiB mean reads,
6.6 % above one 8 KiB block, mostly 16-32 KiB. SLOB's scans of ``cf2`` cannot make that (the
caches hold the small table: 0.041 device requests a scan, measured). A read of ``k``
consecutive blocks of the large ``cf1`` from a random one can: measured on the lab's loop
device (PostgreSQL 15's TID range scan, 150 statements from a cold cache each, /sys/block
stat), ``k = 2`` made 2.07 device requests a statement at 19.8 KiB mean (a block, then the
read-ahead's first window of 32 KiB), ``k = 3`` and ``4`` three requests at 52 KiB, ``k`` 6
to 16 about four at 150 KiB (the window ramping up). So ``k`` = :data:`RANGE_BLOCKS`: its
multi-block requests are the capture's 16-32 KiB, and the mix sets the mean.

With ``R`` block reads an operation on ``cf1``, ``u`` updates in 100 operations, a share
``n`` of the operations plain reads (neither update nor scan), and a range read making ``a``
single-block and ``b`` multi-block requests of mean ``z`` KiB, a share ``p`` of the plain
reads made range reads gives the mean read ``m`` when::

    b n p (z - m) = (m - B) (R (u + n (1 - p)) + a n p)
    p = (m - B) R (u + n) / (n (b (z - m) + (m - B) (R - a)))

(``B`` a block). ``a``, ``b`` and ``z`` are :data:`MODEL` until a run measured them: its
device requests above one block (its size buckets) over its range reads a second, their mean
size from the run's mean read size, corrected between scales as the other costs are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BLOCK_KIB = 8.0
RANGE_BLOCKS = 2
#: The buckets of a single-block read (sim.replay.shape's read_sizes).
SINGLE_BUCKETS = ("le_4", "le_8")
#: A run with fewer multi-block requests a range read than this made none: its ranges were
#: cached, or the target reads no ahead.
CACHED_RANGE_REQUESTS = 0.1


@dataclass(frozen=True)
class RangeCost:
    """What one range read costs at the device: single-block requests, requests above one
    block, and the latter's mean size (KiB)."""

    single: float
    multi: float
    multi_kib: float
    source: str


#: Before a run measured it: a block, then the read-ahead's first window (measured above).
MODEL = RangeCost(1.0, 1.0, 32.0, "model: a block, then the read-ahead's first 32 KiB window")


def range_pct_for(
    read_kib: float | None, reads: float, u: int, plain: float, cost: RangeCost
) -> float | None:
    """The share (%) of plain reads made range reads so that the mean read is ``read_kib``
    (module docstring): 0 at a block or less, None when none does (the ranges make no
    multi-block request, or requests no larger than the mean asked, or even every plain read
    a range falls short)."""
    if not read_kib or read_kib <= BLOCK_KIB:
        return 0.0
    m, z = read_kib, cost.multi_kib
    if cost.multi < CACHED_RANGE_REQUESTS or z <= m or plain <= 0:
        return None
    share = u / 100.0
    p = (
        (m - BLOCK_KIB)
        * reads
        * (share + plain)
        / (plain * (cost.multi * (z - m) + (m - BLOCK_KIB) * (reads - cost.single)))
    )
    return 100.0 * p if 0 < p <= 1.0 else None


def requests_per_op(reads: float, u: int, plain: float, pct: float, cost: RangeCost) -> float:
    """Device read requests an operation on ``cf1``: block reads of the updates and plain
    reads, and the range reads' own."""
    p = pct / 100.0
    return reads * (u / 100.0 + plain * (1 - p)) + plain * p * (cost.single + cost.multi)


def multiblock(
    read_iops: float, read_kib: float | None, sizes: dict[str, float]
) -> tuple[float, float]:
    """A run's read requests above one block a second and their mean size (KiB), from its
    size buckets and its mean read size (the single blocks counted at a block)."""
    total = sum(sizes.values())
    if total <= 0 or not read_kib:
        return 0.0, 0.0
    share = sum(n for b, n in sizes.items() if b not in SINGLE_BUCKETS) / total
    multi = read_iops * share
    if multi <= 0:
        return 0.0, 0.0
    kib = (read_kib * read_iops - BLOCK_KIB * (read_iops - multi)) / multi
    return multi, kib


def measured_cost(
    read_iops: float, read_kib: float | None, sizes: dict[str, float], range_ops_s: float
) -> RangeCost | None:
    """What one range read cost in a run (None without range reads): its multi-block requests
    a second over its range reads a second; a range's single block is the model's."""
    if range_ops_s <= 0:
        return None
    multi, kib = multiblock(read_iops, read_kib, sizes)
    return RangeCost(
        MODEL.single,
        multi / range_ops_s,
        kib if multi > 0 else 0.0,
        "measured: the run's requests above one block (size buckets) over its range reads/s",
    )


def corrected(
    old: RangeCost | None, got: RangeCost | None, gain: float, step: float
) -> RangeCost | None:
    """The next scale's range cost: moved toward the measured by ``gain``, at most ``step``
    times either way (sim.replay.dbplan's rule for every cost); ranges that made no
    multi-block request are a fact of the target, taken at once."""
    if got is None:
        return old
    if old is None or got.multi < CACHED_RANGE_REQUESTS or old.multi <= 0 or old.multi_kib <= 0:
        return got

    def move(a: float, b: float) -> float:
        return min(max(a + gain * (b - a), a / step), a * step)

    return RangeCost(
        old.single, move(old.multi, got.multi), move(old.multi_kib, got.multi_kib), got.source
    )


def as_dict(cost: RangeCost | None) -> dict[str, Any] | None:
    return None if cost is None else dict(vars(cost))


def slob_catalogue(base: dict[str, Any]) -> tuple[str, Any]:
    """The scenario's target's SQL dialect and the slob workload's statement catalogue in it
    (None for both when the kind has no dialect here; the kind's name then)."""
    from sim import registry
    from sim.sql import Catalogue

    kind = str((base.get("target") or {}).get("kind"))
    entry = registry.targets().get(kind)  # an unknown kind is the run's own error to say
    dialect = entry.dialect.name if entry is not None and entry.dialect is not None else None
    if dialect is None:
        return kind, None
    # The slob workload is a SqlWorkload (sql_dir): read from the registry, not imported.
    sql_dir = getattr(registry.workloads()["slob"].workload_class, "sql_dir")  # noqa: B009
    return dialect, Catalogue.load(sql_dir, dialect)


def slob_statement_missing(
    base: dict[str, Any], parameter: str, statement: str, what: str
) -> str | None:
    """Why the scenario's slob workload cannot deal ``statement`` here (its parameters have no
    ``parameter``, or the target's dialect has no such statement; ``what`` says what it does),
    None when it can: the appends' and the row updates' one check."""
    from sim import registry

    if parameter not in registry.workloads()["slob"].parameters_model.model_fields:
        return f"the slob workload here has no {parameter} ({what})"
    dialect, catalogue = slob_catalogue(base)
    if catalogue is None:
        return f"the target kind {dialect} has no SQL dialect here"
    if catalogue.has(statement):
        return None
    return f"{dialect} has no {statement} statement ({what})"


def range_reads_on(base: dict[str, Any]) -> str | None:
    """Why the scenario's target has no range read (its dialect marks ``range_read``
    unsupported), None when it has."""
    dialect, catalogue = slob_catalogue(base)
    if catalogue is None:
        return f"the target kind {dialect} has no SQL dialect here"
    if catalogue.has("range_read"):
        return None
    return (
        f"{dialect} has no read of consecutive blocks (range_read: rows addressed by block, "
        "like PostgreSQL's TID ranges)"
    )


@dataclass(frozen=True)
class RangeSizing:
    range_pct: int | None  # None: no share of range reads makes the size
    how: str
    why: str | None


def sized_by_ranges(
    read_kib: float | None, buckets_pct: float | None, reads: float, u: int, plain: float,
    cost: RangeCost,
) -> RangeSizing:  # fmt: skip
    """The range reads that make the captured mean read size, or why none do."""
    kib = read_kib or 0.0
    seen = (
        ""
        if buckets_pct is None
        else f" (the capture's reads above one block: {buckets_pct:.1f} %)"
    )
    if kib <= BLOCK_KIB:
        return RangeSizing(0, "read size: single blocks", None)
    pct = range_pct_for(kib, reads, u, plain, cost)
    costs = (
        f"a range read of {RANGE_BLOCKS} blocks makes {cost.single:.3g} + {cost.multi:.3g} "
        f"device requests, the latter {cost.multi_kib:.3g} KiB ({cost.source})"
    )
    if pct is None:
        why = f"a mean read of {kib:.3g} KiB{seen}: {costs}; no share of range reads makes that"
        return RangeSizing(None, f"read size: {why}", why)
    how = (
        f"range_pct {round(pct)} for the read size: a mean read of {kib:.3g} KiB{seen}; "
        f"{reads:.3g} block reads an operation; {costs}"
    )
    return RangeSizing(round(pct), how, None)


def run_range_costs(
    shape: Any, operations: dict[str, Any], range_blocks_single: float = MODEL.single
) -> tuple[float | None, float | None, RangeCost | None]:
    """From a run with range reads: device block reads an operation on ``cf1`` (the updates'
    and plain reads', the range reads' own requests left out), writes an update, and what one
    range read cost."""

    def rate(name: str) -> float:
        return float((operations.get(name) or {}).get("ops_s") or 0.0)

    ranges, updates, plain = rate("range"), rate("update"), rate("read")
    cost = measured_cost(shape.read_iops, shape.read_kib, shape.read_sizes, ranges)
    multi = cost.multi * ranges if cost is not None else 0.0
    singles = max(shape.read_iops - multi - range_blocks_single * ranges, 0.0)
    reads = singles / (plain + updates) if plain + updates > 0 else None
    per_update = shape.write_iops / updates if updates > 0 else None
    return reads, per_update, cost
