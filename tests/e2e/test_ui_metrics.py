"""``/metrics`` on ``dbsim ui``'s port: behind ``--web-login``, and equal to the bundle.

The UI runs as a child process with a login; a short SQLite run is started from ``/swarm``
(a form-login session). Prometheus cannot fill a login form, so ``/metrics`` also takes the
same credentials as HTTP Basic authentication: refused without or with wrong ones. While the
run measures, the exposition shows it in ``measure`` with the block device's figures; once it
has ended, the measured counts equal summary.json's and the storage gauges are gone (they are
the last interval's, not current any more).
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import clean_environment

pytestmark = [pytest.mark.e2e]

UI_COMMAND = (sys.executable, "-m", "sim.locust", "ui")
LOGIN = ("alice", "correct horse")
START_TIMEOUT_S = 30.0
RATE_OPS_S = 400


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _open(opener: Any, url: str, data: bytes | None = None, auth: str = "") -> tuple[int, str]:
    request = urllib.request.Request(url, data=data)
    if data is not None:  # a POST: as the UI's own page sends it (sim.locust.guard)
        origin = "/".join(url.split("/", 3)[:3])
        request.add_header("Origin", origin)
        if not url.endswith("/dbsim/login"):
            token = json.loads(_open(opener, f"{origin}/dbsim/token")[1])
            request.add_header(token["header"], token["token"])
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with opener.open(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return -1, ""


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_ui_metrics_need_the_login_and_equal_the_bundle(tmp_path: Path) -> None:
    port = _free_port()
    env = clean_environment(tmp_path)
    env["DBSIM_TEST_LOGIN"] = ":".join(LOGIN)
    command = [*UI_COMMAND, "--port", str(port), "--web-login", "DBSIM_TEST_LOGIN"]
    proc = subprocess.Popen(
        [*command, "-o", str(tmp_path / "out")],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    plain = urllib.request.build_opener()
    session = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    basic = ":".join(LOGIN)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while _open(plain, f"{url}/metrics")[0] != 401:
            assert proc.poll() is None and time.monotonic() < deadline, "dbsim ui did not start"
            time.sleep(0.2)
        assert _open(plain, f"{url}/metrics", auth="alice:wrong")[0] == 401
        status, idle = _open(plain, f"{url}/metrics", auth=basic)
        assert status == 200 and _samples(idle)[("dbsim_run_state", (("state", "idle"),))] == 1
        form = urllib.parse.urlencode({"username": LOGIN[0], "password": LOGIN[1]}).encode()
        _open(session, f"{url}/dbsim/login", form)
        # Paced (open loop): the exposition is judged, not the machine (closed loop, the two
        # sessions took ~1.4 CPUs for the run)
        swarm = {"user_count": 2, "spawn_rate": 2, "duration_s": 4, "warmup_s": 0}
        swarm["rate_ops_s"] = RATE_OPS_S
        status, body = _open(session, f"{url}/swarm", urllib.parse.urlencode(swarm).encode())
        assert status == 200 and json.loads(body)["success"], body

        def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            status, text = _open(session, f"{url}/metrics")  # the browser's session works too
            assert status == 200
            return _samples(text)

        deadline = time.monotonic() + 60
        live = scrape()
        while live.get(("dbsim_run_state", (("state", "measure"),))) != 1 or not any(
            name == "dbsim_block_iops" for name, _ in live
        ):
            assert time.monotonic() < deadline, "no measured interval on /metrics"
            time.sleep(0.5)
            live = scrape()
        while True:
            run = json.loads(_open(session, f"{url}/dbsim/status")[1])["run"]
            if run["status"] not in ("running", "finishing", "idle"):
                break
            assert time.monotonic() < deadline + 60, run
            time.sleep(0.5)
        done = scrape()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((Path(run["bundle"]) / "summary.json").read_text())
    assert done[("dbsim_run_state", (("state", "finished"),))] == 1
    assert not any(name.startswith("dbsim_block_") for name, _ in done)
    info = next(labels for name, labels in done if name == "dbsim_run_info")
    assert dict(info)["run"] == summary["run"]
    for op, figures in summary["operations"].items():
        key = ("dbsim_ops_total", (("op", op), ("phase", "measure")))
        assert done.get(key, 0) == figures["count"], (op, done.get(key), figures["count"])
    assert summary["operations"]["read"]["count"] > 0
    assert "correct horse" not in stderr
