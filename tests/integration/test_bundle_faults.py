"""Issue #8, R3: ENOSPC, EACCES and EROFS on the run bundle's directory (and EACCES on a file
tree), on real file systems — nothing is mocked.

What the user must get in every case: one ``error: `` line naming the path and the errno's
meaning, no traceback, and whatever was measured kept (the bundle's files whole and parseable,
``summary.json`` its last good atomic version, the in-memory summary printed).

* Before the run (the output directory cannot hold a bundle): exit 2 and nothing left behind.
  EACCES comes from a child without the capabilities that let root ignore permissions,
  EROFS from a read-only bind mount, ENOSPC from a full loop-mounted ext4.
* During the run: the bundle's file system fills up, or its directory is made read-only for
  its (unprivileged) writer: the run stops, exit 3.
* In process: an append that the kernel accepts only in part is cut back to the last whole
  line, and a failed atomic write keeps the previous file.

Permissions: the interpreter may live where an unprivileged user cannot reach it (pyenv under
``/root``, mode 0700), so "unprivileged" here is root *without* CAP_DAC_OVERRIDE,
CAP_DAC_READ_SEARCH and CAP_FOWNER (``setpriv --bounding-set``): the kernel then applies the
same mode-bit checks, and returns the same EACCES, as for any other user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.bundle.writer import BundleWriter
from sim.core.metrics import Interval, OpStats
from tests.e2e.conftest import CliResult, clean_environment, read_csv
from tests.support import forked_dbsim
from tests.support.loopfs import loop_ext4

TOOLS = ("losetup", "mkfs.ext4", "mount", "umount", "setpriv")


def _cannot_run() -> str | None:
    if os.geteuid() != 0:
        return "needs root (loop devices, mounts, dropping capabilities for the child)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (util-linux, e2fsprogs)"
    return None


pytestmark = [
    pytest.mark.integration,
    pytest.mark.root,
    pytest.mark.skipif(_cannot_run() is not None, reason=f"bundle faults: {_cannot_run()}"),
]

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 3
BLOCK = 4096
RUN_TIMEOUT_S = 60.0
# Root, but subject to permission bits like any user (see the module docstring).
WITHOUT_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
# Long enough never to end on its own; summary.json rewritten every half second while running.
# Paced (open loop, issue #25): what is checked is the bundle's writes and the stop, not the
# machine's utmost; closed loop, the two sessions took ~1.4 CPUs for as long as each run went.
# 100 ops/s (400 until the suite's CPU was cut again: ~0.1 CPU-s less per second run) still
# measures ~90 reads in every 1 s interval (the counts asserted below are of reads).
SHORT_RUN = (
    "--duration", "20",
    "--set", "collectors.enabled=none",
    "--set", "output.flush_interval_s=0.5",
    "--set", "load.mode=open", "--set", "load.rate_ops_s=100",
)  # fmt: skip


# --------------------------------------------------------------------------- helpers


def run_cli(
    *args: str | os.PathLike[str], cwd: Path, env_tmp: Path, unprivileged: bool = False
) -> CliResult:
    proc = start_cli(*args, cwd=cwd, env_tmp=env_tmp, unprivileged=unprivileged)
    return finish(proc)


def start_cli(
    *args: str | os.PathLike[str], cwd: Path, env_tmp: Path, unprivileged: bool = False
) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "sim.cli", *map(os.fspath, args)]
    # Without root's override of file permissions: exec'd under setpriv; else forked.
    popen = subprocess.Popen if unprivileged else forked_dbsim.popen
    return popen(
        (WITHOUT_DAC if unprivileged else []) + cmd,
        cwd=cwd,
        env=clean_environment(env_tmp),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> CliResult:
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"dbsim did not finish within {RUN_TIMEOUT_S} s\n{out[-2000:]}\n{err[-2000:]}")
    return CliResult([str(a) for a in proc.args], proc.returncode, out, err)


def one_error_line(result: CliResult, exit_code: int) -> str:
    """The exit code, no traceback, exactly one ``error: `` line; returns it."""
    assert result.rc == exit_code, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    return errors[0]


def entries(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def wait_for_measure(proc: subprocess.Popen[str], out: Path, timeout: float = 30.0) -> Path:
    """The run's bundle once its summary.json says ``measure`` (rewritten atomically on
    every state change, so a read never sees half of it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"dbsim exited ({proc.returncode}) before measuring: {finish(proc)}")
        for summary in out.glob("*/summary.json"):
            with contextlib.suppress(OSError, ValueError):
                if json.loads(summary.read_text(encoding="utf-8")).get("state") == "measure":
                    return summary.parent
        time.sleep(0.02)
    pytest.fail(f"dbsim did not reach measure within {timeout} s")


