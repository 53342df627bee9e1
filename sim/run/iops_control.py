"""The closed loop that holds a run's asked device IOPS (``load.rate_iops``) while the device
I/Os per operation drift (a cache warming, a checkpoint, another tenant on the device).

The plant: a stage offered ``u`` operations/s delivers ``D = c * u`` device IOPS, ``c`` the
device I/Os one operation costs, which drifts. The calibration stage (sim.run.calibration)
gives the first estimate of ``c``; from then on, every collector interval ``k``:

* **measure**: the device-role collector's IOPS on the calibration device ``D_k`` and the
  operations the sessions completed ``R_k`` (per second) give the interval's cost
  ``m_k = D_k / R_k``;
* **estimate** (the loop's integrator): the calibration's ratio of sums, continued with
  forgetting: ``S_D <- (1 - g) S_D + g D_k``, ``S_R <- (1 - g) S_R + g R_k``, ``c_k = S_D / S_R``
  with gain ``g = GAIN`` for an interval of the collector's length (memory of ``1 / g``
  intervals; seeded with the calibration's cost at the rate first offered). A shorter interval
  weighs by its length, ``g_t = 1 - (1 - g)^(t / interval)``: forgetting runs per second, not
  per interval, so the sliver a stage's boundary cuts (0.05 s holding one operation and no
  device I/O yet counted) moves the estimate by ~6 % of its size, not 70 % (a CI run's
  sliver took the cost from 6.4 to 3.2, the next 300-IOPS step opened at 599 and the loop's
  correction left it at 244). A ratio of sums, not a mean of the intervals' ratios: an
  interval with one or two operations of ~60 I/Os each weighs by its operations. ``c_k`` moves
  at most ``STEP_CLAMP`` in one interval, stays within ``COST_SPAN`` of the calibration's and
  never below ``MIN_IO_PER_OP``;
* **act**: the stage's rate becomes ``u_(k+1) = A / c_k`` ops/s, ``A`` the IOPS asked; at a
  step's start ``u = A_step / c`` at once (a curve of short steps follows from its first
  interval).

* **make up** (the stage's integral): the stage's shortfall so far, ``E = sum((A - D_j) *
  dt_j)`` device I/Os over its intervals, is paid back over the next ``MAKEUP_INTERVALS``:
  the rate is ``(A + E / (MAKEUP_INTERVALS * interval)) / c_k``, the extra clamped to
  ``±MAKEUP_SHARE`` of ``A``. It starts at zero with each stage (a step of a curve owes
  nothing to the one before) and adds nothing in an interval whose operations ran behind
  their schedule (conditional integration: a target too slow does not wind it up). What the
  sessions' schedule still owes is not a shortfall: an open-loop operation that is late still
  runs (the backlog is the target's, sim.core.coroutine_sessions), so every interval counts
  ``(A - D_j - c_j * (u_j - R_j)) * dt_j``, the operations offered but not completed valued at
  the estimated cost. Without that term a stall of the generator's own host (the process not
  scheduled for 0.3 s beside stress-ng) was counted twice: its interval, behind, added
  nothing, then the schedule's catch-up (2,473 IOPS over 0.02 s) counted as a surplus, and the
  make-up took it back at -25 % for six intervals: 370 of 400 IOPS over a 4 s stage.

Linearised about a steady state where the sessions realise the rate they are offered
(``R_k = u_k``), this is an integral controller on the relative error: ``u_(k+1) ~ u_k * (1 + g
* (A - D_k) / D_k)``. A cost that jumps is followed to within ``(1 - g)^k`` of the jump after
``k`` intervals with no overshoot (a checkpoint's burst and its end alike); a cost that
drifts steadily, ``r`` an interval (a cache warming), is tracked about ``r / g`` behind (a
cost halving over 30 intervals: 3 % at ``g = 0.7``; on the lab, a warming cache halving
the cost over 16 s left the stage 6 % short). The make-up term pays that lag back, so the
stage's mean holds; its price is an overshoot after a jump (a cost halving at once: 200,
359, then +14 % for two intervals, within 5 % after five and 2 % after nine), smaller and
shorter than a trend term's (Holt's, tried: +12-27 % for ten intervals and more). An
interval's noise reaches the rate damped by ``g``.
**Anti-windup**: the integrator's state is the measured cost per operation, not the
accumulated error, so a target that cannot deliver (``R_k`` below ``u_k``, operations
queueing) does not wind the rate up: ``c`` still measures device I/Os over operations done,
and the rate stays ``A / c``. Intervals without an operation or a device figure leave the
estimate as it was; the step clamp keeps one interval's burst (a checkpoint's writes) from
moving the rate more than ``STEP_CLAMP`` at once.

Each stage's delivered IOPS is judged against a tolerance derived from what it is made of
(:func:`tolerance`): the device I/Os over the stage counted as a Poisson variable (1.96 of its
relative standard deviation, ``1 / sqrt(A * T)``) plus the operations in flight at its two
edges (one operation's I/Os each, ``2 * c / (A * T)``). A stage whose delivered IOPS fall short
by more while its operations ran behind their schedule is reported: the target is too slow
for the IOPS asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Weight of the newest interval in the cost estimate's sums (forgetting 1 - GAIN an
#: interval): 0.7 leaves 0.3 of a jump of the cost per operation after one interval, 0.09
#: after two, and takes an interval's noise in at 0.7 of its size (the stage's mean averages
#: it; 0.5 lagged a warming cache by 1 / g = 2 intervals, 7 % on the fake's 12-interval ramp).
GAIN = 0.7
#: The stage's shortfall is paid back over this many intervals …
MAKEUP_INTERVALS = 3
#: … adding at most this share of the IOPS asked either way.
MAKEUP_SHARE = 0.25
#: The cost estimate moves at most this factor in one interval.
STEP_CLAMP = 2.0
#: The cost estimate stays within this factor of the calibration's either way.
COST_SPAN = 20.0
#: Below this many device I/Os per operation the storage is not exercised (sim.run.calibration).
MIN_IO_PER_OP = 0.01
#: An interval whose completed operations fall below this share of the offered rate, less
#: one operation per session, ran behind schedule: the target (or the sessions) could not
#: keep up.
BEHIND_SHARE = 0.9
#: 95 % two-sided normal quantile.
Z95 = 1.96
#: Columns of the per-interval control record (``calibration.control`` in summary.json).
COLUMNS = (
    "t",
    "phase",
    "step",
    "asked_iops",
    "delivered_iops",
    "ops_s",
    "io_per_op_measured",
    "io_per_op_estimate",
    "rate_ops_s",
    "behind",
)


def tolerance(asked: float, seconds: float, io_per_op: float) -> float:
    """How far a stage's delivered device IOPS may be from ``asked``, as a share of it (see the
    module docstring): Poisson count of the stage's I/Os plus one operation at each edge."""
    ios = max(asked * seconds, 1.0)
    return Z95 / math.sqrt(ios) + 2 * io_per_op / ios


