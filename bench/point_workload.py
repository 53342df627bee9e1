"""Bench-only: a random single-key lookup on a table a bench script built, as a dbsim workload
with one operation (``point``), so either session runner deals it (sqlkit's contract:
``next_statement``). pgbench_slob.py, mariadb_bench.py and odbc_bench.py time it against their
peers' point selects; the statement is theirs, in their target's parameter style."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from sim.protocols import Connection, SqlConnection, Target, Workload, sql_connection
from sim.sql import Statement
from workloads.sqlkit import SqlSession


class PointParameters(BaseModel):
    #: The lookup, with one integer parameter: a key drawn uniformly from 1..rows.
    sql: str
    rows: int
    #: The parameter's name (sim.sql.Statement), for the targets that bind by name.
    param: str = "id"


class PointSession(SqlSession):
    def __init__(self, conn: SqlConnection, statement: Statement, rows: int, seed: int) -> None:
        super().__init__(conn)
        self.statement = statement
        self.rows = rows
        self.randint = random.Random(seed).randint

    def next_statement(self) -> tuple[str, Statement, tuple[int]]:
        return "point", self.statement, (self.randint(1, self.rows),)


class PointWorkload(Workload):
    name: ClassVar[str] = "point_lookup"
    parameters_model: ClassVar[type[BaseModel]] = PointParameters
    needs: ClassVar[str] = "sql"

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        assert isinstance(parameters, PointParameters)
        self.p = parameters
        self.statement = Statement("point", parameters.sql, (parameters.param,))

    def operations(self) -> Mapping[str, float]:
        return {"point": 100.0}

    async def load(self, progress: Any) -> dict[str, Any]:
        return {}  # the bench script built the table

    async def verify(self) -> dict[str, Any]:
        return {}

    def statement_inventory(self) -> list[Statement]:
        return [self.statement]

    def new_session(self, index: int, connection: Connection, seed: int) -> PointSession:
        return PointSession(sql_connection(connection), self.statement, self.p.rows, seed)

    async def drop(self) -> list[str]:
        return []  # the bench script drops its table
