"""``dbsim baseline``: the real fio on a file tree, end to end, as a user runs it.

Every case runs ``python -m sim.cli baseline`` as a child process (the refusals after the first,
and the unusable ``--output``, run the same command in this process) with short points (``--runtime 1 --ramp 0.5 --size 64M
--iodepth 4``) and checks what it left: the exit code, its lines, the bundle (fio's own JSON
and text reports beside dbsim's parsed figures) and the target tree, which must hold
afterwards exactly what :func:`sim.baseline.safety.release_tree` leaves (nothing, or the empty
root the user made) — and be untouched by any refusal.

fio must be installed (``apt-get install fio``); the tmpfs case needs root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    SIGNAL_EXIT,
    CliResult,
    Dbsim,
    InProcessDbsim,
    clean_environment,
    read_csv,
    read_summary,
    single_bundle,
)
from workloads.eda.tree import new_marker, write_marker

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

# A fixed depth: these cases are about the run, the bundle and the refusals, not the iodepth
# search the GCNV presets do by default (tests/e2e/test_baseline_steps.py runs that).
SHORT = ("--runtime", "1", "--ramp", "0.5", "--size", "64M", "--iodepth", "4")
ROW = ["rand-4k-r100", "rand-4k-r75", "rand-4k-r50", "rand-4k-r25", "rand-4k-r0"]
MARKER = ".dbsim-tree"
WORK_DIR = "dbsim-baseline"
PERCENTILES = {
    "p50_us": "50.000000",
    "p95_us": "95.000000",
    "p99_us": "99.000000",
    "p99_9_us": "99.900000",
}
MIB = 1 << 20
SIGNAL_EXIT_WITHIN_S = 20.0


# --------------------------------------------------------------------------- helpers


def fio_num2str(num: int, maxlen: int = 4) -> str:
    """``num`` as fio's text report prints a count (lib/num2str.c with fio's default
    ``significant_figures=4``, base 1, SI prefixes): ``9755``, ``40.4k``, ``347k``."""
    prefixes = ("", "k", "M", "G", "T", "P", "E")
    post, modulo, carry = 0, None, False
    while post < len(prefixes) and len(str(num)) > maxlen:
        modulo, num = num % 1000, num // 1000
        carry = modulo >= 500
        post += 1
    if post >= len(prefixes):
        post = 0
    if modulo is None:
        return f"{num}{prefixes[post]}"
    room = maxlen - len(str(num))
    if room <= 1:  # no room for decimals
        return f"{num + 1 if carry else num}{prefixes[post]}"
    decimals = f"{modulo / 1000:.{room - 1}f}"  # C's %.*f: both round the exact binary value
    if decimals[0] == "1":
        num += 1
    return f"{num}.{decimals[2:]}{prefixes[post]}"


def fio_text_iops(parsed_iops: float) -> str:
    """What fio prints after ``IOPS=`` for the IOPS its JSON gives: the text uses the integer
    ``1000 * ios / runtime_ms`` (the JSON the same quotient as a double), then num2str."""
    return fio_num2str(int(parsed_iops))


def printed_iops(report: str, direction: str) -> str | None:
    """The ``read: IOPS=…`` (or write) figure in fio's text report, None if fio printed none."""
    found = re.search(rf"^\s+{direction}: IOPS=([^,]+),", report, re.MULTILINE)
    return found.group(1) if found else None


Snapshot = dict[str, tuple[int, int, int]]


def snapshot(path: Path) -> Snapshot:
    """Every entry under ``path`` (itself included): type/mode, mtime (ns) and size."""
    if not os.path.lexists(path):
        return {}
    entries = [path]
    if path.is_dir() and not path.is_symlink():
        entries += sorted(path.rglob("*"))
    out: Snapshot = {}
    for entry in entries:
        st = entry.lstat()
        out[str(entry.relative_to(path))] = (st.st_mode, st.st_mtime_ns, st.st_size)
    return out


def error_lines(result: CliResult) -> list[str]:
    return [line for line in result.stderr_lines if line.startswith("error:")]


