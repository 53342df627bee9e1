"""R1: PostgreSQL stopped (immediate shutdown) and restarted mid-run. Sessions reconnect with
backoff, errors are counted per class, throughput comes back, and the bundle records the
outage window. A throwaway cluster of our own (never the system one on 5432).

On the Python fallback (asyncpg, ``session_runner: loop``, the engine's own reconnect): the
native libpq loop's reconnect through the same restart is test_pgloop_reconnect.py's, and
MariaDB's native one test_marialoop_reconnect.py's.

Reads only: after crash recovery PostgreSQL's first change to each page since the recovery
checkpoint writes a full-page image to the WAL, so an update-heavy mix is legitimately slower
for a while after the restart; that is the database's behaviour, not the client's recovery."""

from __future__ import annotations

import csv
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.lab.pgcluster import Cluster, as_user, pg_bin
from tests.support.pgcluster_fixture import throwaway_cluster
from tests.support.reconnect import assert_found_together, assert_outage_length

pytestmark = [pytest.mark.integration, pytest.mark.timing]
REPO = Path(__file__).resolve().parents[2]
PORT = 55441
STOP_AFTER_MEASURING_S = 5.0
OUTAGE_S = 3.0
#: Open loop at a rate far below what the sessions do (~3,900 ops/s closed loop here, alone):
#: "throughput comes back" is then the client's recovery, not the host's spare CPU. Closed
#: loop, the rate after the return was compared with the rate before it, and a CI's timing
#: phase (three other workers beside) held the ten seconds after the return to 1,533-2,904
#: ops/s against 3,923 before while every session had reconnected at once.
RATE_OPS_S = 600.0


@pytest.fixture
def cluster():  # type: ignore[no-untyped-def]
    with throwaway_cluster("r1", PORT) as made:
        yield made


def _immediate_stop(cluster: Cluster) -> None:
    argv = [str(pg_bin() / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "-w", "stop"]
    subprocess.run(as_user("postgres", argv), check=True, capture_output=True, cwd=cluster.root)


def _state(bundle_root: Path) -> str | None:
    for summary in bundle_root.glob("*/summary.json"):
        try:
            return json.loads(summary.read_text()).get("state")
        except ValueError:
            return None
    return None


def test_sessions_reconnect_after_the_server_restarts(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pg, password = cluster
    scenario = tmp_path / "r1.yaml"
    scenario.write_text(
        f"""
name: r1
target: {{kind: postgres, host: 127.0.0.1, port: {PORT}, database: postgres,
          user: postgres, password_file: {password}}}
workload: {{name: slob, parameters: {{scale: 10000, update_pct: 0, table_prefix: rone}}}}
load: {{sessions: 4, duration_s: 24, session_runner: loop, mode: open, rate_ops_s: {RATE_OPS_S:g}}}
"""
    )
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "run", str(scenario), "-o", str(out), "-q"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _state(out) != "measure":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started measuring"
            time.sleep(0.1)
        time.sleep(STOP_AFTER_MEASURING_S)
        stop_began = time.monotonic()
        _immediate_stop(pg)
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
    assert summary["session_runner"]["runner"] == "event loop", summary["session_runner"]

    windows = summary["outages"]["windows"]
    assert len(windows) == 1, summary["outages"]
    window = windows[0]
    assert_found_together(window, stop_s)
    assert window["sessions"] == 4
    # At least the time the server was down (less the stop's own wait); at most the time from
    # the stop to the server's return, measured, plus a reconnect pass (tests/support).
    assert window["duration_s"] >= OUTAGE_S * 0.8, window
    assert_outage_length(window, down_s)
    errors = {cls for op in summary["operations"].values() for cls in op["errors_by_class"]}
    assert errors, "the outage left no error classes"

    with open(bundle / "timeseries" / "ops.csv", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["phase"] == "measure"]
    per_t: dict[float, float] = {}
    for row in rows:
        per_t[float(row["t"])] = per_t.get(float(row["t"]), 0.0) + float(row["ops_s"])
    before = [v for t, v in sorted(per_t.items()) if 1.0 <= t <= window["lost_t"] - 0.5]
    back = window["restored_t"]
    after = [v for t, v in sorted(per_t.items()) if back < t <= back + 10.0]
    assert len(before) >= 2 and len(after) >= 3, per_t
    baseline = sum(before) / len(before)
    # "Returns to ≥ 90 % within 10 s": the last 3 seconds of those 10 are back. Not the best
    # stretch: open loop, the sessions first make up what the outage held back (a burst of
    # several times the rate), which would hide a session that never came back.
    recovered = sum(after[-3:]) / 3
    print(
        f"baseline {baseline:.0f} ops/s, last 3 s of the 10 s after the return {recovered:.0f} ops/s"
    )
    print(f"outage {window}; collector errors {summary['collector_errors']}")
    print("per second:", [round(v) for _, v in sorted(per_t.items())])
    # Both figures are means of one-second rates, which wander from second to second at an
    # interval's edges (the baseline's own seconds give the spread): the return is judged
    # "below 90 %" only when it is, beyond two standard errors of the difference of the two
    # means (3 seconds against len(before)).
    spread = statistics.stdev(before)
    error = 2 * math.sqrt(spread**2 / 3 + (0.9 * spread) ** 2 / len(before))
    assert recovered + error >= 0.9 * baseline, (recovered, baseline, error)
