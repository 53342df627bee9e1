"""A distributed EDA run whose last verifier looks for sessions before it verifies.

``python -m tests.support.verify_race master SCENARIO.json OUT`` runs the scenario on two
local workers (``run_distributed``, ``--json``, the bundle under ``OUT``) started as
``python -m tests.support.verify_race worker --master HOST:PORT``. In the workers, :meth:`EdaWorkload.verify` takes a turn (1: the
elected loader's load-only engine, 2 and 3: the two workers' engines, in the order they reach
it). The third waits until the second has verified, then up to ``WINDOW_S`` for a sign that a
session ran on the tree (a file written after the loader's marker, or a file or directory a
session created); what it saw before its own verify goes to ``sessions-before-verify`` in
``$VERIFY_RACE_DIR``. A session that writes while a worker still verifies is the race of a
distributed EDA run that failed "0 bytes, expected 16384 (load the trees first)": the check
saw a data file a session had just truncated to rewrite it. Widened here so it is seen every
time, not once in a while on a loaded host.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# Before asyncio (which imports ssl) and anything of dbsim: gevent patches the process here.
import sim.locust  # noqa: F401

WINDOW_S = 5.0  # after the second verify: sessions started by then are (old code) seen
WAIT_FOR_SECOND_S = 60.0
POLL_S = 0.05
SCAN_EVERY_S = 0.25  # each look scans every file of the trees
FOUND = "sessions-before-verify"


def _turn(flags: Path) -> int:
    for n in (1, 2, 3, 4, 5):
        try:
            os.close(os.open(flags / f"turn-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue
        return n
    return 6


def _session_traces(root: Path) -> list[str]:
    """What a session leaves on the loaded trees: files newer than the marker (the loader
    wrote it after every data file), files and directories a session created."""
    from workloads.eda.tree import CREATED_PREFIX, MARKER, SCRATCH_PREFIX

    loaded_ns = (root / MARKER).stat().st_mtime_ns
    found = []
    for path in sorted(root.rglob("*")):
        if path.name.startswith((CREATED_PREFIX, SCRATCH_PREFIX)):
            found.append(f"{path}: created by a session")
        elif path.is_file() and path.name != MARKER and path.stat().st_mtime_ns > loaded_ns:
            found.append(f"{path}: written after the load")
    return found


def _patch_verify(flags: Path) -> None:
    from workloads.eda.workload import EdaWorkload

    original = EdaWorkload.verify

    async def verify(self: EdaWorkload) -> dict[str, Any]:
        turn = _turn(flags)
        if turn == 3:
            await _look_for_sessions(self.root, flags)
        try:
            return await original(self)
        finally:
            (flags / f"verified-{turn}").touch()

    EdaWorkload.verify = verify  # type: ignore[method-assign]


async def _look_for_sessions(root: Path, flags: Path) -> None:
    import asyncio

    deadline = time.monotonic() + WAIT_FOR_SECOND_S
    while not (flags / "verified-2").exists() and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    deadline = time.monotonic() + WINDOW_S
    while time.monotonic() < deadline:
        found = _session_traces(root)
        if found:
            (flags / FOUND).write_text("\n".join(found) + "\n", encoding="utf-8")
            return
        await asyncio.sleep(SCAN_EVERY_S)


def main(argv: list[str]) -> int:
    flags = Path(os.environ["VERIFY_RACE_DIR"])
    if argv[0] == "worker":
        _patch_verify(flags)
        from sim.cli.entry import main as dbsim

        return dbsim(argv)
    from sim.config.resolve import validate
    from sim.locust.distributed import run_distributed

    data = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    data["output"] = {"directory": argv[2]}  # what ``dbsim run -o`` sets
    scenario = validate(data)
    command = [sys.executable, "-m", "tests.support.verify_race"]
    return run_distributed(scenario, workers=2, as_json=True, worker_command=command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
