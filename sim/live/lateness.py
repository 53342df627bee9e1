"""How far the master's merge trails the run, so a master short of CPU is said, never silent.

The master merges interval *k* once every worker has sent it (:mod:`sim.locust.merge`).
Workers send on Locust's report, every ``WORKER_REPORT_INTERVAL`` (3 s), at moments of their
own, so an interval is normally merged up to two report periods after it closed. A master
that cannot keep up — too many workers for its CPU (``bench/master_scale.py``: about 6 ms of
CPU per worker and second), or a CPU limit, or a busy node — merges each interval later than
the one before; the bundle stays whole, but the live view trails the run and, once the backlog
passes the loss timeout, heartbeats queued behind the reports make workers look lost.

The schedule is the master's own clock, so the workers' clock offsets do not enter: the first
merged interval anchors it (master monotonic time ``m0`` for engine time ``t1_0``), and
interval *k*, which closed at engine time ``t1_k`` on every worker, is due at
``m0 + (t1_k - t1_0)``. Its lateness is the master's time at the merge minus that (an
interval held back for a worker that is then given up for lost starts the schedule again:
that wait is the loss timeout's, said as a loss). Beyond
:data:`ALLOWED_S` the first time, one warning line; at the end, how many intervals were late
and by how much at most (:meth:`Lateness.closing`), for the bundle's messages.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Locust's worker report period (locust.runners.WORKER_REPORT_INTERVAL), in seconds.
REPORT_PERIOD_S = 3.0
#: Normal trail: the slowest worker's report phase (one period) plus one period of jitter and
#: the interval itself; later than this the master is behind.
ALLOWED_S = 2 * REPORT_PERIOD_S + 1.0


@dataclass
class Lateness:
    """The merge's lag behind the run's 1-s grid (see the module docstring)."""

    allowed_s: float = ALLOWED_S
    late: int = 0
    merged: int = 0
    worst_s: float = 0.0
    worst_index: int = -1
    _anchor: tuple[float, float] | None = None  # (master time, engine t_end) of the first
    _warned: bool = False

    def on_merge(
        self, index: int, t_end: float, now: float, workers: int, *, rebase: bool = False
    ) -> str | None:
        """Interval ``index`` (engine time ``t_end``) merged at master time ``now``; returns
        the warning line the first time an interval is late, else None. ``rebase``: this
        interval waited for a worker just given up for lost (the loss timeout, not the
        master's CPU): the schedule starts again from it."""
        self.merged += 1
        if self._anchor is None or rebase:
            self._anchor = (now, t_end)
            return None
        master0, engine0 = self._anchor
        lag = now - (master0 + (t_end - engine0))
        if lag > self.worst_s:
            self.worst_s, self.worst_index = lag, index
        if lag <= self.allowed_s:
            return None
        self.late += 1
        if self._warned:
            return None
        self._warned = True
        return (
            f"master behind: interval {index} merged {lag:.1f} s after it was due (allowed "
            f"{self.allowed_s:g} s, measured on the master's clock): its CPU does not keep up "
            f"with {workers} workers; the bundle stays whole but trails the run, and workers "
            "may be taken for lost — give the master more CPU or run fewer workers"
        )

    def closing(self) -> str | None:
        """The run's line for the bundle's messages when any interval was late."""
        if not self.late:
            return None
        return (
            f"master behind: {self.late} of {self.merged} intervals merged more than "
            f"{self.allowed_s:g} s late (measured, master's clock), the latest "
            f"{self.worst_s:.1f} s (interval {self.worst_index})"
        )

    def as_dict(self) -> dict[str, float | int]:
        """For the summary: late intervals, the largest lag, the allowance."""
        return {
            "late_intervals": self.late,
            "merged_intervals": self.merged,
            "lag_max_s": round(self.worst_s, 3),
            "allowed_s": self.allowed_s,
        }
