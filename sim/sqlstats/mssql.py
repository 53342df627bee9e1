"""SQL Server's Query Store: the target database's queries, summed over their plans and
intervals, most executed first.

Figures: Σ``count_executions`` calls; mean time = Σ(``avg_duration`` × executions) / calls,
µs to ms; reads = Σ(``avg_physical_io_reads`` × executions): 8 kB pages read from storage.
The window is derived: the earliest ``first_execution_time`` to the latest
``last_execution_time`` of the rows read. Query Store keeps a parameterized statement as
``(@1 int)SELECT … WHERE id = @1``: the declaration is dropped and the ``@`` names are the
parameters.

Written from Microsoft's documentation of the Query Store catalog views; no SQL Server runs
here, so it was checked on hand-written rows of those columns only, never on a server.

Refusals (one line, exit 2): Query Store not on for the database, VIEW DATABASE STATE not
held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.errors import ConfigError, TargetError
from sim.sqlstats.access import (
    address,
    driver_code,
    rows,
    seen_window,
    statements_of,
    user_of,
)
from sim.sqlstats.captured import Captured

STATE = "SELECT actual_state_desc AS state FROM sys.database_query_store_options"
QUERY = """SELECT CAST(q.query_id AS varchar(20)) AS [key], t.query_sql_text AS [text],
       SUM(rs.count_executions) AS calls,
       SUM(rs.avg_duration * rs.count_executions) / NULLIF(SUM(rs.count_executions), 0)
         / 1000.0 AS mean_ms,
       SUM(rs.avg_physical_io_reads * rs.count_executions) AS [reads],
       MIN(rs.first_execution_time) AS first_seen, MAX(rs.last_execution_time) AS last_seen
  FROM sys.query_store_query AS q
  JOIN sys.query_store_query_text AS t ON t.query_text_id = q.query_text_id
  JOIN sys.query_store_plan AS p ON p.query_id = q.query_id
  JOIN sys.query_store_runtime_stats AS rs ON rs.plan_id = p.plan_id
 GROUP BY q.query_id, t.query_sql_text
 ORDER BY calls DESC, [key]"""
#: The server's "permission denied" (VIEW DATABASE STATE missing).
DENIED = ("229", "300", "297")
READS_WHAT = "pages read from storage (Query Store avg_physical_io_reads)"


def strip_declaration(text: str) -> str:
    """``(@1 int,@2 varchar(8000))SELECT …`` -> ``SELECT …``; other text unchanged."""
    stripped = text.lstrip()
    if not stripped.startswith("(@"):
        return text
    depth = 0
    for i, char in enumerate(stripped):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return stripped[i + 1 :].lstrip()
    return text


def captured(found: Sequence[Mapping[str, Any]], where: str) -> Captured:
    """Query Store rows (as :data:`QUERY` returns them) as the skeleton's input."""
    seconds, what = seen_window(found, "first_execution_time", "last_execution_time")
    return Captured(
        source=f"the Query Store of {where}",
        statements=statements_of(found, strip_declaration),
        style="at",
        reads_what=READS_WHAT,
        window_s=seconds,
        window_what=what,
    )


async def read(conn: Any, settings: Any) -> Captured:
    where = address(settings)
    try:
        state = await rows(conn, "mssql_qs_state", STATE)
        if not state or str(state[0]["state"]).upper() not in ("READ_ONLY", "READ_WRITE"):
            raise ConfigError(
                f"{where}: Query Store is off for the database: it needs ALTER DATABASE "
                "CURRENT SET QUERY_STORE = ON"
            )
        found = await rows(conn, "mssql_qs_statements", QUERY)
    except TargetError as exc:
        if driver_code(exc) in DENIED or "permission" in str(exc).lower():
            raise ConfigError(
                f"{where}: {user_of(settings)} may not read Query Store: GRANT VIEW DATABASE "
                f"STATE TO {user_of(settings)}"
            ) from exc
        raise
    return captured(found, where)
