"""Sessions beyond a PostgreSQL server's connections are refused in one line with the server's
figures, whether dbsim sees it coming (the room it read when it connected) or the server refuses
first (other clients took that room since).

On a throwaway cluster with ``max_connections`` 12, never the shared server on 5432: filling
that one's connections would refuse the tests running beside this one."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from sim.errors import TargetError
from sim.protocols import EngineContext
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from tests.support import forked_dbsim
from tests.support.pgcluster_fixture import throwaway_cluster

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MAX_CONNECTIONS = 12


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[int, Path]]:
    with throwaway_cluster("room", settings={"max_connections": str(MAX_CONNECTIONS)}) as made:
        pg, password = made
        yield pg.port, password


def test_sessions_beyond_the_room_are_refused_before_the_server_does(
    cluster: tuple[int, Path], tmp_path: Path
) -> None:
    port, password = cluster
    scenario = tmp_path / "room.yaml"
    scenario.write_text(
        f"target: {{kind: postgres, host: 127.0.0.1, port: {port}, database: postgres, "
        f"user: postgres, password_file: {password}}}\n"
        "workload: {name: slob, parameters: {table_prefix: room, scale: 10000}}\n"
        "load: {sessions: 40, duration_s: 2}\n",
        encoding="utf-8",
    )
    result = forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", "run", str(scenario), "-q", "-o", str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    text = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in text, text
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text
    # The figures are the server's own: 12, no reserve for a superuser, dbsim's one in use.
    assert "refused: the server had room for 12 connections from dbsim" in errors[0], errors[0]
    assert f"max_connections {MAX_CONNECTIONS} - 1 in use" in errors[0], errors[0]
    assert "lower load.sessions" in errors[0], errors[0]


def test_the_servers_own_refusal_is_worded_with_the_figures_dbsim_had(
    cluster: tuple[int, Path],
) -> None:
    port, password = cluster
    secret = password.read_text("utf-8").strip()
    settings = PostgresSettings(
        host="127.0.0.1", port=port, database="postgres", user="postgres", password_file=password
    )

    async def main() -> str:
        target = PostgresTarget(settings)
        others: list[Any] = []
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                # Another client takes every connection left after dbsim read the room (the pool
                # keeps the one open() used: the first session gets it, the second needs a new one).
                where = {"host": "127.0.0.1", "port": port, "database": "postgres"}
                while True:
                    try:
                        others.append(
                            await asyncpg.connect(**where, user="postgres", password=secret)
                        )
                    except asyncpg.TooManyConnectionsError:
                        break
                assert len(others) == MAX_CONNECTIONS - 1
                first = await target.connect()
                try:
                    with pytest.raises(TargetError) as refused:
                        await target.connect()
                finally:
                    await first.close()
                return str(refused.value)
            finally:
                for conn in others:
                    await conn.close()
                await target.close()

    line = asyncio.run(main())
    assert line.startswith("postgres: connection 2 refused by the server ("), line
    assert "too many clients" in line, line
    assert "when dbsim connected, the server had room for 12 connections" in line, line
    assert secret not in line
