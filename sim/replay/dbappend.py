"""The append lever of a replay on a database: the SLOB-like workload's own ``append_pct`` (not
SLOB's), the share of the operations that do not update which insert one row filling one
block into ``<prefix>_<n>_cf3`` (no index) instead of reading (docs/capture.md, "Replaying on
a database").

SLOB's update mix moves in steps (0-50 or 100 updates in every 100 operations), and its
write share ends near half the device I/Os (every operation an update). An append reads
nothing and writes about one block (written back later, plus whatever of its commit lands on
the device: ``A``, the model's :data:`MODEL_WRITES_PER_APPEND` until a run measured it), so
with ``u`` updates (a share), a share ``a`` of the other operations appending, ``R`` device
reads of an operation that reads ``cf1``, ``P`` writes an update and ``ρ`` device reads of an
operation that neither updates nor appends (``R`` for a plain read; range reads and scans
change it), the captured write/read ratio ``q`` holds when::

    q (R u + (1 - u)(1 - a) ρ) = u P + (1 - u) a A
    a = (q (R u + (1 - u) ρ) - u P) / ((1 - u) (A + q ρ))

(with ``ρ = R``: ``a = (q R - u P) / ((1 - u) (A + q R))``). ``update_pct`` is the largest of
SLOB's 0-50 whose write share is not above the captured one and whose remaining writes
appends can make (:func:`update_pct_under`). Where range reads size the reads, ``ρ`` depends
on ``range_pct``, which depends on the share of plain reads, which depends on ``a``: the
derivation iterates to a fixed point (:func:`fixed_point`, at most
:data:`FIXED_POINT_ROUNDS` rounds) and rounds ``a`` to a whole percent, which is judged by
the same rules as SLOB's mix (:func:`out_of_reach`).

A run's device writes are ``u P + a A`` an operation: one equation, two costs. With no
updates the appends made them all (``A`` = writes/s over appends/s); with both, the costs the
job was derived from are scaled by one common factor, the measured writes over the predicted
(:func:`split_writes`): a run cannot tell an update's writes from an append's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.replay import dbsize
from sim.replay.fidelity import IOPS_TOL, READ_SHARE_POINTS

#: Writes one append costs before a run measured it: its new block, written back later.
MODEL_WRITES_PER_APPEND = 1.0
#: SLOB's highest update share below every operation an update (its rule: 0-50 or 100);
#: sim.replay.dbrules takes it from here, which it imports.
MAX_UPDATE_PCT = 50
#: The most appends while the capture read: a run of appends alone reads nothing, so neither
#: the capture's reads nor the reads an operation costs (the calibration's) would be made.
MAX_APPEND_PCT = 99
#: The fixed point of the append share and the range reads' share (module docstring): it stops
#: when the append share moves by less than FIXED_POINT_STEP, or after this many rounds.
FIXED_POINT_ROUNDS = 8
FIXED_POINT_STEP = 1e-4


def appends_on(base: dict[str, Any]) -> str | None:
    """Why the scenario's slob workload cannot append here, None when it can."""
    return dbsize.slob_statement_missing(
        base, "append_pct", "append", "an insert of one row into cf3"
    )


def append_fraction(
    q: float, u: int, block_reads: float, per_update: float, per_append: float, other: float
) -> float:
    """The share ``a`` of the operations that do not update which append so that the device's
    write/read ratio is ``q`` (module docstring; ``other`` is ``ρ``), unclamped; 1 when the
    capture read nothing, 0 when every operation updates."""
    uf = u / 100.0
    if uf >= 1.0:
        return 0.0
    if not math.isfinite(q):
        return 1.0
    denominator = (1.0 - uf) * (per_append + q * other)
    if denominator <= 0:
        return 0.0
    return (q * (block_reads * uf + (1.0 - uf) * other) - uf * per_update) / denominator


def update_pct_under(wanted: float, q: float, costs: tuple[float, float, float], cap: float) -> int:
    """The largest of SLOB's 0-50 that is not above ``wanted`` (the update share that alone
    would make ``q``: its write share is then not above the captured) and leaves appends of
    at most ``cap`` (a share) to make the rest of the writes."""
    reads, per_update, per_append = costs
    u = (
        MAX_UPDATE_PCT
        if not math.isfinite(wanted)
        else int(min(math.floor(wanted), MAX_UPDATE_PCT))
    )
    while u > 0 and append_fraction(q, u, reads, per_update, per_append, reads) > cap:
        u -= 1
    return max(u, 0)


