"""``dbsim capture`` on paths, as a user runs it: SIGTERM mid-capture leaves a whole bundle
(exit 143, status interrupted), ``--max-bytes`` coarsens the interval and then stops the
capture, saying both, without the bundle passing the cap; bad input is one ``error:`` line per
problem, exit 2, and no bundle (a missing SQLite file is not created)."""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, InProcessDbsim, read_csv, read_summary, single_bundle

pytestmark = pytest.mark.e2e


def _intervals_written(out: Path) -> int:
    for summary in out.glob("*/summary.json"):
        try:
            return int(json.loads(summary.read_text(encoding="utf-8"))["intervals_written"])
        except (OSError, ValueError, KeyError):
            return 0
    return 0


def _wait_for_intervals(proc: object, out: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the capture exited before it was stopped"  # type: ignore[attr-defined]
        if _intervals_written(out) >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"the capture wrote fewer than {count} intervals in {timeout} s")


def _bundle_bytes(bundle: Path) -> int:
    return sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())


def test_sigterm_mid_capture_leaves_a_whole_interrupted_bundle(
    dbsim: Dbsim, out_dir: Path, tmp_path: Path
) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    proc = dbsim.start("capture", "--path", watched, "--interval", "0.2", "-o", out_dir)
    _wait_for_intervals(proc, out_dir, 3)
    proc.send_signal(signal.SIGTERM)
    done = dbsim.finish(proc, timeout=60)
    assert done.rc == 143, done.describe()
    bundle = single_bundle(out_dir)
    summary = read_summary(bundle)
    assert summary["kind"] == "capture"
    assert summary["status"] == "interrupted" and summary["reason"] == "stopped by SIGTERM"
    assert summary["capture"]["origin"] == "live" and summary["sessions"] == 0
    assert summary["capture"]["own"]["cpu_s"] > 0
    # Every time series whole (read_csv fails on a torn line), one row per interval and entity.
    header, host_rows = read_csv(bundle / "timeseries" / "host.csv")
    assert header[:4] == ["t", "interval", "phase", "entity"]
    assert len(host_rows) == summary["intervals_written"] >= 3
    times = [float(row["t"]) for row in host_rows]
    assert times == sorted(times) and all(row["phase"] == "measure" for row in host_rows)
    assert read_csv(bundle / "timeseries" / "ops.csv")[1] == []  # no operations ran
    for series in (bundle / "timeseries").glob("*.csv"):
        read_csv(series)
    assert list(watched.iterdir()) == []  # nothing was made in what was watched


@pytest.mark.timing  # the rows' spacing, read from the clock, shows the coarser interval
def test_max_bytes_coarsens_the_interval_then_stops_the_capture(
    dbsim: Dbsim, out_dir: Path, tmp_path: Path
) -> None:
    args = ("capture", "--path", tmp_path, "--interval", "0.1", "--max-bytes", "64K")
    done = dbsim(*args, "--duration", "300", "-o", out_dir, timeout=240)
    assert done.rc == 0, done.describe()
    bundle = single_bundle(out_dir)
    summary = read_summary(bundle)
    limits = summary["capture"]["limits"]
    assert summary["status"] == "completed" and limits["reached"] is True
    assert summary["reason"] == limits["stopped"]
    assert "the next interval's rows would not fit" in summary["reason"]
    steps = limits["coarsening"]
    assert [step["interval_s"] for step in steps] == [0.1 * 2**k for k in range(1, len(steps) + 1)]
    assert len(steps) >= 2 and limits["coarsened_to_s"] == steps[-1]["interval_s"]
    # Each step said in the messages and on the console; the cap itself never passed.
    for step in steps:
        said = f"sampling every {step['interval_s']:g} s from then on"
        assert any(said in message for message in summary["messages"])
        assert said in done.stdout
    assert _bundle_bytes(bundle) <= 64 * 1024
    # The rows show it: after the last step, intervals are as long as it says, on average and
    # for most. Not every one: the ticker keeps its schedule, so a tick a busy host woke late
    # makes the next interval short (beside stress-ng --cpu 2: 0.506 s, then 0.289 s, of 0.4).
    _, rows = read_csv(bundle / "timeseries" / "host.csv")
    times = [float(row["t"]) for row in rows]
    last = [b - a for a, b in itertools.pairwise(times) if a >= steps[-1]["t"]]
    assert last, rows
    assert sum(last) / len(last) >= 0.9 * steps[-1]["interval_s"], last
    assert statistics.median(last) >= 0.9 * steps[-1]["interval_s"], last


def test_a_capture_of_a_missing_sqlite_file_is_refused_and_does_not_create_it(
    dbsim: Dbsim, out_dir: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "prod.sqlite"
    done = dbsim(
        "capture", "--set", "target.kind=sqlite", "--set", f"target.path={missing}",
        "-o", out_dir,
    )  # fmt: skip
    assert done.rc == 2, done.describe()
    assert done.stderr.splitlines() == [
        f"error: target.path: {missing}: No such file or directory; a capture creates "
        "nothing, so it watches only what exists"
    ]
    assert not missing.exists() and not out_dir.exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ((), "error: target: nothing to watch:"),
        (("--path", "/nonexistent/dbsim"), "error: capture.paths: /nonexistent/dbsim: No such"),
        (("--path", ".", "--max-bytes", "10"), "error: --max-bytes: 10 is out of range"),
        (("--path", ".", "--max-bytes", "lots"), "error: --max-bytes: 'lots' is not a size"),
        (("--path", ".", "--interval", "0"), "error: collectors.interval_s:"),
        (("--path", ".", "--duration", "-1"), "error: capture.duration_s:"),
        (("--target-kind", "nosuch"), "error: target.kind:"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_bundle(
    dbsim_in_process: InProcessDbsim, out_dir: Path, args: tuple[str, ...], line: str
) -> None:
    done = dbsim_in_process("capture", *args, "-o", out_dir)
    assert done.rc == 2, done.describe()
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), done.describe()
    assert not out_dir.exists()
