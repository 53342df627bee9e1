"""The master's worker port stays guarded after Locust resets it (issue #24, item 3).

Locust's master closes and binds its worker port again when the port breaks
(``MasterRunner.reset_connection``, assigning a new ``rpc.Server``); the guard
(sim.locust.workerport) must cover the new server too, not only the first. The child process
(Locust is never imported here: it patches the process with gevent) builds dbsim's master on
127.0.0.1, resets its port, and sends the new port the byte 0xc1 and then a worker's
``client_ready`` from real ZeroMQ sockets; it prints what the master made of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHILD = r"""
import json
import sim.locust  # gevent's patch first, as every dbsim Locust process
import gevent, msgpack, zmq.green as zmq
from locust import __version__
from locust.env import Environment
from locust.event import Events
from locust.runners import FALLBACK_INTERVAL
from sim.locust.workerport import GuardedServer, create_master_runner

runner = create_master_runner(Environment(events=Events(), user_classes=[]), "127.0.0.1", 0)
gevent.sleep(0.2)  # the listener is waiting on the first server
first = runner.server.port
runner.reset_connection()
# The listener's wait on the closed socket ends in an error; Locust waits this long, then
# serves the new server.
gevent.sleep(FALLBACK_INTERVAL + 1)
context = zmq.Context()
sockets = []
for identity, frame in ((b"junk", b"\xc1"), (b"w1", msgpack.packb(["client_ready", __version__, "w1"]))):
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.connect(f"tcp://127.0.0.1:{runner.server.port}")
    sock.send(frame)
    sockets.append(sock)
    gevent.sleep(0.5)
print(json.dumps({
    "rebound": runner.server.port != first,
    "guarded": isinstance(runner.server, GuardedServer),
    "clients": sorted(runner.clients.keys()),
    "drops": dict(runner.drops.counts),
}))
for sock in sockets:
    sock.close(linger=0)
runner.quit()
"""


def test_the_port_locust_binds_again_is_guarded_too() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "rebound": True,
        "guarded": True,
        "clients": ["w1"],  # the listener served on after the garbage
        "drops": {"undecodable": 1},
    }, done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
