"""Locust master + 2 local workers on loopback: one merged bundle, exact counts, a lost worker,
SLOs judged on the merged bundle (exit 0 met, 1 missed) and sweeps refused up front (exit 2).

``dbsim run --workers 2`` is run as a child process, forked from the pytest worker's zygote
(tests/support/forked_dbsim.py: ``python -m sim.cli`` with its imports made, ~0.8 CPU-s a run
less than an exec'd ``python -m sim.locust``; it imports Locust, as the installed ``dbsim``
does, when it reaches ``--workers``); its workers are its own children, exec'd by the product:
``python -m sim.locust worker --master 127.0.0.1:<port>``. Each worker prints one
``dbsim-worker-report {json}`` line on stderr with the operations its own engine counted; the
merged bundle must hold exactly their sum. Every child is bounded in time and killed at
teardown if still there.

Each run starts three processes that import Locust, gevent and the run's machinery (about 6
CPU-s a run before its first operation), so a run serves every check that needs the same
outcome: the exact merged counts and the SLOs met on the merged bundle (exit 0) are one run
(issue #25: what test_slos_met_on_the_merged_bundle_exit_0 checked is asserted there), and so
are garbage on its worker port while it measures (formerly a run of its own in
tests/e2e/test_worker_port.py) and the array sampled by one worker only (formerly
tests/integration/test_distributed_ontap.py). And the sessions think 20 ms between
transactions (``PACED``): closed-loop SQLite sessions with no think time each take all the CPU
they can get (a worker 0.6-0.8 CPU-s a second of run), and nothing
here is about throughput — the counts, their merge and the verdicts hold at any rate.
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

from sim import registry
from tests.support import forked_dbsim
from tests.support.gevent_reports import hub_blocks_in_dbsim, hub_monitor_env
from tests.support.ontap_replay import Entity, OntapReplay
from tests.support.worker_port_garbage import check_drop_lines, local_master_port, send_garbage
from tests.support.worker_reports import worker_reports

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REPORT_PREFIX = "dbsim-worker-report "
RUN_TIMEOUT_S = 150.0
#: A bound for a hang, not a measurement: the first interval of a run comes after its three
#: processes' start-up, which took over 60 s beside a loaded host (load average 22 on 2 CPUs).
START_TIMEOUT_S = 120.0
#: Think time between transactions (SLOB's THINK_TM): a few hundred operations a second in all.
PACED = ["--set", "load.think={min_ms: 20, max_ms: 20}"]
#: The recorded ONTAP replay's login and its one volume (tests/support/ontap_replay.py).
ONTAP_USER, ONTAP_PASSWORD = "monitor", "Repl4y-s3cret!"
VOL_DATA = Entity(
    "volume", "svm1", "vol_data", "a1", (500, 250, 50), (200, 400, 100), (8192, 16384, 0)
)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim.cli", *args]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env.update(extra)
    env["TMPDIR"] = str(tmp)  # the workers' temporary SQLite databases
    # gevent's monitor thread in the master and every worker: any 100 ms block is reported
    # (stretched beside make test's parallel workers: tests/support/gevent_reports.py).
    env.update(hub_monitor_env(0.1))
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


def _start_master(
    tmp_path: Path, started: list[subprocess.Popen[str]], *args: str, **env: str
) -> subprocess.Popen[str]:
    """``dbsim ARGS`` as a child, forked where it can be (registered with ``started`` for
    clean-up)."""
    proc = forked_dbsim.popen(
        _command(*args),
        cwd=tmp_path,
        env=_env(tmp_path, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(proc)
    return proc


def _run_master(
    tmp_path: Path, started: list[subprocess.Popen[str]], *args: str
) -> tuple[int, str, str]:
    """``dbsim ARGS`` to its end: exit code, stdout, stderr."""
    proc = _start_master(tmp_path, started, *args)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    return proc.returncode, stdout, stderr


def _worker_reports(stderr: str) -> list[dict[str, Any]]:
    return worker_reports(stderr)


def _summary(out: Path) -> dict[str, Any]:
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    data: dict[str, Any] = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    data["bundle"] = str(bundle)
    return data


def _counts(operations: dict[str, Any]) -> dict[str, int]:
    return {
        op: v["count"] + v["errors"] for op, v in operations.items() if v["count"] + v["errors"]
    }


def test_merged_counts_are_exact_and_slos_met_on_them_exit_0(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """The merged bundle holds exactly the sum of the workers' counts, and SLOs declared on
    the run are judged on those merged figures: all met, exit 0.

    The same run serves two more checks that need a completed two-worker run (issue #25: a run
    of their own cost a distributed run's start-up each, ~7 CPU-s): garbage sent to its worker
    port while it measures (tests/support/worker_port_garbage.py, issue #24 item 3) loses no
    worker report, and the array's counters (the recorded ONTAP replay) are sampled by one
    worker only (issue #32, _assert_the_array_sampled_by_one_worker)."""
    out = tmp_path / "runs"
    slos = (
        "slos=[{name: read latency, op: read, p99_us_max: 60000000},"
        " {op: '*', ops_s_min: 1, error_pct_max: 100}, {name: storage, await_ms_max: 60000}]"
    )
    args = ["run", "--workers", "2", "--sessions", "4", "--duration", "10", *PACED, "--set", slos]
    with OntapReplay([VOL_DATA], username=ONTAP_USER, password=ONTAP_PASSWORD) as replay:
        ontap = (
            f"collectors.ontap={{cluster: '{replay.url}', username_env: ONTAP_T_USER, "
            "password_env: ONTAP_T_PASSWORD, svm: svm1, volumes: [vol_data]}"
        )
        master = _start_master(
            tmp_path, started, *args, "--set", ontap, "-o", str(out), "--json",
            ONTAP_T_USER=ONTAP_USER, ONTAP_T_PASSWORD=ONTAP_PASSWORD,
        )  # fmt: skip
        port = local_master_port(master, 2, timeout=START_TIMEOUT_S)
        _wait_for_intervals(out, master, 1, timeout=START_TIMEOUT_S)
        send_garbage(port)  # while the workers report their intervals
        stdout, stderr = master.communicate(timeout=RUN_TIMEOUT_S)
        returncode = master.returncode
        requests = [path for path, query in replay.requests if "start.uuid" not in query]
    assert returncode == 0, stderr[-4000:]
    assert hub_blocks_in_dbsim(stderr) == [], stderr[-4000:]  # the garbage stalled nothing
    summary = json.loads(stdout)
    assert summary["status"] == "completed"

    reports = _worker_reports(stderr)
    assert len(reports) == 2, stderr[-4000:]
    assert sorted(r["worker_index"] for r in reports) == [0, 1], stderr[-4000:]
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
    _assert_slos_met_on_the_merged_figures(summary, _summary(out))
    # The garbage: one warning per kind, the totals at quit, no traceback.
    check_drop_lines(stderr)
    _assert_the_array_sampled_by_one_worker(summary, requests)


def _assert_the_array_sampled_by_one_worker(summary: dict[str, Any], requests: list[str]) -> None:
    """Issue #32: the master tells only its lowest-numbered worker to sample collectors of
    ``shared`` scope (sim.locust.master, ``shared_collectors``); before, both workers sampled
    the array and the master kept one view (sim.live.worker_samples), doubling the array's REST
    requests. Counted: the replay's first-page GETs of the volumes (one per sample of one
    collector: its start's reading and one per interval) against the intervals the merged
    bundle holds; and the array's rates in the bundle, one row per interval, equal to the
    replay's steps (vol_data: 500 reads, 250 writes, 50 others per 5 s step: 160 IOPS). The
    workers share this host, whose block devices the bundle keeps once beside the array's
    volume."""
    workers = summary["distributed"]["workers"]
    assert len(workers) == 2 and summary["distributed"]["lost"] == []
    bundle = Path(summary["bundle"])
    source = registry.collector_with_role(registry.ROLE_ARRAY)
    assert source is not None
    lines = (bundle / "timeseries" / f"{source}.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    intervals = max(int(w["intervals_received"]) for w in workers)
    # One view of the array per interval (a worker's first interval may come before a reading
    # spans one: at most one interval without a row), and from one worker's readings only.
    assert intervals - 1 <= len(rows) <= intervals, (len(rows), intervals)
    assert {r["entity"] for r in rows} == {"volume:svm1/vol_data"}
    volume_gets = [p for p in requests if p == "/api/storage/volumes"]
    # One reading at the collector's start and one per interval, by one worker; two workers
    # sampling it would double them.
    assert len(volume_gets) <= intervals + 2, (len(volume_gets), intervals)
    assert len(volume_gets) >= intervals
    for row in rows:
        assert float(row["total_iops"]) == pytest.approx(160.0)
        assert float(row["read_iops"]) == pytest.approx(100.0)
    # Beside the array, this host's block devices, once (one host, no per-host names).
    assert summary["storage"][source]["volume:svm1/vol_data"]["total_iops"] == pytest.approx(160)
    device = registry.collector_with_role(registry.ROLE_DEVICE)
    assert device is not None and summary["storage"].get(device)
    print(f"array: {len(volume_gets)} volume readings for {intervals} intervals of 2 workers "
          f"(measured, the replay's request log)")  # fmt: skip


def _assert_slos_met_on_the_merged_figures(
    summary: dict[str, Any], written: dict[str, Any]
) -> None:
    assert written["slos"] == summary["slos"]  # printed and written alike
    section = summary["slos"]
    assert section["met"] is True and section["window"] == "measured window"
    assert [(v["slo"], v.get("op", v.get("device"))) for v in section["verdicts"]][:3] == [
        ("p99_us_max", "read"),
        ("ops_s_min", "*"),
        ("error_pct_max", "*"),
    ]
    latency, throughput, errors, storage = section["verdicts"]
    # Judged on the merged figures: the merged histogram's p99, the merged counts over the
    # measured window, the block device the workers' host sampled.
    assert latency["measured"] == summary["operations"]["read"]["p99_us"]
    ops = summary["operations"]
    total = sum(op["count"] for op in ops.values())
    assert total == sum(
        sum(v["count"] for v in w["operations"].values()) for w in summary["distributed"]["workers"]
    )
    assert throughput["measured"] == pytest.approx(
        total / summary["timing"]["measured_s"], rel=0.01
    )
    assert errors["measured"] == 0
    assert storage["device"] in summary["storage"]["block"]
    assert storage["met"] is True
    assert all(v["met"] is True for v in section["verdicts"])


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
    args = ["run", "--workers", "2", "--sessions", "4", "--duration", "20", *PACED]
    args += ["-o", str(out), "-q"]
    proc = _start_master(tmp_path, started, *args)
    _wait_for_intervals(out, proc, 2, timeout=START_TIMEOUT_S)
    workers = [p for p in psutil.Process(proc.pid).children() if "worker" in " ".join(p.cmdline())]
    assert len(workers) == 2
    victim = workers[0]
    os.kill(victim.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, stderr[-4000:]
    assert hub_blocks_in_dbsim(stderr) == [], stderr[-4000:]

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


# --------------------------------------------------------------------------- SLOs

SLO_RUN = ["run", "--workers", "2", "--sessions", "2", "--duration", "2", "--warmup", "0", *PACED]
#: The missed SLO's run judges an operation's latency and the throughput, no storage figure:
#: it samples no collector (the merged-counts run above samples them all, the array's too).
NO_COLLECTORS = ["--set", "collectors.enabled=none"]
EXIT_SLO_MISSED, EXIT_BAD_INPUT = 1, 2


def test_an_slo_missed_on_the_merged_bundle_exits_1(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    out = tmp_path / "runs"
    slos = "slos=[{op: read, p99_us_max: 1}, {ops_s_min: 1}]"
    rc, stdout, stderr = _run_master(
        tmp_path, started, *SLO_RUN, *NO_COLLECTORS, "--set", slos, "-o", str(out)
    )
    assert rc == EXIT_SLO_MISSED, stdout[-4000:] + stderr[-4000:]
    assert hub_blocks_in_dbsim(stderr) == [], stderr[-4000:]
    summary = _summary(out)
    assert summary["status"] == "completed"  # the run is fine; the objective is not
    assert summary["slos"]["met"] is False
    missed, met = summary["slos"]["verdicts"]
    assert (missed["slo"], missed["op"], missed["met"]) == ("p99_us_max", "read", False)
    assert (
        missed["measured"] == summary["operations"]["read"]["p99_us"] and missed["margin_pct"] < 0
    )
    assert (met["slo"], met["met"]) == ("ops_s_min", True)
    assert "SLO MISSED: read p99 ≤ 1 µs: " in stdout
    assert "SLO met: all operations ops/s ≥ 1.0: " in stdout
    assert (Path(summary["bundle"]) / "report.html").is_file()


@pytest.mark.parametrize(
    "sweep",
    [
        ["load.sweep={vary: sessions, start: 1, factor: 2, max: 2, step_duration_s: 1}"],
        [
            "load.mode=open",
            "load.sweep={vary: rate_ops_s, start: 50, factor: 2, max: 100, step_duration_s: 1}",
        ],
    ],
    ids=["sessions", "rate"],
)
def test_a_sweep_under_workers_is_refused_up_front(
    tmp_path: Path, started: list[subprocess.Popen[str]], sweep: list[str]
) -> None:
    out = tmp_path / "runs"
    sets = [arg for item in sweep for arg in ("--set", item)]
    # No --duration: with steps (a sweep becomes steps) it is refused on its own (exit 2 too).
    sweep_run = ["run", "--workers", "2", "--sessions", "2", "--warmup", "0"]
    rc, stdout, stderr = _run_master(tmp_path, started, *sweep_run, *sets, "-o", str(out))
    assert rc == EXIT_BAD_INPUT, stderr
    assert stderr.splitlines() == [
        "error: load.sweep: sweeps do not run under Locust (dbsim run --workers, dbsim ui); "
        "run the sweep with dbsim run without --workers"
    ]
    assert stdout == ""
    assert not out.exists()  # nothing started, no bundle


def test_an_slo_on_an_unknown_operation_is_refused_up_front(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    out = tmp_path / "runs"
    rc, _, stderr = _run_master(
        tmp_path, started, *SLO_RUN, "--set", "slos=[{op: nope, p99_us_max: 1}]", "-o", str(out)
    )
    assert rc == EXIT_BAD_INPUT, stderr
    assert stderr.splitlines() == [
        "error: slos[0].op: unknown operation 'nope' (this workload has: read, scan, update)"
    ]
    assert not out.exists()
