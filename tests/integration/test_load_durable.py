"""A SQL load ends with its writes on the device (sim.dialects ``after_load``): on PostgreSQL a
CHECKPOINT once a load built a table, so a run measured right after its load (a replay's
calibration, ``dbsim run`` loading first) does not count the load's write-back as its own
device writes; a user who may not checkpoint gets a warning and a loaded table.

On the live PostgreSQL (database ``test``; a throwaway database and role of this module's own
for the user without the privilege), each with a table prefix of its own, dropped after.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from sim.core.dataset import drop_objects, load_and_verify
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration

HOST, PORT = "127.0.0.1", 5432
RUN = secrets.token_hex(3)
ROWS = 10_000  # SLOB's least


def sql(query: str, database: str = "test", user: str = "postgres") -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(host=HOST, port=PORT, user=user, database=database)
        try:
            return list(await conn.fetch(query))
        finally:
            await conn.close()

    return asyncio.run(run())


def slob(prefix: str, **settings: Any) -> SlobWorkload:
    target = PostgresTarget(PostgresSettings(host=HOST, port=PORT, **settings))
    return SlobWorkload(SlobParameters(scale=ROWS, table_prefix=prefix), target)


def checkpoints() -> int:
    """Checkpoints asked for since the statistics' reset (CHECKPOINT counts as one)."""
    return int(sql("SELECT checkpoints_req FROM pg_stat_bgwriter")[0][0])


def test_a_load_that_built_a_table_ends_with_a_checkpoint() -> None:
    workload = slob(f"dur{RUN}", database="test", user="postgres")
    before = checkpoints()
    try:
        report = load_and_verify(workload, workload.target)
        assert report["load"]["built"] is True
        assert report["load"]["after_load"] == "CHECKPOINT"
        assert checkpoints() > before
        # Loaded already: nothing built, so no checkpoint is asked for again.
        again = load_and_verify(workload, workload.target)
        assert again["load"]["built"] is False and again["load"]["after_load"] is None
    finally:
        drop_objects(workload, workload.target)


@pytest.fixture
def unprivileged() -> Iterator[tuple[str, str]]:
    """A role without pg_checkpoint owning a database of its own: (role, database)."""
    role, database = f"dbsim_nockpt_{RUN}", f"dbsim_nockpt_{RUN}"
    sql(f"CREATE ROLE {role} LOGIN")
    sql(f"CREATE DATABASE {database} OWNER {role}")
    try:
        yield role, database
    finally:
        sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        sql(f"DROP ROLE IF EXISTS {role}")


def test_a_user_who_may_not_checkpoint_gets_a_warning_and_a_loaded_table(
    unprivileged: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    role, database = unprivileged
    workload = slob(f"dur{RUN}", database=database, user=role)
    with caplog.at_level(logging.WARNING, logger="workloads.sqlkit.workload"):
        report = load_and_verify(workload, workload.target)
    said = report["load"]["after_load"]
    assert said.startswith("CHECKPOINT after the load failed (") and "pg_checkpoint" in said, said
    assert [t["rows"] for t in report["verify"]["tables"]][:1] == [ROWS]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(said in m and "first measured minutes" in m for m in warned), warned
    drop_objects(workload, workload.target)
