"""The SLOB-like mix's arithmetic: which operation a session's n-th one is, the shares the
summary reports and the exact counts a run's operations must come to.

The order, per session: ``update_pct`` of every 100 operations are updates (SLOB's rule);
of the others, ``row_update_pct`` update one random row (dbsim's own: one scattered block read
and written); of the others left, ``append_pct`` append (dbsim's own: a write that reads
nothing); of the reads left, ``scan_pct`` scan cf2; of the reads that do not scan, ``range_pct`` read consecutive
blocks; the rest are SLOB's reads. Each choice numbers its own candidates (the n-th operation
that is not an update, the n-th read …) and takes ``pct`` of every 100 of them, spread evenly
(:func:`takes_this_op`), so any run's counts follow from the operation numbers alone.
"""

from __future__ import annotations

from collections.abc import Sequence


def takes_this_op(index: int, pct: int) -> bool:
    """Whether operation ``index`` (0-based) is one of the ``pct`` in its block of 100.

    Spreads them evenly: any 100 consecutive operations starting at a multiple of 100 hold
    exactly ``pct``, and any prefix is within one of ``pct`` percent.
    """
    return (index + 1) * pct // 100 > index * pct // 100


def _taken(first: int, end: int, pct: int) -> int:
    """How many of candidates ``first`` up to (not including) ``end`` are taken at ``pct``."""
    return end * pct // 100 - first * pct // 100


def _passed(count: int, pct: int) -> int:
    """How many of the first ``count`` candidates are not taken at ``pct`` (the numbering of
    the next choice's candidates)."""
    return count - count * pct // 100


def mix_shares(update: int, append: int, scan: int, ranged: int, row: int = 0) -> dict[str, float]:
    """Each operation's share of all operations, in percent; ``append``, ``range`` and
    ``row_update`` only when their percentage is set (SLOB's own mix reports SLOB's three)."""
    updates = float(update)
    others = 100.0 - updates
    rows = others * row / 100
    others -= rows
    appends = others * append / 100
    reads = others - appends
    scans = reads * scan / 100
    ranges = (reads - scans) * ranged / 100
    shares = {"read": reads - scans - ranges, "update": updates, "scan": scans}
    if append:
        shares["append"] = appends
    if ranged:
        shares["range"] = ranges
    if row:
        shares["row_update"] = rows
    return shares


def mix_counts(
    update: int,
    append: int,
    scan: int,
    ranged: int,
    op_ranges: Sequence[tuple[int, int]],
    row: int = 0,
) -> dict[str, int]:
    """The operations each kind must count when session ``s`` issued its operations number
    ``op_ranges[s][0]`` up to (not including) ``op_ranges[s][1]``; the keys as
    :func:`mix_shares` has them (``row``: row_update_pct)."""
    totals = {"read": 0, "update": 0, "scan": 0}
    if row:
        totals["row_update"] = 0
    if append:
        totals["append"] = 0
    if ranged:
        totals["range"] = 0
    for first, end in op_ranges:
        updates = _taken(first, end, update)
        # Each choice's candidates are what the one before left: numbered again from 0.
        not_updates = _passed(first, update), _passed(end, update)
        rows = _taken(*not_updates, row)
        others = _passed(not_updates[0], row), _passed(not_updates[1], row)
        appends = _taken(*others, append)
        reads = _passed(others[0], append), _passed(others[1], append)
        scans = _taken(*reads, scan)
        plain = _passed(reads[0], scan), _passed(reads[1], scan)
        ranges = _taken(*plain, ranged)
        totals["update"] += updates
        totals["scan"] += scans
        if append:
            totals["append"] += appends
        if ranged:
            totals["range"] += ranges
        if row:
            totals["row_update"] += rows
        totals["read"] += (end - first) - updates - rows - appends - scans - ranges
    return totals


__all__ = ["mix_counts", "mix_shares", "takes_this_op"]
