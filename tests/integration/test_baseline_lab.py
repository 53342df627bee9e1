"""Ground truth for ``dbsim baseline`` on real devices (root: loop devices, mounts, cgroups).

1. **The lab's ceiling.** A private lab (its own state, image, mount and cgroup names) caps
   its loop device at 500 read and 500 write IOPS. The 4 KiB random row (100/75/50/25/0 %
   read) runs with fio inside the lab's groups. fio keeps each point's read share, so the
   point's total is bound by whichever direction reaches its ceiling first::

       total(f) = min(500 / f, 500 / (1 - f))  → 500, 666.7, 1000, 666.7, 500 IOPS

   fio's own measured total, and the loop device's iostat figures over the same window, must
   sit within 5 % of that.
2. **Raw devices.** fio writes to a raw device only when it is named twice and carries
   nothing: refused without ``--raw-device``, with another device named, with an ext4
   signature, with a partition table and when mounted — and the refused device's first MiB
   is unchanged (the first refusal through the real binary, the others through
   ``sim.cli.entry.main`` in the test process). A bare loop device is accepted and measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.baseline.run import BaselineOptions, BaselineRun
from tests.e2e.conftest import CliResult, InProcessDbsim
from tests.integration.test_lab import _require_lab, lab_env  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.root]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
CEILING = 500
#: fio's total over its runtime against blk-throttle's ceiling: up to one 100 ms slice at each
#: edge of the 6 s run (2 x 0.1 / 6 = 3.3 %).
REL_TOL = 0.05


def _expected_total(read_pct: int) -> float:
    f = read_pct / 100
    limits = [CEILING / f if f else float("inf"), CEILING / (1 - f) if f < 1 else float("inf")]
    return min(limits)


def _require_fio() -> None:
    if not any(os.access(Path(p) / "fio", os.X_OK) for p in os.environ["PATH"].split(":")):
        pytest.skip("!!! NOT RUN: fio is not installed (apt-get install fio; make test does)")


@pytest.mark.timing
def test_random_4k_row_sits_at_the_lab_ceiling(lab_env, tmp_path: Path) -> None:  # noqa: F811
    _require_fio()
    lab, mount_point = lab_env
    status = lab.up(1024 * MiB, mount_point, read_iops=CEILING, write_iops=CEILING)
    opts = BaselineOptions(
        target=mount_point / "baseline",
        presets=["random-4k"],
        runtime_s=6.0,
        ramp_s=1.0,
        size_bytes=256 * MiB,
        numjobs=2,
        iodepth=8,
        lab=True,
        directory=tmp_path / "runs",
    )
    lines: list[str] = []
    run = BaselineRun(opts, on_line=lines.append, lab=lab)
    loop = asyncio.new_event_loop()
    try:
        summary, bundle = loop.run_until_complete(run.run(asyncio.Event()))
    finally:
        loop.close()
    assert summary["status"] == "completed", summary.get("error")
    points = {p["id"]: p for p in summary["baseline"]["points"]}
    device = Path(status["device"]).name
    report = []
    for pct in (100, 75, 50, 25, 0):
        point = points[f"rand-4k-r{pct}"]
        expected = _expected_total(pct)
        fio_total = point["iops"]
        dev = point["device"][device]
        dev_total = dev["r_s"] + dev["w_s"]
        report.append(
            f"r{pct}: expected {expected:.1f}, fio {fio_total:.1f}, device {dev_total:.1f} "
            f"(fio read {point['read']['iops']:.1f} write {point['write']['iops']:.1f})"
        )
    print("\n".join(report))
    for pct, text in zip((100, 75, 50, 25, 0), report, strict=True):
        point = points[f"rand-4k-r{pct}"]
        expected = _expected_total(pct)
        assert point["iops"] == pytest.approx(expected, rel=REL_TOL), text
        dev = point["device"][device]
        assert dev["r_s"] + dev["w_s"] == pytest.approx(expected, rel=REL_TOL), text
    # The files fio wrote are gone; the lab's mount holds nothing of the baseline.
    assert not (mount_point / "baseline").exists()
    assert (bundle / "report.html").is_file()


# --------------------------------------------------------------------------- raw devices


@contextlib.contextmanager
def _loop_device(path: Path, size: int = 64 * MiB) -> Iterator[str]:
    with open(path, "wb") as handle:
        handle.truncate(size)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)


def _head_hash(dev: str) -> str:
    with open(dev, "rb") as handle:
        return hashlib.sha256(handle.read(MiB)).hexdigest()


def _dbsim(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "sim.cli", "baseline", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _in_process(cwd: Path, *args: str) -> CliResult:
    """``dbsim baseline ARGS`` through ``sim.cli.entry.main`` in this process (the same
    environment as :func:`_dbsim`'s child, about a second less)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    return InProcessDbsim(cwd, env)("baseline", *args)


def _refused(result: subprocess.CompletedProcess[str] | CliResult, words: str, cwd: Path) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words in lines[0], lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert not (cwd / "runs").exists(), "a refused baseline created a bundle"


def _write_dos_label(dev: str) -> None:
    """One Linux partition from sector 2048 to the end, in an MBR written here (sfdisk is not
    on every machine): blkid reports PTTYPE=dos."""
    sectors = os.path.getsize(dev) if not dev.startswith("/dev/") else _size(dev)
    sectors //= 512
    entry = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little")
    entry += (sectors - 2048).to_bytes(4, "little")
    mbr = bytearray(512)
    mbr[446 : 446 + 16] = entry
    mbr[510:512] = b"\x55\xaa"
    with open(dev, "r+b") as handle:
        handle.write(mbr)


def _size(dev: str) -> int:
    with open(dev, "rb") as handle:
        return handle.seek(0, os.SEEK_END)


@pytest.fixture
def devices(tmp_path: Path) -> Iterator[dict[str, str]]:
    _require_lab()
    _require_fio()
    with contextlib.ExitStack() as stack:
        found = {
            name: stack.enter_context(_loop_device(tmp_path / f"{name}.img"))
            for name in ("raw", "other", "ext4", "parted", "mounted")
        }
        subprocess.run(["mkfs.ext4", "-q", found["ext4"]], check=True)
        subprocess.run(["mkfs.ext4", "-q", found["mounted"]], check=True)
        _write_dos_label(found["parted"])
        mount_point = tmp_path / "mnt"
        mount_point.mkdir()
        # Read-only, so the kernel itself never writes to it (a read-write ext4 mount starts
        # ext4lazyinit and updates the superblock: the device's first MiB changed under the
        # hash in one CI run while dbsim had refused correctly). Mounted is mounted either way.
        subprocess.run(["mount", "-o", "ro", found["mounted"], str(mount_point)], check=True)
        stack.callback(subprocess.run, ["umount", str(mount_point)], check=False)
        yield found


def test_raw_device_refusals_leave_the_device_untouched(devices, tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    common = ("--runtime", "1", "--ramp", "0", "--only", "r0")  # a write test: the risky one
    cases = [
        (devices["raw"], (), "name it again with --raw-device"),
        (devices["raw"], ("--raw-device", devices["other"]), "is not the target"),
        (devices["ext4"], ("--raw-device", devices["ext4"]), "holds ext4"),
        (devices["parted"], ("--raw-device", devices["parted"]), "holds dos"),
        (devices["mounted"], ("--raw-device", devices["mounted"]), "is mounted"),
    ]
    for n, (dev, extra, words) in enumerate(cases):
        before = _head_hash(dev)
        # The first refusal through the real binary, the others in this process.
        run = _dbsim if n == 0 else _in_process
        _refused(run(cwd, dev, *common, *extra), words, cwd)
        assert _head_hash(dev) == before, f"{dev} changed although refused"


def test_bare_raw_device_is_measured(devices, tmp_path: Path) -> None:
    dev = devices["raw"]
    result = _dbsim(
        tmp_path, dev, "--raw-device", dev, "--only", "r100", "--only", "r0",
        "--runtime", "3", "--ramp", "0", "--iodepth", "4", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    points = {p["id"]: p for p in summary["baseline"]["points"]}
    assert set(points) == {"rand-4k-r100", "rand-4k-r0"}
    assert points["rand-4k-r100"]["read"]["iops"] > 0
    assert points["rand-4k-r0"]["write"]["iops"] > 0
    name = Path(dev).name
    assert points["rand-4k-r0"]["device"][name]["w_s"] > 0
    assert summary["scenario"]["target"] == "raw-device"
