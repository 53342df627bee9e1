"""The suite's forked ``dbsim`` (tests/support/forked_dbsim.py) behaves as the exec'd one: the
same exit code, stdout and stderr for a success, a refusal and a usage error, the same death by
a signal, and the shell's view through the docs' PATH shim. Every e2e test relies on it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import forked_dbsim

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "examples" / "quickstart.yaml")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env["TMPDIR"] = str(tmp)
    return env


@pytest.mark.parametrize(
    "argv",
    [["validate", QUICKSTART], ["validate", "/no/such/scenario.yaml"], ["run", "--no-such-option"]],
    ids=["success", "refusal", "usage"],
)
def test_a_forked_command_answers_as_the_execd_one(argv: list[str], tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "sim.cli", *argv]
    kwargs = {"cwd": tmp_path, "env": _env(tmp_path), "text": True}
    execd = subprocess.run(cmd, timeout=60, check=False, capture_output=True, **kwargs)  # type: ignore[call-overload]
    # ForkedPopen itself, not forked_dbsim.run: with DBSIM_TEST_EXEC_CLI=1 that would exec,
    # and this would compare the exec'd command with itself.
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with forked_dbsim.ForkedPopen(cmd, **pipes, **kwargs) as forked:
        out, err = forked.communicate(timeout=60)
    assert (forked.returncode, out, err) == (execd.returncode, execd.stdout, execd.stderr)
    assert forked_dbsim.children_cpu_s() > 0


def test_a_forked_command_is_a_process_of_its_own_that_signals_reach(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "sim.cli", "run", "--duration", "60", "-q", "-o", "out"]
    proc = forked_dbsim.ForkedPopen(
        cmd, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.pid not in (os.getpid(), os.getppid())
    deadline = time.monotonic() + 30
    while not list((tmp_path / "out").glob("*/summary.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_the_shells_dbsim_exits_as_the_command_did(tmp_path: Path) -> None:
    shim = tmp_path / "bin"
    shim.mkdir()
    forked_dbsim.write_shim(shim / "dbsim", REPO / ".venv" / "bin" / "dbsim")
    env = _env(tmp_path)
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    script = (
        "dbsim validate /no/such.yaml; echo rc=$?; "
        "dbsim run --duration 60 -q -o out & sleep 3; kill -TERM $!; wait $!; echo rc=$?"
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines()[0] == "rc=2", done.stdout + done.stderr
    assert "error: /no/such.yaml: no such scenario file" in done.stderr
    # A run stopped by SIGTERM exits 143 after writing its bundle (sim/cli/entry.py).
    assert done.stdout.splitlines()[-1] == "rc=143", done.stdout + done.stderr
    assert list((tmp_path / "out").glob("*/summary.json"))
