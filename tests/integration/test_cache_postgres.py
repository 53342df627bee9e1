"""The pre-load cache check on the live PostgreSQL: shared_buffers read through the dialect
record's query, the data the scenario would build held against it and the host's RAM; and on
the live MariaDB, whose O_DIRECT reads leave the buffer pool as the only cache.

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


def test_postgresql_here_reads_through_the_page_cache_in_no_capped_group() -> None:
    """PostgreSQL 15 has no debug_io_direct (the query's NULL is "not direct"), and the
    server's backend sits in a memory cgroup without a limit: the host's RAM counts whole."""
    section = check("80M")
    assert section["direct_io"] is False and section["memory_limit_bytes"] is None
    # The cheaper way first: a quarter of the data, then the scale.
    assert section["cap_bytes"] == 20 * MIB
    assert (
        "shared_buffers = 5MB with the server started in a memory cgroup of 20M"
        in (section["recipe"])
    )
    warning = section["warning"]
    assert warning.index("cap the caches at 20 MiB") < warning.index(section["recommended"])


def test_mariadb_with_o_direct_is_judged_on_its_buffer_pool_alone() -> None:
    """MariaDB reads its files with O_DIRECT when innodb_flush_method says so (MariaDB
    10.6+'s default): the page cache is not a cache of its data, only the buffer pool is."""
    pymysql = pytest.importorskip("pymysql", reason="!!! PyMySQL missing: MariaDB NOT TESTED")
    from storage.targets.mysql import MysqlSettings, MysqlTarget

    dsn = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
    try:
        conn = pymysql.connect(**dsn)
    except pymysql.MySQLError as exc:
        pytest.skip(f"!!! MariaDB on 127.0.0.1:3306 is not reachable: {exc}")
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT @@innodb_flush_method, @@innodb_buffer_pool_size")
            method, pool = cursor.fetchone()
    finally:
        conn.close()
    target = MysqlTarget(MysqlSettings())
    workload = SlobWorkload(SlobParameters(scale="80M", table_prefix="cachecheck"), target)

    async def main() -> dict[str, Any]:
        with concurrent.futures.ThreadPoolExecutor(2) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await check_caches(target, workload)
            finally:
                await target.close()

    section = asyncio.run(main())
    direct = str(method) in ("O_DIRECT", "O_DIRECT_NO_FSYNC")
    assert section["direct_io"] is direct and section["server_cache"]["bytes"] == int(pool)
    if direct:
        assert section["needed_bytes"] == EXERCISE_FACTOR * int(pool)
        assert "no page cache: direct I/O" in section.get("warning", "no page cache: direct I/O")
    if section["hidden_by_caches"]:
        assert (
            "innodb_buffer_pool_size = 20M with innodb_flush_method = O_DIRECT"
            in (section["warning"])
        )
