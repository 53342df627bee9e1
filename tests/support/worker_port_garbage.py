"""Malformed ZeroMQ messages for a master's worker port (issue #24, item 3), and the checks on
what the master says about them.

Shared by tests/e2e/test_worker_port.py (a ``dbsim ui --distributed`` master, a worker joining
afterwards) and tests/integration/test_distributed.py (a ``run --workers 2`` in progress, whose
run must still complete with both workers' reports and exact merged counts).
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections import Counter

import msgpack
import psutil
import pytest
import zmq

#: (frames, identity) of each malformed message, and the kind the master calls it.
GARBAGE: list[tuple[list[bytes], bytes, str]] = [
    ([b"\xc1"], b"g-c1", "not msgpack"),
    ([b"\xc1"], b"g-c1-again", "not msgpack"),
    ([msgpack.packb(5)], b"g-int", "not a Locust message"),
    ([msgpack.packb(["client_ready", "2.47.0"])], b"g-pair", "not a Locust message"),
    ([msgpack.packb([7, None, "g-seven"])], b"g-seven", "not a Locust message"),
    ([msgpack.packb(["quit", None, "g-two"]), b"x"], b"g-two", "not a single frame"),
    ([random.Random(24).randbytes(1 << 20)], b"g-random", "not msgpack"),
    ([bytes(17 << 20)], b"g-big", "larger than 16 MiB"),
    ([msgpack.packb(["locustfile", {"version": "2"}, "g-lf"])], b"g-lf", "never sends"),
    ([msgpack.packb(["heartbeat", "x", "g-hb"])], b"g-hb", "wrong shape for its type"),
    ([msgpack.packb(["client_ready", 7, "g-ready"])], b"g-ready", "handling failed"),
    ([msgpack.packb(["quit", None, "g-id"])], b"\xff\xfe", "not UTF-8"),
]
WARNING = "worker port: dropped a message from"


def send_garbage(port: int) -> None:
    """Every GARBAGE message, each from its own DEALER socket, delivered before returning."""
    context = zmq.Context()
    try:
        for frames, identity, _ in GARBAGE:
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, identity)
            sock.connect(f"tcp://127.0.0.1:{port}")
            sock.send_multipart(frames)
            sock.close(linger=10_000)  # linger: the frames go out before the socket is gone
    finally:
        context.term()  # waits for every lingering socket's frames


def check_drop_lines(stderr: str) -> None:
    """One warning per kind, however many of it came, and the totals at quit."""
    warnings = [line for line in stderr.splitlines() if WARNING in line]
    kinds = {kind for _, _, kind in GARBAGE}
    for kind in kinds:
        assert sum(kind in line for line in warnings) == 1, (kind, warnings)
    assert len(warnings) == len(kinds), warnings
    totals = re.search(rf"dropped {len(GARBAGE)} malformed messages: (.*)$", stderr, re.M)
    assert totals, stderr[-4000:]
    counted = {
        kind: int(part.split(" ", 1)[0])
        for part in totals.group(1).split(", ")
        for kind in kinds
        if kind in part
    }
    assert counted == Counter(kind for _, _, kind in GARBAGE), totals.group(0)
    assert "Traceback" not in stderr, stderr[-4000:]


def local_master_port(master: subprocess.Popen[str], count: int, timeout: float) -> int:
    """The port ``run --workers`` bound (0: any free one), from its workers' command lines."""
    deadline = time.monotonic() + timeout
    found: list[int] = []
    while time.monotonic() < deadline:
        assert master.poll() is None, "the master exited early"
        try:
            found = [
                int(args[args.index("--master") + 1].rsplit(":", 1)[1])
                for child in psutil.Process(master.pid).children()
                if "--master" in (args := child.cmdline())
            ]
        except psutil.Error:  # a child gone between the listing and its command line
            found = []
        if len(found) == count:
            assert len(set(found)) == 1, found
            return found[0]
        time.sleep(0.3)
    pytest.fail(f"{count} local workers did not start within {timeout} s (found {found})")
