"""The arithmetic of the ``db`` collector family (storage.collectors.database), kept pure:
counter differences and resets, cache hit ratios, blocks read per statement and the cache
warning the summary gives. No I/O, no driver: the unit tests drive it with plain numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from sim.protocols import Sample

SOURCE = "db"
TABLE_ENTITY_PREFIX = "table:"
#: Columns holding a view's ``stats_reset`` (seconds since the epoch, 0 for never) are named
#: ``reset_<view>`` (written out in the SQL below).
RESET_PREFIX = "reset_"
#: Above this share of block requests served by the cache, reads did not reach storage.
CACHE_WARNING_PCT = 50.0


def first_decrease(
    prev: Mapping[str, float], curr: Mapping[str, float], counters: Iterable[str]
) -> str | None:
    """The first of ``counters`` that went down between two readings, as ``"<counter>: <old>
    -> <new>"``, or None. PostgreSQL's counters are 64-bit and never wrap: a decrease is a
    reset (``pg_stat_reset()``, a crash restart), never a difference to turn into a rate."""
    for name in counters:
        if curr[name] < prev[name]:
            return f"{name}: {prev[name]:.0f} -> {curr[name]:.0f}"
    return None


def stats_reset_moved(prev: Mapping[str, float], curr: Mapping[str, float]) -> str | None:
    """Which view's ``stats_reset`` time changed between two readings (the ``reset_<view>``
    entries, seconds since the epoch, 0 for never), as ``"<view>.stats_reset: <old> ->
    <new>"``, or None. A reset that left a counter higher than before (pg_stat_reset() and
    busy seconds after it) shows here and nowhere else."""
    for key in sorted(k for k in curr if k.startswith(RESET_PREFIX)):
        if curr[key] != prev.get(key, curr[key]):
            view = key.removeprefix(RESET_PREFIX)
            return f"{view}.stats_reset: {when(prev[key])} -> {when(curr[key])}"
    return None


def when(epoch: float) -> str:
    if not epoch:
        return "never"
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def counter_rates(
    prev: Mapping[str, float],
    curr: Mapping[str, float],
    interval_s: float,
    names: Mapping[str, str],
) -> dict[str, float]:
    """Per-second rates of the counters in ``names`` (counter -> output key); the caller has
    made sure none went down (:func:`first_decrease`)."""
    return {out: (curr[c] - prev[c]) / interval_s for c, out in names.items()}


def hit_pct(hits: float, reads: float) -> float:
    """Share of block requests the cache served, in percent (0 when there were none)."""
    total = hits + reads
    return 100.0 * hits / total if total > 0 else 0.0


def cache_warning(hit_pct: float | None) -> str | None:
    """A warning when the database cache served more than half of the block requests: the
    reads then measure memory, not storage (the SLOB method needs data far larger than the
    cache). None when the figure is fine or unknown."""
    if hit_pct is None or hit_pct <= CACHE_WARNING_PCT:
        return None
    return (
        f"the database cache served {hit_pct:.1f} % of block requests (more than "
        f"{CACHE_WARNING_PCT:.0f} %): most reads never reached storage; use a data set "
        f"several times larger than the database cache"
    )


def table_blocks_read(samples: Iterable[Sample]) -> float:
    """Heap plus index blocks read (cache misses) by the sampled tables over the samples
    given: the sum of each table sample's read rates times its interval."""
    total = 0.0
    for sample in samples:
        if sample.source == SOURCE and sample.entity.startswith(TABLE_ENTITY_PREFIX):
            v = sample.values
            total += (v["heap_blks_read_s"] + v["idx_blks_read_s"]) * v["interval_s"]
    return total


def physical_reads_per_op(
    samples_or_blocks: Iterable[Sample] | float, op_count: int
) -> float | None:
    """Blocks read per statement: the first sanity check of a SLOB-like run (≈ WORK_UNIT−1
    for reads when the data is far larger than the cache).

    ``samples_or_blocks``: the ``db`` samples of the measured window (see
    :func:`table_blocks_read`), or a block count already summed. None without operations.
    """
    if op_count <= 0:
        return None
    if isinstance(samples_or_blocks, int | float):
        blocks = float(samples_or_blocks)
    else:
        blocks = table_blocks_read(samples_or_blocks)
    return blocks / op_count


def blocks_read_from_means(
    entity_means: Mapping[str, Mapping[str, float]], measured_s: float
) -> float:
    """The table blocks read over a measured window from the bundle summary's per-entity
    means of the ``db`` source (``summary["storage"]["db"]``); exact when the intervals
    were equally long."""
    return sum(
        (means.get("heap_blks_read_s", 0.0) + means.get("idx_blks_read_s", 0.0)) * measured_s
        for entity, means in entity_means.items()
        if entity.startswith(TABLE_ENTITY_PREFIX)
    )
