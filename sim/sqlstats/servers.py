"""Reading a server's statement statistics through dbsim's own target, read-only.

The target is the scenario's (or the command line's) ``target`` section, opened as
``dbsim capture`` opens it: PostgreSQL's connections get ``default_transaction_read_only``,
so the server itself refuses any write; the readers only ever run SELECTs. A view that is
missing or that the user may not read is refused with one line naming the setting or the
grant it needs (:class:`~sim.errors.ConfigError`, exit 2).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sim.capture.watch import watched_target
from sim.errors import ConfigError
from sim.protocols import connect_sql
from sim.sqlstats import mariadb, mssql, postgres
from sim.sqlstats.captured import Captured

Reader = Callable[[Any, Any], Awaitable[Captured]]


#: The target kinds whose statement statistics are read, and their readers.
READERS: dict[str, Reader] = {
    "postgres": postgres.read,
    "mysql": mariadb.read,
    "sqlserver": mssql.read,
}


def read_server(settings: Any) -> Captured:
    """Every statement the server's statistics hold for the target's database, most called
    first. Refuses a kind without statement statistics dbsim reads."""
    from sim.core.loops import run_opened

    readers = READERS
    reader = readers.get(settings.kind)
    if reader is None:
        raise ConfigError(
            f"target.kind: {settings.kind} has no statement statistics dbsim reads "
            f"(it reads {', '.join(sorted(readers))}, or an AWR report with --awr)"
        )
    target = watched_target(settings, [])  # capture's: read-only sessions where it can

    async def work() -> Captured:
        conn = await connect_sql(target)
        try:
            return await reader(conn, settings)
        finally:
            await conn.close()

    return run_opened(target, work, threads=1, thread_name="dbsim-sqlstats")
