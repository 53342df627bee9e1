"""``dbsim sql-from-stats``'s refusals before anything is read, and --awr with a scenario
that names no target (tests/data/awr's 19c HTML report; its README says whose)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import forked_dbsim

ROOT = Path(__file__).resolve().parents[2]
AWR = ROOT / "tests" / "data" / "awr" / "awr_19c.html.gz"


def dbsim(*args: str) -> subprocess.CompletedProcess[str]:
    return forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", "sql-from-stats", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_nothing_to_read_is_refused_in_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "no-target.yaml"
    scenario.write_text("name: x\n")
    for args, line in (
        ((), "error: sql-from-stats: nothing to read: give a scenario with a target"),
        ((str(scenario),), f"error: {scenario}: no target section: give a scenario"),
    ):
        done = dbsim(*args)
        assert done.returncode == 2
        [said] = done.stderr.splitlines()
        assert said.startswith(line), said


def test_an_output_that_exists_or_has_no_directory_is_refused_before_connecting(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("mine\n")
    # Port 1 on this machine: nothing listens there; the refusal comes before any connect.
    cases = {
        mine: "exists (or is a link); dbsim writes only a new file",
        tmp_path / "no" / "x.yaml": "its directory does not exist",
    }
    for output, why in cases.items():
        done = dbsim("--target-kind", "postgres", "--port", "1", "-o", str(output))
        assert done.returncode == 2
        assert done.stderr.splitlines() == [f"error: --output {output}: {why}"]
    assert mine.read_text() == "mine\n"


def test_awr_with_a_scenario_without_target_writes_a_skeleton_without_one(
    tmp_path: Path,
) -> None:
    report = tmp_path / "awr_19c.html"
    report.write_bytes(gzip.decompress(AWR.read_bytes()))
    scenario = tmp_path / "no-target.yaml"
    scenario.write_text("name: x\n")
    out = tmp_path / "skeleton.yaml"
    done = dbsim(str(scenario), "--awr", str(report), "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(out.read_text())
    assert "target" not in data
    # The report's eight SQL Ids of SQL ordered by Executions are the dictionary's own.
    assert data["workload"]["parameters"]["statements"] == []
    assert "# The top 0 replayable of the 8 statements read, by executions" in out.read_text()
