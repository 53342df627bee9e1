"""What every SQL workload's session shares: its connection, the blocking form of it where
the driver blocks, and a statement committed on its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.protocols import Connection, SqlConnection, sql_connection
from sim.sql import Statement


class SqlSession:
    """A session on one SQL connection. The engine runs :meth:`next_call` on a thread of the
    session's own when the driver blocks (sqlite3, pyodbc: ``blocking_ready``), else awaits
    :meth:`next_transaction` on its loop; a workload's session provides both."""

    def __init__(self, conn: SqlConnection) -> None:
        self.conn = conn
        self.blocking = getattr(conn, "blocking", None)  # a test double may have none

    def replace_connection(self, connection: Connection) -> None:
        self.conn = sql_connection(connection)
        self.blocking = self.conn.blocking

    @property
    def blocking_ready(self) -> bool:
        """Whether :meth:`next_call` can be used: the driver blocks (sqlite3, pyodbc)."""
        return self.blocking is not None

    async def committed(self, statement: Statement, params: Sequence[Any]) -> None:
        """``statement`` as a transaction of its own (an update, say)."""
        await self.conn.execute(statement, params)
        await self.conn.commit()
