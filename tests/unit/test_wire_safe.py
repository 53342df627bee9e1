"""What a worker ships on Locust's channel is always msgpack-able (sim.locust.packets.wire_safe).

A value msgpack refuses, raised inside Locust's stats reporter, ends that greenlet: the worker
stays alive on its heartbeats and ships nothing more, so the master waits for intervals that
never come. Such a value travels as a plain one instead, and an error says so. In a child
process: importing sim.locust monkey-patches with gevent, which the test process must never be
(tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD = r"""
import datetime, json, logging, sys
import numpy as np
from locust.rpc.protocol import Message
from sim.locust.packets import wire_safe

logging.basicConfig(stream=sys.stderr, level=logging.ERROR, format="%(name)s: %(message)s")
clean = {"i": 3, "samples": [["block", "vda", {"r_s": 1.5}, {"host": "h1"}]], "lat": {}}
packet = {
    "i": 7,
    "samples": [["block", "vda", {"r_s": np.int64(5), "w_s": np.float32(0.5)}, {}]],
    "when": datetime.datetime(2026, 12, 6, 12, 0, 0),  # Locust's encoder carries these
    "classes": {"timeout"},
    "huge": 2**70,
    "other": object(),
}
try:
    Message("stats", {"dbsim": packet}, "w1").serialize()
    refused = False
except TypeError:
    refused = True
safe = wire_safe(packet, "interval 7")
Message("stats", {"dbsim": safe}, "w1").serialize()  # what Locust's stats reporter does
values = safe["samples"][0][2]
print(json.dumps({
    "clean_unchanged": wire_safe(clean, "interval 3") is clean,
    "refused": refused,
    "values": values,
    "r_s_int": type(values["r_s"]) is int,
    "classes": safe["classes"],
    "huge": safe["huge"],
    "when_kept": safe["when"] == packet["when"],
    "other_text": isinstance(safe["other"], str),
}))
"""


def test_values_msgpack_refuses_travel_plain_and_are_named() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["clean_unchanged"]  # a packet msgpack takes ships as it is (no copy)
    assert got["refused"]  # Locust's own serializer raises on it, as in its reporter
    assert got["values"] == {"r_s": 5, "w_s": 0.5} and got["r_s_int"]
    assert got["classes"] == ["timeout"] and got["huge"] == str(2**70)
    assert got["when_kept"] and got["other_text"]
    # One error line names the packet, and none for the clean one.
    errors = [line for line in done.stderr.splitlines() if line.startswith("sim.locust.packets")]
    assert len(errors) == 1 and "interval 7" in errors[0], done.stderr
