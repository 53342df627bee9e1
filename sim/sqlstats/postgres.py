"""PostgreSQL's ``pg_stat_statements``: the current database's statements, summed per
``queryid`` over users (and top-level or nested), most called first.

Figures: ``calls``; mean execution time = Σ``total_exec_time`` / Σ``calls`` in ms
(``total_time`` before PostgreSQL 13); reads = Σ``shared_blks_read``: shared buffers read
from the operating system (which may have served them from its cache), 8 kB blocks on a
default build. The window is ``pg_stat_statements_info.stats_reset`` to now (PostgreSQL
14 and later; earlier: unknown).

Refusals (one line, exit 2): the extension not created in the database, the library not in
``shared_preload_libraries``, the view not readable, other users' texts hidden (the
``pg_read_all_stats`` role).
"""

from __future__ import annotations

from typing import Any

from sim.errors import ConfigError, TargetError, WorkloadError
from sim.sql import quote_identifier
from sim.sqlstats.access import address, driver_code, rows, statements_of, user_of
from sim.sqlstats.captured import Captured

INSTALLED = "SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'"
VERSION = "SELECT current_setting('server_version_num')::int AS v"
QUERY = """SELECT s.queryid::text AS key, min(s.query) AS text, sum(s.calls)::bigint AS calls,
       sum(s.{total}) / nullif(sum(s.calls), 0) AS mean_ms,
       sum(s.shared_blks_read)::float8 AS reads
  FROM pg_stat_statements AS s JOIN pg_database AS d ON d.oid = s.dbid
 WHERE d.datname = current_database()
 GROUP BY s.queryid
 ORDER BY calls DESC, key"""
WINDOW = """SELECT extract(epoch FROM now() - stats_reset)::float8 AS seconds,
       to_char(stats_reset AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') AS since
  FROM pg_stat_statements_info"""
HIDDEN = "<insufficient privilege>"
READS_WHAT = "shared blocks read (pg_stat_statements shared_blks_read)"


def _setup(settings: Any) -> str:
    """The set-up a refusal names; the role quoted as GRANT needs it (a role name no
    identifier rule accepts is named in words instead)."""
    try:
        grantee = quote_identifier("postgres", user_of(settings))
    except WorkloadError:
        grantee = "the capture's role"
    return (
        "shared_preload_libraries = 'pg_stat_statements' (restart), CREATE EXTENSION "
        f"pg_stat_statements in the database, GRANT pg_read_all_stats TO {grantee}"
    )


async def read(conn: Any, settings: Any) -> Captured:
    where = address(settings)
    if not await rows(conn, "pg_installed", INSTALLED):
        raise ConfigError(
            f"{where}: the pg_stat_statements extension is not installed; it needs "
            f"{_setup(settings)}"
        )
    version = int((await rows(conn, "pg_version", VERSION))[0]["v"])
    total = "total_exec_time" if version >= 130000 else "total_time"
    try:
        found = await rows(conn, "pg_statements", QUERY.format(total=total))
    except TargetError as exc:
        raise _refusal(where, settings, exc) from exc
    if any(row["text"] == HIDDEN for row in found):
        raise ConfigError(
            f"{where}: pg_stat_statements hides other users' statements from "
            f"{user_of(settings)}: GRANT pg_read_all_stats TO {user_of(settings)}"
        )
    seconds, since = None, "pg_stat_statements_info needs PostgreSQL 14"
    if version >= 140000:
        window = (await rows(conn, "pg_window", WINDOW))[0]
        seconds = float(window["seconds"])
        since = f"since pg_stat_statements_info.stats_reset, {window['since']} UTC"
    statements = statements_of(found)
    return Captured(
        source=f"pg_stat_statements of {where}",
        statements=statements,
        style="dollar",
        reads_what=READS_WHAT,
        window_s=seconds,
        window_what=since,
    )


def _refusal(where: str, settings: Any, exc: TargetError) -> ConfigError | TargetError:
    code = driver_code(exc)
    if code == "55000":  # object_not_in_prerequisite_state: the library is not preloaded
        return ConfigError(
            f"{where}: pg_stat_statements is created but not loaded: it needs "
            "shared_preload_libraries = 'pg_stat_statements' and a restart"
        )
    if code == "42501":  # insufficient_privilege
        return ConfigError(
            f"{where}: {user_of(settings)} may not read pg_stat_statements: GRANT SELECT ON "
            f"pg_stat_statements TO {user_of(settings)} (and pg_read_all_stats for others' "
            "statements)"
        )
    if code == "42P01":  # undefined_table: the extension lives in a schema off the path
        return ConfigError(
            f"{where}: pg_stat_statements is not on {user_of(settings)}'s search_path: "
            "ALTER EXTENSION pg_stat_statements SET SCHEMA public"
        )
    return exc
