"""The lab's servers run ahead of the host's other work in their session group too
(storage.lab.system.run_session_ahead): under the kernel's autogroup scheduling a process's
nice ranks it only inside its session, so a detached server's group gets the nice as well —
and never the caller's session, whose group holds whatever else the user runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.lab import system

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/proc/self/autogroup").exists(),
    reason="needs root and a kernel with autogroup scheduling",
)

READ_SELF = (
    "print(open('/proc/self/autogroup').read().split()[-1], os.getpriority(os.PRIO_PROCESS, 0))"
)


def _own(text: str) -> tuple[int, int]:
    group, nice = text.split()
    return int(group), int(nice)


def test_a_child_in_a_session_of_its_own_runs_ahead_in_both() -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import os; {READ_SELF}"],
        preexec_fn=system.start_session_ahead(system.DATABASE_NICE),
        capture_output=True,
        text=True,
        check=True,
    )
    assert _own(done.stdout) == (system.DATABASE_NICE, system.DATABASE_NICE)


def test_the_callers_session_is_never_changed() -> None:
    before = Path("/proc/self/autogroup").read_text()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        # The child shares the test's session: raising its group would raise the caller's.
        assert system.run_session_ahead(child.pid, system.ARRAY_NICE) is False
    finally:
        child.kill()
        child.wait()
    assert Path("/proc/self/autogroup").read_text() == before


def test_a_process_that_has_gone_changes_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    child.wait()
    assert system.run_session_ahead(child.pid, system.ARRAY_NICE) is False
