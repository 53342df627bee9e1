"""The calibration's correction of a fio replay (sim.replay.correction) on hand-made calibration
results: the request path's ratio (the device's IOPS over fio's completed) is corrected, fio's
own pacing (completed over asked) is recorded and never applied, and a target too slow is not
corrected. No fio and no device here (tests/integration/test_replay_fio.py runs them)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from sim.replay.correction import (
    CORRECTION_BOUNDS,
    CORRECTION_MIN,
    calibration,
    correction_threshold,
    path_threshold,
    ratios,
    section,
)
from sim.replay.fiojob import ReplayJob, derive
from sim.replay.shape import Shape, Window

WRITES = 200.0  # asked, paced evenly (one size)


def _production(reads: float) -> Shape:
    """A production of ``reads`` reads/s of 8 and 64 KiB (paced as Poisson arrivals) and
    :data:`WRITES` writes/s of 8 KiB (paced evenly)."""
    window = Window(0.0, 60.0, 60.0, 60, "production")
    return Shape(window, reads, WRITES, 25.0, 8.0, {"le_8": 70, "le_64": 30}, {"le_8": 1}, 0.0, 2)


def _job(reads: float) -> ReplayJob:
    """The calibration's job: the production's at 1x, uncorrected."""
    return derive(_production(reads), 1.0)


def _run(
    fio: tuple[float, float],
    device: tuple[float, float],
    device_s: float = 9.0,
    fio_s: float = 10.0,
) -> SimpleNamespace:
    """A calibration run as sim.replay.correction reads it: fio's completed (read, write) IOPS
    over its run of ``fio_s``, the device's over the ``device_s`` of whole intervals inside."""
    window = Window(2.0, 2.0 + device_s, device_s, round(device_s), "test")
    return SimpleNamespace(
        bundle=Path("calibration"),
        shape=Shape(window, device[0], device[1], 25.0, 8.0),
        fio={"read": {"iops": fio[0], "kib": 25.0}, "write": {"iops": fio[1], "kib": 8.0}},
        window=(1.5, 1.5 + fio_s),
    )


def test_fio_overshooting_its_pacing_is_not_corrected() -> None:
    """ci5's rehearsal: the 10 s calibration's fio completed 526.3 reads/s of 501.5 asked (+5.0
    %, beyond the count's own interval) and the device saw about the same. Taken as device over
    asked (1.05) it had 1x ask 476 and the device see -6.2 %: now the path (1.00) is judged."""
    job = _job(501.5)
    read = job.directions[0]
    run = _run((526.3, WRITES), (526.0, WRITES))
    assert abs(526.0 / 501.5 - 1) > correction_threshold(read, 9.0)  # the old rule's 1.049
    assert calibration(run, job) == {}
    found = ratios(run, job)["read"]
    assert found["path"] == pytest.approx(526.0 / 526.3)
    assert found["pacing"] == pytest.approx(526.3 / 501.5)
    assert abs(found["pacing"] - 1) > found["pacing_threshold"]  # beyond chance, still not applied
    assert found["applied"] is None and found["correction"] is None
    assert "beyond its ±2.8 %, recorded, not applied" in found["why"]
    # every scale asks the capture's rate times the scale, not 5 % less
    assert derive(_production(501.5), 2.0, calibration(run, job)).directions[0].iops == 1003.0


def test_a_path_that_splits_requests_is_corrected() -> None:
    """fio completed the 500 reads/s asked and the device saw 560: requests split below fio,
    which every scale meets again, so every scale asks 1/1.12 of the capture's."""
    job = _job(500.0)
    run = _run((500.0, WRITES), (560.0, WRITES))
    assert calibration(run, job) == {"read": {"iops": pytest.approx(1.12)}}
    found = ratios(run, job)["read"]
    assert found["applied"] == "path" and found["why"].startswith("corrected by the path")
    scaled = derive(_production(500.0), 2.0, calibration(run, job))
    assert scaled.directions[0].iops == pytest.approx(1000.0 / 1.12)


