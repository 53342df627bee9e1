"""Interval recorder: per-op histograms per interval, measured totals apart from warm-up."""

from __future__ import annotations

from sim.metrics import HIGHEST_TRACKABLE_US, IntervalRecorder


def test_rotation_hands_over_the_interval_and_folds_measured_totals() -> None:
    recorder = IntervalRecorder()
    for us in (100, 200, 300):
        recorder.record("read", us)
    recorder.record_error("read", "TimeoutError")
    warm = recorder.rotate(0, 0.0, 1.0, "warmup", None)
    assert warm.ops["read"].count == 3 and not warm.measured
    for us in range(1, 1001):
        recorder.record("read", us)
    measured = recorder.rotate(1, 1.0, 2.0, "measure", None)
    row = next(measured.rows())
    assert row["count"] == 1000 and row["ops_s"] == 1000.0
    assert 495 <= row["p50_us"] <= 505 and 985 <= row["p99_us"] <= 995
    assert recorder.totals["read"].count == 1000
    assert recorder.warmup_totals["read"].errors == {"TimeoutError": 1}
    assert not recorder.pending


def test_out_of_range_latencies_are_clamped_and_counted() -> None:
    recorder = IntervalRecorder()
    recorder.record("x", 0)
    recorder.record("x", HIGHEST_TRACKABLE_US * 10)
    interval = recorder.rotate(0, 0.0, 1.0, "measure", None)
    assert interval.ops["x"].count == 2
    assert recorder.clamped == 1
