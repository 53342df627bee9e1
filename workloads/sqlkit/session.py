"""What every SQL workload's session shares: its connection (and the blocking form of it where
the driver blocks), and turning the workload's next statement into the engine's transaction
or blocking call."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, ClassVar

from sim.protocols import Connection, SqlConnection, sql_connection
from sim.sql import Statement


class SqlSession(ABC):
    """A session on one SQL connection: a workload's session writes :meth:`next_statement`.

    The engine awaits :meth:`next_transaction` on its loop (asyncpg, oracledb), or runs
    :meth:`next_call` on a thread of the session's own when the driver blocks (sqlite3,
    pyodbc: :attr:`blocking_ready`). An operation named in :attr:`WRITES` runs as a
    transaction of its own, committed at once; any other is a query whose one value is read.
    """

    WRITES: ClassVar[frozenset[str]] = frozenset({"update"})

    def __init__(self, conn: SqlConnection) -> None:
        self.conn = conn
        self.blocking = getattr(conn, "blocking", None)  # a test double may have none

    @abstractmethod
    def next_statement(self) -> tuple[str, Statement, Sequence[Any]]:
        """The next operation's name, its statement and its bind values in bind order."""

    def replace_connection(self, connection: Connection) -> None:
        self.conn = sql_connection(connection)
        self.blocking = self.conn.blocking

    @property
    def blocking_ready(self) -> bool:
        """Whether :meth:`next_call` can be used: the driver blocks (sqlite3, pyodbc)."""
        return self.blocking is not None

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        name, statement, params = self.next_statement()
        if name in self.WRITES:
            return name, self.committed(statement, params)
        return name, self.conn.scalar(statement, params)

    def next_call(self) -> tuple[str, Callable[[], Any]]:
        """The same operation as a blocking call (sim.core.session_threads)."""
        name, statement, params = self.next_statement()
        blocking = self.blocking
        assert blocking is not None
        if name in self.WRITES:
            return name, partial(blocking.execute_committed, statement, params)
        return name, partial(blocking.scalar, statement, params)

    async def committed(self, statement: Statement, params: Sequence[Any]) -> None:
        """``statement`` as a transaction of its own."""
        await self.conn.execute(statement, params)
        await self.conn.commit()
