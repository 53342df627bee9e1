"""Ground truth for the storage lab: the loop device holds the ceiling it was given.

As root, each test brings up its own lab (its own state directory, image directory, mount
point and cgroup name, so a user's lab or a colleague's test run is never touched) and takes
it down in ``finally`` and again in the fixture, then checks that no loop device, mount,
cgroup or file is left.

1. A reader process of our own, started inside the lab's groups, does random 8 KiB reads
   (O_DIRECT, or buffered after the caches were dropped) on a 512 MiB file as fast as 8
   threads can; :class:`BlockDeviceCollector` samples the loop device each second. The mean
   read IOPS must be within 5 % of the 500 ceiling, then of 200 after ``set_ceiling`` at run
   time.
2. ``postgres=True``: the throwaway cluster answers on its port, the postmaster and a client
   backend are in the lab's groups, the data directory resolves to the loop device, and
   ``down`` stops the server.
3. As ``nobody``, ``dbsim lab up|down|set`` exits 2 with one line and no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.errors import ConfigError
from storage.collectors.block import BlockDeviceCollector
from storage.devices import DeviceResolver
from storage.lab import Lab, apply_step_ceiling, cgroups, system
from tests.support.ramdisk import mount_ram, unmount_ram

pytestmark = [pytest.mark.integration, pytest.mark.root]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
LAB_SIZE = 1024 * MiB
DATA_SIZE = 512 * MiB  # twice the memory limit: the page cache cannot hold the file
MEMORY_LIMIT = 256 * MiB
SETTLE_S = 1.0
MEASURE_S = 6
#: blk-throttle hands out its budget in 100 ms slices: a window of MEASURE_S seconds may hold
#: up to one slice more or less at each edge (2 x 0.1 / 6 = 3.3 %); the diskstats readings'
#: instants are exact to milliseconds.
REL_TOL = 0.05
READER_THREADS = 8

# Random 8 KiB reads until killed; argv: path, "direct" | "buffered", threads.
READER = r"""
import mmap, os, random, sys, threading
path, mode, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
BLOCK = 8192
blocks = os.path.getsize(path) // BLOCK
flags = os.O_RDONLY | (os.O_DIRECT if mode == "direct" else 0)
def work(seed):
    rng = random.Random(seed)
    fd = os.open(path, flags)
    if mode != "direct":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: 8 KiB per miss
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
    while True:
        os.preadv(fd, [buf], rng.randrange(blocks) * BLOCK)
for seed in range(threads):
    threading.Thread(target=work, args=(seed,), daemon=True).start()
threading.Event().wait()  # until the test kills us
"""


def _require_lab() -> None:
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: the lab tests need root (loop devices, mounts, cgroups)")
    mounts = cgroups.v1_mounts()
    missing = [c for c in cgroups.CONTROLLERS if c not in mounts]
    if missing:
        pytest.skip(f"!!! NOT RUN: cgroup v1 {' and '.join(missing)} not mounted")
    tools = system.missing_tools()
    if tools:
        pytest.skip(f"!!! NOT RUN: {', '.join(tools)} missing (util-linux, e2fsprogs)")


def _mounted_under(base: Path) -> list[str]:
    prefix = str(base) + "/"
    return [
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]


@pytest.fixture
def lab_env() -> Iterator[tuple[Lab, Path]]:
    """A lab of the test's own and its mount point; always taken down afterwards."""
    _require_lab()
    # /var/tmp, not pytest's tmp_path: postgres must be able to search every parent directory.
    base = Path(tempfile.mkdtemp(prefix="dbsim-lab-test-", dir="/var/tmp"))
    base.chmod(0o755)
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", 1 << 30)
    lab = Lab(base / "state", base / "images", name=f"dbsim-lab-test-{os.getpid()}")
    try:
        yield lab, base / "mnt"
    finally:
        with contextlib.suppress(Exception):
            lab.down()
        # Last resort, independent of the state file: never leave a mount or loop device.
        for mount_point in _mounted_under(base):
            subprocess.run(["umount", mount_point], check=False)
        for loop in system.loops_for(base / "images" / f"{lab.name}.img"):
            subprocess.run(["losetup", "--detach", loop], check=False)
        unmount_ram(base / "images", ram)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)


def _assert_nothing_left(lab: Lab, status: dict[str, Any]) -> None:
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert status["image"] not in losetup, losetup
    assert status["device"] not in system.loops_for(Path(status["image"]))
    mounts = Path("/proc/mounts").read_text()
    assert f" {status['mount_point']} " not in mounts
    for path in status["cgroups"].values():
        assert not Path(path).exists(), f"cgroup {path} left behind"
    assert not Path(status["image"]).exists(), "image file left behind"
    assert not lab.state_file.exists(), "state file left behind"


