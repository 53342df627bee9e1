"""The pre-load cache check on the live PostgreSQL: shared_buffers read through the dialect
record's query, the data the scenario would build held against it and the host's RAM.

Nothing is loaded: the check compares the data the scenario *will* build, so it runs on the
opened target alone (as the engine's ``before_load`` hook does, before the load).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import asyncpg
import pytest

from sim.core.cache import EXERCISE_FACTOR, check_caches, host_ram_bytes
from sim.protocols import EngineContext
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration

HOST, PORT, DATABASE = "127.0.0.1", 5432, "test"
MIB = 2**20


def shared_buffers_bytes() -> int:
    """The server's shared_buffers by another route than dbsim's: pg_settings' unit."""

    async def query() -> int:
        conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=DATABASE)
        try:
            return int(
                await conn.fetchval(
                    "SELECT setting::bigint * pg_size_bytes(unit) FROM pg_settings "
                    "WHERE name = 'shared_buffers'"
                )
            )
        finally:
            await conn.close()

    try:
        return asyncio.run(query())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        pytest.skip(f"!!! PostgreSQL on {HOST}:{PORT} is not reachable: {exc}")


def check(scale: str, **options: Any) -> dict[str, Any]:
    target = PostgresTarget(PostgresSettings(host=HOST, port=PORT, database=DATABASE))
    workload = SlobWorkload(SlobParameters(scale=scale, table_prefix="cachecheck"), target)

    async def main() -> dict[str, Any]:
        with concurrent.futures.ThreadPoolExecutor(2) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await check_caches(target, workload, **options)
            finally:
                await target.close()

    return asyncio.run(main())


def test_a_scale_below_shared_buffers_and_the_page_cache_is_warned_with_a_scale() -> None:
    shared = shared_buffers_bytes()
    section = check("80M")
    assert section["server_cache"] == {"name": "shared_buffers", "bytes": shared}
    ram = host_ram_bytes()
    assert ram is not None and section["host_ram_bytes"] == ram  # 127.0.0.1: this host's RAM
    assert section["needed_bytes"] == EXERCISE_FACTOR * (shared + ram)
    assert section["hidden_by_caches"] is True
    assert section["recommended"].startswith("scale: ") and "shared_buffers" in section["warning"]
    assert section["warning"].endswith(f"use {section['recommended']}")


def test_the_recommended_scale_is_not_warned() -> None:
    """With this host's real RAM (24 GiB) the recommended scale is about 100 GiB of data,
    which is not built here; so the host's RAM is given as 64 MiB, and the server's real
    shared_buffers is what the recommended scale must beat."""
    shared = shared_buffers_bytes()
    small_ram = 64 * MIB
    warned = check("80M", host_ram=small_ram)
    assert warned["needed_bytes"] == EXERCISE_FACTOR * (shared + small_ram)
    assert warned["hidden_by_caches"] is True
    scale = warned["recommended"].split()[1]
    exercised = check(scale, host_ram=small_ram)
    assert exercised["server_cache"]["bytes"] == shared
    assert exercised["data_bytes"] >= exercised["needed_bytes"]
    assert exercised["hidden_by_caches"] is False and "warning" not in exercised
