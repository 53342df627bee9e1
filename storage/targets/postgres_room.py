"""How many connections a PostgreSQL server could still take from dbsim (read at open())."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg


@dataclass(frozen=True)
class ConnectionRoom:
    """How many connections the server could still take from dbsim when it connected."""

    max_connections: int
    reserved: int
    in_use: int
    superuser: bool

    @property
    def free(self) -> int:
        # The connection that measured this is in use but goes back to the pool (+1); only a
        # superuser may take the superuser_reserved_connections.
        reserved = 0 if self.superuser else self.reserved
        return max(self.max_connections - reserved - self.in_use + 1, 0)

    def describe(self) -> str:
        reserved = "" if self.superuser else f" - {self.reserved} reserved for superusers"
        return (
            f"the server had room for {self.free} connections from dbsim (max_connections "
            f"{self.max_connections}{reserved} - {self.in_use} in use); lower load.sessions "
            "(dbsim also uses one for the db collector) or raise max_connections"
        )


async def connection_room(conn: Any) -> ConnectionRoom | None:
    """The server's connection figures, or None when they cannot be read (then nothing is
    refused ahead: the server's own refusal stands)."""
    try:
        row = await conn.fetchrow(
            "SELECT current_setting('max_connections')::int AS max_connections, "
            "current_setting('superuser_reserved_connections')::int AS reserved, "
            "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
            "::int AS in_use, "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser"
        )
    except asyncpg.PostgresError:
        return None
    if row is None:
        return None
    return ConnectionRoom(
        int(row["max_connections"]),
        int(row["reserved"]),
        int(row["in_use"]),
        bool(row["superuser"]),
    )
