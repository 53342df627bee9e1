"""Ground truth: dbsim's block collector and sysstat's ``iostat -x`` agree on a loop device.

As root: a sparse 256 MiB file is attached with ``losetup``; two background threads put a
steady, paced load of O_DIRECT reads (400/s) and writes (200/s), mostly 4 KiB with every
8th read and every 4th write 64 KiB, on the loop device; iostat and the collector then
measure the same window and must agree within 2 % (awaits: 2 % or 0.05 ms, whichever is
larger, since a loop device answers in microseconds).

How the two windows are made to coincide: iostat is run as
``stdbuf -oL iostat -dx -o JSON loopN W 2`` — *without* ``-y``, so its first report (since
boot) is printed right after its first reading of the device's counters and its second
report (the one compared) right after its second reading, W seconds later. With stdout
line-buffered each report's device line reaches us as soon as it is printed, so we call
``collector.start`` on the first device line and ``collector.sample`` on the second: both
edges lag iostat's readings by the same few tens of microseconds (print, pipe, wake-up), so
the two windows hold the same I/Os. The clock handed to the collector is ``/proc/uptime``
read the way sysstat reads it (hundredths of a second), so both divide by the same
interval; the monotonic interval is printed beside it (they differ by less than 10 ms, i.e.
< 0.25 % of W, which would not break the 2 % bound either).
"""

from __future__ import annotations

import asyncio
import json
import mmap
import os
import random
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.collectors.block import BlockDeviceCollector

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

IMAGE_SIZE = 256 * 1024 * 1024
WINDOW_S = 4
READS_PER_S = 400
WRITES_PER_S = 200
READ_SIZES = (4096,) * 7 + (65536,)
WRITE_SIZES = (4096,) * 3 + (65536,)
#: iostat and dbsim read the same diskstats counters at instants a few ms apart: over a
#: WINDOW_S window at ~600 I/Os per second that is a handful of I/Os (a few tenths of 1 %).
REL_TOL = 0.02
AWAIT_ABS_TOL_MS = 0.05
# iostat key -> dbsim key; the first six are asserted, the rest printed.
CHECKED = {
    "r/s": "r_s",
    "w/s": "w_s",
    "rkB/s": "rkB_s",
    "wkB/s": "wkB_s",
    "r_await": "r_await_ms",
    "w_await": "w_await_ms",
}
SHOWN = {
    "rrqm/s": "rrqm_s",
    "wrqm/s": "wrqm_s",
    "rareq-sz": "rareq_sz_kB",
    "wareq-sz": "wareq_sz_kB",
    "f/s": "f_s",
    "aqu-sz": "aqu_sz",
    "util": "util_pct",
}


def _require_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: the iostat ground-truth test needs root (losetup, O_DIRECT)")
    if shutil.which("iostat") is None:
        pytest.skip(
            "!!! NOT RUN: iostat is missing; install sysstat (`apt-get install -y sysstat`) "
            "to check dbsim's block figures against iostat"
        )
    for tool in ("losetup", "stdbuf"):
        if shutil.which(tool) is None:
            pytest.skip(f"!!! NOT RUN: {tool} is missing (util-linux / coreutils)")
    version = subprocess.run(["iostat", "-V"], capture_output=True, text=True).stdout
    found = re.search(r"sysstat version (\d+)\.", version)
    if found is None or int(found.group(1)) < 12:
        pytest.skip(f"!!! NOT RUN: needs sysstat >= 12 for iostat's JSON columns, got {version!r}")


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    _require_tools()
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(IMAGE_SIZE)  # sparse
    attach = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True
    )
    if attach.returncode != 0:
        pytest.skip(f"!!! NOT RUN: losetup cannot attach a loop device: {attach.stderr.strip()}")
    device = attach.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


