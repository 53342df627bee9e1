"""Fixtures shared by several integration modules.

``ground_lab``: the ground-truth lab (a loop device under IOPS ceilings, a throwaway
PostgreSQL in the lab's groups and the SLOB table of 80,000 one-row blocks, loaded,
verified, vacuumed and checkpointed). Building it takes ~17 s of the serial phase (lab up,
initdb, the load), so the modules that measure against it (test_ground_truth,
test_lab_iops, and test_replay_db as its replay target) share one per session instead of one
each. Every test that uses it sets the ceiling it measures against and empties the lab's cache
itself, so no state crosses from one module to the next (the replay checkpoints what its
calibration loaded). Its users are timing tests (make test's timing phase), whose modules are
units of their own there (tests/support/xdist_scopes.py): a worker that runs two of them
builds one lab and runs its tests one at a time, so the lab is never used by two tests at
once; workers that run them beside each other build a lab each, on ports of their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_ground_truth import (
    KEEP_ENV,
    GroundLab,
    _require_lab,
    private_ground_lab,
)
from tests.integration.test_lab import _free_port


@pytest.fixture(scope="session")
def ground_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroundLab]:
    """The session's ground-truth lab; always taken down. Scenarios and bundles are kept in
    pytest's temporary directory (or the directory ``DBSIM_GROUND_TRUTH_DIR`` names) for inspection."""
    _require_lab()
    keep = os.environ.get(KEEP_ENV)
    runs = Path(keep) if keep else tmp_path_factory.mktemp("ground-truth")
    # A port per worker: two workers building their labs at once would both find 55442 free.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    port = _free_port(55442 + 100 * int(worker) if worker.isdigit() else 55442)
    with private_ground_lab("dbsim-gt-", "ground-truth", runs, port) as ground:
        settings = ground.sql("SHOW track_io_timing", "SHOW autovacuum", "SHOW shared_buffers")
        assert settings == ["on", "off", "16MB"], settings
        yield ground