def assert_refused(result: CliResult, out: Path, *needles: str) -> str:
    """Exit 2 with exactly one ``error:`` line (and nothing else), no traceback, no bundle."""
    assert result.rc == 2, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert result.stderr_lines == error_lines(result), result.describe()
    assert len(error_lines(result)) == 1, result.describe()
    line = error_lines(result)[0]
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert not out.exists(), f"a bundle directory was created: {list(out.rglob('*'))}"
    return line


def read_baseline(bundle: Path) -> dict[str, Any]:
    data = json.loads((bundle / "baseline.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def fio_job(bundle: Path, point_id: str) -> dict[str, Any]:
    document = json.loads((bundle / "fio" / f"{point_id}.json").read_text(encoding="utf-8"))
    assert len(document["jobs"]) == 1, "group_reporting: one job entry"
    job: dict[str, Any] = document["jobs"][0]
    return job


def assert_parsed_as_fio_reported(bundle: Path, point: dict[str, Any]) -> None:
    """The point's figures are fio's own JSON figures, exactly (parsed, not recomputed), and
    fio's own text report prints the same IOPS under its rounding."""
    job = fio_job(bundle, point["id"])
    report = (bundle / "fio" / f"{point['id']}.txt").read_text(encoding="utf-8")
    assert not report.lstrip().startswith("{"), "the .txt part holds fio's JSON"
    for direction in ("read", "write"):
        ours, theirs = point[direction], job[direction]
        where = f"{point['id']} {direction}"
        assert ours["iops"] == theirs["iops"], where
        assert ours["ios"] == theirs["total_ios"], where
        assert ours["bw_kib_s"] == theirs["bw"], where
        assert ours["mib_s"] == theirs["bw_bytes"] / MIB, where
        percentiles = theirs["clat_ns"].get("percentile") or {}
        for key, name in PERCENTILES.items():
            expected = percentiles[name] / 1000.0 if name in percentiles else None
            assert ours[key] == expected, f"{where} {key}: {ours[key]} vs fio's {expected}"
            if theirs["total_ios"]:
                assert expected is not None, f"{where}: fio reported no {name} percentile"
        printed = printed_iops(report, direction)
        if theirs["total_ios"]:
            assert printed == fio_text_iops(ours["iops"]), (
                f"{where}: fio printed IOPS={printed}, the parsed {ours['iops']} is "
                f"{fio_text_iops(ours['iops'])} in fio's rounding"
            )
        else:
            assert printed is None, f"{where}: fio printed IOPS={printed} without any I/O"
    assert point["iops"] == job["read"]["iops"] + job["write"]["iops"]


def wait_for_file(proc: subprocess.Popen[str], pattern: str, root: Path, timeout: float) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"dbsim exited ({proc.returncode}) before {pattern} appeared:\n{err}")
        time.sleep(0.01)
    pytest.fail(f"{pattern} did not appear under {root} within {timeout} s")


def fio_processes(needle: str) -> str:
    """Processes whose command line contains ``needle`` (``pgrep -af``), '' when none."""
    done = subprocess.run(
        ["pgrep", "-af", re.escape(needle)], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


# --------------------------------------------------------------------------- 1. the 4 KiB row


@dataclass(frozen=True)
class RowRun:
    result: CliResult
    target: Path
    bundle: Path
    baseline: dict[str, Any]
    points: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def row_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RowRun]:
    """The whole random-4k row on a new directory of the root file system, run once."""
    base = tmp_path_factory.mktemp("row")
    for name in ("cwd", "tmp"):
        (base / name).mkdir()
    runner = Dbsim(base / "cwd", clean_environment(base / "tmp"))
    target, out = base / "tree", base / "out"
    try:
        result = runner("baseline", target, "--preset", "random-4k", *SHORT, "-o", out)
        assert result.rc == 0, result.describe()
        bundle = single_bundle(out)
        baseline = read_baseline(bundle)
        yield RowRun(result, target, bundle, baseline, {p["id"]: p for p in baseline["points"]})
    finally:
        runner.cleanup()


def test_row_measures_every_point(row_run: RowRun) -> None:
    assert [p["id"] for p in row_run.baseline["points"]] == ROW
    for point in row_run.baseline["points"]:
        assert point["status"] == "completed", point
        assert point["iops"] > 0, point
    summary = read_summary(row_run.bundle)
    assert summary["status"] == "completed"
    assert [p["id"] for p in summary["baseline"]["points"]] == ROW
    assert summary["baseline"]["fio"]["version"].startswith("fio-")
    for point_id in ROW:
        for suffix in (".fio", ".json", ".txt"):
            assert (row_run.bundle / "fio" / f"{point_id}{suffix}").is_file(), point_id + suffix
    assert not list((row_run.bundle / "fio").glob("*.out")), "fio's raw output was not split"


@pytest.mark.parametrize("point_id", ROW)
def test_row_figures_are_fios_own(row_run: RowRun, point_id: str) -> None:
    assert_parsed_as_fio_reported(row_run.bundle, row_run.points[point_id])


@pytest.mark.parametrize("point_id", ROW)
def test_row_mix_is_the_points(row_run: RowRun, point_id: str) -> None:
    """fio's own I/O counts give the read share the point asked for (±2 points)."""
    job = fio_job(row_run.bundle, point_id)
    reads, writes = job["read"]["total_ios"], job["write"]["total_ios"]
    assert reads + writes > 0
    target = row_run.points[point_id]["read_pct"]
    assert target == int(point_id.rsplit("-r", 1)[1])
    assert abs(100.0 * reads / (reads + writes) - target) <= 2.0, (reads, writes, target)


@pytest.mark.parametrize("point_id", ROW)
def test_row_device_figures_on_the_same_clock(row_run: RowRun, point_id: str) -> None:
    point = row_run.points[point_id]
    assert point["t_start"] <= point["t_measure_start"] < point["t_end"], point
    device = point["device"]
    assert device, f"{point_id}: no block-device figures over its measured window"
    busiest = max(device.values(), key=lambda d: d.get("r_s", 0) + d.get("w_s", 0))
    # O_DIRECT: fio's reads and writes reach the device in the window.
    if point["read_pct"] > 0:
        assert busiest["r_s"] > 0, (point_id, device)
    if point["read_pct"] < 100:
        assert busiest["w_s"] > 0, (point_id, device)


def test_row_csv_and_report(row_run: RowRun) -> None:
    _header, rows = read_csv(row_run.bundle / "baseline.csv")
    assert len(rows) == 5
    assert [r["id"] for r in rows] == ROW
    assert {r["status"] for r in rows} == {"completed"}
    for row in rows:
        assert float(row["read_iops"]) == row_run.points[row["id"]]["read"]["iops"]
    html = (row_run.bundle / "report.html").read_text(encoding="utf-8")
    for point_id in ROW:
        assert point_id in html
    assert "<script" not in html.lower()


def test_row_leaves_no_tree(row_run: RowRun) -> None:
    """dbsim created the root: release_tree removes fio's files, the marker and the root."""
    assert not os.path.lexists(row_run.target), snapshot(row_run.target)


def test_keep_files_are_reused(dbsim: Dbsim, tmp_path: Path, out_dir: Path) -> None:
    """--keep-files leaves fio's files in the marked tree; the next run lays out over the
    same files."""
    target = tmp_path / "kept"
    target.mkdir()

    def fio_files() -> dict[str, tuple[int, int]]:
        return {p.name: (p.stat().st_ino, p.stat().st_size) for p in (target / WORK_DIR).iterdir()}

    keep = ("--keep-files", "-q", "-o", out_dir)
    first = dbsim("baseline", target, *SHORT, "--only", "r100", *keep, "--name", "first")
    assert first.rc == 0, first.describe()
    numjobs = read_baseline(Path(first.stdout.strip()))["points"][0]["numjobs"]
    assert sorted(os.listdir(target)) == sorted([MARKER, WORK_DIR])
    kept = fio_files()
    assert sorted(kept) == [f"dbsim-fio.{n}" for n in range(numjobs)]
    assert all(size == (64 * MIB // numjobs) for _, size in kept.values()), kept
    marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    assert marker["owner"] == "dbsim" and marker["baseline"] == {"dir": WORK_DIR}
    assert marker["created_root"] is False

    second = dbsim("baseline", target, *SHORT, "--only", "r0", *keep, "--name", "second")
    assert second.rc == 0, second.describe()
    assert fio_files() == kept, "the second run did not reuse fio's files"


# --------------------------------------------------------------------------- 2. --json, --quiet


def test_json_output(dbsim: Dbsim, tmp_path: Path, out_dir: Path) -> None:
    result = dbsim(
        "baseline", tmp_path / "tree", *SHORT, "--only", "rand-4k-r75", "--json", "-o", out_dir
    )
    assert result.rc == 0, result.describe()
    summary = json.loads(result.stdout)
    assert summary["status"] == "completed"
    assert [p["id"] for p in summary["baseline"]["points"]] == ["rand-4k-r75"]
    bundle = single_bundle(out_dir)
    assert Path(summary["bundle"]) == bundle
    assert summary["baseline"] == read_summary(bundle)["baseline"]
    assert result.stderr == "", "--json: no progress lines"


def test_quiet_prints_only_the_bundle(dbsim: Dbsim, tmp_path: Path, out_dir: Path) -> None:
    """… and on an empty root the user made, release_tree leaves that root, empty."""
    target = tmp_path / "mine"
    target.mkdir()
    result = dbsim("baseline", target, *SHORT, "--only", "rand-4k-r0", "-q", "-o", out_dir)
    assert result.rc == 0, result.describe()
    assert result.stdout == f"{single_bundle(out_dir)}\n"
    assert result.stderr == ""
    assert target.is_dir() and os.listdir(target) == [], "the user's root must stay, empty"


# --------------------------------------------------------------------------- 3, 4. refusals
#
# Each refusal has its own cwd, TMPDIR, target and -o directory. The first runs the real binary
# (started first, so it runs while the others are checked); the others run the same command
# through sim.cli.entry.main in this process (InProcessDbsim: the same environment, about a
# second less each), since what they check is the command's decision and what it left.


def _nonempty(root: Path) -> None:
    root.mkdir()
    (root / "data.txt").write_text("someone's\n")


def _unrecorded_work_dir(root: Path) -> None:
    # dbsim's own marker for this root (an EDA tree's), which records no baseline directory.
    root.mkdir()
    write_marker(root, new_marker(created_root=False))
    (root / WORK_DIR).mkdir()
    (root / WORK_DIR / "dbsim-fio.0").write_text("not dbsim's\n")


def _foreign_marker(root: Path) -> None:
    root.mkdir()
    (root / MARKER).write_text('{"owner": "someone else"}\n')


def _regular_file(root: Path) -> None:
    root.write_text("a file\n")


def _empty(root: Path) -> None:
    root.mkdir()


def _absent(root: Path) -> None:
    pass


@dataclass(frozen=True)
class Refusal:
    id: str
    prepare: Callable[[Path], None]
    args: tuple[str, ...]
    needles: tuple[str, ...]  # each in the error line
    env: str | None = None  # "DBSIM_FIO": a missing fio binary; "PATH": no fio on PATH


REFUSALS = [
    # the target (3.)
    Refusal("non-empty-without-marker", _nonempty, (), ("is not empty", MARKER)),
    Refusal("unrecorded-work-dir", _unrecorded_work_dir, (), (WORK_DIR, "not recorded")),
    Refusal("foreign-marker", _foreign_marker, (), ("not a dbsim marker",)),
    Refusal("regular-file", _regular_file, (), ("not a directory",)),
    Refusal("raw-device-for-directory", _empty, ("--raw-device", "/dev/null"),
            ("--raw-device", "not a block device")),
    # bad options (3.); SHORT comes first, so the option under test wins
    Refusal("unknown-preset", _absent, ("--preset", "random-3k"), ("--preset",)),
    Refusal("bad-only-term", _absent, ("--only", "zz9"), ("--only",)),
    Refusal("unknown-envelope", _absent, ("--envelope", "no-such-envelope"), ("--envelope",)),
    Refusal("runtime-0", _absent, ("--runtime", "0"), ("--runtime",)),
    Refusal("size-nonsense", _absent, ("--size", "nonsense"), ("--size",)),
    Refusal("size-0", _absent, ("--size", "0"), ("--size",)),
    # fio missing (4.)
    Refusal("fio-missing-DBSIM_FIO", _empty, (), ("fio is not installed", "apt-get install fio"),
            env="DBSIM_FIO"),
    Refusal("fio-missing-PATH", _empty, (), ("fio is not installed", "apt-get install fio"),
            env="PATH"),
]  # fmt: skip


@dataclass(frozen=True)
class Refused:
    result: CliResult
    target: Path
    out: Path
    before: Snapshot


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Refused]]:
    started: list[tuple[Refusal, Dbsim, subprocess.Popen[str], Path, Path, Snapshot]] = []
    done: dict[str, Refused] = {}
    try:
        for case in REFUSALS:
            base = tmp_path_factory.mktemp(case.id)
            for name in ("cwd", "tmp", "bin"):
                (base / name).mkdir()
            runner = Dbsim(base / "cwd", clean_environment(base / "tmp"))
            target, out = base / "target", base / "out"
            case.prepare(target)
            before = snapshot(target)
            env = {
                None: {},
                "DBSIM_FIO": {"DBSIM_FIO": "/nonexistent/fio"},
                # a PATH without fio; the child's python is started by its absolute path
                "PATH": {"PATH": str(base / "bin")},
            }[case.env]
            argv = ("baseline", target, *SHORT, *case.args, "-o", out)
            if case is REFUSALS[0]:
                proc = runner.start(*argv, env=env)
                started.append((case, runner, proc, target, out, before))
            else:
                result = InProcessDbsim(runner.cwd, runner.env)(*argv, env=env)
                done[case.id] = Refused(result, target, out, before)
        for case, runner, proc, target, out, before in started:
            done[case.id] = Refused(runner.finish(proc, timeout=60), target, out, before)
        yield done
    finally:
        for _, runner, *_rest in started:
            runner.cleanup()


@pytest.mark.parametrize("case", REFUSALS, ids=[c.id for c in REFUSALS])
def test_refused_and_untouched(refused: dict[str, Refused], case: Refusal) -> None:
    """Exit 2, one ``error:`` line naming the cause, no traceback, no bundle directory, and
    the target exactly as it was (names, types, mtimes, sizes; absent stays absent)."""
    got = refused[case.id]
    assert_refused(got.result, got.out, *case.needles)
    assert snapshot(got.target) == got.before


def test_unusable_output_directory_gives_the_tree_back(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    """The tree is claimed (marker written) before the bundle is made: when the bundle cannot
    be made, the claim is undone, so a bad --output leaves no trace on the target. (In this
    process: the command's decision and what it left; fio is never started.)"""
    dbsim = dbsim_in_process
    target = tmp_path / "tree"
    out = Path("/proc/dbsim-no-such-dir")  # mkdir fails there for root too
    result = dbsim("baseline", target, *SHORT, "-o", out)
    assert_refused(result, out, "baseline --output", "cannot create")
    assert not os.path.lexists(target), sorted(p.name for p in target.iterdir())


# --------------------------------------------------------------------------- 5. fio fails


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs under tmp_path (root only), unmounted at teardown."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: mounting a tmpfs needs root; fio failure case not run")
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=False)
        done = subprocess.run(["umount", str(mount)], check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def test_fio_failing_mid_run(dbsim: Dbsim, tmpfs: Path, out_dir: Path) -> None:
    """The volume turns read-only while the first point (reads) runs: the second point's fio
    cannot open its files for writing. Exit 3, fio's error in one line, and a failed bundle
    that keeps the point measured before."""
    target = tmpfs / "tree"
    proc = dbsim.start(
        "baseline",
        target,
        "--runtime",
        "2",
        "--ramp",
        "0.5",
        "--size",
        "64M",
        "--iodepth",
        "4",
        "--only",
        "rand-4k-r100",
        "--only",
        "rand-4k-r75",
        "-o",
        out_dir,
        "-q",
    )
    wait_for_file(proc, "*/fio/rand-4k-r100.fio", out_dir, timeout=30)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    result = dbsim.finish(proc, timeout=60)

    assert result.rc == 3, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert result.stderr_lines == error_lines(result) and len(error_lines(result)) == 1, (
        result.describe()
    )
    line = error_lines(result)[0]
    assert "rand-4k-r75" in line and "Read-only file system" in line, line
    bundle = single_bundle(out_dir)
    assert result.stdout == f"{bundle}\n"
    summary = read_summary(bundle)
    assert summary["status"] == "failed"
    assert "Read-only file system" in summary["error"]
    baseline = read_baseline(bundle)
    assert [(p["id"], p["status"]) for p in baseline["points"]] == [
        ("rand-4k-r100", "completed"),
        ("rand-4k-r75", "failed"),  # listed, with fio's error, beside what was measured
    ]
    assert "Read-only file system" in baseline["points"][1]["error"]
    assert_parsed_as_fio_reported(bundle, baseline["points"][0])
    assert summary["baseline"] == baseline
    # The read-only volume also kept fio's files: the bundle says so instead of hiding it.
    assert any("could not be removed" in m for m in summary.get("messages", [])), summary
    _header, rows = read_csv(bundle / "baseline.csv")
    assert [(r["id"], r["status"]) for r in rows] == [
        ("rand-4k-r100", "completed"),
        ("rand-4k-r75", "failed"),
    ]
    assert (bundle / "report.html").is_file()


# --------------------------------------------------------------------------- 6. signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_a_point(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path, signum: signal.Signals
) -> None:
    target = tmp_path / "tree"
    proc = dbsim.start(
        "baseline", target, "--runtime", "20", "--ramp", "0.5", "--size", "64M", "--iodepth", "4",
        "-o", out_dir, "-q",
    )  # fmt: skip
    job = wait_for_file(proc, "*/fio/rand-4k-r100.fio", out_dir, timeout=30)
    bundle = job.parents[1]
    time.sleep(1.0)
    assert proc.poll() is None, "dbsim ended before the signal"
    sent = time.monotonic()
    proc.send_signal(signum)
    result = dbsim.finish(proc, timeout=SIGNAL_EXIT_WITHIN_S + 5)
    took = time.monotonic() - sent

    assert result.rc == SIGNAL_EXIT[signum], result.describe()
    assert took < SIGNAL_EXIT_WITHIN_S, f"exit took {took:.1f} s"
    assert "Traceback" not in result.stderr, result.describe()
    assert result.stdout == f"{bundle}\n"
    assert not fio_processes(str(bundle)), "fio outlived dbsim"
    assert not fio_processes(str(job))
    summary = read_summary(bundle)
    assert summary["status"] == "interrupted"
    baseline = read_baseline(bundle)
    assert summary["baseline"] == baseline
    assert [p["id"] for p in baseline["points"]] == ["rand-4k-r100"], "no point after the signal"
    point = baseline["points"][0]
    assert point["status"] == "interrupted"
    if (bundle / "fio" / "rand-4k-r100.json").exists():  # fio printed its partial figures
        assert_parsed_as_fio_reported(bundle, point)
        assert point["read"]["ios"] > 0
        assert point["t_measure_start"] < point["t_end"]
    _header, rows = read_csv(bundle / "baseline.csv")
    assert [(r["id"], r["status"]) for r in rows] == [("rand-4k-r100", "interrupted")]
    assert not os.path.lexists(target), f"fio's files were left: {snapshot(target)}"


# --------------------------------------------------------------------------- the helper itself


@pytest.mark.parametrize(
    ("num", "printed"),
    [
        (0, "0"),
        (999, "999"),
        (9755, "9755"),
        (40417, "40.4k"),
        (45658, "45.7k"),
        (45960, "46.0k"),
        (347385, "347k"),
        (347500, "348k"),
        (1234567, "1235k"),
    ],
)
def test_fio_num2str(num: int, printed: str) -> None:
    assert fio_num2str(num) == printed
