"""The base class of the SQL workloads: it owns the ownership-safe sequence, the workload
supplies its tables, its rows and its checks.

The sequence, the same for every SQL workload (docs/safety.md says why each step is there):

* ``load``: check that the registry and every planned table are absent or this workload's
  (reading only), then create the registry, then the tablespace, then per table: register it
  as loading, CREATE TABLE with dbsim's marker, the row batches (each committed), the
  after-load statements (indexes: one sort instead of one index insert per row), mark it
  loaded. A table already loaded with the same fingerprint is kept as it is.
* ``check_loaded`` (``--skip-load``): every planned table is dbsim's and loaded with its
  fingerprint, without writing anything.
* ``verify``: the dialect's page counts refreshed, then the workload's own check per table.
* ``drop``: the registered tables of this workload and prefix, then the tablespace.
* ``statement_inventory``: the registry's statements, each sample table's DDL, INSERT and
  DROP, then the workload's catalogue (tests/contract compare it per dialect).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel

from sim.dialects import NEEDS_SQL, dialect_of
from sim.errors import WorkloadError
from sim.protocols import ProgressCallback, SqlConnection, Target, Workload, connect_sql
from sim.sql import Catalogue, Statement, quote_identifier, refresh_page_counts
from workloads.common import (
    bind,
    catalog_name,
    create_statements,
    drop_statement,
    insert_statement,
    tablespace_of,
)
from workloads.naming import like_prefix, number_of, owned_pattern
from workloads.ownership import TableRegistry
from workloads.tablespace import drop_tablespace, ensure_tablespace

if TYPE_CHECKING:
    # Annotations only: a workload is built without SQLAlchemy (dbsim validate, issue #25).
    from sqlalchemy import Table

ParamsT = TypeVar("ParamsT", bound=BaseModel)
#: Rows inserted and committed together, each row's values in the INSERT's bind order.
Batch = Sequence[Sequence[Any]]


@dataclass(frozen=True)
class PlannedTable:
    """One table a configuration loads.

    ``fingerprint`` holds everything that shapes the table's data (row count, seed, layout
    version, tablespace …): a table recorded with another fingerprint is dropped and rebuilt,
    and ``--skip-load`` refuses it. ``number`` is the table's (or schema's) number in its name,
    ``role`` the workload's own kind of table (SLOB: ``cf1``, ``cf2`` or ``cf3``; empty when it
    has one). ``rows`` is what the loader inserts: 0 for a table created empty (SLOB's cf3,
    which the sessions fill), whose fingerprint then carries no row count.
    """

    name: str
    number: int
    rows: int
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    role: str = ""


class SqlWorkload(Workload, Generic[ParamsT]):
    """A SQL workload's framework: load, check_loaded, verify, drop and the statement inventory.

    A subclass sets ``name``, ``parameters_model`` (with a ``table_prefix`` field),
    ``sql_dir``, ``required_statements`` and ``name_suffix``, and writes
    :meth:`planned_tables`, :meth:`table`, :meth:`row_batches` and :meth:`verify_table`
    (and may override :meth:`ddl`, :meth:`tables_to_verify`, :meth:`load_facts`,
    :meth:`inventory_tables` and :meth:`inventory_identifiers`), plus its sessions.
    """

    needs: ClassVar[str] = NEEDS_SQL
    #: The folder of ``default.sql`` and its per-dialect overrides (sim.sql).
    sql_dir: ClassVar[Path]
    #: Statements every dialect must have: a missing one fails when the workload is built.
    required_statements: ClassVar[frozenset[str]] = frozenset()
    #: A regular expression for what follows ``<prefix>_<n>`` in the workload's table names
    #: (SLOB ``_cf[123]``, SSB nothing): what ``dbsim drop`` and the collectors match.
    name_suffix: ClassVar[str] = ""

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        if not isinstance(parameters, self.parameters_model):
            raise WorkloadError(
                f"{self.name} needs {self.parameters_model.__name__}, "
                f"not {type(parameters).__name__}"
            )
        self.p: ParamsT = cast(ParamsT, parameters)
        if dialect_of(target) is None:
            raise WorkloadError(f"{self.name} runs on SQL targets, not {target.kind}")
        prefix = getattr(parameters, "table_prefix", None)
        if not isinstance(prefix, str):
            raise WorkloadError(f"{self.name}: its parameters have no table_prefix")
        self.table_prefix: str = prefix
        self.dialect: str = target.dialect
        # Fails here, before anything runs, if a dialect lacks a statement.
        self.catalogue = Catalogue.load(self.sql_dir, self.dialect, self.required_statements)
        self.registry = TableRegistry(self.name, self.dialect, target.paramstyle)
        self.tablespace = tablespace_of(target)

    # ------------------------------------------------------------------ what a workload writes

    @abstractmethod
    def planned_tables(self) -> list[PlannedTable]:
        """Every table this configuration loads, in load order."""

    @abstractmethod
    def table(self, planned: PlannedTable) -> Table:
        """The SQLAlchemy table of ``planned``, with its indexes, in :attr:`tablespace`."""

    @abstractmethod
    def row_batches(
        self, planned: PlannedTable, table: Table, insert: Statement
    ) -> Iterator[Batch]:
        """The rows of ``planned`` in batches, values in the order of ``insert.param_names``;
        each batch is inserted and committed before the next is asked for."""

    @abstractmethod
    async def verify_table(self, conn: SqlConnection, planned: PlannedTable) -> dict[str, Any]:
        """The loaded table's facts; WorkloadError when they break the workload's rules.
        Page counts are fresh (the dialect's ``refresh_page_counts`` has run)."""

    def ddl(self, table: Table) -> list[Statement]:
        """CREATE TABLE first, then what runs once the rows are in (indexes …)."""
        return create_statements(table, self.dialect)

    def tables_to_verify(self) -> list[PlannedTable]:
        return self.planned_tables()

    def load_facts(self) -> dict[str, Any]:
        """The workload's own facts for the load report (beside ``tables`` and ``built``)."""
        return {}

    def inventory_tables(self) -> list[Table]:
        """One table of each shape the workload creates, for the statement inventory."""
        return [self.table(self.planned_tables()[0])]

    def inventory_identifiers(self, tables: Sequence[Table]) -> dict[str, str]:
        """The identifiers the catalogue's statements are rendered with in the inventory."""
        return {"table": str(tables[0].name)}

    # ------------------------------------------------------------------ naming and statements

    def owned_names(self) -> re.Pattern[str]:
        """Every name this prefix's tables can have, whatever their count."""
        return owned_pattern(self.table_prefix, self.name_suffix)

    def table_pattern(self) -> str:
        return f"^{self.owned_names().pattern}$"

    def render(self, name: str, **identifiers: str) -> Statement:
        return self.catalogue.render(name, self.target.paramstyle, **identifiers)

    async def ask(self, conn: SqlConnection, statement_name: str, table: str, **binds: Any) -> int:
        """A catalogue statement's number for ``table`` (``{table}`` filled in, ``:tname``
        bound to its catalogue name, ``binds`` to the rest; NULL reads as 0)."""
        statement = self.render(statement_name, table=table)
        values = {"tname": catalog_name(self.dialect, table), **binds}
        return int(await conn.scalar(statement, bind(statement, **values)) or 0)

    @staticmethod
    def expect_rows(name: str, rows: int, max_key: int, expected: int) -> None:
        """Keys 1..expected, each once: the row count and the highest key are both it."""
        if rows != expected or max_key != expected:
            raise WorkloadError(
                f"{name}: {rows} rows, max key {max_key}; expected {expected} and {expected}"
            )

    def statement_inventory(self) -> list[Statement]:
        tables = self.inventory_tables()
        statements = self.registry.inventory(str(tables[0].name))
        for table in tables:
            statements += self.ddl(table)
            statements.append(insert_statement(table, self.dialect, self.target.paramstyle))
            statements.append(drop_statement(str(table.name), self.dialect))
        identifiers = self.inventory_identifiers(tables)
        return statements + [
            self.render(name, **identifiers) for name in sorted(self.catalogue.statements)
        ]

    # ------------------------------------------------------------------ load

    async def load(self, progress: ProgressCallback) -> dict[str, Any]:
        """Create and fill the planned tables that are missing or stale; keep the others."""
        planned = self.planned_tables()
        conn = await connect_sql(self.target)
        try:
            await self._claim(conn, planned)
            tables = [await self._load_table(conn, table, progress) for table in planned]
        finally:
            await conn.close()
        return {"tables": tables, "built": any(t["built"] for t in tables), **self.load_facts()}

    async def _claim(self, conn: SqlConnection, planned: Sequence[PlannedTable]) -> None:
        """Refuse anything foreign before writing anything, then make the registry and the
        tablespace the tables need.

        The one order, and why: the registry first (every check below reads it; a look-alike
        is refused here), then every planned table, all by reading only, and only then the
        first write, the registry's ``ensure``. Were ``ensure`` first, a load refused for a
        foreign table would still leave a new ``dbsim_registry`` in the user's schema; and
        checking every table before loading any means a refusal costs no loading time.
        ``begin_load`` checks each table again just before it writes to it."""
        await self.registry.registry_present(conn)
        for table in planned:
            await self.registry.check_ownership(conn, table.name)
        await self.registry.ensure(conn)
        await ensure_tablespace(self.target, conn, self.registry)

    async def _load_table(
        self, conn: SqlConnection, planned: PlannedTable, progress: ProgressCallback
    ) -> dict[str, Any]:
        entry = {"table": planned.name, "rows": planned.rows, "built": False}
        if not await self.registry.begin_load(conn, planned.name, planned.fingerprint):
            return entry
        table = self.table(planned)
        create, *after_load = self.ddl(table)
        # The registry runs CREATE TABLE: it adds dbsim's marker and records the identity.
        await self.registry.create_table(conn, planned.name, create)
        insert = insert_statement(table, self.dialect, self.target.paramstyle)
        what = f"load {planned.name}"
        done = 0
        progress(what, 0, planned.rows)
        for batch in self.row_batches(planned, table, insert):
            await conn.bulk_insert(insert, planned.name, insert.param_names, batch)
            await conn.commit()
            done += len(batch)
            progress(what, done, planned.rows)
        for statement in after_load:
            await conn.execute(statement)
        await self.registry.finish_load(conn, planned.name, planned.fingerprint)
        return {**entry, "built": True}

    async def check_loaded(self) -> dict[str, Any]:
        """``--skip-load``: every planned table is dbsim's and loaded with this
        configuration's fingerprint (nothing is written, no data is read)."""
        wanted = {t.name: t.fingerprint for t in self.planned_tables()}
        return await self.registry.check_loaded_on(self.target, wanted)

    # ------------------------------------------------------------------ verify and drop

    async def verify(self) -> dict[str, Any]:
        conn = await connect_sql(self.target)
        tables = []
        try:
            for planned in self.tables_to_verify():
                quoted = quote_identifier(self.dialect, planned.name)
                for statement in refresh_page_counts(self.dialect, quoted):
                    await conn.execute(statement)
                tables.append(await self.verify_table(conn, planned))
        finally:
            await conn.close()
        return {"tables": tables}

    async def drop(self) -> list[str]:
        """Drop the tables this workload registered under its prefix (any count, in table
        number order), then the tablespace dbsim created for them if it is empty."""
        conn = await connect_sql(self.target)
        try:
            like = like_prefix(self.table_prefix)
            names = await self.registry.owned(conn, like, self.owned_names())
            ordered = sorted(names, key=lambda n: (number_of(self.table_prefix, n), n))
            dropped = await self.registry.drop(conn, ordered)
            record = dialect_of(self.target)
            # Only once no table of dbsim's is left: SQLite's VACUUM renumbers the root pages
            # that identify the tables still registered, which would then be refused as not
            # dbsim's (ownership is checked by identity, workloads/ownership.py).
            if (
                dropped
                and record is not None
                and record.after_drop
                and not await self.registry.holds_tables(conn)
            ):
                for number, sql in enumerate(record.after_drop):
                    await conn.execute(Statement(f"after_drop_{number}", sql, ()))
            return dropped + await drop_tablespace(self.target, conn, self.registry)
        finally:
            await conn.close()


__all__ = ["Batch", "PlannedTable", "SqlWorkload"]
