"""``dbsim run`` with the block-latency collector (root, bpftrace): its one bpftrace process runs
beside the run, and Ctrl-C (SIGINT) mid-measure ends the run with no bpftrace left behind and
the device percentiles in the interrupted bundle."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, read_summary, single_bundle, wait_for_state
from tests.integration.test_blocklatency_live import alive, bpftrace_children

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bpftrace") is None, reason="needs root and bpftrace"
    ),
]


def test_ctrl_c_mid_run_leaves_no_bpftrace_behind(dbsim: Dbsim, out_dir: Path) -> None:
    proc = dbsim.start("run", "--duration", "30", "-o", out_dir)
    wait_for_state(proc, out_dir, {"measure"})
    deadline = time.monotonic() + 15
    children: list[int] = []
    while not children and time.monotonic() < deadline:
        children = bpftrace_children(proc.pid)
        time.sleep(0.1)
    assert len(children) == 1, f"expected one bpftrace beside the run, found {children}"
    time.sleep(2.5)  # a few intervals measured once bpftrace has attached
    proc.send_signal(signal.SIGINT)
    result = dbsim.finish(proc, timeout=20)
    assert "Traceback" not in result.stderr, result.describe()
    assert not alive(children[0]), "bpftrace outlived the interrupted run"

    summary = read_summary(single_bundle(out_dir))
    assert summary["status"] == "interrupted"
    (described,) = [c for c in summary["collectors"] if c["source"] == "blocklatency"]
    assert "unavailable" not in described, described
    latency = summary["storage"].get("blocklatency") or {}
    devices = {entity.split(":")[0] for entity in latency}
    assert devices <= set(summary["storage"].get("block") or {}), summary["storage"]
    for figures in latency.values():
        if "p99_ms" in figures:
            assert 0 < figures["p50_ms"] <= figures["p99_ms"], figures
