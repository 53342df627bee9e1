"""T2 on the lab array (issue #18): a QoS ceiling below the block layer, seen by iostat.

As root, a lab of the test's own (state, images, mount and cgroup names under a fresh
/var/tmp directory) gets one array volume: the FUSE array process serves the LUN, the loop
device is attached to it with direct I/O, ext4 on top. fio reads a file on it at random
(4 KiB, O_DIRECT, 16 in flight) while the host's real ``iostat -x`` watches the loop device:

- with a 500-IOPS policy the device delivers 500 IOPS ± 5 % and its r_await rises far above
  the array's 0.5 ms base service time (the QoS queue: ~16 / 500 s = 32 ms), unlike the
  blk-throttle lab, whose queue sits above the device (await ~0.1 ms); the array's own
  counters agree with iostat on the IOPS and show the QoS delay;
- with the policy lifted at run time (``set_policy``, as ``dbsim lab set`` does) the same
  load runs several times faster (the FUSE array's overhead: its IOPS without QoS) and one
  request at a time takes about the base service time;
- the ONTAP collector, unchanged, reads the array's REST endpoint live over TLS (the lab's
  self-signed certificate as its ``ca_file``): its read IOPS within 5 % of iostat's, its read
  latency within 15 % of iostat's r_await;
- after SIGKILL of the array process, ``down`` leaves no mount, loop device, process or file.

About 30 s; ``-s`` prints the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.collectors.ontap import OntapCollector, OntapSettings
from storage.lab import Lab, parse_volume, system
from storage.lab.qos import read_counters
from tests.integration.test_lab import _mounted_under
from tests.integration.test_lab import _require_lab as require_lab
from tests.support.ramdisk import mount_ram, unmount_ram

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

POLICY_IOPS = 500
SERVICE_US = 500
#: The policy paces requests 1/max_iops apart with no burst (storage/lab/qos.py): the count is
#: exact to one request at each edge of the window; 5 % is for the FUSE array's CPU on two
#: shared cores, which can fall behind the schedule. The array runs ahead of the host's other
#: work (storage/lab/system.py ARRAY_NICE): at nice 0 beside `stress-ng --cpu 2` and another
#: timing test it delivered 449.6 of 500; ahead, 499.4 beside stress-ng.
IOPS_TOL = 0.05
DEPTH = 16
#: What the FUSE array's Python adds to a request, and the kernel path around it (loop
#: device, FUSE, the reply) adds to that, on a CPU of its own: quiet, one request at a time
#: read 0.13-0.14 ms beyond the service at the array and 0.20-0.22 ms more at iostat; the
#: bounds leave that path 3-4x room, and CPU waits are measured and added on top.
ARRAY_OVERHEAD_MS = 0.5
PATH_OVERHEAD_MS = 1.0
SAMPLES = 5  # iostat intervals of 1 s, after one to let fio start


def _require_array() -> None:
    require_lab()
    missing = system.missing_tools(("fio", "iostat", "fusermount3"))
    if missing or not Path("/dev/fuse").exists():
        pytest.skip(
            f"!!! NOT RUN: the lab array needs /dev/fuse, fio, iostat, fusermount3 "
            f"(missing: {', '.join(missing) or '/dev/fuse'})"
        )
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        pytest.skip(f"!!! NOT RUN: mfusepy / libfuse3 missing: {exc}")


@pytest.fixture(scope="module")
def array_lab() -> Iterator[tuple[Lab, dict[str, Any], Path]]:
    """The lab, its status once up, and its base directory; always taken down."""
    _require_array()
    base = Path(tempfile.mkdtemp(prefix="dbsim-lab-array-", dir="/var/tmp"))
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", 256 << 20)
    lab = Lab(base / "state", base / "images", name=f"dbsim-lab-array-{os.getpid()}")
    spec = parse_volume(f"lun:qos-iops={POLICY_IOPS},service-us={SERVICE_US}")
    try:
        status = lab.up(256 << 20, base / "mnt", volumes=[spec])
        _fio(status, "write", "--rw=write", "--bs=1M", "--iodepth=4", "--size=64M")
        yield lab, status, base
    finally:
        problems = lab.down()
        unmount_ram(base / "images", ram)
        shutil.rmtree(base, ignore_errors=True)
        assert not problems, problems


def _fio(status: dict[str, Any], name: str, *args: str, runtime_s: float | None = None) -> None:
    argv = [
        "fio",
        f"--name={name}",
        f"--filename={status['volumes'][0]['mount_point']}/f",
        "--size=64M",
        "--direct=1",
        "--ioengine=libaio",
        "--output=/dev/null",
        *args,
    ]
    if runtime_s:
        argv += [f"--runtime={runtime_s}", "--time_based"]
    subprocess.run(argv, check=True, timeout=120, capture_output=True)


def _measure(
    status: dict[str, Any],
    depth: int,
    samples: int = SAMPLES,
    ontap: OntapCollector | None = None,
) -> dict[str, float]:
    """Random 4 KiB reads at ``depth`` while ``iostat -x`` samples the loop device: mean r/s
    and r_await over the intervals, the array's read ops/s over the same time and, with
    ``ontap``, what the ONTAP collector read from the array's REST endpoint over it."""
    device = os.path.basename(status["volumes"][0]["device"])
    array_dir = Path(status["volumes"][0]["array"]["dir"])
    array_pid = status["volumes"][0]["array"]["pid"]
    # fio runs ahead of the host's other work, as a lab database does
    # (storage.lab.system.DATABASE_NICE), behind the array (ARRAY_NICE): the test asks
    # whether the policy holds the device's IOPS, and the policy has no burst, so a slot
    # with no request waiting is lost. At nice 0, in a timing phase beside `stress-ng --cpu 2`,
    # the 500-IOPS policy delivered 414.
    fio = subprocess.Popen(
        [
            "fio",
            "--name=rr",
            f"--filename={status['volumes'][0]['mount_point']}/f",
            "--size=64M",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            f"--iodepth={depth}",
            f"--runtime={samples + 3}",
            "--time_based",
            "--output=/dev/null",
        ],
        preexec_fn=system.start_session_ahead(system.DATABASE_NICE),
    )
    try:
        time.sleep(1.0)
        before = read_counters(array_dir)
        waited_before = _run_queue_wait_s(array_pid)
        started = time.time()
        if ontap is not None:
            asyncio.run(ontap.start(started))
        out = subprocess.run(
            ["iostat", "-d", "-x", "-y", "-o", "JSON", device, "1", str(samples)],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        rest = asyncio.run(ontap.sample(time.time())) if ontap is not None else []
        time.sleep(0.3)  # the array publishes its counters four times a second
        after = read_counters(array_dir)
        waited = _run_queue_wait_s(array_pid) - waited_before
        elapsed = (after or {}).get("time", time.time()) - (before or {}).get("time", started)
    finally:
        fio.wait(timeout=60)
    stats = json.loads(out.stdout)["sysstat"]["hosts"][0]["statistics"]
    disks = [next(d for d in s["disk"] if d["disk_device"] == device) for s in stats]
    assert before and after
    volume = [smp.values for smp in rest if smp.entity.startswith("volume:")]
    ops = max(1, after["read"]["ops"] - before["read"]["ops"])
    return {
        "ontap_r_s": volume[0]["read_iops"] if volume else float("nan"),
        "ontap_read_latency_ms": volume[0]["read_latency_us"] / 1000 if volume else float("nan"),
        "r_s": sum(d["r/s"] for d in disks) / len(disks),
        "r_await_ms": sum(d["r_await"] for d in disks) / len(disks),
        # The mean number of requests in flight at the device (the kernel's time-in-queue
        # counter over each interval): a product of the mean await and the mean IOPS is not
        # it where intervals differ (1.05 ms x 1,021 r/s read 1.07 under stress, one at a time).
        "in_flight": sum(d["aqu-sz"] for d in disks) / len(disks),
        "array_r_s": (after["read"]["ops"] - before["read"]["ops"]) / elapsed,
        "array_latency_ms": (after["read"]["latency_us"] - before["read"]["latency_us"])
        / ops
        / 1000,
        "array_qos_delay_ms": (after["read"]["qos_delay_us"] - before["read"]["qos_delay_us"])
        / ops
        / 1000,
        "array_cpu_wait_ms": waited / ops * 1000,
    }


def _run_queue_wait_s(pid: int) -> float:
    """The time the array process's threads spent runnable but waiting for a CPU, so far
    (``/proc/PID/task/*/schedstat``, field 2, ns). Threads that ended are not counted."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return total / 1e9


def test_policy_holds_device_iops_and_raises_device_await(
    array_lab: tuple[Lab, dict[str, Any], Path],
) -> None:
    lab, status, _ = array_lab
    array = status["volumes"][0]["array"]
    assert array["running"] and array["mounted"] and array["policy"]["max_iops"] == POLICY_IOPS
    os.environ["DBSIM_LAB_ARRAY_USER"] = array["ontap"]["user"]
    collector = OntapCollector(
        OntapSettings(
            cluster=array["ontap"]["cluster"],
            username_env="DBSIM_LAB_ARRAY_USER",
            password_file=array["ontap"]["password_file"],
            ca_file=array["ontap"]["ca_file"],  # the lab's self-signed certificate, verified
            svm=array["ontap"]["svm"],
            volumes=["lun"],
            luns=["/vol/lun/lun"],
            mode="statistics",
        )
    )
    try:
        got = _measure(status, DEPTH, ontap=collector)
    finally:
        asyncio.run(collector.stop())
    print(
        f"\n500-IOPS policy, {DEPTH} in flight (iostat -x on the loop device, measured): "
        f"{got['r_s']:.1f} r/s, r_await {got['r_await_ms']:.2f} ms; array (its counters, "
        f"measured): {got['array_r_s']:.1f} reads/s, latency {got['array_latency_ms']:.2f} ms, "
        f"QoS delay {got['array_qos_delay_ms']:.2f} ms; ONTAP collector (live REST): "
        f"{got['ontap_r_s']:.1f} read IOPS, read latency {got['ontap_read_latency_ms']:.2f} ms; "
        f"base service {SERVICE_US} µs"
    )
    assert abs(got["r_s"] - POLICY_IOPS) <= IOPS_TOL * POLICY_IOPS, got
    assert abs(got["array_r_s"] - got["r_s"]) <= IOPS_TOL * got["r_s"], got
    assert abs(got["ontap_r_s"] - got["r_s"]) <= IOPS_TOL * got["r_s"], got
    assert got["ontap_read_latency_ms"] == pytest.approx(got["r_await_ms"], rel=0.15), got
    # The queue is below the device: iostat's await carries it (Little: depth / IOPS).
    assert got["r_await_ms"] >= 10 * SERVICE_US / 1000, got
    assert got["r_await_ms"] == pytest.approx(DEPTH / POLICY_IOPS * 1000, rel=0.25), got
    assert got["array_qos_delay_ms"] >= 0.8 * (got["array_latency_ms"] - SERVICE_US / 1000), got

    # Lifted at run time: the FUSE array's own ceiling, and one request at a time.
    assert lab.set_policy(None, {"max_iops": 0})["max_iops"] is None
    time.sleep(0.5)
    free = _measure(status, DEPTH, samples=3)
    single = _measure(status, 1, samples=3)
    print(
        f"no policy, {DEPTH} in flight: {free['r_s']:.0f} r/s, r_await "
        f"{free['r_await_ms']:.2f} ms; 1 in flight: {single['r_s']:.0f} r/s, r_await "
        f"{single['r_await_ms']:.2f} ms, aqu-sz {single['in_flight']:.2f}, array latency {single['array_latency_ms']:.2f} ms "
        f"(of which its threads waited for a CPU {single['array_cpu_wait_ms']:.2f} ms)"
    )
    assert free["r_s"] >= 3 * POLICY_IOPS, free
    assert free["array_qos_delay_ms"] < 0.05, free
    # One request at a time costs the base service time plus the FUSE array's own handling
    # (quiet: 0.63-0.64 ms in all), plus whatever its threads waited for a CPU the host gave
    # to others: measured, not guessed (a timing phase beside other lab tests read 1.04 ms).
    # The wait is every thread's (the policy keeper and the REST server's too), so on a busy
    # host the bound is loose, never tight.
    own = SERVICE_US / 1000 + ARRAY_OVERHEAD_MS + single["array_cpu_wait_ms"]
    assert SERVICE_US / 1000 <= single["array_latency_ms"] <= own, single
    # At the device, the service is a floor; above it the loop device's kernel worker and fio
    # wait for a CPU as well, which nothing here measures per request (a host at load 18 read
    # 8.8 ms for the array's 2.4). What holds on any host: one request at a time, so the
    # device never holds more than one (iostat's aqu-sz, the mean number in flight, ≤ 1).
    assert single["r_await_ms"] >= SERVICE_US / 1000, single
    assert single["in_flight"] <= 1 + IOPS_TOL, single
    if single["array_cpu_wait_ms"] < ARRAY_OVERHEAD_MS:  # a CPU free for the path, as quiet
        assert single["r_await_ms"] < own + PATH_OVERHEAD_MS, single


def test_down_after_sigkill_of_the_array_leaves_nothing(
    array_lab: tuple[Lab, dict[str, Any], Path],
) -> None:
    lab, status, base = array_lab
    array = status["volumes"][0]["array"]
    os.kill(array["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{array['pid']}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{array['pid']}").exists(), "the array process is a zombie or alive"
    after = lab.status()
    assert not after["up"]
    assert any("array process" in p for p in after["problems"]), after["problems"]
    assert lab.down() == []
    assert _mounted_under(base) == [str(base / "images")]  # the test's own tmpfs, no more
    assert system.loops_for(Path(array["lun"])) == []
    assert system.loops_for(Path(status["volumes"][0]["image"])) == []
    assert not (base / "state").exists()
    assert list((base / "images").glob("*")) == [] if (base / "images").exists() else True
