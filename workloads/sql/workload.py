"""The ``sql`` workload: the user's own statements on the user's own tables.

dbsim owns nothing here: it creates no table, so ``load`` (in a run) only checks and reads
what the statements need before any session starts — the sample generators' values, the
files' values, whether the database can enforce a read-only transaction where the tokenizer
could not tell — and ``dbsim load`` / ``dbsim drop`` refuse (:attr:`creates_objects`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from sim.errors import ConfigError, ScenarioError, TargetError, WorkloadError
from sim.protocols import Connection, SqlConnection, Target, connect_sql, sql_connection
from sim.safeio import read_text_file
from sim.sql import Statement, to_paramstyle
from workloads.sql import generators as gen
from workloads.sql.parameters import Generator, SqlParameters, SqlStatement
from workloads.sql.safety import READ, UNCERTAIN, WRITE, read_statement
from workloads.sql.session import Plan, SqlUserSession, Step
from workloads.sqlkit import Batch, PlannedTable, SqlWorkload

if TYPE_CHECKING:
    # Annotations only: the workload is built without SQLAlchemy to be checked (issue #25).
    from sqlalchemy import Table

FIELD = "workload.parameters.statements"
MAX_FILE_BYTES = 64 * 2**20
#: Each dialect's read-only transaction: what opens it (after the connection's own begin, where
#: it has one) and what closes it after the rollback. SQL Server has none: a statement the
#: tokenizer cannot vouch for is refused there.
READ_ONLY = {
    "postgres": (("SET TRANSACTION READ ONLY",), ()),
    "oracle": (("SET TRANSACTION READ ONLY",), ()),
    "mysql": (("START TRANSACTION READ ONLY",), ()),
    "sqlite": (("PRAGMA query_only = 1",), ("PRAGMA query_only = 0",)),
}
#: Target kinds whose driver opens a transaction at a plain SELECT (autocommit off: MariaDB's
#: consistent snapshot, psqlODBC's BEGIN): each query is followed by a rollback there, so no
#: session holds a snapshot on the user's database for the whole run (blocking purge/vacuum).
ENDS_READS = frozenset({"mysql", "odbc", "sqlserver"})


def _statements(name: str, texts: tuple[str, ...]) -> list[Statement]:
    return [Statement(f"{name}_{i}", sql, ()) for i, sql in enumerate(texts)]


class SqlUserWorkload(SqlWorkload[SqlParameters]):
    name: ClassVar[str] = "sql"
    parameters_model: ClassVar[type[BaseModel]] = SqlParameters
    sql_dir = Path(__file__).parent / "sql"
    required_statements = frozenset({"sample", "sample_in_schema"})
    #: dbsim creates nothing for this workload: ``dbsim load`` and ``dbsim drop`` refuse.
    creates_objects: ClassVar[bool] = False

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        begin, end = READ_ONLY.get(self.dialect, ((), ()))
        self.read_only_begin = _statements("read_only_begin", begin)
        self.read_only_end = _statements("read_only_end", end)
        self.plans = [self._plan(s) for s in self.p.statements]
        self.weights = [s.weight for s in self.p.statements]
        #: Values of the list, file and sample generators, by statement and parameter.
        self.values: dict[tuple[str, str], list[Any]] = {}

    def _plan(self, spec: SqlStatement) -> Plan:
        readings = spec.readings()
        steps = []
        for i, (text, reading) in enumerate(zip(spec.texts, readings, strict=True)):
            sql, order = to_paramstyle(text, self.target.paramstyle)
            name = spec.name if spec.sql is not None else f"{spec.name}_{i + 1}"
            steps.append(Step(Statement(name, sql, order), reading.kind != WRITE))
        kinds = {r.kind for r in readings}
        if kinds == {READ} and len(steps) == 1:
            mode = "read_then_rollback" if self.target.kind in ENDS_READS else "plain"
        elif WRITE not in kinds and spec.read_only:
            mode = "read_only"
        else:
            mode = "committed" if self.p.commit else "rolled_back"
        params = tuple(dict.fromkeys(n for r in readings for n in r.params))
        return Plan(spec.name, tuple(steps), mode, params)

    # ------------------------------------------------------------------ the mix

    def operations(self) -> Mapping[str, float]:
        total = sum(self.weights) or 1.0
        return {s.name: 100.0 * s.weight / total for s in self.p.statements}

    def read_operations(self) -> frozenset[str]:
        return frozenset(p.name for p in self.plans if p.mode != "rolled_back")

    def table_pattern(self) -> str:
        """The tables the statements name (their last part), for the database collector; a
        pattern no table matches when they name none."""
        names = sorted(
            {
                table.rsplit(".", 1)[-1]
                for spec in self.p.statements
                for reading in spec.readings()
                for table in reading.tables
            }
        )
        return "^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "^$"

    # ------------------------------------------------------------------ before the sessions

    def _refuse(self, spec: SqlStatement, field: str, why: str) -> ScenarioError:
        return ScenarioError([f"{FIELD}: statement {spec.name}: {field}: {why}"])

    def _static_checks(self) -> None:
        if not self.p.statements:
            raise ScenarioError([f"{FIELD}: no statement: give at least one"])
        if self.read_only_begin:
            return
        for spec in self.p.statements:
            kinds = {read_statement(t).kind for t in spec.texts}
            if spec.read_only and (UNCERTAIN in kinds or len(spec.texts) > 1):
                raise self._refuse(
                    spec,
                    "read_only",
                    f"{self.dialect} has no read-only transaction to enforce it, and the "
                    "statement calls functions dbsim cannot see into: drop read_only (it is "
                    "then rolled back)",
                )

    async def prepare_values(self) -> dict[str, Any]:
        """Every check that needs the database or a file, and the values they give: before
        any session starts (a refusal: exit 2, statement and field named)."""
        self._static_checks()
        self.values.clear()
        needs_db = [
            (spec, name, g)
            for spec in self.p.statements
            for name, g in spec.params.items()
            if g.sample is not None
        ]
        for spec in self.p.statements:
            for name, g in spec.params.items():
                if g.list is not None:
                    self.values[(spec.name, name)] = list(g.list)
                elif g.file is not None:
                    self.values[(spec.name, name)] = self._file_values(spec, name, g.file)
        if needs_db:
            conn = await connect_sql(self.target)
            try:
                for spec, name, g in needs_db:
                    self.values[(spec.name, name)] = await self._sample(conn, spec, name, g)
            finally:
                await conn.close()
        headline = None
        if self.p.commit:
            headline = (
                "COMMITTED: this run changed your data (commit: true) — its statements' "
                f"writes to {', '.join(self.p.may_change)} were committed, not rolled back"
            )
        return {
            "headline": headline,
            "built": False,
            "tables": [],
            "creates": "nothing: the sql workload runs on the database's own tables",
            "commit": self.p.commit,
            "may_change": list(self.p.may_change),
            "values_read": {f"{s}.{p}": len(v) for (s, p), v in self.values.items()},
        }

    def _file_values(self, spec: SqlStatement, name: str, path: str) -> list[str]:
        field = f"params.{name}.file"
        try:
            text = read_text_file(
                Path(path), what="values file", max_bytes=MAX_FILE_BYTES, follow_symlinks=False
            )
        except (OSError, ConfigError) as exc:
            raise self._refuse(spec, field, str(exc)) from None
        values = [line.strip() for line in text.splitlines() if line.strip()]
        if not values:
            raise self._refuse(spec, field, f"{path} holds no value")
        return values

    async def _sample(
        self, conn: SqlConnection, spec: SqlStatement, name: str, g: Generator
    ) -> list[Any]:
        assert g.sample is not None
        field = f"params.{name}.sample"
        schema, _, table = g.sample.table.rpartition(".")
        ids = {"table": table, "column": g.sample.column}
        statement = (
            self.render("sample_in_schema", schema=schema, **ids)
            if schema
            else self.render("sample", **ids)
        )
        try:
            values = await conn.column(statement, (g.sample.rows,))
            await conn.rollback()
        except (TargetError, WorkloadError) as exc:
            where = f"{g.sample.table}.{g.sample.column}"
            raise self._refuse(spec, field, f"{where} cannot be read: {exc}") from None
        if not values:
            raise self._refuse(spec, field, f"{g.sample.table} has no non-NULL value to draw")
        return values

    async def load(self, progress: Any) -> dict[str, Any]:
        return await self.prepare_values()

    async def check_loaded(self) -> dict[str, Any]:
        return await self.prepare_values()

    async def verify(self) -> dict[str, Any]:
        return {"tables": [], "statements": len(self.plans)}

    async def drop(self) -> list[str]:
        raise ConfigError(
            "the sql workload drops nothing: dbsim created none of the tables it runs on"
        )

    # ------------------------------------------------------------------ the kit's hooks (none)

    def planned_tables(self) -> list[PlannedTable]:
        return []

    def table(self, planned: PlannedTable) -> Table:
        raise WorkloadError("the sql workload creates no table")

    def row_batches(
        self, planned: PlannedTable, table: Table, insert: Statement
    ) -> Iterator[Batch]:
        raise WorkloadError("the sql workload loads no row")

    async def verify_table(self, conn: SqlConnection, planned: PlannedTable) -> dict[str, Any]:
        raise WorkloadError("the sql workload owns no table")

    def statement_inventory(self) -> list[Statement]:
        """The sample reads (for a table ``t``, column ``c``, schema ``s``), the read-only
        transaction's statements, then the scenario's own statements as the driver takes them."""
        ids = {"table": "t", "column": "c"}
        samples = [self.render("sample", **ids), self.render("sample_in_schema", schema="s", **ids)]
        own = [step.statement for plan in self.plans for step in plan.steps]
        return samples + self.read_only_begin + self.read_only_end + own

    # ------------------------------------------------------------------ sessions

    def _draws(self, index: int, seed: int) -> dict[str, dict[str, gen.Draw]]:
        draws: dict[str, dict[str, gen.Draw]] = {}
        for number, spec in enumerate(self.p.statements):
            mine = draws[spec.name] = {}
            for p_number, (name, g) in enumerate(sorted(spec.params.items())):
                rng = random.Random(seed * 1_000_003 + number * 1009 + p_number)
                mine[name] = self._draw(rng, spec.name, name, g)
        return draws

    def _draw(self, rng: random.Random, statement: str, name: str, g: Generator) -> gen.Draw:
        if g.uniform is not None:
            return gen.uniform(rng, *g.uniform)
        if g.gaussian is not None:
            return gen.gaussian(rng, *g.gaussian, g.stddevs or 2.5)
        if g.exponential is not None:
            assert g.parameter is not None
            return gen.exponential(rng, *g.exponential, g.parameter)
        if g.zipfian is not None:
            assert g.s is not None
            return gen.zipfian(rng, *g.zipfian, g.s)
        if g.sequence is not None:
            return gen.sequence(g.sequence.start, g.sequence.step)
        values = self.values.get((statement, name))
        if not values:
            raise WorkloadError(f"{statement}.{name}: its values were not read before the run")
        return gen.choice(rng, values)

    def new_session(self, index: int, connection: Connection, seed: int) -> SqlUserSession:
        return SqlUserSession(self, sql_connection(connection), self._draws(index, seed), seed)
