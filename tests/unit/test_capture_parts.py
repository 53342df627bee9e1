"""The parts of ``dbsim capture`` that are arithmetic or plain input: the size cap's steps
(sim.capture.budget), ``--max-bytes``'s sizes, the capture's own CPU of a real child process
(sim.capture.own), the scenario a capture reads (sim.capture.plan) and the database I/O
vocabulary of the db collectors (storage.collectors.database_io), each expected value worked
out by hand beside it."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.capture.budget import MIN_MAX_BYTES, SizeBudget, parse_size
from sim.capture.own import OwnUsage, child_pids, hwm_kb, process_cpu_s
from sim.capture.plan import resolve_capture
from sim.capture.watch import watched_target
from sim.errors import ConfigError, ScenarioError
from storage.collectors.database_io import innodb_vocabulary, postgres_vocabulary


def test_the_interval_doubles_at_each_halving_of_what_is_left() -> None:
    budget = SizeBudget(max_bytes=100_000, base_interval_s=1.0, last_size=30_000)
    # Growth 10,000 each time: 40,000 + 2 x 10,000 fits, and is below half (50,000).
    assert budget.after_interval(40_000, 4.0) == ""
    assert budget.after_interval(50_000, 5.0) == "coarsen"  # 50,000 >= 100,000 x (1 - 1/2)
    assert budget.interval_s == 2.0
    assert budget.after_interval(60_000, 7.0) == ""  # the next threshold is 75,000
    assert budget.after_interval(70_000, 9.0) == ""
    assert budget.after_interval(75_000, 11.0) == "coarsen"  # 75,000 >= 100,000 x (1 - 1/4)
    assert budget.interval_s == 4.0
    assert budget.steps == [
        {"t": 5.0, "bundle_bytes": 50_000, "interval_s": 2.0},
        {"t": 11.0, "bundle_bytes": 75_000, "interval_s": 4.0},
    ]
    # 80,000 + 2 x 10,000 (the largest growth so far) = 100,000 fits; 92,000 + 2 x 12,000 =
    # 116,000 would not.
    assert budget.after_interval(80_000, 15.0) == ""
    assert budget.after_interval(92_000, 19.0) == "stop"
    assert "92,000 of 100,000 bytes at t=19.0 s" in budget.stopped
    limits = budget.describe()
    assert limits["reached"] is True and limits["coarsened_to_s"] == 4.0


def test_the_margin_is_the_largest_growth_so_far_not_the_last() -> None:
    """A source writes rows only in some intervals (blocklatency: only when there were
    requests): a quiet interval must not make the next busy one look as if it would fit."""
    budget = SizeBudget(max_bytes=100_000, base_interval_s=1.0, last_size=40_000)
    assert budget.after_interval(50_000, 1.0) == "coarsen"  # busy: +10,000
    assert budget.after_interval(59_000, 3.0) == ""
    assert budget.after_interval(68_000, 5.0) == ""
    assert budget.after_interval(76_000, 7.0) == "coarsen"  # >= 75,000
    assert budget.after_interval(80_000, 11.0) == ""  # 80,000 + 2 x 10,000 = 100,000 fits
    # A quiet interval (+100): judged on it, 80,100 + 200 would fit and the next busy one could
    # add 10,000 and more; judged on the largest growth, 80,100 + 20,000 does not.
    assert budget.after_interval(80_100, 15.0) == "stop"
    assert budget.max_growth == 10_000


def test_the_interval_stops_doubling_at_ten_minutes() -> None:
    budget = SizeBudget(max_bytes=1 << 30, base_interval_s=300.0, last_size=(1 << 29) - 1000)
    assert budget.after_interval(1 << 29, 300.0) == "coarsen"  # 300 -> 600 s
    budget.last_size = (3 << 28) - 1000  # the bundle grew slowly up to three quarters
    assert budget.after_interval(3 << 28, 900.0) == ""  # 1,200 s would pass MAX_COARSE_S
    assert budget.interval_s == 600.0


def test_an_untouched_budget_says_it_was_not_reached() -> None:
    limits = SizeBudget(max_bytes=MIN_MAX_BYTES, base_interval_s=1.0).describe()
    assert limits == {
        "max_bytes": MIN_MAX_BYTES,
        "reached": False,
        "coarsened_to_s": None,
        "coarsening": [],
        "stopped": None,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100000", 100_000),
        ("500M", 500 << 20),
        ("2G", 2 << 30),
        ("64KiB", 65_536),
        ("1.5g", 1610612736),
    ],
)
def test_sizes_are_read_in_powers_of_1024(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["10", "1K", "lots", "", "nan", "inf", "-5M", "2P"])
def test_a_size_out_of_range_or_not_a_size_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--max-bytes: "):
        parse_size(text)


def _this_process_cpu_s() -> float:
    me, done = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + done.ru_utime + done.ru_stime


def test_own_usage_counts_a_running_child_from_proc() -> None:
    usage = OwnUsage()
    usage.start()
    mine_before = _this_process_cpu_s()
    # A child that burns 0.3 s of CPU, then sleeps: still running, so only /proc has its CPU.
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.process_time()\n"
         "while time.process_time() - t < 0.3: pass\ntime.sleep(30)"]
    )  # fmt: skip
    try:
        for _ in range(400):
            if process_cpu_s(child.pid) >= 0.3:
                break
            time.sleep(0.05)
        assert child.pid in child_pids()
        assert hwm_kb(child.pid) > 0
        mine = _this_process_cpu_s() - mine_before
        # What the capture reports beyond this process's own CPU is the running child's.
        assert usage.describe()["cpu_s"] - mine >= 0.29
    finally:
        child.kill()
        child.wait()


def test_a_capture_reads_target_and_collectors_and_ignores_the_workload(tmp_path: Path) -> None:
    scenario = tmp_path / "prod.yaml"
    scenario.write_text(
        "name: prod\ntarget: {kind: postgres, host: 127.0.0.1, database: test}\n"
        "workload: {name: slob}\nload: {sessions: 8}\ncollectors: {interval_s: 5}\n"
    )
    plan = resolve_capture(scenario, [("capture.duration_s", 60)], environ={})
    assert plan.ignored == ["workload", "load"]
    assert plan.target.kind == "postgres" and plan.interval_s == 5.0
    assert plan.section.duration_s == 60
    assert "workload" not in plan.resolved and plan.resolved["capture"]["duration_s"] == 60
    assert plan.scenario.output.flush_interval_s == 10.0  # a capture's own default
    given = resolve_capture(scenario, [("output.flush_interval_s", 2)], environ={})
    assert given.scenario.output.flush_interval_s == 2.0


def test_a_capture_with_nothing_to_watch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="target: nothing to watch"):
        resolve_capture(None, [], environ={})
    with pytest.raises(ScenarioError, match=r"capture\.max_bytes"):
        resolve_capture(None, [("capture.max_bytes", 10)], [tmp_path], environ={})


def test_a_sqlite_capture_watches_the_file_s_directory_and_never_creates_it(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "app.sqlite"
    plan = resolve_capture(
        None, [("target.kind", "sqlite"), ("target.path", str(missing))], environ={}
    )
    with pytest.raises(ConfigError, match=r"^target\.path: .*app\.sqlite: No such file"):
        watched_target(plan.target, [])
    assert not missing.exists()
    missing.write_bytes(b"SQLite format 3\x00" + bytes(84))
    assert watched_target(plan.target, []).storage_paths() == [tmp_path]


def test_postgres_vocabulary_by_hand() -> None:
    # One second of a PostgreSQL 15 server: 100 blocks read in 50 ms, 30 + 20 + 10 buffers
    # written, 40 WAL writes of 327,680 bytes, 52 commits of which 2 were the collector's.
    rates = {
        "blks_read_s": 100.0,
        "blk_read_time_ms_s": 50.0,
        "buffers_checkpoint_s": 30.0,
        "buffers_clean_s": 20.0,
        "buffers_backend_s": 10.0,
        "wal_write_s": 40.0,
        "wal_bytes_s": 327_680.0,
        "xact_commit_s": 52.0,
    }
    assert postgres_vocabulary(rates, 150000, own_commits_s=2.0) == {
        "phys_read_req_s": 100.0,
        "single_block_read_s": 100.0,
        "phys_read_kB_s": 800.0,  # 100 x 8 KiB
        "single_block_read_ms": 0.5,  # 50 ms / 100 reads
        "phys_write_req_s": 60.0,
        "phys_write_kB_s": 480.0,  # 60 x 8 KiB
        "log_write_req_s": 40.0,
        "log_write_kB_s": 320.0,  # 327,680 / 1,024
        "commits_s": 50.0,
    }


def test_postgres_vocabulary_leaves_out_what_is_not_counted() -> None:
    # track_io_timing off (no read time), PostgreSQL 17 (blocks read are not requests), no WAL.
    out = postgres_vocabulary({"blks_read_s": 10.0, "blk_read_time_ms_s": 0.0}, 170000)
    assert out == {"phys_read_kB_s": 80.0}


def test_innodb_vocabulary_by_hand() -> None:
    rates = {
        "data_reads_s": 12.0,
        "data_read_bytes_s": 196_608.0,  # 12 pages of 16 KiB
        "data_writes_s": 3.0,
        "data_written_bytes_s": 49_152.0,
        "log_writes_s": 5.0,
        "log_written_bytes_s": 2_560.0,
        "handler_commits_s": 4.0,
    }
    assert innodb_vocabulary(rates) == {
        "phys_read_req_s": 12.0,
        "phys_read_kB_s": 192.0,
        "phys_write_req_s": 3.0,
        "phys_write_kB_s": 48.0,
        "log_write_req_s": 5.0,
        "log_write_kB_s": 2.5,
        "commits_s": 4.0,
    }
