"""The native MariaDB loop through a server restart (issue #33): a throwaway MariaDB server of
our own (mariadb-install-db, a free port, a password user), killed mid-run and started again.
The run must say it ran natively, log one outage window of every session, count the lost
operations under an error class, mask the password, and run again after the return.

Marked timing: it waits for the run to measure and for an outage of OUTAGE_S seconds."""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.targets import marialoop

pytestmark = [pytest.mark.integration, pytest.mark.timing]
REPO = Path(__file__).resolve().parents[2]
SESSIONS = 3
MEASURE_BEFORE_STOP_S = 3.0
OUTAGE_S = 2.0
MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = shutil.which("mariadb-install-db")
CLIENT = shutil.which("mariadb")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A throwaway mariadbd under /var/tmp, run as root (``--user=root``)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root, self.port = root, port
        self.data, self.sock = root / "data", root / "mysqld.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [str(MARIADBD), "--no-defaults", f"--datadir={self.data}", "--user=root",
                f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.sock}",
                "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--skip-name-resolve",
                f"--pid-file={self.root / 'mysqld.pid'}", f"--log-error={self.root / 'err.log'}"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 30
        while not self.sock.exists() or self.sql("SELECT 1").returncode != 0:
            assert self.proc.poll() is None, (self.root / "err.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the throwaway MariaDB never accepted"
            time.sleep(0.2)

    def kill(self) -> None:
        """The server killed (SIGKILL): every connection lost at once, as in a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.sock.unlink(missing_ok=True)

    def sql(self, statement: str) -> subprocess.CompletedProcess[str]:
        argv = [str(CLIENT), "--no-defaults", f"--socket={self.sock}", "-uroot", "-e", statement]
        return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture
def server() -> Iterator[tuple[Server, Path]]:
    if os.environ.get(marialoop.SWITCH) == "0":
        pytest.skip(f"!!! NOT RUN on the native loop: {marialoop.unavailable()}")
    if marialoop.unavailable():
        pytest.fail(f"the native loop is not built here: {marialoop.unavailable()}")
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: a throwaway MariaDB server here needs root")
    if INSTALL_DB is None or CLIENT is None or not MARIADBD.exists():
        pytest.skip("!!! NOT RUN: MariaDB server binaries missing")
    port = _free_port()
    root = Path(f"/var/tmp/dbsim-marialoop-{os.getpid()}-{port}")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    made = Server(root, port)
    try:
        install = [INSTALL_DB, "--no-defaults", f"--datadir={made.data}", "--user=root",
                   "--auth-root-authentication-method=socket", "--skip-test-db"]  # fmt: skip
        done = subprocess.run(install, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        made.start()
        password = secrets.token_hex(8)
        created = made.sql(
            f"CREATE DATABASE test; CREATE USER 'dbsim'@'127.0.0.1' IDENTIFIED BY '{password}';"
            " GRANT ALL ON *.* TO 'dbsim'@'127.0.0.1';"
        )
        assert created.returncode == 0, created.stderr
        password_file = root / "password"
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        yield made, password_file
    finally:
        if made.proc is not None and made.proc.poll() is None:
            made.proc.kill()
            made.proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def _summary(out: Path) -> dict[str, object] | None:
    for path in out.glob("*/summary.json"):
        try:
            return dict(json.loads(path.read_text()))
        except ValueError:
            return None
    return None


def test_native_mariadb_sessions_reconnect_after_the_server_restarts(
    server: tuple[Server, Path], tmp_path: Path
) -> None:
    db, password = server
    scenario = tmp_path / "marialoop_r1.yaml"
    scenario.write_text(
        f"""
name: marialoop_r1
target: {{kind: mysql, host: 127.0.0.1, port: {db.port}, database: test, user: dbsim,
          password_file: {password}}}
workload: {{name: slob, parameters: {{scale: 10000, update_pct: 0, table_prefix: mrc}}}}
load: {{sessions: {SESSIONS}, duration_s: 14, session_runner: native}}
"""
    )
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "run", str(scenario), "-o", str(out), "-q"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while (_summary(out) or {}).get("state") != "measure":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started measuring"
            time.sleep(0.1)
        time.sleep(MEASURE_BEFORE_STOP_S)
        db.kill()
        time.sleep(OUTAGE_S)
        db.start()
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    bundle = Path(stdout.strip().splitlines()[-1])
    summary = json.loads((bundle / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["session_runner"]["runner"] == "native", summary["session_runner"]
    windows = summary["outages"]["windows"]
    assert len(windows) == 1, summary["outages"]
    window = windows[0]
    assert window["sessions"] == SESSIONS
    # At least the time the server was down, at most that plus the reconnect backoff's
    # longest sleep (2 s) and the server's start with its crash recovery.
    assert OUTAGE_S * 0.8 <= window["duration_s"] <= OUTAGE_S + 8, window
    errors = {
        cls: message
        for op in summary["operations"].values()
        for cls, message in op.get("error_examples", op["errors_by_class"]).items()
    }
    print("error classes:", errors)
    assert errors, "the outage left no error classes"
    assert "OperationalError" in errors, errors  # asyncmy's class for a lost connection
    secret = password.read_text().strip()
    assert secret not in json.dumps(summary)
    with open(bundle / "timeseries" / "ops.csv", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["phase"] == "measure"]
    after = [float(r["ops_s"]) for r in rows if float(r["t"]) > window["restored_t"] + 1]
    assert after and max(after) > 0, rows
