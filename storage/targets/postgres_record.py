"""Facts about PostgreSQL that its dialect record (storage.targets.postgres) carries (the record itself is at
the end, apart from the driver module so the registry knows it without importing asyncpg): how a
SLOB row stays alone on its page, and the caches the cache check (sim.core.cache) reads with
the way past them.

``shared_buffers`` is the server's own cache. ``debug_io_direct`` (PostgreSQL 16+) holding
``data`` makes the server read its files past the host's page cache; an older server has no
such setting (the query's NULL reads as "not direct"). ``pg_backend_pid()`` names the process
serving the connection, whose memory cgroup bounds the page cache its reads fill.
"""

from __future__ import annotations

from sim.dialects import PageFit, ServerCache, SqlDialect
from storage.collectors.database import postgres_stats_collectors
from storage.targets.first_contact import POSTGRES as FIRST_CONTACT

#: fillfactor 10 keeps one row per block; toast_tuple_target keeps a ~2.5 KB row in the heap
#: (past 2 KB PostgreSQL would move columns out to TOAST, and every read and update would touch
#: a second relation).
SLOB_TABLE_OPTIONS = {"fillfactor": 10, "toast_tuple_target": 8160}


def postgres_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    """Fill factor and TOAST target that keep one row per block."""
    return PageFit(table_kwargs={"postgresql_with": dict(SLOB_TABLE_OPTIONS)})


POSTGRES_CACHE = ServerCache(
    "shared_buffers",
    "SELECT pg_size_bytes(current_setting('shared_buffers'))",
    direct_query="SELECT coalesce(current_setting('debug_io_direct', true), '') LIKE '%data%'",
    pid_query="SELECT pg_backend_pid()",
)

#: The memory cgroup holds shared_buffers (shared memory is charged to the group whose
#: processes touch it) and the page cache of the server's files, so ``{cap_mb}`` bounds both.
POSTGRES_CACHE_RECIPE = (
    "shared_buffers = {quarter_mb}MB with the server started in a memory cgroup of "
    "{cap_mb}M (cgroup v2 memory.max, v1 memory.limit_in_bytes), or on PostgreSQL 16+ "
    "shared_buffers = {cap_mb}MB with debug_io_direct = data; dbsim's own lab: "
    "dbsim lab up --postgres --pg-cache-cap {cap_mb}M"
)


#: Names longer than 63 bytes are cut by the server (NAMEDATALEN - 1), so they are refused.
POSTGRES_DIALECT = SqlDialect(
    name="postgres",
    sqlalchemy_module="sqlalchemy.dialects.postgresql",
    sqlglot="postgres",
    max_identifier_chars=63,
    one_row_per_page=postgres_page_fit,
    stats_collectors=postgres_stats_collectors,
    cache=POSTGRES_CACHE,
    cache_recipe=POSTGRES_CACHE_RECIPE,
    first_contact=FIRST_CONTACT,
)
