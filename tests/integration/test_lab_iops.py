"""Acceptance: load asked in device IOPS (``load.steps[].rate_iops``) on the lab device is
delivered within 15 % of what was asked, for rates below the device's read-IOPS ceiling.

The session's ground-truth lab, shared with test_ground_truth (tests/integration/conftest.py;
always taken down): a loop device with
ext4 under a 600 read-IOPS ceiling, a throwaway PostgreSQL cluster in the lab's groups (16 MB
shared_buffers, 128 MiB memory limit) and the SLOB table of 80,000 one-row blocks (each read
statement costs ~62 device reads). The page cache is first filled to its steady state (a
short run without a ceiling), since a calibration on a cold cache overstates the I/Os per
operation of the steps that follow. The run calibrates closed loop (4 sessions, 8 s, at the
ceiling), then runs open loop at 150, 300 and 450 IOPS asked, converted to ops/s through the
measured device I/Os per operation; each step's delivered device IOPS on the loop device
(``stages[].delivered_iops``) must be within the tolerance :func:`tolerance` derives from what
the figure is made of: the calibration's own 95 % interval and the I/Os of the operations in
flight at the step's edges (on the lab with other suites beside it: 22-28 %; the steps landed
at -5 % to +1 % at 150 IOPS and -16 % at 450, and a CI run once at +20 % at 150, when the
tolerance was a flat 15 %).

Runs go through the real CLI (``--skip-load``); ``-s`` prints requested against delivered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_ground_truth import (
    GroundLab,
    _summary,
)

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

CEILING = 600
ASKED = (150.0, 300.0, 450.0)
#: 8 calibration intervals of ~9 operations at the ceiling pin the I/Os per operation within
#: this (measured: 95 % intervals of ±16-17 % of the estimate).
MAX_CALIBRATION_HALF_WIDTH = 0.25
CALIBRATION_S = 8.0
STEP_S = 8.0
WARM_S = 6.0


@pytest.fixture(scope="module")
def iops_lab(ground_lab: GroundLab) -> GroundLab:
    """The session's ground-truth lab (tests/integration/conftest.py), shared with
    test_ground_truth: its set-up (lab up, initdb, the 80,000-row load) is ~17 s."""
    return ground_lab


def _warm_cache(lab: GroundLab) -> None:
    """Fill the lab's page cache to its steady state before the run: without a ceiling the
    loop device answers at memory speed, so a few seconds read the cache full. Calibrated on
    a cold cache, the I/Os per operation fall as the cache fills (measured: 65.3 per op at
    calibration, then 138, 268, 365 IOPS delivered for 150, 300, 450 asked)."""
    lab.cold_cache()
    assert lab.lab.set_ceiling(read_iops=0)["read_iops"] in (0, None)
    warm = lab.write_scenario("lab-iops-warm", {"sessions": 4, "duration_s": WARM_S})
    lab.cli("run", str(warm), "-o", str(lab.runs), "--skip-load", "-q")


def tolerance(calibration: dict[str, Any], asked: float) -> float:
    """How far a step's delivered device IOPS may be from those asked, as a share of them.

    The step runs at ``asked / io_per_op`` ops/s, so it delivers ``asked`` times the step's
    own I/Os per operation over the estimate's: the calibration's relative 95 % interval is
    the conversion's error, as the product states it. Then the step's edges: the I/Os of the
    operations in flight when it starts are counted in it and those of its last ones are not,
    up to one operation each, ``2 * io_per_op`` I/Os over the step (11 % of a 150-IOPS step of
    8 s at ~66 I/Os per operation, 4 % at 450). Per-operation variation (cache hits among
    ~63 block reads, binomial) is ~1 % over the ~18 operations of the smallest step."""
    low, high = calibration["ci95"]
    io = calibration["io_per_op"]
    return (high - low) / 2 / io + 2 * io / (asked * STEP_S)


def test_device_iops_asked_are_delivered_below_the_ceiling(iops_lab: GroundLab) -> None:
    _warm_cache(iops_lab)
    assert iops_lab.lab.set_ceiling(read_iops=CEILING)["read_iops"] == CEILING
    path = iops_lab.write_scenario(
        "lab-iops",
        {
            # Open loop needs free sessions when an operation is due: under the ceiling, 4
            # streams share 600 IOPS, an operation of ~60 reads takes ~0.4 s, and at 450 IOPS
            # asked (7.7 ops/s) 4 sessions were ~77 % busy, so operations waited for a session
            # and the step's backlog ran past its end (387.9 of 450 delivered in one CI run).
            # 8 sessions are ~40 % busy at that step.
            "sessions": 8,
            "mode": "open",
            "calibration_s": CALIBRATION_S,
            "warmup_s": 2.0,
            "steps": [{"duration_s": STEP_S, "rate_iops": asked} for asked in ASKED],
        },
    )
    out = iops_lab.cli("run", str(path), "-o", str(iops_lab.runs), "--skip-load", "-q")
    summary = _summary(Path(out.stdout.strip().splitlines()[-1]))
    assert summary["status"] == "completed", summary.get("error")
    calibration = summary["calibration"]
    print(f"\n{calibration['line']}\n  points (ops, s, device I/Os): {calibration['points']}")
    assert calibration["device"] == iops_lab.device, calibration
    low, high = calibration["ci95"]
    assert low <= calibration["io_per_op"] <= high
    assert (high - low) / 2 <= MAX_CALIBRATION_HALF_WIDTH * calibration["io_per_op"], calibration
    # SLOB on one-row blocks: ~62 device reads per statement (the ground-truth module's T2).
    assert 40 <= calibration["io_per_op"] <= 80, calibration
    assert calibration["intervals"] >= CALIBRATION_S - 1
    steps = [s for s in summary["stages"] if s["phase"] == "measure"]
    assert [s["rate_iops"] for s in steps] == list(ASKED)
    for stage in steps:
        asked, got = stage["rate_iops"], stage["delivered_iops"]
        print(f"  step {stage['step'] + 1}: {asked:.0f} IOPS asked, {got} delivered "
              f"({stage['rate_ops_s']:.2f} ops/s offered)")  # fmt: skip
        assert stage["rate_ops_s"] == pytest.approx(asked / calibration["io_per_op"])
        assert stage["calibration_device"] == iops_lab.device
        allowed = tolerance(calibration, asked)
        assert abs(got - asked) <= allowed * asked, (
            f"step {stage['step'] + 1}: {got} IOPS delivered, not {asked:.0f} ± {allowed:.0%}"
        )
