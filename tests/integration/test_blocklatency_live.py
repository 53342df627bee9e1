"""The block-latency collector live (root, bpftrace): O_DIRECT reads on a loop device give
ordered percentiles of the same order as iostat's r_await from the block collector in the same
run, and bpftrace never outlives the collector — stopped, or its parent killed outright."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.protocols import Sample
from storage.collectors.block import BlockDeviceCollector
from storage.collectors.blocklatency import BlockLatencyCollector

pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,  # latency percentiles against iostat's await from the same seconds
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bpftrace") is None or shutil.which("losetup") is None,
        reason="needs root, bpftrace and losetup",
    ),
]

IMAGE_MIB = 32
READ_S = 3.0


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[tuple[str, tuple[int, int]]]:
    """A loop device with direct I/O onto a 32 MiB image of random data (a sparse image's
    holes would read back without touching the disk)."""
    image = tmp_path / "disk.img"
    image.write_bytes(os.urandom(IMAGE_MIB * 2**20))
    path = subprocess.run(
        ["losetup", "--find", "--show", "--direct-io=on", str(image)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    name = Path(path).name
    major, minor = (Path("/sys/class/block") / name / "dev").read_text().strip().split(":")
    try:
        yield name, (int(major), int(minor))
    finally:
        subprocess.run(["losetup", "-d", path], capture_output=True)


def bpftrace_children(parent: int) -> list[int]:
    """Pids of bpftrace processes whose parent is ``parent``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm_end = (text := stat.read_text()).rindex(")")
        except (OSError, ValueError):
            continue
        comm = text[text.index("(") + 1 : comm_end]
        if comm == "bpftrace" and int(text[comm_end + 2 :].split()[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_direct_reads_give_ordered_percentiles_agreeing_with_r_await(
    loop_device: tuple[str, tuple[int, int]],
) -> None:
    name, numbers = loop_device
    latency = BlockLatencyCollector({name: numbers})
    block = BlockDeviceCollector([name])

    async def drive() -> tuple[list[Sample], list[Sample]]:
        await latency.start(time.monotonic())
        assert latency._reader is not None
        assert await asyncio.to_thread(latency._reader.ready.wait, 20.0), latency.unavailable
        await latency.sample(time.monotonic())  # drop what came before the reads
        await block.start(time.monotonic())
        reader = subprocess.Popen(
            ["dd", f"if=/dev/{name}", "of=/dev/null", "bs=4k", "iflag=direct", "status=none",
             f"count={IMAGE_MIB * 256}"],
        )  # fmt: skip
        ours, iostat = [], []
        try:
            started = time.monotonic()
            while time.monotonic() - started < READ_S and reader.poll() is None:
                await asyncio.sleep(0.5)
            ours = await latency.sample(time.monotonic())
            iostat = await block.sample(time.monotonic())
        finally:
            reader.wait()
            await latency.stop()
            await block.stop()
        return ours, iostat

    ours, iostat = asyncio.run(drive())
    assert latency.unavailable is None
    entities = {s.entity: s.values for s in ours}
    assert set(entities) <= {name, f"{name}:read", f"{name}:write"}, entities
    figures, every = entities[f"{name}:read"], entities[name]
    (rates,) = [s.values for s in iostat if s.entity == name]
    assert figures["n"] >= 100, figures
    assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"], figures
    assert every["n"] >= figures["n"] and every["p50_ms"] <= every["p99_ms"], every
    # Our median against iostat's mean: one synchronous reader keeps one request in flight,
    # so the scheduler queue iostat also counts is nearly empty; within a factor of 10.
    assert rates["r_await_ms"] > 0, rates
    ratio = figures["p50_ms"] / rates["r_await_ms"]
    assert 0.1 <= ratio <= 10, (figures, rates)


def test_bpftrace_goes_when_its_parent_is_killed(loop_device: tuple[str, tuple[int, int]]) -> None:
    name, (major, minor) = loop_device
    holder = (
        "import asyncio, sys\n"
        "from storage.collectors.blocklatency import BlockLatencyCollector\n"
        "async def main():\n"
        f"    c = BlockLatencyCollector({{{name!r}: ({major}, {minor})}})\n"
        "    await c.start(0.0)\n"
        "    await asyncio.to_thread(c._reader.ready.wait, 20.0)\n"
        "    print('started', flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        (child,) = bpftrace_children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # What is checked is that bpftrace does not outlive dbsim (a leaked one runs for ever),
        # not how fast it goes: in a quiet CI's timing phase, beside the device tests (their
        # own bpftrace among them), one was still there 10 s after its parent's SIGKILL; alone
        # it goes in ~0.1 s. Why it took longer is not known (its probes' detaching is the
        # suspect): the message says where it waits.
        deadline = time.monotonic() + 60
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child), f"bpftrace {child} outlived its killed parent: {_where(child)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _where(pid: int) -> str:
    """What a process is doing (its state and kernel wait channel), for the failure message."""
    try:
        state = next(
            line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("State:")
        )  # fmt: skip
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except (OSError, StopIteration):
        return "gone"
    return f"{state.strip()}, waiting in {wchan or '?'}"
