"""sim.live.lateness: a master that merges behind the run's 1-s grid says so, once, and counts.

Times are given, not measured: the schedule is the master's own clock anchored at the first
merged interval, so these cases are exact.
"""

from __future__ import annotations

from sim.live.lateness import ALLOWED_S, REPORT_PERIOD_S, Lateness


def test_reports_every_three_seconds_are_on_time() -> None:
    """Intervals merged in bursts of three at each report, the slowest worker a full report
    period after the others: never late."""
    lateness = Lateness()
    for k in range(60):
        t_end = float(k + 1)
        report = (k // 3 + 1) * REPORT_PERIOD_S  # the report that carries interval k
        now = 100.0 + report + REPORT_PERIOD_S  # the slowest worker's phase
        assert lateness.on_merge(k, t_end, now, workers=8) is None
    assert lateness.late == 0 and lateness.closing() is None
    assert lateness.worst_s <= ALLOWED_S


def test_a_master_falling_behind_warns_once_and_counts_every_late_interval() -> None:
    lateness = Lateness()
    lines = []
    for k in range(40):
        # Each merge takes 1.25 s of a 1-s interval: 0.25 s more behind each time.
        line = lateness.on_merge(k, float(k + 1), 50.0 + 1.25 * k, workers=128)
        if line:
            lines.append((k, line))
    # Lag of interval k is 0.25 k: first beyond 7 s at k = 29; late from there to 39.
    assert [k for k, _ in lines] == [29]
    assert "interval 29 merged 7.2 s after it was due" in lines[0][1]
    assert "128 workers" in lines[0][1]
    assert lateness.late == 11 and lateness.merged == 40
    assert lateness.worst_index == 39 and abs(lateness.worst_s - 9.75) < 1e-9
    closing = lateness.closing()
    assert closing is not None and "11 of 40 intervals" in closing and "9.8 s" in closing
    assert lateness.as_dict()["late_intervals"] == 11


def test_the_workers_clocks_do_not_enter() -> None:
    """Engine times (t_end) are relative to each run's start; the master's clock alone judges:
    a run whose engine times start at 1,000 s behaves as one starting at 1 s."""
    a, b = Lateness(), Lateness()
    for k in range(20):
        now = 10.0 + k * 1.5
        a.on_merge(k, float(k + 1), now, workers=2)
        b.on_merge(k, 1000.0 + k + 1, now, workers=2)
    assert a.as_dict() == b.as_dict() and a.late == b.late > 0


def test_a_wait_for_a_lost_worker_is_not_the_masters_lateness() -> None:
    """Intervals held 10 s for a worker then lost: the schedule starts again there, and a
    master on time afterwards is never called behind."""
    lateness = Lateness()
    for k in range(5):
        assert lateness.on_merge(k, float(k + 1), 10.0 + k, workers=3) is None
    # Interval 5 waited for the lost worker: merged 10 s late, with the three after it.
    assert lateness.on_merge(5, 6.0, 25.0, workers=3, rebase=True) is None
    for k in range(6, 20):
        assert lateness.on_merge(k, float(k + 1), 25.0 + (k - 5), workers=3) is None
    assert lateness.late == 0 and lateness.closing() is None
