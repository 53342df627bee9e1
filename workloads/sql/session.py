"""A session of the ``sql`` workload: picks a statement by weight, draws its parameters, and
runs it the safe way its reading allows (workloads.sql.safety):

* a *read* the tokenizer vouches for: the query alone (its rows are all fetched);
* a read-only statement calling functions it cannot see into, or a read-only transaction of
  several statements: inside the database's read-only transaction, then rolled back;
* anything else: inside a transaction, rolled back (committed only with ``commit: true``).

Always on the event loop (``conn.scalar``/``column``/``execute`` of the target), never the
blocking path: a rollback needs the connection's own transaction calls.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from sim.protocols import SqlConnection
from sim.sql import Statement
from workloads.sql.generators import Draw
from workloads.sqlkit import SqlSession

if TYPE_CHECKING:
    from workloads.sql.workload import SqlUserWorkload


@dataclass(frozen=True)
class Step:
    """One statement of a plan, as the driver takes it, and whether it returns rows."""

    statement: Statement
    query: bool


@dataclass(frozen=True)
class Plan:
    """One named statement (or transaction) ready to run: how, and with what."""

    name: str
    steps: tuple[Step, ...]
    #: "plain": the query alone; "read_then_rollback": the query, then a rollback (drivers
    #: that open a transaction at a SELECT); "read_only": in the database's read-only
    #: transaction; "rolled_back" / "committed": in a transaction ended so.
    mode: str
    params: tuple[str, ...]


class SqlUserSession(SqlSession):
    def __init__(
        self,
        workload: SqlUserWorkload,
        conn: SqlConnection,
        draws: dict[str, dict[str, Draw]],
        seed: int,
    ) -> None:
        super().__init__(conn)
        self.blocking = None  # the loop path only: see the module docstring
        self.plans = workload.plans
        self.draws = draws
        self.read_only_begin = workload.read_only_begin
        self.read_only_end = workload.read_only_end
        self.random = random.Random(seed).random
        total = sum(workload.weights)
        self.cumulative = [w / total for w in accumulate(workload.weights)]
        self.last = len(self.plans) - 1
        # The hot path of a lone plain query (pgbench -S): its draws in bind order.
        only = self.plans[0]
        self.lone: tuple[str, Statement, tuple[Draw, ...]] | None = None
        if not self.last and only.mode == "plain":
            statement = only.steps[0].statement
            mine = draws[only.name]
            self.lone = (only.name, statement, tuple(mine[n] for n in statement.param_names))

    def replace_connection(self, connection: Any) -> None:
        super().replace_connection(connection)
        self.blocking = None

    def _pick(self) -> Plan:
        if not self.last:
            return self.plans[0]
        return self.plans[min(bisect.bisect_right(self.cumulative, self.random()), self.last)]

    def _values(self, plan: Plan) -> dict[str, Any]:
        draws = self.draws[plan.name]
        return {name: draws[name]() for name in plan.params}

    def next_statement(self) -> tuple[str, Statement, Sequence[Any]]:
        plan = self._pick()
        values = self._values(plan)
        statement = plan.steps[0].statement
        return plan.name, statement, tuple(values[n] for n in statement.param_names)

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        lone = self.lone
        if lone is not None:
            name, statement, draws = lone
            return name, self.conn.column(statement, tuple([draw() for draw in draws]))
        plan = self._pick()
        values = self._values(plan)
        if plan.mode == "plain":
            statement = plan.steps[0].statement
            return plan.name, self.conn.column(
                statement, tuple(values[n] for n in statement.param_names)
            )
        if plan.mode == "read_then_rollback":
            statement = plan.steps[0].statement
            return plan.name, self._read_then_rollback(
                statement, tuple(values[n] for n in statement.param_names)
            )
        return plan.name, self._transaction(plan, values)

    async def _read_then_rollback(self, statement: Statement, args: tuple[Any, ...]) -> None:
        try:
            await self.conn.column(statement, args)
        finally:
            await self.conn.rollback()

    async def _transaction(self, plan: Plan, values: dict[str, Any]) -> None:
        conn = self.conn
        begin: Callable[[], Awaitable[None]] | None = getattr(conn, "begin", None)
        if begin is not None:
            await begin()
        done = False
        try:
            if plan.mode == "read_only":
                for statement in self.read_only_begin:
                    await conn.execute(statement)
            for step in plan.steps:
                args = tuple(values[n] for n in step.statement.param_names)
                if step.query:
                    await conn.column(step.statement, args)
                else:
                    await conn.execute(step.statement, args)
            if plan.mode == "committed":
                await conn.commit()
                done = True
        finally:
            if not done:
                await conn.rollback()
            if plan.mode == "read_only":
                for statement in self.read_only_end:
                    await conn.execute(statement)
