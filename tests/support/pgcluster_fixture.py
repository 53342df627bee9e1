"""A throwaway PostgreSQL cluster of a test's own (never the system one on 5432): initdb on a
free port under /var/tmp, started, and always stopped and removed. Root only (the cluster runs
as the ``postgres`` user); skips loudly where the server binaries or that user are missing."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.lab.pgcluster import Cluster, pg_bin, port_free


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def throwaway_cluster(
    tag: str, port: int | None = None, settings: dict[str, str] | None = None
) -> Iterator[tuple[Cluster, Path]]:
    """The started cluster and its password file (``port``: a free one when not given;
    ``settings``: postgresql.conf lines of the test's own, e.g. a low max_connections)."""
    if os.geteuid() != 0:
        pytest.skip("!!! NOT RUN: starting a throwaway PostgreSQL cluster needs root")
    try:
        pwd.getpwnam("postgres")
        pg_bin()
    except Exception as exc:  # any missing piece: say which
        pytest.skip(f"!!! NOT RUN: PostgreSQL server binaries or user missing: {exc}")
    port = free_port() if port is None else port
    if not port_free(port):
        pytest.skip(f"!!! NOT RUN: port {port} is taken")
    root = Path(f"/var/tmp/dbsim-{tag}-{os.getpid()}-{port}")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    root.chmod(0o755)
    cluster = Cluster(root / "pg", port)
    password = root / "password"
    cluster.init(password, settings)
    cluster.start([])
    try:
        yield cluster, password
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
