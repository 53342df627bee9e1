"""`dbsim lab exec -- dbsim run …` runs this dbsim, whatever PATH holds (issue #19).

``sudo`` resets PATH and a checkout's ``.venv/bin`` is on nobody's, so looking ``dbsim`` up
on PATH failed with "No such file or directory" exactly where the lab guide says to use it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sim.cli.lab import exec_argv


def test_dbsim_resolves_to_the_running_dbsim_without_path() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"
    argv = exec_argv(["dbsim", "validate", str(example)])
    assert argv[0] != "dbsim"
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = "/nonexistent"  # no dbsim (and no python) to be found there
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "name: quickstart" in done.stdout.splitlines()


def test_other_commands_are_run_as_given() -> None:
    assert exec_argv(["fio", "--version"]) == ["fio", "--version"]
    assert exec_argv(["/usr/local/bin/dbsim", "run"]) == ["/usr/local/bin/dbsim", "run"]