@dataclass
class Controller:
    """The loop's state: the cost estimate, the rate it set, and its record."""

    io_per_op: float
    closed: bool = True
    gain: float = GAIN
    interval_s: float = 1.0
    #: The running stage's shortfall in device I/Os (make-up), and the stage (phase, step).
    shortfall: float = 0.0
    stage: tuple[str, int | None] | None = None
    floor: float = field(init=False)
    ceiling: float = field(init=False)
    rows: list[list[Any]] = field(default_factory=list)
    #: The forgetting sums of device IOPS and operations/s (None until the first interval).
    sums: tuple[float, float] | None = None
    #: Per row: the device I/Os of the operations offered in its interval and not completed
    #: in it, ``c * (u - R) * dt`` (negative: a backlog caught up). A stage's sum is what its
    #: schedule still owed at its end, never run (the next stage starts a schedule afresh).
    owed: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.floor = max(self.io_per_op / COST_SPAN, MIN_IO_PER_OP)
        self.ceiling = self.io_per_op * COST_SPAN

    def rate(self, asked: float, stage: tuple[str, int | None] | None = None) -> float:
        """The ops/s rate that delivers ``asked`` IOPS at the current estimate, with the
        make-up of ``stage``'s shortfall so far (none for a stage just begun)."""
        extra = 0.0
        if stage is not None and stage == self.stage:
            extra = self.shortfall / (MAKEUP_INTERVALS * self.interval_s)
            extra = max(-MAKEUP_SHARE * asked, min(MAKEUP_SHARE * asked, extra))
        return (asked + extra) / self.io_per_op

    def update(
        self,
        asked: float,
        offered: float,
        delivered: float | None,
        ops_s: float,
        where: tuple[float, str, int | None],
        sessions: int = 1,
        seconds: float = 1.0,
    ) -> float:
        """One interval: ``offered`` ops/s were asked of the sessions, ``ops_s`` completed,
        ``delivered`` device IOPS measured (None: no figure). Returns the next rate."""
        measured = delivered / ops_s if delivered is not None and ops_s > 0 else None
        if self.closed and delivered is not None and ops_s > 0 and seconds > 0:
            self._estimate(delivered, ops_s, offered, seconds)
        behind = ops_s * seconds < BEHIND_SHARE * offered * seconds - sessions
        t, phase, step_index = where
        if (phase, step_index) != self.stage:
            self.stage, self.shortfall = (phase, step_index), 0.0
        # The schedule's own debt (or its catch-up of one, R above u) is not the loop's.
        owed = self.io_per_op * (offered - ops_s)
        self.owed.append(owed * seconds)
        if delivered is not None and not behind:
            self.shortfall += (asked - delivered - owed) * seconds
        rate = self.rate(asked, self.stage) if self.closed else offered
        self.rows.append(
            [
                round(t, 3),
                phase,
                step_index,
                asked,
                None if delivered is None else round(delivered, 1),
                round(ops_s, 2),
                None if measured is None else round(measured, 3),
                round(self.io_per_op, 3),
                round(rate, 3),
                behind,
            ]
        )
        return rate

    def _estimate(self, delivered: float, ops_s: float, offered: float, seconds: float) -> None:
        if self.sums is None:  # the calibration's cost, at the rate first offered
            scale = offered if offered > 0 else ops_s
            self.sums = (self.io_per_op * scale, scale)
        g = 1.0 - (1.0 - self.gain) ** min(seconds / self.interval_s, 1.0)
        s_d, s_r = self.sums
        s_d, s_r = (1 - g) * s_d + g * delivered, (1 - g) * s_r + g * ops_s
        self.sums = (s_d, s_r)
        level = s_d / s_r
        forecast = min(max(level, self.io_per_op / STEP_CLAMP), self.io_per_op * STEP_CLAMP)
        self.io_per_op = min(max(forecast, self.floor), self.ceiling)


