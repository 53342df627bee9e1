"""MariaDB's (and MySQL's) ``performance_schema.events_statements_summary_by_digest``: the
statements of the target's database (``SCHEMA_NAME = DATABASE()``), most called first.

Figures: ``COUNT_STAR`` calls; mean time = ``AVG_TIMER_WAIT`` (picoseconds) in ms; reads =
``SUM_ROWS_EXAMINED`` (rows the server examined: the view counts no block reads). The window
is derived: from the earliest ``FIRST_SEEN`` to the latest ``LAST_SEEN`` of the database's
digests (the view keeps no reset time), so calls/s is over the span the statements ran.

Refusals (one line, exit 2): ``performance_schema`` off (a server setting: a restart), the
``statements_digest`` consumer off, the view not readable (the grant).
"""

from __future__ import annotations

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

ENABLED = "SELECT @@performance_schema AS enabled"
CONSUMER = """SELECT ENABLED AS enabled FROM performance_schema.setup_consumers
 WHERE NAME = 'statements_digest'"""
QUERY = """SELECT DIGEST AS `key`, DIGEST_TEXT AS `text`, COUNT_STAR AS calls,
       AVG_TIMER_WAIT / 1e9 AS mean_ms, SUM_ROWS_EXAMINED AS `reads`,
       FIRST_SEEN AS first_seen, LAST_SEEN AS last_seen
  FROM performance_schema.events_statements_summary_by_digest
 WHERE SCHEMA_NAME = DATABASE() AND DIGEST_TEXT IS NOT NULL
 ORDER BY COUNT_STAR DESC, DIGEST"""
#: Access denied to a table (1142) or a database (1044).
DENIED = ("1142", "1044")
READS_WHAT = "rows examined (SUM_ROWS_EXAMINED)"


async def read(conn: Any, settings: Any) -> Captured:
    where = address(settings)
    enabled = (await rows(conn, "my_enabled", ENABLED))[0]["enabled"]
    if not int(enabled or 0):
        raise ConfigError(
            f"{where}: performance_schema is OFF: it needs performance_schema = ON in the "
            "server's configuration and a restart"
        )
    try:
        consumer = await rows(conn, "my_consumer", CONSUMER)
        found = await rows(conn, "my_statements", QUERY)
    except TargetError as exc:
        if driver_code(exc) in DENIED:
            raise ConfigError(
                f"{where}: {user_of(settings)} may not read performance_schema: GRANT SELECT "
                f"ON performance_schema.* TO {user_of(settings)}"
            ) from exc
        raise
    if not consumer or str(consumer[0]["enabled"]).upper() != "YES":
        raise ConfigError(
            f"{where}: performance_schema's statements_digest consumer is off: it needs "
            "performance_schema_consumer_statements_digest = ON (or UPDATE "
            "performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = "
            "'statements_digest')"
        )
    seconds, what = seen_window(found, "FIRST_SEEN", "LAST_SEEN")
    return Captured(
        source=f"performance_schema.events_statements_summary_by_digest of {where}",
        statements=statements_of(found),
        style="qmark",
        reads_what=READS_WHAT,
        window_s=seconds,
        window_what=what,
    )
