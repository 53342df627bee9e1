"""In-process stand-ins for the engine's pacing tests: a target whose "queries" take a known
service time and can be stalled on demand. They test the engine's arithmetic (rates, phases,
coordinated omission), not any database; database behaviour is tested against real servers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from sim.protocols import EngineContext, SqlConnection, Target, Workload
from sim.sql import Statement


class TimedConnection(SqlConnection):
    def __init__(self, target: TimedTarget) -> None:
        self.target = target

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        await self.target.serve()
        return 1

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        await self.target.serve()
        return [1]

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        await self.target.serve()
        return 1

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        await self.target.serve()

    async def commit(self) -> None:
        return None

    async def rollback(self) -> None:
        return None

    async def close(self) -> None:
        self.target.closed += 1


class TimedTarget(Target):
    """Every call takes ``service_s``; while ``stalled`` is set, calls wait for it to clear."""

    kind: ClassVar[str] = "timed"
    dialect: ClassVar[str] = "sqlite"
    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, service_s: float = 0.0005, fail_every: int = 0) -> None:
        self.service_s = service_s
        self.fail_every = fail_every
        self.calls = 0
        self.closed = 0
        self.running = asyncio.Event()
        self.running.set()
        # The same switch for sessions on their own threads (serve_blocking).
        self.running_blocking = threading.Event()
        self.running_blocking.set()

    async def serve(self) -> None:
        self.calls += 1
        call = self.calls
        await self.running.wait()
        await asyncio.sleep(self.service_s)
        if self.fail_every and call % self.fail_every == 0:
            raise ConnectionResetError("injected failure")

    def serve_blocking(self) -> None:
        """``serve`` as a blocking call, for sessions on their own threads."""
        self.calls += 1  # under the GIL; a lost count would only blur fail_every
        call = self.calls
        self.running_blocking.wait()
        time.sleep(self.service_s)
        if self.fail_every and call % self.fail_every == 0:
            raise ConnectionResetError("injected failure")

    async def stall_for(self, seconds: float) -> None:
        self.running.clear()
        self.running_blocking.clear()
        await asyncio.sleep(seconds)
        self.running_blocking.set()
        self.running.set()

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> SqlConnection:
        return TimedConnection(self)

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list[Path]:
        return []

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}


class PingParameters(BaseModel):
    sessions: int = 4
    #: Offer blocking calls (``next_call``), so the engine may run sessions on threads.
    blocking: bool = False


PING = Statement(name="ping", sql="SELECT 1", param_names=())


class PingSession:
    def __init__(self, conn: SqlConnection) -> None:
        self.conn = conn

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        return "ping", self.conn.scalar(PING)

    def replace_connection(self, connection: SqlConnection) -> None:  # type: ignore[override]
        self.conn = connection


class BlockingPingSession(PingSession):
    """The same operation as a blocking call (sim.core.session_threads)."""

    def next_call(self) -> tuple[str, Any]:
        assert isinstance(self.conn, TimedConnection)
        return "ping", self.conn.target.serve_blocking


class PingWorkload(Workload):
    """One operation, ``ping``: a single call to the target."""

    name: ClassVar[str] = "ping"
    parameters_model: ClassVar[type[BaseModel]] = PingParameters
    needs: ClassVar[str] = "timed"

    def operations(self) -> Mapping[str, float]:
        return {"ping": 100.0}

    def default_sessions(self) -> int:
        assert isinstance(self.parameters, PingParameters)
        return self.parameters.sessions

    async def load(self, progress: Any) -> dict[str, Any]:
        return {"built": False}

    async def verify(self) -> dict[str, Any]:
        return {}

    def statement_inventory(self) -> list[Statement]:
        return [PING]

    def new_session(self, index: int, connection: SqlConnection, seed: int) -> PingSession:
        assert isinstance(self.parameters, PingParameters)
        return (
            BlockingPingSession(connection) if self.parameters.blocking else PingSession(connection)
        )

    async def drop(self) -> list[str]:
        return []
