"""Locust master + 2 local workers on loopback: one merged bundle, exact counts, a lost worker.

``python -m sim.locust run --workers 2`` (the ``dbsim run --workers 2`` command) is run as a
child process; its workers are its own children, ``python -m sim.locust worker --master
127.0.0.1:<port>``. Each worker prints one ``dbsim-worker-report {json}`` line on stderr with
the operations its own engine counted; the merged bundle must hold exactly their sum. Every
child is bounded in time and killed at teardown if still there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REPORT_PREFIX = "dbsim-worker-report "
RUN_TIMEOUT_S = 150.0
BLOCKED = "appears to be blocked"  # gevent's monitor thread report


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim.locust", *args]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env["TMPDIR"] = str(tmp)  # the workers' temporary SQLite databases
    # gevent's monitor thread in the master and every worker: any 100 ms block is reported.
    env.update(GEVENT_MONITOR_THREAD_ENABLE="true", GEVENT_MAX_BLOCKING_TIME="0.1")
    return env


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started by a test; killed (with their children) if still running."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    psutil = pytest.importorskip("psutil")
    for proc in procs:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
        proc.communicate(timeout=30)


def _worker_reports(stderr: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(REPORT_PREFIX) :])
        for line in stderr.splitlines()
        if line.startswith(REPORT_PREFIX)
    ]


def _summary(out: Path) -> dict[str, Any]:
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    data: dict[str, Any] = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    data["bundle"] = str(bundle)
    return data


def _counts(operations: dict[str, Any]) -> dict[str, int]:
    return {
        op: v["count"] + v["errors"] for op, v in operations.items() if v["count"] + v["errors"]
    }


def test_merged_counts_equal_the_sum_of_the_workers_exactly(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    out = tmp_path / "runs"
    args = ["run", "--workers", "2", "--sessions", "4", "--duration", "6", "-o", str(out), "--json"]
    proc = subprocess.Popen(
        _command(*args),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(proc)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, stderr[-4000:]
    assert BLOCKED not in stderr, stderr[-4000:]
    summary = json.loads(stdout)
    assert summary["status"] == "completed"

    reports = _worker_reports(stderr)
    assert len(reports) == 2, stderr[-4000:]
    assert {r["run"] for r in reports} == {summary["distributed"]["run_id"]}
    assert sorted(r["sessions"] for r in reports) == [2, 2]
    expected: dict[str, int] = {}
    for report in reports:
        for op, value in report["operations"].items():
            expected[op] = expected.get(op, 0) + value["count"] + value["errors"]
    expected = {op: n for op, n in expected.items() if n}

    # The merged totals, the per-worker breakdown and Locust's own table all agree, exactly.
    assert _counts(summary["operations"]) == expected
    per_worker = {w["index"]: _counts(w["operations"]) for w in summary["distributed"]["workers"]}
    assert {r["worker_index"]: _counts(r["operations"]) for r in reports} == per_worker
    assert summary["distributed"]["locust_requests"] == expected
    assert summary["distributed"]["lost"] == []
    assert summary["sessions"] == 4
    assert summary["mix"]["exact"] is True  # SLOB's rule holds per worker, so for the sum

    bundle = Path(summary["bundle"])
    assert (bundle / "report.html").is_file()
    assert (bundle / "histograms" / "measured.json").is_file()
    measured = json.loads((bundle / "histograms" / "measured.json").read_text(encoding="utf-8"))
    assert {op: v["count"] for op, v in measured.items()} == {
        op: summary["operations"][op]["count"] for op in measured
    }
    # The time series is the merged one: interval by interval, the sum of both workers.
    rows = (bundle / "timeseries" / "ops.csv").read_text(encoding="utf-8").splitlines()[1:]
    counted = sum(int(r.split(",")[6]) for r in rows if r.split(",")[2] == "measure")
    assert counted == sum(summary["operations"][op]["count"] for op in summary["operations"])
    # One view of the shared disk per host, not one per worker.
    block = (bundle / "timeseries" / "block.csv").read_text(encoding="utf-8").splitlines()[1:]
    keys = [(line.split(",")[1], line.split(",")[3]) for line in block]  # (interval, device)
    assert keys and len(keys) == len(set(keys))


def _wait_for_intervals(out: Path, proc: subprocess.Popen[str], count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the master exited early"
        for summary in out.glob("*/summary.json"):
            try:
                if json.loads(summary.read_text(encoding="utf-8"))["intervals_written"] >= count:
                    return
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.2)
    pytest.fail(f"the bundle did not reach {count} intervals within {timeout} s")


def test_a_killed_worker_is_recorded_and_the_run_completes(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    psutil = pytest.importorskip("psutil")
    out = tmp_path / "runs"
    args = ["run", "--workers", "2", "--sessions", "4", "--duration", "20", "-o", str(out), "-q"]
    proc = subprocess.Popen(
        _command(*args),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(proc)
    _wait_for_intervals(out, proc, 2, timeout=60)
    workers = [p for p in psutil.Process(proc.pid).children() if "worker" in " ".join(p.cmdline())]
    assert len(workers) == 2
    victim = workers[0]
    os.kill(victim.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, stderr[-4000:]
    assert BLOCKED not in stderr, stderr[-4000:]

    summary = _summary(out)
    assert stdout.strip() == summary["bundle"]
    assert summary["status"] == "completed"
    distributed = summary["distributed"]
    (lost,) = distributed["lost"]
    assert "no heartbeat" in lost["reason"]
    assert any("was lost" in message for message in summary.get("messages", []))
    rows = {w["index"]: w for w in distributed["workers"]}
    assert rows[lost["index"]]["status"] == "lost"
    (survivor_report,) = _worker_reports(stderr)
    survivor = rows[survivor_report["worker_index"]]
    assert survivor["status"] == "completed"
    assert _counts(survivor["operations"]) == _counts(survivor_report["operations"])
    # What the lost worker sent before it died is counted, and nothing else.
    total: dict[str, int] = {}
    for row in rows.values():
        for op, n in _counts(row["operations"]).items():
            total[op] = total.get(op, 0) + n
    assert _counts(summary["operations"]) == total
    assert lost["operations_counted"] == {
        op: v["count"] for op, v in rows[lost["index"]]["operations"].items()
    }
    assert "exact" not in summary["mix"]  # no rule can be checked over a partial worker
    assert (Path(summary["bundle"]) / "report.html").is_file()