def fill(fs: Path, *, alone: bool = True) -> None:
    """Take every free block of ``fs`` with a file of the test's own. ``alone``: nothing
    else writes to ``fs``, so it must then be exactly full (a running dbsim may free a block
    meanwhile, by cutting back an append or replacing a summary)."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, BLOCK):
            chunk = b"\0" * size
            with contextlib.suppress(OSError):
                while os.write(fd, chunk) == size:
                    pass
        os.fsync(fd)
    finally:
        os.close(fd)
    # f_bavail, not f_bfree: ext4 keeps a few clusters back for its own metadata.
    assert not alone or os.statvfs(fs).f_bavail == 0, "the file system still has free blocks"


def assert_bundle_whole(bundle: Path, *, locked: bool = False) -> dict[str, Any]:
    """Every file whole: the summary parses (its last good version), CSVs hold whole rows
    only, every histogram-log line is complete, no temporary file is left; returns the
    summary on disk.

    ``locked``: the directory was made unwritable while a summary was being rewritten; its
    temporary file, written whole but not renamed, cannot be removed either (removing needs
    the same write permission), so that one may remain."""
    stray = {p.name for p in bundle.rglob(".*.tmp")} - ({".summary.json.tmp"} if locked else set())
    assert not stray, entries(bundle)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema_version"] == 1
    assert summary["status"] in ("running", "failed"), summary["status"]
    for csv_file in (bundle / "timeseries").glob("*.csv"):
        read_csv(csv_file)  # fails on a torn last line or a short row
    hlog = (bundle / "histograms" / "intervals.hlog").read_text(encoding="ascii")
    assert hlog.endswith("\n")
    for line in hlog.splitlines()[1:]:
        assert len(line.split(",")) == 5, line
    return summary


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """cwd and TMPDIR for the child, and the place for output directories."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


@pytest.fixture
def small_fs(base: Path) -> Iterator[Path]:
    # 4 KiB blocks, no journal, no blocks reserved for root: full means full for everyone.
    no_reserve = ("-b", str(BLOCK), "-m", "0", "-O", "^has_journal")
    with loop_ext4(base / "fs", mkfs_options=no_reserve) as mnt:
        yield mnt


@pytest.fixture
def read_only_dir(base: Path) -> Iterator[Path]:
    """A directory seen through a read-only bind mount (writes fail with EROFS)."""
    source, view = base / "rw", base / "ro"
    source.mkdir()
    view.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(view)], check=True, capture_output=True)
    try:
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(view)], check=True, capture_output=True
        )
        yield view
    finally:
        if subprocess.run(["umount", str(view)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(view)], capture_output=True)


# --------------------------------------------------------------------------- before the run


def test_eacces_on_the_output_directory_is_one_line_exit_2_and_touches_nothing(
    base: Path,
) -> None:
    locked = base / "locked"
    locked.mkdir(mode=0o555)
    result = run_cli(
        "run", "-o", locked / "out", *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp",
        unprivileged=True,
    )  # fmt: skip
    line = one_error_line(result, EXIT_BAD_INPUT)
    assert (
        line
        == f"error: output.directory: cannot create {locked / 'out'}: EACCES (Permission denied)"
    )
    assert entries(locked) == [] and entries(base / "tmp") == [] and entries(base / "cwd") == []
    assert result.stdout == ""


def test_eacces_inside_an_existing_output_directory(base: Path) -> None:
    out = base / "out"
    out.mkdir(mode=0o555)
    result = run_cli(
        "run", "-o", out, *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp", unprivileged=True
    )
    line = one_error_line(result, EXIT_BAD_INPUT)
    assert line == (
        f"error: output.directory: cannot create a run directory in {out}: "
        "EACCES (Permission denied)"
    )
    assert entries(out) == [] and entries(base / "tmp") == []