def _in_lab_groups(pid: int, lab: Lab) -> dict[str, bool]:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    groups = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            groups[controller] = path.endswith("/" + lab.name)
    return {c: groups.get(c, False) for c in cgroups.CONTROLLERS}


async def _read_iops(device: str, seconds: int) -> list[float]:
    """Per-second read IOPS of ``device`` from the collector, ``seconds`` samples."""
    collector = BlockDeviceCollector([device])
    start = time.monotonic()
    await collector.start(start)
    values = []
    for i in range(1, seconds + 1):
        await asyncio.sleep(max(0.0, start + i - time.monotonic()))
        (sample,) = await collector.sample(time.monotonic())
        values.append(sample.values["r_s"])
    await collector.stop()
    return values


def _write_data(path: Path) -> None:
    chunk = os.urandom(MiB)  # not zeros: nothing may be elided on the way to the device
    with open(path, "wb") as f:
        for _ in range(DATA_SIZE // MiB):
            f.write(chunk)


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["direct", "buffered"])
def test_read_ceiling_holds_and_steps_at_run_time(
    lab_env: tuple[Lab, Path], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lab, mount_point = lab_env
    status = lab.up(LAB_SIZE, mount_point, read_iops=500, memory_limit_bytes=MEMORY_LIMIT)
    try:
        assert status["up"], status
        assert status["ceilings"]["read_iops"] == 500
        device = os.path.basename(status["device"])
        data = mount_point / "data.bin"
        _write_data(data)  # by the test, outside the groups: not throttled
        lab.drop_caches()  # so the reader's pages come from the device, charged to its group
        argv = [sys.executable, "-c", READER, str(data), mode, str(READER_THREADS)]
        # The reader runs ahead of the host's other work, as a lab database does
        # (storage.lab.system.DATABASE_NICE): the test asks whether the ceiling holds, and a
        # reader starved of CPU beside `stress-ng --cpu 2` read 219 IOPS for a second under
        # the 500 ceiling (the others 498-500).
        reader = subprocess.Popen(
            lab.command(argv),
            stdin=subprocess.DEVNULL,
            preexec_fn=system.start_session_ahead(system.DATABASE_NICE),
        )
        try:
            time.sleep(SETTLE_S)
            assert reader.poll() is None, "the reader died"
            assert _in_lab_groups(reader.pid, lab) == {"blkio": True, "memory": True}
            at_500 = asyncio.run(_read_iops(device, MEASURE_S))
            assert lab.set_ceiling(read_iops=200)["read_iops"] == 200
            time.sleep(SETTLE_S)
            at_200 = asyncio.run(_read_iops(device, MEASURE_S))
            usage = lab.status()["memory_usage_bytes"]
        finally:
            reader.kill()
            reader.wait(timeout=10)
        mean_500 = sum(at_500) / len(at_500)
        mean_200 = sum(at_200) / len(at_200)
        with capsys.disabled():
            print(
                f"\n[lab {mode}] 500 ceiling: mean {mean_500:.1f} r/s "
                f"{[round(v, 1) for v in at_500]}\n[lab {mode}] 200 ceiling: mean "
                f"{mean_200:.1f} r/s {[round(v, 1) for v in at_200]}; "
                f"memory cgroup usage {usage / MiB:.1f} MiB"
            )
        assert mean_500 == pytest.approx(500, rel=REL_TOL), at_500
        assert mean_200 == pytest.approx(200, rel=REL_TOL), at_200
        assert usage is not None and usage <= MEMORY_LIMIT
    finally:
        problems = lab.down()
    assert problems == []
    _assert_nothing_left(lab, status)


def _free_port(preferred: int = 55432) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])