def test_a_target_too_slow_is_not_corrected() -> None:
    """fio completed under 95 % of the asked: the target is too slow at 1x (fidelity says
    so), whatever the device saw."""
    job = _job(500.0)
    for device in (470.0, 560.0):
        run = _run((470.0, WRITES), (device, WRITES))
        assert calibration(run, job) == {}
        assert "the target too slow" in ratios(run, job)["read"]["why"]


def test_the_path_is_judged_beyond_its_own_noise_only() -> None:
    job = _job(500.0)
    read, write = job.directions
    assert len(read.split) > 1 and len(write.split) == 1  # Poisson-paced reads, even writes
    # The device counts fio's own requests over 9 s of its 10 s: only the last second's are a
    # draw of their own, 1.96 x sqrt(1/4500 - 1/5000) = 0.9 %, under the 2.5 % floor.
    assert path_threshold(read, 9.0, 10.0) == CORRECTION_MIN
    assert path_threshold(read, 10.0, 10.0) == CORRECTION_MIN
    slow = _job(50.0).directions[0]  # 50 reads/s: 1.96 x sqrt(1/450 - 1/500) = 2.9 %
    assert path_threshold(slow, 9.0, 10.0) == pytest.approx(1.96 * (1 / 450 - 1 / 500) ** 0.5)
    assert path_threshold(write, 9.0, 10.0) == CORRECTION_MIN
    # fio's count's own (its pacing): 5 s of 500 Poisson reads/s are +-3.92 % by chance alone
    assert correction_threshold(read, 5.0) == pytest.approx(0.0392)
    assert correction_threshold(write, 5.0) == CORRECTION_MIN  # even pacing: its schedule's
    assert correction_threshold(read, 60.0) == CORRECTION_MIN  # 30,000 reads: 1.1 % < 2.5 %
    # fio drew 3 % low and the device saw what it issued: nothing to correct; writes merged
    # 3 % below fio (paced evenly, fio completed its schedule): corrected
    run = _run((485.0, WRITES), (485.0, 194.0))
    assert calibration(run, job) == {"write": {"iops": pytest.approx(0.97)}}
    # the reads' path 2 % low: inside 2.5 %; 6 % low: corrected
    assert calibration(_run((500.0, WRITES), (490.0, WRITES)), job) == {}
    assert calibration(_run((500.0, WRITES), (470.0, WRITES)), job) == {
        "read": {"iops": pytest.approx(0.94)}
    }


def test_a_correction_is_held_to_its_bounds() -> None:
    job = _job(500.0)
    found = calibration(_run((500.0, WRITES), (1500.0, WRITES)), job)
    assert found == {"read": {"iops": CORRECTION_BOUNDS[1]}}
    assert "held to 2" in ratios(_run((500.0, WRITES), (1500.0, WRITES)), job)["read"]["why"]


def test_the_section_records_both_ratios_and_what_was_applied() -> None:
    """replay.json's calibration: the keys other readers know, and per direction both ratios,
    their thresholds, which was applied and why."""
    job = _job(501.5)
    doc = section(_run((526.3, WRITES), (526.0, 194.0)), job, 10.0)
    json.dumps(doc, allow_nan=False)
    for key in ("bundle", "seconds", "fio", "device", "correction", "thresholds", "what"):
        assert key in doc, key
    assert doc["seconds"] == 10.0 and doc["fio_seconds"] == 10.0
    assert doc["correction"] == {"write": {"iops": pytest.approx(0.97)}}
    assert doc["thresholds"] == {"read": CORRECTION_MIN, "write": CORRECTION_MIN}
    read, write = doc["ratios"]["read"], doc["ratios"]["write"]
    assert read["applied"] is None and write["applied"] == "path"
    assert read["asked_iops"] == 501.5 and read["fio_iops"] == 526.3
    assert read["device_iops"] == 526.0
    for entry in (read, write):
        assert set(entry) >= {"path", "pacing", "path_threshold", "pacing_threshold", "why"}