def other_reads(reads_op: float, u: int, a: float, block_reads: float) -> float:
    """``ρ``: the device reads of an operation that neither updates nor appends, from the reads
    an operation of the whole mix (``a`` a share)."""
    reading = (1.0 - u / 100.0) * (1.0 - a)
    if reading <= 0:
        return block_reads
    return (reads_op - block_reads * u / 100.0) / reading


def fixed_point(
    q: float,
    u: int,
    costs: tuple[float, float, float],
    reads_at: Callable[[float], float],
    cap: float,
) -> tuple[float, int]:
    """The append share (a fraction, within 0 and ``cap``) whose mix makes ``q``, where
    ``reads_at(append_pct)`` is the device reads an operation of the mix at that share (the
    range reads or scans that size the reads set again for it), and the rounds it took."""
    reads, per_update, per_append = costs

    def solve(other: float) -> float:
        return min(max(append_fraction(q, u, reads, per_update, per_append, other), 0.0), cap)

    a = solve(reads)
    for rounds in range(1, FIXED_POINT_ROUNDS + 1):
        moved = solve(other_reads(reads_at(100.0 * a), u, a, reads))
        if abs(moved - a) < FIXED_POINT_STEP:
            return moved, rounds
        a = moved
    return a, FIXED_POINT_ROUNDS


@dataclass(frozen=True)
class AppendMix:
    update_pct: int
    append_pct: int
    #: What the caller's sizing of the reads gave at that mix: its sizing, range_pct and the
    #: device reads an operation.
    sizing: tuple[Any, int | None, float]
    writes_op: float
    write_pct: float  # the write share (%) the mix makes on these costs
    words: str  # the lever, its formula and its figures (the job's ``how``)
    why: str | None  # why it cannot make the captured writes (None: it can)


def append_mix(
    asked: tuple[float, float, float],
    iops: float,
    costs: tuple[float, float, float],
    read: bool,
    size_at: Callable[[int, float], tuple[Any, int | None, float]],
) -> AppendMix:
    """The update share and the whole-percent append share whose mix makes the captured
    writes (``asked``: the write/read ratio ``q``, the update share that alone would make it,
    the write share in %), with ``size_at(update_pct, append_pct)`` the caller's sizing of
    the reads at that mix (its first item's ``why``: why no share sizes them, None when one
    does); ``read``: the capture read (then at most :data:`MAX_APPEND_PCT`).

    The update share: from the largest of SLOB's 0-50 not above the captured writes on the
    block reads alone (:func:`update_pct_under`) down, the first whose mix makes both the
    writes and the read size. The sizing moves the reads an operation (a range read is two
    requests against ``R`` for a plain read), so a lower update share may be what keeps the
    writes from exceeding the captured ones; and the more updates, the fewer plain reads
    are left to size the reads with. When none makes both: the largest that makes the
    writes, else the one whose write share is nearest the captured."""
    q, wanted, asked_pct = asked
    cap = MAX_APPEND_PCT / 100.0 if read else 1.0
    writes_only: AppendMix | None = None
    nearest: AppendMix | None = None
    for u in range(update_pct_under(wanted, q, costs, cap), -1, -1):
        made = _append_mix_at(u, asked, iops, costs, (cap, read), size_at)
        if made.why is None and getattr(made.sizing[0], "why", None) is None:
            return made
        if made.why is None and writes_only is None:
            writes_only = made
        if nearest is None or abs(made.write_pct - asked_pct) < abs(nearest.write_pct - asked_pct):
            nearest = made
    found = writes_only or nearest
    assert found is not None  # the loop ran at least once (update_pct 0)
    return found


