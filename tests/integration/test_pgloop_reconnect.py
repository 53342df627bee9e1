"""The native libpq loop through a server restart (issue #33): a throwaway cluster of our own
on a free port (password auth), stopped with an immediate shutdown mid-run and started again.
The run must say it ran natively, log one outage window of every session, count the lost
operations under an error class, mask the password, and run again after the return.

Marked timing: it waits for the run to measure and for an outage of OUTAGE_S seconds."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.lab.pgcluster import as_user, pg_bin
from storage.targets import pgloop
from tests.support.pgcluster_fixture import throwaway_cluster
from tests.support.reconnect import assert_found_together, assert_outage_length

pytestmark = [pytest.mark.integration, pytest.mark.timing]
REPO = Path(__file__).resolve().parents[2]
SESSIONS = 3
MEASURE_BEFORE_STOP_S = 3.0
OUTAGE_S = 2.0


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    if os.environ.get(pgloop.SWITCH) == "0":
        pytest.skip(f"!!! NOT RUN on the native loop: {pgloop.unavailable()}")
    if pgloop.unavailable():
        pytest.fail(f"the native loop is not built here: {pgloop.unavailable()}")
    with throwaway_cluster("pgloop") as made:
        yield made


def _summary(out: Path) -> dict[str, object] | None:
    for path in out.glob("*/summary.json"):
        try:
            return dict(json.loads(path.read_text()))
        except ValueError:
            return None
    return None


def test_native_sessions_reconnect_after_the_server_restarts(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pg, password = cluster
    scenario = tmp_path / "pgloop_r1.yaml"
    scenario.write_text(
        f"""
name: pgloop_r1
target: {{kind: postgres, host: 127.0.0.1, port: {pg.port}, database: postgres,
          user: postgres, password_file: {password}}}
workload: {{name: slob, parameters: {{scale: 10000, update_pct: 0, table_prefix: pgr}}}}
load: {{sessions: {SESSIONS}, duration_s: 14, session_runner: native}}
"""
    )
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "run", str(scenario), "-o", str(out), "-q"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while (_summary(out) or {}).get("state") != "measure":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started measuring"
            time.sleep(0.1)
        time.sleep(MEASURE_BEFORE_STOP_S)
        stop_began = time.monotonic()
        stop = [str(pg_bin() / "pg_ctl"), "-D", str(pg.data), "-m", "immediate", "-w", "stop"]
        subprocess.run(as_user("postgres", stop), check=True, capture_output=True, cwd=pg.root)
        stop_s = time.monotonic() - stop_began
        time.sleep(OUTAGE_S)
        pg.start([])  # returns once the server accepts connections, crash recovery done
        down_s = time.monotonic() - stop_began
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    bundle = Path(stdout.strip().splitlines()[-1])
    summary = json.loads((bundle / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["session_runner"]["runner"] == "native", summary["session_runner"]
    windows = summary["outages"]["windows"]
    assert len(windows) == 1, summary["outages"]
    window = windows[0]
    assert_found_together(window, stop_s)
    assert window["sessions"] == SESSIONS
    # At least the time the server was down (less the stop's own wait); at most the time from
    # the stop to the server's return, measured, plus a reconnect pass (tests/support).
    assert window["duration_s"] >= OUTAGE_S * 0.8, window
    assert_outage_length(window, down_s)
    errors = {
        cls: message
        for op in summary["operations"].values()
        for cls, message in op.get("error_examples", op["errors_by_class"]).items()
    }
    print("error classes:", errors)
    assert errors, "the outage left no error classes"
    secret = password.read_text().strip()
    assert secret not in json.dumps(summary)
    with open(bundle / "timeseries" / "ops.csv", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["phase"] == "measure"]
    after = [float(r["ops_s"]) for r in rows if float(r["t"]) > window["restored_t"] + 1]
    assert after and max(after) > 0, rows
