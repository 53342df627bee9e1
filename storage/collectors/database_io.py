"""The database I/O vocabulary (issue #26): what a database asks of its storage, in the same
words whatever the engine, so that a profile of production reads one set of figures for
PostgreSQL, MariaDB, Oracle's AWR or SQL Server's views.

Every figure is a rate per second over the interval, except ``*_ms`` (mean wait per request)
and the sessions' activity (a count at the interval's end):

- ``phys_read_req_s``, ``phys_read_kB_s``: read requests the database made of its files, and
  their volume; ``single_block_read_s``, ``multi_block_read_s`` where the engine tells them
  apart; ``single_block_read_ms`` the mean wait of a single-block read where it is timed.
- ``phys_write_req_s``, ``phys_write_kB_s``: data-file writes; ``log_write_req_s``,
  ``log_write_kB_s``: writes of the redo/WAL log; ``commits_s``: transactions committed.
- ``active_sessions``, ``io_wait_sessions`` (live captures): client sessions running a
  statement, and those of them waiting on I/O, other than the capture's own.

A figure the engine does not count is absent, never 0. Pure arithmetic on the ``db``
collectors' rates (storage.collectors.database for PostgreSQL, storage.collectors.innodb for
MariaDB/MySQL); the importers of view snapshots use the same functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sim.errors import CollectorError
from sim.sql import Statement

#: PostgreSQL reads and writes its relations one 8 KiB block per call (BLCKSZ, up to 16).
PG_BLOCK_KB = 8.0
#: From PostgreSQL 17 a read may cover several blocks (read streams), so blocks read are no
#: longer read requests.
PG_MULTI_BLOCK_READS = 170000
#: The PostgreSQL collector's written-buffer rates (pg_stat_bgwriter, <= 16 layout).
PG_BUFFER_WRITES = ("buffers_checkpoint_s", "buffers_clean_s", "buffers_backend_s")
VOCABULARY = (
    "phys_read_req_s",
    "phys_read_kB_s",
    "single_block_read_s",
    "multi_block_read_s",
    "phys_write_req_s",
    "phys_write_kB_s",
    "log_write_req_s",
    "log_write_kB_s",
    "commits_s",
    "single_block_read_ms",
    "multi_block_read_ms",
    "log_write_ms",
)


def postgres_vocabulary(
    rates: Mapping[str, float], version_num: int, own_commits_s: float = 0.0
) -> dict[str, float]:
    """The vocabulary from the PostgreSQL collector's rates (``blks_read_s``,
    ``buffers_*_s``, ``wal_write_s``, ``wal_bytes_s``, ``xact_commit_s``, ``blk_read_time_ms_s``).

    Reads and commits are the database's (pg_stat_database); writes and WAL the cluster's.
    ``own_commits_s``: the collector's own statements, each a transaction the server counts,
    taken off ``commits_s``. ``single_block_read_ms`` only when reads were timed
    (``track_io_timing``: the read time grew)."""
    out: dict[str, float] = {}
    blocks = rates.get("blks_read_s")
    if blocks is not None:
        out["phys_read_kB_s"] = blocks * PG_BLOCK_KB
        if version_num < PG_MULTI_BLOCK_READS:
            out["phys_read_req_s"] = out["single_block_read_s"] = blocks
            read_ms = rates.get("blk_read_time_ms_s", 0.0)
            if blocks > 0 and read_ms > 0:
                out["single_block_read_ms"] = read_ms / blocks
    if all(name in rates for name in PG_BUFFER_WRITES):
        written = sum(rates[name] for name in PG_BUFFER_WRITES)
        out["phys_write_req_s"] = written
        out["phys_write_kB_s"] = written * PG_BLOCK_KB
    if "wal_write_s" in rates:
        out["log_write_req_s"] = rates["wal_write_s"]
    if "wal_bytes_s" in rates:
        out["log_write_kB_s"] = rates["wal_bytes_s"] / 1024.0
    if "xact_commit_s" in rates:
        out["commits_s"] = rates["xact_commit_s"] - own_commits_s
    return out


#: InnoDB's status counters (``SHOW GLOBAL STATUS``) -> the collector's rate keys -> the
#: vocabulary: data-file reads and writes, redo log writes, engine commits.
INNODB_VOCABULARY = {
    "data_reads_s": "phys_read_req_s",
    "data_writes_s": "phys_write_req_s",
    "log_writes_s": "log_write_req_s",
    "handler_commits_s": "commits_s",
}
INNODB_VOLUMES = {
    "data_read_bytes_s": "phys_read_kB_s",
    "data_written_bytes_s": "phys_write_kB_s",
    "log_written_bytes_s": "log_write_kB_s",
}


def innodb_vocabulary(rates: Mapping[str, float]) -> dict[str, float]:
    """The vocabulary from the InnoDB collector's rates. ``commits_s`` counts the engine's
    commits (``Handler_commit``), autocommitted statements included; ``Com_commit`` would
    count only COMMIT statements."""
    out = {word: rates[key] for key, word in INNODB_VOCABULARY.items() if key in rates}
    out.update({word: rates[key] / 1024.0 for key, word in INNODB_VOLUMES.items() if key in rates})
    return out


# --------------------------------------------------------------------------- live captures

#: Live captures: client sessions of the captured database running a statement, and those
#: waiting on I/O, other than the collector's own (counts at the interval's end) — the
#: database's, as its reads and commits are (another database's sessions on the same server
#: were counted here too). Without pg_read_all_stats the state and wait event of other roles'
#: sessions read as NULL, so the capture checks that grant first.
PG_ACTIVITY_SQL = """SELECT count(*) FILTER (WHERE state = 'active')::float8 AS active_sessions,
       count(*) FILTER (WHERE state = 'active' AND wait_event_type = 'IO')::float8
         AS io_wait_sessions
  FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
   AND datname = current_database()"""
PG_SEES_ALL_SQL = (
    "SELECT current_user::text || CASE WHEN pg_has_role(current_user, 'pg_read_all_stats', "
    "'USAGE') THEN '' ELSE ' lacks pg_read_all_stats' END"
)
#: SQLSTATE of a statement the role has no privilege for.
INSUFFICIENT_PRIVILEGE = "42501"


async def check_sees_all(conn: Any, statement: Statement) -> None:
    """A capture counts every client session's state: refuse without pg_read_all_stats."""
    who = str(await conn.scalar(statement))
    if who.endswith(" lacks pg_read_all_stats"):
        user = who.removesuffix(" lacks pg_read_all_stats")
        raise CollectorError(
            f"collector db: role {user} cannot see other roles' sessions in "
            "pg_stat_activity (their state and wait events read as NULL), so "
            f"active_sessions would count nothing of the application's: GRANT "
            f"pg_read_all_stats TO {user} (or pg_monitor, which includes it)"
        )


def missing_grant(exc: BaseException) -> CollectorError | None:
    """A statistics view the role may not read, as the line that names the grant."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    if getattr(cause, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
        return None
    found = re.search(r"permission denied for (?:view|table|relation) (\w+)", str(cause))
    view = found.group(1) if found else "a statistics view"
    return CollectorError(
        f"collector db: {cause}: the collector reads {view} (GRANT SELECT ON pg_catalog."
        f"{view} TO the target's user; PostgreSQL grants it to PUBLIC unless revoked)"
    )