def _append_mix_at(
    u: int,
    asked: tuple[float, float, float],
    iops: float,
    costs: tuple[float, float, float],
    limits: tuple[float, bool],
    size_at: Callable[[int, float], tuple[Any, int | None, float]],
) -> AppendMix:
    """The append share at ``u`` updates: the fixed point, rounded to a whole percent, and
    judged (:func:`append_mix`)."""
    (q, wanted, asked_pct), (reads, per_update, per_append), (cap, read) = asked, costs, limits
    a, rounds = fixed_point(q, u, costs, lambda pct: size_at(u, pct)[2], cap)
    a_pct = min(round(100.0 * a), round(100.0 * cap))
    sizing = size_at(u, a_pct)
    writes = writes_per_op(u, a_pct, per_update, per_append)
    total = sizing[2] + writes
    got_pct = 100.0 * writes / total if total > 0 else 0.0
    unclamped = append_fraction(
        q, u, reads, per_update, per_append, other_reads(sizing[2], u, a_pct / 100.0, reads)
    )
    capped = read and a_pct >= MAX_APPEND_PCT and unclamped > (a_pct + 0.5) / 100.0
    words = (
        f"update_pct {u}, append_pct {a_pct}: write/read ratio {q:.3g} captured; update_pct "
        f"{wanted:.3g} would make it alone ({reads:.3g} reads / {per_update:.3g} writes an "
        f"update), so {u} of SLOB's 0-50 (the largest not above it whose mix makes the "
        f"writes and the read size), and appends of {per_append:.3g} writes each for the rest: "
        f"a = (q (R u + (1-u) rho) - u P) / ((1-u) (A + q rho)) = {100 * a:.3g} % ({rounds} "
        f"round(s) to the fixed point with the reads' sizing), {got_pct:.1f} % writes for "
        f"{asked_pct:.1f} % captured"
    )
    why = out_of_reach(asked_pct, got_pct, iops, (u, a_pct), capped)
    return AppendMix(u, a_pct, sizing, writes, got_pct, words, why)


def writes_per_op(u: int, append_pct: int, per_update: float, per_append: float) -> float:
    uf = u / 100.0
    return uf * per_update + (1.0 - uf) * append_pct / 100.0 * per_append


def write_checks(asked_pct: float, got_pct: float, iops: float) -> tuple[bool, bool, bool]:
    """Whether a mix's write share is within the read share's tolerance of the captured one,
    its write IOPS within theirs, and its read IOPS within theirs, at ``iops`` device I/Os a
    second (the run's closed loop holds their sum)."""
    asked_w, got_w = iops * asked_pct / 100.0, iops * got_pct / 100.0
    asked_r, got_r = iops - asked_w, iops - got_w
    share_ok = abs(got_pct - asked_pct) <= READ_SHARE_POINTS
    writes_ok = abs(got_w - asked_w) <= IOPS_TOL * asked_w if asked_w > 0 else got_w == 0
    reads_ok = abs(got_r - asked_r) <= IOPS_TOL * asked_r if asked_r > 0 else got_r == 0
    return share_ok, writes_ok, reads_ok


def out_of_reach(
    asked_pct: float, got_pct: float, iops: float, mix: tuple[int, int], capped: bool
) -> str | None:
    """Why the update and append mix cannot make the captured writes (its whole-percent
    steps), None when it can. Its read IOPS are judged too: SLOB's own mix writes at most
    about half the I/Os, where the write share's tolerance bounds the reads as well, but near
    all writes two points of share are most of the reads."""
    checks = write_checks(asked_pct, got_pct, iops)
    if all(checks):
        return None
    u, a = mix
    words = (
        f"the write share's ±{READ_SHARE_POINTS:g} points",
        f"the write IOPS' ±{100 * IOPS_TOL:g} %",
        f"the read IOPS' ±{100 * IOPS_TOL:g} %",
    )
    outside = " and ".join(w for w, ok in zip(words, checks, strict=True) if not ok)
    text = (
        f"the workload cannot reach the write share: {asked_pct:.2f} % of the device I/Os "
        f"asked ({iops * asked_pct / 100:.3g} writes/s, {iops * (1 - asked_pct / 100):.3g} "
        f"reads/s); the appends move in steps of one in 100 of the operations that do not "
        f"update: update_pct {u}, append_pct {a} gives {got_pct:.2f} % "
        f"({iops * got_pct / 100:.3g} writes/s, {iops * (1 - got_pct / 100):.3g} reads/s), "
        f"outside {outside}"
    )
    if capped:
        text += (
            f" (append_pct at most {MAX_APPEND_PCT} while the capture read: appends alone "
            "read nothing)"
        )
    return text


def split_writes(
    write_iops: float, update_s: float, append_s: float, prior: tuple[float, float]
) -> tuple[float | None, float | None]:
    """A run's writes an update and writes an append (None: that operation did not run):
    without updates the appends made every write; with both, the costs the job was derived
    from (``prior``) scaled by one common factor, the measured writes over the predicted (one
    equation cannot give two costs)."""
    if append_s <= 0:
        return (write_iops / update_s if update_s > 0 else None), None
    if update_s <= 0:
        return None, write_iops / append_s
    per_update, per_append = prior
    predicted = update_s * per_update + append_s * per_append
    if predicted <= 0:
        return None, None
    factor = write_iops / predicted
    return factor * per_update, factor * per_append
