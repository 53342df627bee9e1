"""``dbsim capture`` against workloads dbsim did not write, checked against the tools' own
figures, and the target left exactly as it was.

- **fio on a loop device**: a 256 MiB file attached with ``losetup``, ext4 on it, a tree of
  files and a data file beside it. ``dbsim capture --path <tree>`` and ``iostat -dx -y loopN
  W 1`` (one report over W seconds) both watch while fio does paced random 4 KiB/64 KiB
  direct reads and writes on the data file. Nothing else uses the device, so every request
  falls inside both windows: the capture's reads and writes (the sum of each interval's rate
  times its length), the kB moved and the mean request sizes must equal iostat's within 2 %.
  The tree is unchanged: path, size, inode, mtime and ctime of every entry, before and after.
- **pgbench on PostgreSQL**: a scratch database (created and dropped here), ``pgbench -i``,
  then ``dbsim capture --target-kind postgres`` around ``pgbench -n --rate=100 -T 20``: the
  capture's commits (``commits_s`` times each interval) equal the transactions pgbench reports
  within 3 %, so its commits per second over pgbench's run equal pgbench's tps; the
  database's catalogue (pg_class, pg_namespace) is unchanged, and a statement that would
  write through the capture's own connections is refused by the server (read-only).
"""

from __future__ import annotations

import asyncio
import csv
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, clean_environment, read_summary, single_bundle

pytestmark = [pytest.mark.integration, pytest.mark.timing]

PG = ["-h", "127.0.0.1", "-U", "postgres"]
REL_TOL = 0.02
PGBENCH_RATE = 100
PGBENCH_SECONDS = 20
SLEEP_S = 3


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"!!! NOT RUN: {tool} is missing")


def _intervals(out: Path) -> int:
    for path in out.glob("*/summary.json"):
        try:
            return int(read_summary(path.parent).get("intervals_written") or 0)
        except (OSError, ValueError):
            return 0
    return 0


def _wait_for_intervals(proc: subprocess.Popen[str], out: Path, count: int) -> None:
    for _ in range(1200):
        assert proc.poll() is None, f"the capture exited: {proc.communicate()}"
        if _intervals(out) >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"the capture wrote fewer than {count} intervals in a minute")


def _rows(bundle: Path, source: str, entity: str) -> list[dict[str, str]]:
    with (bundle / "timeseries" / f"{source}.csv").open(encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle) if row["entity"] == entity]


def _totals(rows: list[dict[str, str]], keys: tuple[str, ...]) -> dict[str, float]:
    """Each rate times its interval's length (from the ``t`` column), summed."""
    totals = dict.fromkeys(keys, 0.0)
    previous = 0.0
    for row in rows:
        t = float(row["t"])
        for key in keys:
            totals[key] += float(row[key]) * (t - previous)
        previous = t
    return totals


# --------------------------------------------------------------------------- fio + iostat


