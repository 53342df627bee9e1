"""A reader that stops reading (``dbsim … | head``) leaves the command its own exit code
(sim.cli.closed_pipe): ``dbsim run | head -2`` completed its run, wrote its bundle, and exited 1
because its closing table met a closed pipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import REPO_ROOT, clean_environment, read_summary, single_bundle


def _with_reader_gone(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Runs ``python -m sim.cli ARGS`` with its stdout a pipe closed before dbsim writes to it
    (the reader went first): dbsim's exit code and its stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", *args],
        cwd=tmp_path,
        env={**clean_environment(tmp_path), "PYTHONPATH": str(REPO_ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    with process.stderr:
        stderr = process.stderr.read()
    return process.wait(timeout=120), stderr


def test_help_into_a_closed_pipe_exits_0_without_a_traceback(tmp_path: Path) -> None:
    rc, stderr = _with_reader_gone(tmp_path, "--help")
    assert (rc, stderr) == (0, "")


def test_a_run_into_a_closed_pipe_completes_its_bundle_and_exits_with_its_own_code(
    tmp_path: Path,
) -> None:
    # Paced (open loop, issue #25): the closed pipe is what is checked, not throughput.
    pace = ("--set", "load.mode=open", "--set", "load.rate_ops_s=400")
    rc, stderr = _with_reader_gone(tmp_path, "run", "--duration", "1", *pace, "-o", "runs")
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    assert read_summary(single_bundle(tmp_path / "runs"))["status"] == "completed"
