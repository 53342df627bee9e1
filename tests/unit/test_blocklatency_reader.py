"""The block-latency collector's print on request without root: a stand-in for bpftrace (a
script that prints its counts when it receives SIGWINCH, as the real program's probe on
``signal:signal_generate`` makes bpftrace do) shows that a sample asks for a print, waits for
it and holds what it printed. The real program is run by tests/integration/test_blocklatency_*.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from storage.collectors import blocklatency
from storage.collectors.blocklatency import BlockLatencyCollector
from storage.collectors.blocklatency_reader import BpftraceReader
from storage.collectors.blocklatency_script import PRINT_SIGNAL, kernel_dev

LOOP0 = kernel_dev(7, 0)
# On each SIGWINCH: N reads of bucket (13, 9) on loop0 (N the prints so far), then the marker.
STAND_IN = f"""\
import signal, sys
prints = 0
def on_print(signum, frame):
    global prints
    prints += 1
    print(f"@lat[{LOOP0}, 1, 13, 9]: {{prints}}", flush=True)
    print("blocklatency-tick", flush=True)
signal.signal({int(PRINT_SIGNAL)}, on_print)
print("Attaching 3 probes...", flush=True)
print("blocklatency-ready", flush=True)
while True:
    signal.pause()
"""


def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "bpftrace"
    path.write_text(f"#!{sys.executable}\n{STAND_IN}")
    path.chmod(0o755)
    return path


def test_a_sample_asks_for_a_print_and_holds_what_it_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loaded machine (8 test workers) may take longer than the 0.5 s a capture waits.
    monkeypatch.setattr(blocklatency, "PRINT_WAIT_S", 20.0)
    collector = BlockLatencyCollector({"loop0": (7, 0)})
    collector._reader = BpftraceReader("", {}, command=str(stand_in(tmp_path)))

    reader = collector._reader

    async def two_samples() -> tuple[list[int], list[int]]:
        try:
            assert await asyncio.to_thread(reader.ready.wait, 20.0)
            counts = []
            for _ in range(2):
                samples = await collector.sample(time.monotonic())
                counts.append([int(s.values["n"]) for s in samples if s.entity == "loop0:read"])
        finally:
            await collector.stop()
        return counts[0], counts[1]

    first, second = asyncio.run(two_samples())
    # No sleep between the samples: each holds its own print (1 read, then 2), none empty.
    assert (first, second) == ([1], [2])
    assert collector.unavailable is None


def test_the_reader_hands_over_each_print_with_the_inflight_peak(tmp_path: Path) -> None:
    inflight = tmp_path / "inflight"
    inflight.write_text("       3        4\n")  # as /sys/class/block/<dev>/inflight prints it
    reader = BpftraceReader("", {LOOP0: inflight}, command=str(stand_in(tmp_path)))
    try:
        assert reader.ready.wait(20.0)

        async def ask() -> None:
            loop, printed = asyncio.get_running_loop(), asyncio.Event()

            def wake() -> None:  # from the reading thread
                loop.call_soon_threadsafe(printed.set)

            reader.request_print(wake)
            await asyncio.wait_for(printed.wait(), 20.0)

        asyncio.run(ask())
        (tick,) = reader.take()
        assert tick.counts[LOOP0]["r"].latency.buckets == {(13, 9): 1}
        assert tick.kernel_inflight == {LOOP0: 7}  # 3 reads + 4 writes, read at the print
        assert reader.take() == []  # handed over once
    finally:
        reader.stop()
    assert reader.process.returncode is not None  # ended and reaped
    assert reader.failure is None  # stopped, not failed


def test_bpftrace_is_set_to_die_with_its_parent_before_it_execs(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG (SIGKILL) is in place in the program the reader starts, set by setpriv
    before the exec: no Python runs in the child between fork and exec (with a preexec_fn
    calling prctl, a Locust worker with other threads hung waiting for that exec)."""
    if shutil.which("setpriv") is None:
        pytest.skip("!!! NOT RUN: no setpriv (util-linux) on this host")
    seen = tmp_path / "pdeathsig"
    script = stand_in(tmp_path)
    # The stand-in first writes its own parent-death signal (PR_GET_PDEATHSIG, 2).
    script.write_text(script.read_text().replace("prints = 0\n", (
        "import ctypes\nsig = ctypes.c_int()\n"
        "ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)\n"
        f"open({str(seen)!r}, 'w').write(str(sig.value))\nprints = 0\n"
    ), 1))  # fmt: skip
    reader = BpftraceReader("", {}, command=str(script))
    try:
        assert reader.ready.wait(20.0)
        assert reader.process.args[:4] == [shutil.which("setpriv"), "--pdeathsig", "KILL", "--"]
    finally:
        reader.stop()
    assert seen.read_text() == str(int(signal.SIGKILL))
