"""Throwaway servers for the ``dbsim sql-from-stats`` tests: a PostgreSQL cluster that
preloads pg_stat_statements and a MariaDB server with performance_schema ON, each on a free
port under a directory of its own, always taken down. The local servers (5432, 3306) have
neither setting, so these tests never use them."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage.lab.pgcluster import Cluster, pg_bin
from tests.support import forked_dbsim

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dbsim(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m sim.cli ARGS`` at the repository's root, output captured."""
    return forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _root_dir(prefix: str) -> Path:
    # Under /var/tmp with mode 0755: the server's user must reach it through every parent
    # (pytest's tmp_path is under a 0700 directory).
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    root.chmod(0o755)
    return root


@dataclass
class PgServer:
    port: int
    password: str

    def env(self) -> dict[str, str]:
        return {"PGHOST": "127.0.0.1", "PGPORT": str(self.port), "PGUSER": "postgres",
                "PGPASSWORD": self.password}  # fmt: skip

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", database, "-c", sql],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return out.stdout


@contextlib.contextmanager
def pg_with_statements(extra: dict[str, str] | None = None) -> Iterator[PgServer]:
    """A throwaway cluster preloading pg_stat_statements (unless ``extra`` says otherwise)."""
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: a throwaway PostgreSQL cluster needs root")
    try:
        pwd.getpwnam("postgres")
        pg_bin()
    except Exception as exc:
        pytest.skip(f"!!! NOT RUN: PostgreSQL server binaries or user missing: {exc}")
    root = _root_dir("dbsim-sqlstats-pg-")
    cluster = Cluster(root / "pg", free_port())
    settings = {"shared_preload_libraries": "'pg_stat_statements'", "shared_buffers": "64MB"}
    try:
        cluster.init(root / "password", {**settings, **(extra or {})})
        cluster.start([])
        yield PgServer(cluster.port, (root / "password").read_text().strip())
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class MariaServer:
    port: int

    def sql(self, statement: str, database: str = "test") -> str:
        out = subprocess.run(
            ["mariadb", "-h127.0.0.1", f"-P{self.port}", "-uroot", "-N", "-B", database,
             "-e", statement],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return out.stdout


@contextlib.contextmanager
def mariadb_server(performance_schema: bool = True) -> Iterator[MariaServer]:
    """A throwaway MariaDB (root without a password on 127.0.0.1, database ``test``)."""
    for tool in ("mariadb-install-db", "mariadbd", "mariadb"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"!!! NOT RUN: {tool} is not installed")
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: this throwaway MariaDB runs as root (--user=root)")
    root = _root_dir("dbsim-sqlstats-my-")
    port = free_port()
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={root}/data", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    server = subprocess.Popen(
        [shutil.which("mariadbd") or "/usr/sbin/mariadbd", "--no-defaults",
         f"--datadir={root}/data", "--user=root", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={root}/sock", f"--pid-file={root}/pid",
         f"--performance_schema={'ON' if performance_schema else 'OFF'}", "--skip-log-bin",
         "--innodb-buffer-pool-size=64M", f"--log-error={root}/error.log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        maria = MariaServer(port)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                maria.sql("CREATE DATABASE IF NOT EXISTS test", database="mysql")
                break
            except subprocess.CalledProcessError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mariadbd did not start (see {root}/error.log)") from None
                time.sleep(0.2)  # no event to wait on: the server accepts once it is up
        yield maria
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)
