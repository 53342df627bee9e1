"""Issue #20: the Locust master's worker port beyond loopback needs a shared secret.

``--master-bind 0.0.0.0`` without ``--master-secret`` is refused (exit 2, one line); with it,
the port speaks CURVE keyed by the secret (sim.locust.secure): a worker with the secret joins,
one with another secret or none never does, and exits 2 saying why (sim.locust.handshake). Joining is read from the master's own web UI
(``/stats/requests`` lists its workers). Every process here is bounded by a timeout.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim

pytestmark = pytest.mark.e2e

SECRET_ENV = "DBSIM_TEST_MASTER_SECRET"  # DBSIM_ without "__": not a scenario override
OTHER_ENV = "DBSIM_TEST_OTHER_SECRET"
JOIN_TIMEOUT_S = 30.0
REFUSAL_S = 10.0  # a bound for a hang (the refusal takes ~3 s here), not a measurement


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def workers(web_port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/stats/requests", timeout=5) as r:
        return [str(w.get("id")) for w in json.load(r).get("workers", [])]


def wait_for_ui(web_port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the master exited"
        try:
            workers(web_port)
            return
        except OSError:
            time.sleep(0.3)
    pytest.fail("the master's web UI did not answer")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--master-bind 0.0.0.0: a worker port beyond loopback needs --master-secret"),
        (["--master-secret", "NOT_SET_ANYWHERE"], "environment variable NOT_SET_ANYWHERE is not"),
        (["--master-secret", "s3cret-value!"], "give the NAME of an environment variable"),
        (["--master-secret", "DBSIM_SHORT"], "DBSIM_SHORT holds fewer than 16 characters"),
    ],
)
def test_a_worker_port_beyond_loopback_needs_a_secret(
    dbsim: Dbsim, extra: list[str], message: str
) -> None:
    result = dbsim(
        "ui", "--distributed", "--master-bind", "0.0.0.0", *extra,
        env={"DBSIM_SHORT": "too-short"}, timeout=20,
    )  # fmt: skip
    assert result.rc == 2, result.describe()
    assert len(result.stderr_lines) == 1 and message in result.stderr, result.describe()
    assert "s3cret-value!" not in result.stdout + result.stderr


@pytest.mark.timing  # refused within REFUSAL_S of their start: held with nothing beside it
def test_only_workers_with_the_secret_join(dbsim: Dbsim, tmp_path: Path) -> None:
    env = {SECRET_ENV: secrets.token_hex(16), OTHER_ENV: secrets.token_hex(16)}
    master_port, web_port = free_port(), free_port()
    master = dbsim.start(
        "ui", "--distributed", "--master-bind", "0.0.0.0", "--master-port", str(master_port),
        "--port", str(web_port), "--master-secret", SECRET_ENV, "-o", tmp_path / "runs",
        env=env,
    )  # fmt: skip
    wait_for_ui(web_port, master)
    address = f"127.0.0.1:{master_port}"
    outsiders = {
        "another secret": dbsim.start(
            "worker", "--master", address, "--master-secret", OTHER_ENV, env=env
        ),
        "no secret": dbsim.start("worker", "--master", address, env=env),  # plain ZeroMQ
    }
    # Refused in the handshake, they say why and exit 2 (issue #24; they used to knock for
    # minutes, or exit 3 with RPCSendError): well within REFUSAL_S of their start.
    said = {
        "another secret": f"error: --master-secret: the master at {address} refused this "
        "worker's CURVE handshake: its secret is not this one",
        "no secret": f"error: --master-secret: the master at {address} has a secret (its "
        "worker port speaks CURVE) and this worker none: give it the master's with "
        "--master-secret ENV_VAR",
    }
    deadline = time.monotonic() + REFUSAL_S
    for case, proc in outsiders.items():
        refused = dbsim.finish(proc, timeout=max(deadline - time.monotonic(), 0.1))
        assert refused.rc == 2, refused.describe()
        assert refused.stderr_lines == [said[case]], refused.describe()
        assert env[SECRET_ENV] not in refused.stderr and env[OTHER_ENV] not in refused.stderr
    assert workers(web_port) == [], "a worker without the secret joined"
    member = dbsim.start("worker", "--master", address, "--master-secret", SECRET_ENV, env=env)
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not workers(web_port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(workers(web_port)) == 1, "the worker with the secret did not join"
    member.terminate()
    master.terminate()
    for proc in (member, master):
        out, err = proc.communicate(timeout=60)
        assert env[SECRET_ENV] not in out + err and env[OTHER_ENV] not in out + err
        assert "Traceback" not in err, err[-4000:]