def test_erofs_on_the_output_directory(base: Path, read_only_dir: Path) -> None:
    result = run_cli("run", "-o", read_only_dir, *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp")
    line = one_error_line(result, EXIT_BAD_INPUT)
    assert line == (
        f"error: output.directory: cannot create a run directory in {read_only_dir}: "
        "EROFS (Read-only file system)"
    )
    assert entries(read_only_dir) == [] and entries(base / "tmp") == []


def test_enospc_before_the_run_leaves_no_half_bundle(base: Path, small_fs: Path) -> None:
    out = small_fs / "out"
    out.mkdir()
    fill(small_fs)
    result = run_cli("run", "-o", out, *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp")
    line = one_error_line(result, EXIT_BAD_INPUT)
    assert line.startswith("error: output.directory: cannot ") and str(out) in line, line
    assert line.endswith(": ENOSPC (No space left on device)"), line
    assert entries(out) == [], "a refused start left part of a bundle behind"
    assert entries(base / "tmp") == []


# --------------------------------------------------------------------------- during the run


def test_enospc_mid_run_stops_with_one_line_and_keeps_what_was_measured(
    base: Path, small_fs: Path
) -> None:
    out = small_fs / "out"
    proc = start_cli("run", "-o", out, "--json", *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp")
    bundle = wait_for_measure(proc, out)
    time.sleep(1.0)  # an interval or two on disk first
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < 10:
        fill(small_fs, alone=False)  # and take again whatever the run frees
        time.sleep(0.1)
    assert proc.poll() is not None, "the run did not stop when its bundle filled up"
    result = finish(proc)
    line = one_error_line(result, EXIT_RUN_FAILED)
    assert line.startswith(f"error: bundle: cannot write {bundle}/"), line
    assert "ENOSPC (No space left on device); run stopped during measure" in line, line
    # The measurement is not lost: the whole summary, held in memory, is printed.
    printed = json.loads(result.stdout)
    assert printed["status"] == "failed" and printed["error"] == line.removeprefix("error: ")
    assert printed["operations"]["read"]["count"] > 0
    assert printed["bundle"] == str(bundle)
    # What reached the disk is whole and parseable.
    on_disk = assert_bundle_whole(bundle)
    header, rows = read_csv(bundle / "timeseries" / "ops.csv")
    assert header[:3] == ["t", "interval", "phase"]
    assert any(row["phase"] == "measure" for row in rows), "the measured intervals were lost"
    assert on_disk["intervals_written"] <= len({row["interval"] for row in rows})
    assert not (bundle / "report.html").exists()  # not built on series that stop early


def test_eacces_mid_run_stops_with_one_line_and_keeps_what_was_measured(base: Path) -> None:
    out = base / "out"
    proc = start_cli(
        "run", "-o", out, *SHORT_RUN, cwd=base / "cwd", env_tmp=base / "tmp", unprivileged=True
    )
    bundle = wait_for_measure(proc, out)
    time.sleep(1.0)
    before = (bundle / "summary.json").read_bytes()
    bundle.chmod(0o555)  # its writer is not allowed to create files there any more
    result = finish(proc)
    line = one_error_line(result, EXIT_RUN_FAILED)
    assert line == (
        f"error: bundle: cannot write {bundle / 'summary.json'}: EACCES (Permission denied); "
        "run stopped during measure, the bundle keeps what was written before"
    )
    # The console still shows the measured figures and where the bundle is.
    assert "read" in result.stdout and f"bundle: {bundle}" in result.stdout, result.describe()
    on_disk = assert_bundle_whole(bundle, locked=True)
    # Its last good version: written while measuring, before the directory was locked.
    assert on_disk["status"] == "running" and on_disk["state"] == "measure"
    assert (bundle / "summary.json").read_bytes() == before or on_disk["intervals_written"] > 0
    _, rows = read_csv(bundle / "timeseries" / "ops.csv")
    assert any(row["phase"] == "measure" for row in rows)
    # histograms/ stayed writable: the measured window's histograms were still saved.
    measured = json.loads((bundle / "histograms" / "measured.json").read_text())
    assert measured["read"]["count"] > 0


def test_eacces_mid_run_under_locust_workers_stops_the_run_at_once(base: Path) -> None:
    """``run --workers``: the master writes the merged bundle; when it cannot, the run stops
    then (as a single-process run does), not after the hour it was asked to measure: a run
    that went on would outlast finish()'s RUN_TIMEOUT_S and fail there. (No stopwatch: a bound
    of 17 s on a stop that takes 2-3 s was a time assertion in the parallel phase.)"""
    out = base / "out"
    proc = start_cli(
        "run", "--workers", "1", "-o", out, *SHORT_RUN, "--duration", "3600",
        cwd=base / "cwd", env_tmp=base / "tmp", unprivileged=True,
    )  # fmt: skip
    bundle = wait_for_measure(proc, out, timeout=60.0)
    assert "duration_s: 3600.0" in (bundle / "scenario.yaml").read_text()  # the last --duration
    time.sleep(1.0)
    bundle.chmod(0o555)
    result = finish(proc)
    line = one_error_line(result, EXIT_RUN_FAILED)
    assert line == (
        f"error: bundle: cannot write {bundle / 'summary.json'}: EACCES (Permission denied); "
        "run stopped during measure, the bundle keeps what was written before"
    )
    on_disk = assert_bundle_whole(bundle, locked=True)
    assert on_disk["status"] == "running" and on_disk["state"] == "measure"
    _, rows = read_csv(bundle / "timeseries" / "ops.csv")
    assert any(row["phase"] == "measure" for row in rows)


# --------------------------------------------------------------------------- a file tree


def test_eacces_on_the_file_tree_is_one_line_and_a_failed_bundle(base: Path) -> None:
    locked = base / "locked"
    locked.mkdir(mode=0o555)
    scenario = base / "eda.yaml"
    scenario.write_text(
        f"""\
name: eda-eacces
target: {{kind: filetree, path: {locked / "eda"}}}
workload: {{name: eda, parameters: {{component: EDA_FRONTEND}}}}
load: {{duration_s: 2}}
collectors: {{enabled: none}}
"""
    )
    out = base / "out"
    result = run_cli(
        "run", scenario, "-o", out, cwd=base / "cwd", env_tmp=base / "tmp", unprivileged=True
    )
    line = one_error_line(result, EXIT_RUN_FAILED)
    assert line == f"error: filetree: mkdir {locked / 'eda'}: EACCES (Permission denied)"
    assert entries(locked) == []
    (bundle,) = out.iterdir()
    summary = json.loads((bundle / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["reason"].startswith("loading: filetree:")


# --------------------------------------------------------------------------- in process


def _interval(index: int, operations: int) -> Interval:
    """An interval of ``operations`` operations with 400-character names: a dozen make rows
    longer than a block (few operations, because each row computes its percentiles)."""
    ops = {}
    for k in range(operations):
        stats = OpStats()
        stats.histogram.record_value(100 + k, 10)
        ops[f"op{k:02d}-{'x' * 400}"] = stats
    return Interval(index, float(index), index + 1.0, "measure", None, ops)


def test_a_partly_written_append_is_cut_back_to_the_last_whole_row(small_fs: Path) -> None:
    """On a full disk the kernel takes what fits in the last block already allocated to
    ops.csv and refuses the rest: that short write must not stay in the file."""
    path = small_fs / "run"
    path.mkdir()
    failures: list[str] = []
    writer = BundleWriter(path, {"name": "faults"}, on_failure=failures.append)
    try:
        writer.on_interval(_interval(0, 1), [])
        ops = path / "timeseries" / "ops.csv"
        rows_before, summary_before = ops.read_bytes(), (path / "summary.json").read_bytes()
        assert len(rows_before) % BLOCK > 0, "ops.csv must end inside a block for this test"
        fill(small_fs)
        big = _interval(1, 12)  # rows longer than the block's free tail
        assert sum(len(name) for name in big.ops) > BLOCK
        writer.on_interval(big, [])
        assert failures == [f"bundle: cannot write {ops}: ENOSPC (No space left on device)"]
        assert writer.failure == failures[0]
        assert ops.read_bytes() == rows_before  # cut back: the header and interval 0 only
        writer.on_interval(_interval(2, 1), [])  # after a failure nothing more is appended
        assert ops.read_bytes() == rows_before
        # A final summary is still tried; it fails, and the last good one stays.
        summary = writer.write_summary("failed", extra={"error": writer.failure})
        assert summary["status"] == "failed"
        assert (path / "summary.json").read_bytes() == summary_before
        assert failures == [writer.failure]  # told once
    finally:
        writer.close()
    assert_bundle_whole(path)
