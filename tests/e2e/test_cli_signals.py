"""SIGINT twice to a running ``dbsim run``: a prompt exit and a whole, interrupted bundle.

A single SIGINT or SIGTERM in each phase of a run (loading, connecting, measuring, the bundle
write) is tests/e2e/test_signal_sweep.py's: one case per phase at a random moment, the signal
alternating (the two take one path: tests/unit/test_run_signals.py), with the checks this
module made for the single signals (nothing measured when stopped while loading, the mix
accounting exact, ops.csv holding every measured operation). What the sweep does not send is a
second signal while the first is being handled: the two cases here.

Each case starts ``dbsim run --duration 30``, waits (by polling the bundle's summary.json,
which is rewritten on every state change) for the moment it wants, delivers the signals and
then checks the process and the bundle it left. The run is shared by the tests of a case (the
bundle and the exit code), so every case runs the CLI once.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    SIGNAL_EXIT,
    CliResult,
    Dbsim,
    clean_environment,
    read_csv,
    read_summary,
    single_bundle,
    wait_for_state,
)

pytestmark = pytest.mark.e2e

EXIT_WITHIN_S = 20.0
MID_MEASURE_S = 2.2
SECOND_SIGNAL_AFTER_S = 0.05
# 25,600 rows instead of 10,240: loading lasts about a second instead of 0.3 s, so a signal
# sent on seeing state "loading" reliably lands while the data is still being loaded.
SLOW_LOAD = ("--set", "workload.parameters.scale=200M")


@dataclass(frozen=True)
class Case:
    id: str
    signum: signal.Signals
    wait_for: frozenset[str]  # engine states to wait for before the (first) signal
    delay_s: float = 0.0  # after reaching that state
    second_after_s: float | None = None  # a second signal this long after the first
    extra: tuple[str, ...] = ()
    measuring: bool = False  # the signal lands after measuring began
    mid_measure: bool = False  # … and after at least MID_MEASURE_S of it


LOADING = frozenset({"loading"})
MEASURE = frozenset({"measure"})

CASES = [
    Case(
        "double-SIGINT-mid-measure", signal.SIGINT, MEASURE, MID_MEASURE_S,
        second_after_s=SECOND_SIGNAL_AFTER_S, measuring=True, mid_measure=True,
    ),
    Case(
        "double-SIGINT-loading", signal.SIGINT, LOADING,
        second_after_s=SECOND_SIGNAL_AFTER_S, extra=SLOW_LOAD,
    ),
]  # fmt: skip


@dataclass(frozen=True)
class Stopped:
    case: Case
    result: CliResult
    out: Path
    tmp: Path
    seconds_to_exit: float


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def stopped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stopped]:
    case: Case = request.param
    base = tmp_path_factory.mktemp(case.id)
    cwd, tmp, out = base / "cwd", base / "tmp", base / "out"
    cwd.mkdir()
    tmp.mkdir()
    runner = Dbsim(cwd, clean_environment(tmp))
    try:
        proc = runner.start("run", "--duration", "30", "-o", out, *case.extra)
        wait_for_state(proc, out, set(case.wait_for))
        if case.delay_s:
            time.sleep(case.delay_s)
        assert proc.poll() is None, "dbsim exited before the signal"
        sent = time.monotonic()
        proc.send_signal(case.signum)
        if case.second_after_s is not None:
            time.sleep(case.second_after_s)
            if proc.poll() is None:
                proc.send_signal(case.signum)
        result = runner.finish(proc, timeout=EXIT_WITHIN_S)
        yield Stopped(case, result, out, tmp, time.monotonic() - sent)
    finally:
        runner.cleanup()


def test_stop_leaves_an_interrupted_bundle(stopped: Stopped) -> None:
    case, result = stopped.case, stopped.result
    assert stopped.seconds_to_exit < EXIT_WITHIN_S
    assert "Traceback" not in result.stderr + result.stdout, result.describe()
    if result.rc < 0:
        # Killed by a signal instead of exiting: acceptable only for a second signal that
        # landed once the bundle was written and CPython had restored the default handlers
        # for its shutdown (a shell reports that as 128 + signal too).
        assert case.second_after_s is not None and result.rc == -case.signum, result.describe()

    bundle = single_bundle(stopped.out)
    summary = read_summary(bundle)
    assert summary["status"] == "interrupted", summary
    assert summary["state"] == "finished", summary
    assert summary["reason"] == f"stopped by {case.signum.name}", summary
    assert summary["error"] is None
    assert summary["ended_at"] is not None

    _, rows = read_csv(bundle / "timeseries" / "ops.csv")  # complete lines only
    read_csv(bundle / "timeseries" / "errors.csv")
    if (bundle / "timeseries" / "block.csv").exists():
        read_csv(bundle / "timeseries" / "block.csv")

    operations: dict[str, Any] = summary.get("operations", {})
    if "loading" in case.wait_for:
        # Stopped before any session started: nothing measured.
        assert summary["timing"]["sessions_started_at"] is None, summary["timing"]
        assert summary["timing"]["measured_s"] == 0
        assert all(stats["count"] == 0 for stats in operations.values()), operations
        assert rows == []
    if case.measuring:
        assert summary["timing"]["sessions_started_at"] is not None
        assert operations["read"]["count"] > 0, operations
    if case.mid_measure:
        assert operations["update"]["count"] > 0, operations
        assert summary["timing"]["measured_s"] >= MID_MEASURE_S - 0.1, summary["timing"]
        for op in ("read", "update"):
            measured = [r for r in rows if r["op"] == op and r["phase"] == "measure"]
            assert len(measured) >= 2, (op, rows)
            assert sum(int(r["count"]) for r in measured) == operations[op]["count"]
    # Stopping mid-transaction must not break the mix accounting.
    assert summary["mix"]["exact"] is True, summary["mix"]


def test_stop_removes_the_temporary_database(stopped: Stopped) -> None:
    leftovers = sorted(p.name for p in stopped.tmp.iterdir())
    assert leftovers == [], f"left in TMPDIR after the stop: {leftovers}"


def test_stop_exit_code_names_the_signal(stopped: Stopped) -> None:
    case, result = stopped.case, stopped.result
    if case.second_after_s is not None and result.rc == -case.signum:
        pytest.skip("the second signal landed during interpreter shutdown (killed by it)")
    assert result.rc == SIGNAL_EXIT[case.signum], result.describe()