class PacedLoad:
    """Reads and writes at fixed rates on absolute deadlines, one thread each."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.stop_event = threading.Event()
        self.errors: list[BaseException] = []
        self.done = {"read": 0, "write": 0}
        self.threads = [
            threading.Thread(target=self._run, args=("read", READS_PER_S, READ_SIZES, 1)),
            threading.Thread(target=self._run, args=("write", WRITES_PER_S, WRITE_SIZES, 2)),
        ]

    def _run(self, op: str, rate: int, sizes: tuple[int, ...], seed: int) -> None:
        try:
            self._loop(op, rate, sizes, seed)
        except BaseException as exc:  # reported by the test, never lost in the thread
            self.errors.append(exc)

    def _loop(self, op: str, rate: int, sizes: tuple[int, ...], seed: int) -> None:
        rng = random.Random(seed)
        buffers = {size: mmap.mmap(-1, size) for size in set(sizes)}  # page-aligned
        for buf in buffers.values():
            buf.write(bytes(rng.randrange(256) for _ in range(64)) * (len(buf) // 64))
        fd = os.open(self.device, os.O_RDWR | os.O_DIRECT)
        try:
            period = 1.0 / rate
            deadline = time.monotonic()
            i = 0
            while not self.stop_event.is_set():
                buf = buffers[sizes[i % len(sizes)]]
                offset = rng.randrange(IMAGE_SIZE // 65536) * 65536
                n = os.preadv(fd, [buf], offset) if op == "read" else os.pwrite(fd, buf, offset)
                assert n == len(buf), f"short {op}: {n} of {len(buf)}"
                self.done[op] += 1
                i += 1
                deadline += period
                delay = deadline - time.monotonic()
                if delay > 0:
                    self.stop_event.wait(delay)
        finally:
            os.close(fd)
            for buf in buffers.values():
                buf.close()

    def __enter__(self) -> PacedLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=10)


def uptime_s() -> float:
    """/proc/uptime as sysstat's read_uptime reads it: whole hundredths of a second."""
    first = Path("/proc/uptime").read_text().split()[0]
    seconds, _, cents = first.partition(".")
    return (int(seconds) * 100 + int(cents)) / 100


async def measure(device: str) -> tuple[dict[str, Any], dict[str, float], float, float]:
    """Run iostat and the collector over the same window; return both figures and the
    uptime and monotonic lengths of the collector's window."""
    name = os.path.basename(device)
    collector = BlockDeviceCollector([name])
    proc = await asyncio.create_subprocess_exec(
        *("stdbuf", "-oL", "iostat", "-dx", "-o", "JSON", name, str(WINDOW_S), "2"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    edges: list[tuple[float, float]] = []
    ours: dict[str, float] = {}
    async for raw in proc.stdout:
        line = raw.decode()
        lines.append(line)
        if '"disk_device"' in line:
            now, mono = uptime_s(), time.monotonic()
            if not edges:
                await collector.start(now)
            else:
                (sample,) = await collector.sample(now)
                ours = dict(sample.values)
            edges.append((now, mono))
    stderr = (await proc.stderr.read()).decode()
    assert await proc.wait() == 0, f"iostat failed: {stderr}"
    await collector.stop()
    assert len(edges) == 2, f"expected two iostat reports, got {len(edges)}:\n{''.join(lines)}"
    report = json.loads("".join(lines))["sysstat"]["hosts"][0]["statistics"][1]["disk"][0]
    assert report["disk_device"] == name
    return report, ours, edges[1][0] - edges[0][0], edges[1][1] - edges[0][1]


def test_block_collector_agrees_with_iostat(loop_device: str) -> None:
    with PacedLoad(loop_device) as load:
        time.sleep(0.5)  # let both threads reach their pace
        iostat, ours, uptime_window, mono_window = asyncio.run(measure(loop_device))
        assert not load.errors, load.errors
    assert not load.errors, load.errors

    print(
        f"\niostat vs dbsim on {loop_device}, window {uptime_window:.2f} s by /proc/uptime "
        f"({mono_window:.4f} s monotonic); load {READS_PER_S} r/s + {WRITES_PER_S} w/s"
    )
    print(f"{'column':>10} {'iostat':>10} {'dbsim':>12} {'diff %':>8}")
    for iostat_key, our_key in {**CHECKED, **SHOWN}.items():
        theirs, mine = float(iostat[iostat_key]), ours[our_key]
        diff = (mine - theirs) / theirs * 100 if theirs else float("nan")
        print(f"{iostat_key:>10} {theirs:>10.2f} {mine:>12.4f} {diff:>8.3f}")

    # The load really ran at about its pace (the loop device answers in microseconds).
    assert iostat["r/s"] > 0.8 * READS_PER_S and iostat["w/s"] > 0.8 * WRITES_PER_S, iostat
    for iostat_key, our_key in CHECKED.items():
        theirs, mine = float(iostat[iostat_key]), ours[our_key]
        tol = REL_TOL * theirs + 0.005  # iostat prints two decimals
        if iostat_key.endswith("await"):
            tol = max(tol, AWAIT_ABS_TOL_MS)
        assert abs(mine - theirs) <= tol, f"{iostat_key}: iostat {theirs}, dbsim {mine:.4f}"