def test_throwaway_postgres_runs_inside_the_lab(lab_env: tuple[Lab, Path]) -> None:
    if shutil.which("psql") is None:
        pytest.skip("!!! NOT RUN: psql is missing (postgresql-client)")
    import asyncpg

    lab, mount_point = lab_env
    port = _free_port()
    status = lab.up(512 * MiB, mount_point, read_iops=500, postgres=True, pg_port=port)
    try:
        pg = status["postgres"]
        assert pg["running"] and pg["port"] == port, status
        password = Path(pg["password_file"]).read_text().strip()
        assert oct(Path(pg["password_file"]).stat().st_mode & 0o777) == "0o600"
        env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10"}
        psql = ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-Atc"]
        done = subprocess.run([*psql, "select 1"], env=env, capture_output=True, text=True)
        assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr

        async def backend() -> tuple[int, str, dict[str, bool]]:
            conn = await asyncpg.connect(
                host="127.0.0.1", port=port, user="postgres", password=password
            )
            try:
                pid = await conn.fetchval("select pg_backend_pid()")
                data_dir = await conn.fetchval("show data_directory")
                return pid, data_dir, _in_lab_groups(pid, lab)
            finally:
                await conn.close()

        backend_pid, data_dir, backend_groups = asyncio.run(backend())
        assert backend_groups == {"blkio": True, "memory": True}, backend_pid
        assert _in_lab_groups(pg["pid"], lab) == {"blkio": True, "memory": True}
        assert set(lab.status()["pids"]) >= {pg["pid"]}

        assert data_dir == pg["data_dir"]
        resolved = DeviceResolver().resolve(data_dir)
        assert resolved.kind == "block", resolved
        first = resolved.devices[0]
        assert (first.devtype, f"/dev/{first.name}") == ("loop", status["device"]), resolved
        assert first.backing_file == status["image"]
        postmaster = pg["pid"]
    finally:
        problems = lab.down()
    assert problems == []
    assert not Path(f"/proc/{postmaster}").exists() or "postgres" not in (
        Path(f"/proc/{postmaster}/comm").read_text()
    )
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "the lab's postgres still listens"
    _assert_nothing_left(lab, status)


def test_up_again_reports_and_adjusts(lab_env: tuple[Lab, Path]) -> None:
    lab, mount_point = lab_env
    status = lab.up(64 * MiB, mount_point, read_iops=300, write_iops=100)
    try:
        again = lab.up(64 * MiB, mount_point, read_iops=400)
        assert again["already_up"] and again["device"] == status["device"]
        assert again["ceilings"] == {
            "read_iops": 400,
            "write_iops": 100,
            "read_bps": None,
            "write_bps": None,
        }
        assert lab.set_ceiling(write_iops=0, read_bps=10 * MiB)["write_iops"] is None
        assert lab.status()["ceilings"]["read_bps"] == 10 * MiB
        # A scenario step's `lab:` settings: names not given keep their value.
        assert apply_step_ceiling(lab, None) == {}
        assert apply_step_ceiling(lab, {"read_iops": 250, "read_bps": None}) == {
            "read_iops": 250,
            "write_iops": None,
            "read_bps": None,
            "write_bps": None,
        }
        with pytest.raises(ConfigError, match="unknown read_ops"):
            apply_step_ceiling(lab, {"read_ops": 1})
        with pytest.raises(ConfigError, match="not a whole number"):
            apply_step_ceiling(lab, {"read_iops": "fast"})
    finally:
        problems = lab.down()
    assert problems == []
    _assert_nothing_left(lab, status)


def test_refusals_name_the_missing_piece(
    lab_env: tuple[Lab, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab, mount_point = lab_env
    monkeypatch.setattr(cgroups, "v1_mounts", lambda *a: {"cpu": Path("/sys/fs/cgroup/cpu")})
    with pytest.raises(ConfigError, match="cgroup v1 blkio and memory"):
        lab.up(64 * MiB, mount_point)
    monkeypatch.undo()
    monkeypatch.setattr(system, "missing_tools", lambda *a: ["mkfs.ext4"])
    with pytest.raises(ConfigError, match=r"needs mkfs\.ext4"):
        lab.up(64 * MiB, mount_point)
    assert not lab.state_file.exists()


@pytest.mark.parametrize("args", [["up"], ["down"], ["set", "--read-iops", "100"]])
def test_non_root_is_refused_with_one_line(args: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: switching to nobody needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("!!! NOT RUN: setpriv is missing (util-linux)")
    runner = "import sys, sim.cli.lab; from sim.cli import main; sys.exit(main(sys.argv[1:]))"
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}

    def run(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*as_nobody, sys.executable, "-c", code, *argv],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    # The interpreter may live where nobody cannot read (a pyenv build under /root): then
    # this test cannot say anything about dbsim.
    probe = run("import sim.cli.lab")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"!!! NOT RUN: nobody cannot run {sys.executable} with dbsim: {last}")
    done = run(runner, "lab", *args)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and lines[0].startswith("error: dbsim lab needs root: "), lines
    assert "Traceback" not in done.stderr + done.stdout
