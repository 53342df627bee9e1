"""``dbsim ui`` as a child process (never imported here: sim.locust patches the process with
gevent) and a plain HTTP client for it that sets every header itself (http.client adds none
but Host, Content-Length and Accept-Encoding, and no Host when given one)."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

UI_COMMAND = (sys.executable, "-m", "sim.locust", "ui")  # = `dbsim ui`
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class UiChild:
    """``dbsim ui ARGS --port <free> -o runs`` in ``cwd``; its stderr goes to a file (a pipe
    nobody reads while the UI runs would fill and block it)."""

    def __init__(self, cwd: Path, env: Mapping[str, str], args: Sequence[str] = ()) -> None:
        self.last_headers: dict[str, str] = {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = cwd / "runs"
        self.stderr_path = cwd / "ui-stderr.txt"
        with self.stderr_path.open("w", encoding="utf-8") as sink:
            self.proc = subprocess.Popen(
                [*UI_COMMAND, *args, "--port", str(self.port), "-o", "runs"],
                cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=sink,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.request("GET", "/dbsim/status")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    problem = f"dbsim ui did not come up: {self.stderr()[-3000:]}"
                    raise RuntimeError(problem) from None
                time.sleep(0.2)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, Any]:
        """``(status, body)``: the body as JSON when it is, else as text; the answer's headers
        are left in ``last_headers``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=dict(headers or {}))
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        self.last_headers = dict(response.getheaders())
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw.decode("utf-8", "replace")

    def token_headers(self) -> dict[str, str]:
        """The headers the UI's own page sends with a POST: its Origin and its token."""
        status, token = self.request("GET", "/dbsim/token")
        assert status == 200, token
        return {"Origin": self.url, token["header"]: token["token"]}

    def run_status(self) -> str:
        status, body = self.request("GET", "/dbsim/status")
        assert status == 200, body
        return str(body["run"]["status"])

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 60) -> str:
        """Interrupt the UI (killed if it does not end); its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.stderr()