def judge_stage(entry: dict[str, Any], behind: int, intervals: int, owed: float = 0.0) -> None:
    """Write a measured stage's tolerance and whether it held its IOPS into its stage log
    entry (a warm-up is not judged: its first interval holds the calibration's operations
    still in flight, run closed loop at full speed). ``owed``: the device I/Os of the
    operations its schedule offered and the sessions had not run by its end."""
    if entry.get("phase") != "measure":
        return
    asked, got = float(entry["rate_iops"]), entry.get("delivered_iops")
    seconds = float(entry.get("duration_s") or 0.0)
    io = float(entry.get("io_per_op") or 0.0)
    if got is None or seconds <= 0:
        return
    allowed = tolerance(asked, seconds, io)
    entry["iops_tolerance"] = round(allowed, 4)
    entry["iops_held"] = abs(got - asked) <= allowed * asked
    entry["intervals_behind"] = behind
    # As IOPS over the stage: with them it would have delivered what its schedule offered.
    not_run = max(owed, 0.0) / seconds
    entry["iops_not_run"] = round(not_run, 1)
    # Too slow: most intervals behind, or operations offered and never run (a target or a
    # host of the sessions that could not keep up for part of the stage, its end included)
    # that account for the shortfall beyond the tolerance; not the loop's estimate.
    unrun = not_run > 0 and got + not_run >= asked * (1 - allowed)
    if got < asked * (1 - allowed) and (behind > intervals / 2 or unrun):
        entry["iops_unmet"] = (
            f"target too slow: {got:,.0f} of {asked:,.0f} IOPS asked delivered, operations "
            f"behind their schedule in {behind} of {intervals} intervals"
            + (f", {not_run:,.0f} IOPS of them not run by the stage's end" if unrun else "")
        )
