"""Acceptance: a sweep on the lab device with a known ceiling reports the highest SLO-meeting
load at the ceiling (± 10 %) — the correlation issue's "what load can this storage carry".

A private lab like the ground-truth module's (its own state directory, image directory, mount
point, lab/cgroup name ``dbsim-sweep-<pid>`` and port; always taken down), built with that
module's helpers: a loop device with ext4 under a 500 read-IOPS ceiling, a throwaway
PostgreSQL cluster in the lab's groups (16 MB shared_buffers, 128 MiB memory limit) and the
SLOB table of 80,000 one-row blocks, loaded with ``dbsim load``.

The scenario: SLOB read-only with T2's think time, ``load.sweep`` over sessions 1, 2, 4, 8, 16
(``factor: 2``, ``stop_on_breach``), and the SLO a DBA would set from T2's figures — read p99
at most 0.6 s. T2 measured p99 ≈ 0.10 s at 150 IOPS (1 session), 0.17 s at 300 (2), 0.31 s at
the 500-IOPS ceiling (4 sessions, which ask for ~750) and 0.8-1.9 s beyond (8, 16: the
requests queue in the throttle); this module measured 0.40 s at 4 sessions and 0.97 s at 8.
0.6 s sits between 4 and 8 sessions, so the sweep should break at 8 sessions and answer
4 sessions at ~500 device IOPS. A storage SLO names the lab's loop device (``device:``), so
every point's storage figures are read on it; its limit (await ≤ 20 ms: the loop device
answers from the host's page cache, blk-throttle queues above it) always holds, so only the
latency SLO decides.

Exit code: some load met every SLO (step 1), so ``dbsim run`` exits **0** even though the
sweep stopped on a breach (docs/validation.md: 1 only when even the first step missed one).

Runs go through the real CLI (``--skip-load``); ``-s`` prints the sweep's points.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_ground_truth import (
    T2_THINK,
    WARMUP_S,
    GroundLab,
    _free_port,
    _require_lab,
    _summary,
    private_ground_lab,
)

pytestmark = [pytest.mark.integration, pytest.mark.root]

CEILING = 500
TOLERANCE = 0.10
P99_LIMIT_US = 600_000  # 0.6 s: above 0.31-0.40 s at the ceiling (4 sessions), below 0.8 s beyond
AWAIT_LIMIT_MS = 20.0
STEP_S = 8.0
SESSIONS = (1, 2, 4, 8, 16)
EXPECTED_HIGHEST = 4  # the first step that reaches the ceiling; 8 sessions queue past the SLO


@pytest.fixture(scope="module")
def sweep_lab() -> Iterator[GroundLab]:
    """A private lab with PostgreSQL and the SLOB table loaded; always taken down."""
    _require_lab()
    runs = Path(tempfile.mkdtemp(prefix="dbsim-sweep-runs-"))
    try:
        with private_ground_lab("dbsim-sweep-", "lab-sweep", runs, _free_port(55462)) as ground:
            yield ground
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def _print_sweep(sweep: dict[str, Any], exit_code: int) -> None:
    print(f"\nlab sweep (ceiling {CEILING} read IOPS, read p99 ≤ {P99_LIMIT_US / 1e6:g} s), "
          f"device {sweep['device']}, exit {exit_code}")  # fmt: skip
    for p in sweep["points"]:
        iops, p99 = p["device_iops"], p["p99_us"]
        print(
            f"  {p['label']}: {p['sessions']:>2} sessions  "
            f"{'-' if iops is None else f'{iops:6.1f}'} IOPS  "
            f"p99 {'-' if p99 is None else f'{p99 / 1e6:.3f} s'}  "
            f"complete {p['complete']}  slo_met {p['slo_met']}"
        )
    hp = sweep["highest_passing"]
    print(
        f"  highest passing: {hp and hp['sessions']} sessions, "
        f"{sweep['device_iops_at_highest_passing']} IOPS; "
        f"first breach: {sweep['first_breach'] and sweep['first_breach']['label']}"
    )


def test_sweep_reports_the_highest_slo_meeting_load_at_the_ceiling(sweep_lab: GroundLab) -> None:
    assert sweep_lab.lab.set_ceiling(read_iops=CEILING)["read_iops"] == CEILING
    path = sweep_lab.write_scenario(
        "lab-sweep-500",
        {
            "warmup_s": WARMUP_S,
            "think": T2_THINK,
            "sweep": {
                "vary": "sessions",
                "start": SESSIONS[0],
                "factor": 2,
                "max": SESSIONS[-1],
                "step_duration_s": STEP_S,
                "stop_on_breach": True,
            },
        },
    )
    scenario = yaml.safe_load(path.read_text())
    scenario["slos"] = [
        {"name": "read latency", "op": "read", "p99_us_max": P99_LIMIT_US},
        {"name": "lab device", "device": sweep_lab.device, "await_ms_max": AWAIT_LIMIT_MS},
    ]
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))

    # GroundLab.run asserts exit 0 (some load met every SLO), a complete bundle and "completed".
    bundle = sweep_lab.run(path)
    summary = _summary(bundle)
    sweep = summary["sweep"]
    _print_sweep(sweep, 0)

    assert sweep["device"] == sweep_lab.device, sweep["device"]
    assert [p["sessions"] for p in sweep["points"]] == list(SESSIONS[: len(sweep["points"])])
    hp = sweep["highest_passing"]
    breach = sweep["first_breach"]
    assert hp is not None, "no step met the SLOs"
    assert breach is not None, "no step broke the p99 SLO: the ceiling never showed"
    # The highest passing load is the last step before the breach, and every step below it met
    # the SLOs.
    assert hp["step"] == breach["step"] - 1, (hp["label"], breach["label"])
    assert all(p["slo_met"] for p in sweep["points"][: hp["step"] + 1])
    assert summary["slos"]["met"] is True
    assert hp["sessions"] == EXPECTED_HIGHEST, hp
    iops = sweep["device_iops_at_highest_passing"]
    assert iops == hp["device_iops"]
    assert abs(iops - CEILING) <= TOLERANCE * CEILING, (
        f"device IOPS at the highest passing load {iops:.1f}, not {CEILING} ± 10 %"
    )
