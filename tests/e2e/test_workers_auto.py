"""``dbsim run --workers auto`` on a file tree: spread over one local worker per CPU (at most
one per session), one load, one merged bundle with exact counts (sim.core.workers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Dbsim, read_summary, single_bundle

pytestmark = pytest.mark.e2e

LOOPS = 100  # transactions per session


def test_a_closed_file_loop_is_spread_over_the_cpus(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path
) -> None:
    scenario = tmp_path / "eda.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "auto",
                "target": {"kind": "filetree", "path": str(tmp_path / "tree")},
                "workload": {
                    "name": "eda",
                    "parameters": {
                        "component": "EDA_FRONTEND",
                        "frontend": {"processes_per_job_set": 2, "mix": {"stat": 90, "access": 10}},
                    },
                },
                # A fixed count per session, not 2 s of a closed loop on every CPU (~2 CPU-s
                # a second, spent on nothing checked): the merged counts are then known exactly.
                "load": {"mode": "closed", "loops_per_session": LOOPS, "warmup_s": 0.5},
                "output": {"directory": str(out_dir)},
            }
        )
    )
    result = dbsim("run", scenario, "--workers", "auto", "--json", timeout=180)
    assert result.rc == 0, result.describe()
    expected = min(os.cpu_count() or 1, 2)
    summary = read_summary(single_bundle(out_dir))
    if expected < 2:
        assert "no worker processes" in result.stderr
        assert "distributed" not in summary
        return
    assert f"--workers auto: {expected} worker processes" in result.stderr
    workers = summary["distributed"]["workers"]
    assert len(workers) == expected
    assert summary["status"] == "completed" and summary["mix"]["exact"] is True
    merged = {op: v["count"] for op, v in summary["operations"].items()}
    summed: dict[str, int] = {}
    for worker in workers:
        for op, v in worker["operations"].items():
            summed[op] = summed.get(op, 0) + v["count"]
    assert merged == summed and merged["stat"] > 0
    assert sum(merged.values()) == LOOPS * summary["sessions"]
    assert merged == summary["mix"]["expected_by_rule"]
    for worker in workers:
        assert sum(v["count"] for v in worker["operations"].values()) == LOOPS * worker["sessions"]