def tree_state(root: Path) -> list[tuple[str, int, int, int, int]]:
    """Every entry under ``root``: path, size, inode, mtime and ctime (ns), sorted."""
    state = []
    for path in sorted([root, *root.rglob("*")]):
        st = path.lstat()
        state.append(
            (str(path.relative_to(root)), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        )
    return state


@pytest.fixture
def ext4_loop(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: a loop device needs root")
    _need("losetup", "mkfs.ext4", "mount", "fio", "iostat")
    image = tmp_path / "disk.img"
    with image.open("wb") as handle:
        handle.truncate(256 * 1024 * 1024)
    attach = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True
    )
    if attach.returncode != 0:
        pytest.skip(f"!!! NOT RUN: losetup cannot attach a loop device: {attach.stderr.strip()}")
    device = attach.stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        # Inode tables and journal zeroed now, not by a kernel thread in the middle of the test.
        lazy = "lazy_itable_init=0,lazy_journal_init=0"
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", lazy, device], check=True)
        subprocess.run(["mount", "-o", "noatime", device, str(mnt)], check=True)
        yield device, mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        subprocess.run(["losetup", "--detach", device], check=False)


def _iostat_report(text: str, name: str) -> dict[str, float]:
    """The device's line of ``iostat -dx``'s report, by the header's column names."""
    header: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "Device":
            header = words
        elif words and words[0] == name and header:
            return {key: float(value) for key, value in zip(header[1:], words[1:], strict=True)}
    raise AssertionError(f"no {name} line in iostat's output:\n{text}")


def test_capture_of_fio_on_a_loop_device_agrees_with_iostat(
    ext4_loop: tuple[str, Path], tmp_path: Path
) -> None:
    device, mnt = ext4_loop
    name = Path(device).name
    tree, data = mnt / "tree", mnt / "data"
    tree.mkdir()
    data.mkdir()
    for i in range(20):
        (tree / f"file{i}.dat").write_bytes(os.urandom(4096 * (i + 1)))
    # The data file written whole beforehand: reads of never-written blocks reach no device.
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={data / 'fio.bin'}", "bs=1M", "count=64", "oflag=direct", "status=none"],
        check=True,
    )  # fmt: skip
    # Its own file system only: a host-wide sync makes every other test's ext4 commit its
    # journal, counted as that test's writes (storage/lab/pagecache.py).
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    before = tree_state(tree)
    dbsim = Dbsim(tmp_path, clean_environment(tmp_path))
    out = tmp_path / "out"
    capture = dbsim.start("capture", "--path", tree, "--interval", "1", "-o", out)
    try:
        _wait_for_intervals(capture, out, 1)
        iostat = subprocess.Popen(
            ["iostat", "-dx", "-y", name, "16", "1"], stdout=subprocess.PIPE, text=True
        )
        time.sleep(1)
        fio = subprocess.run(
            ["fio", "--name=capture", f"--filename={data / 'fio.bin'}", "--size=64M", "--direct=1",
             "--ioengine=psync", "--rw=randrw", "--rwmixread=67", "--bssplit=4k/85:64k/15",
             "--rate_iops=300,150", "--runtime=10", "--time_based", "--randrepeat=0",
             "--output-format=terse"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        subprocess.run(["sync"], check=True)  # ext4's journal commit inside iostat's window
        report = _iostat_report(iostat.communicate(timeout=60)[0], name)
        time.sleep(1.5)
        capture.send_signal(signal.SIGTERM)
        done = dbsim.finish(capture, timeout=60)
    finally:
        dbsim.cleanup()
    assert done.rc == 143, done.describe()
    bundle = single_bundle(out)
    keys = ("r_s", "w_s", "rkB_s", "wkB_s")
    captured = _totals(_rows(bundle, "block", name), keys)
    window = 16.0  # iostat's one report: rates over its 16 s window
    expected = {"r_s": report["r/s"] * window, "w_s": report["w/s"] * window,
                "rkB_s": report["rkB/s"] * window, "wkB_s": report["wkB/s"] * window}  # fmt: skip
    print(f"fio terse: {fio.stdout.strip()[:200]}")
    print(f"iostat over {window:g} s: {expected}; capture: {captured}")
    for key in keys:
        assert captured[key] == pytest.approx(expected[key], rel=REL_TOL), key
    assert captured["r_s"] > 1000 and captured["w_s"] > 500  # fio's paced load was there
    # Mean request sizes: kB per request over the whole window, as iostat's rareq-sz/wareq-sz.
    assert captured["rkB_s"] / captured["r_s"] == pytest.approx(report["rareq-sz"], rel=REL_TOL)
    assert captured["wkB_s"] / captured["w_s"] == pytest.approx(report["wareq-sz"], rel=REL_TOL)
    assert tree_state(tree) == before


# --------------------------------------------------------------------------- pgbench


def psql(database: str, sql: str) -> str:
    done = subprocess.run(
        ["psql", *PG, "-d", database, "-AtXqc", sql], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"!!! NOT RUN: PostgreSQL on 127.0.0.1:5432 refused: {done.stderr.strip()}")
    return done.stdout


CATALOGUE = (
    "SELECT oid, relname, relnamespace, relkind, relfilenode, relowner, relacl FROM pg_class "
    "ORDER BY oid; SELECT oid, nspname, nspowner, nspacl FROM pg_namespace ORDER BY oid"
)


@pytest.fixture
def scratch_db() -> Iterator[str]:
    _need("psql", "pgbench")
    name = f"capture_{uuid.uuid4().hex[:10]}"
    psql("postgres", f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        psql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_capture_of_pgbench_counts_its_commits_and_changes_nothing(
    scratch_db: str, tmp_path: Path
) -> None:
    subprocess.run(
        ["pgbench", *PG, "-i", "-q", "-s", "1", scratch_db], check=True, capture_output=True
    )
    before = psql(scratch_db, CATALOGUE)
    dbsim = Dbsim(tmp_path, clean_environment(tmp_path))
    out = tmp_path / "out"
    capture = dbsim.start(
        "capture", "--target-kind", "postgres", "--host", "127.0.0.1", "--user", "postgres",
        "--database", scratch_db, "--interval", "1", "-o", out,
    )  # fmt: skip
    try:
        _wait_for_intervals(capture, out, 2)
        # A statement that surely runs across two of the capture's 1 s readings: pgbench's own
        # are ~0.05 ms of server time each (7 per transaction at 100 tps: ~4 % of a session
        # busy), so a reading at an interval's end finds none running about half the time.
        sleeper = subprocess.Popen(
            ["psql", *PG, "-d", scratch_db, "-AtXqc", f"SELECT pg_sleep({SLEEP_S})"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        bench = subprocess.run(
            ["pgbench", *PG, "-n", f"--rate={PGBENCH_RATE}", "-T", str(PGBENCH_SECONDS),
             "-c", "4", "-j", "2", scratch_db],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        sleeper.wait(timeout=60)
        time.sleep(3)  # the server publishes a backend's counts about once a second
        capture.send_signal(signal.SIGINT)
        done = dbsim.finish(capture, timeout=60)
    finally:
        dbsim.cleanup()
    assert done.rc == 130, done.describe()
    processed = int(re.search(r"actually processed: (\d+)", bench.stdout).group(1))  # type: ignore[union-attr]
    tps = float(re.search(r"tps = ([\d.]+)", bench.stdout).group(1))  # type: ignore[union-attr]
    bundle = single_bundle(out)
    rows = _rows(bundle, "db", scratch_db)
    commits = sum(float(row["commits_s"]) * float(row["interval_s"]) for row in rows)
    print(f"pgbench: {processed} transactions, {tps} tps; capture: {commits:.0f} commits")
    assert commits == pytest.approx(processed, rel=0.03)
    # The same count over pgbench's own run is its tps.
    seconds = processed / tps
    assert commits / seconds == pytest.approx(tps, rel=0.03)
    # The sleeping session is seen running; the capture's own session never is: the readings
    # before any client came (the two waited for) count none.
    assert max(float(row["active_sessions"]) for row in rows) >= 1
    assert [float(row["active_sessions"]) for row in rows[:2]] == [0.0, 0.0]
    assert psql(scratch_db, CATALOGUE) == before


def test_the_capture_s_connections_cannot_write(scratch_db: str) -> None:
    from sim.capture.plan import resolve_capture
    from sim.capture.watch import watched_target
    from sim.errors import TargetError
    from sim.protocols import EngineContext
    from sim.sql import Statement

    plan = resolve_capture(
        None,
        [("target.kind", "postgres"), ("target.host", "127.0.0.1"), ("target.user", "postgres"),
         ("target.database", scratch_db)],
        environ={},
    )  # fmt: skip
    target = watched_target(plan.target, [])

    async def try_to_write() -> str:
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            await target.open(EngineContext(asyncio.get_running_loop(), pool))
            conn = await target.connect()
            try:
                await conn.execute(Statement("create", "CREATE TABLE capture_wrote (x int)", ()))
            except TargetError as exc:
                return str(exc)
            finally:
                await conn.close()
                await target.close()
        return "written"

    refused = asyncio.run(try_to_write())
    assert "read-only transaction" in refused
    assert (
        psql(scratch_db, "SELECT count(*) FROM pg_class WHERE relname = 'capture_wrote'") == "0\n"
    )
