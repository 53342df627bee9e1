"""What every SQL workload shares: sizes, DDL per dialect, bind order and object ownership.

* Sizes: :func:`parse_size_bytes` reads ``"80M"``-style sizes.
* DDL: SQLAlchemy Core tables compiled per dialect (:func:`compile_ddl`,
  :func:`create_statements`, :func:`drop_statement`, :func:`insert_statement`). No
  ``IF [NOT] EXISTS``: Oracle before 23ai and SQL Server before 2016 lack it, so existence is
  checked with the workload's ``table_exists`` statement first.
* Binds: :func:`bind_order` maps a statement's bind parameters onto a fixed argument order
  (dialects may name a parameter twice or in another order).
* Ownership: :class:`TableRegistry` keeps the registry table ``dbsim_objects`` (name, workload,
  fingerprint). dbsim writes to and drops only tables registered there; a table of the same
  name that is not registered raises :class:`~sim.errors.OwnershipError`. The fingerprint
  (JSON) records the workload, the parameters that shape the data and the load state, which
  makes loading idempotent: a table registered as loaded with the same fingerprint is reused,
  one that is stale or half-loaded is rebuilt.

A workload using the registry keeps the statements named in :data:`REGISTRY_STATEMENTS` in its
``sql/`` catalogue (``table_exists`` is dialect-specific, the others portable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Column, MetaData, String, Table, Text, insert
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable
from sqlalchemy.sql.elements import ClauseElement

from sim.errors import OwnershipError, TargetError, WorkloadError
from sim.protocols import SqlConnection
from sim.sql import Catalogue, Statement, sqlalchemy_dialect, to_paramstyle

REGISTRY_TABLE = "dbsim_objects"
#: Statements a workload's catalogue must hold for :class:`TableRegistry`.
REGISTRY_STATEMENTS = frozenset(
    {
        "table_exists",
        "registry_get",
        "registry_put",
        "registry_set",
        "registry_delete",
        "registry_names",
    }
)
STATE_LOADING = "loading"
STATE_LOADED = "loaded"
FINGERPRINT_CHARS = 2000

SIZE_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT])?B?\s*$", re.IGNORECASE)


def parse_size_bytes(value: int | str) -> int:
    """Bytes from an int or a string like ``"512"``, ``"80M"``, ``"1G"`` (binary units)."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a size: use bytes or a number with K, M, G or T")
    number, unit = int(match.group(1)), match.group(2)
    return number * SIZE_UNITS[unit.upper()] if unit else number


# --------------------------------------------------------------------------- DDL and binds


def compile_ddl(element: ClauseElement, dialect: str) -> Statement:
    """A DDL element compiled for ``dialect``, named after its kind (``CreateTable`` …)."""
    sql = str(element.compile(dialect=sqlalchemy_dialect(dialect))).strip()
    return Statement(name=type(element).__name__, sql=sql, param_names=())


def create_statements(table: Table, dialect: str) -> list[Statement]:
    """CREATE TABLE, then CREATE INDEX for each index (by name): load data in between."""
    return [compile_ddl(CreateTable(table), dialect)] + [
        compile_ddl(CreateIndex(index), dialect)
        for index in sorted(table.indexes, key=lambda i: i.name or "")
    ]


def drop_statement(name: str, dialect: str) -> Statement:
    """``DROP TABLE name`` (its indexes go with it); check that it exists first. Oracle adds
    PURGE, so the space is freed now rather than parked in the recycle bin."""
    drop = compile_ddl(DropTable(Table(name, MetaData())), dialect)
    if dialect == "oracle":
        return Statement(drop.name, f"{drop.sql} PURGE", ())
    return drop


def insert_statement(table: Table, dialect: str, paramstyle: str) -> Statement:
    """INSERT of every column the loader supplies (all but server-filled ones, those with a
    server default), binds in the driver's paramstyle, in column order."""
    named_dialect = type(sqlalchemy_dialect(dialect))(paramstyle="named")  # type: ignore[call-arg]
    supplied = [c.name for c in table.columns if c.server_default is None]
    if len(supplied) == len(table.columns):
        sql = str(insert(table).compile(dialect=named_dialect))
    else:
        sql = str(insert(table).compile(dialect=named_dialect, column_keys=supplied))
    sql, order = to_paramstyle(sql, paramstyle)
    return Statement(name=f"insert_{table.name}", sql=sql, param_names=order)


def registry_table() -> Table:
    """Objects dbsim created: the only ones it will ever write to or drop."""
    # Oracle would make Text a CLOB (fetched as a LOB locator) and SQL Server the deprecated
    # TEXT type; a fingerprint is a short JSON object, so a bounded VARCHAR serves both.
    fingerprint = Text().with_variant(String(FINGERPRINT_CHARS), "oracle", "mssql")
    return Table(
        REGISTRY_TABLE,
        MetaData(),
        Column("name", String(128), primary_key=True),
        Column("workload", String(32), nullable=False),
        Column("fingerprint", fingerprint, nullable=False),
    )


def create_registry_statement(dialect: str) -> Statement:
    """Plain CREATE TABLE of the registry: :meth:`TableRegistry.ensure` checks first."""
    return compile_ddl(CreateTable(registry_table()), dialect)


def catalog_name(dialect: str, name: str) -> str:
    """``name`` as the dialect's catalogue stores it: Oracle upper-cases names that need no
    quotes (SQLAlchemy leaves lower-case names unquoted), the others keep them as written."""
    if dialect != "oracle":
        return name
    return str(sqlalchemy_dialect(dialect).denormalize_name(name))


def bind_order(statement: Statement, names: Sequence[str]) -> list[int]:
    """Positions in ``names`` of each bind parameter of ``statement``, so a hot path builds
    its parameters as ``tuple(args[i] for i in order)``."""
    try:
        return [list(names).index(n) for n in statement.param_names]
    except ValueError:
        raise WorkloadError(
            f"{statement.name}: bind parameters {statement.param_names} are not among {tuple(names)}"
        ) from None


def bind(statement: Statement, **values: Any) -> tuple[Any, ...]:
    """Parameters for ``statement`` by name (for set-up paths; extra names are ignored)."""
    try:
        return tuple(values[n] for n in statement.param_names)
    except KeyError as exc:
        raise WorkloadError(f"{statement.name}: no value for bind parameter {exc}") from None


# --------------------------------------------------------------------------- ownership


class TableRegistry:
    """The tables one workload created, recorded in ``dbsim_objects``.

    ``catalogue`` is the workload's statement catalogue for the target's dialect; it must hold
    :data:`REGISTRY_STATEMENTS`. Methods take the connection to use and commit their own work.
    """

    def __init__(self, workload: str, catalogue: Catalogue, paramstyle: str) -> None:
        self.workload = workload
        self.dialect = catalogue.dialect
        self.catalogue = catalogue
        self.paramstyle = paramstyle

    def _render(self, name: str) -> Statement:
        return self.catalogue.render(name, self.paramstyle, registry=REGISTRY_TABLE)

    def inventory(self) -> list[Statement]:
        """The registry's own DDL (its DML is in the workload's catalogue)."""
        return [create_registry_statement(self.dialect)]

    async def table_exists(self, conn: SqlConnection, name: str) -> bool:
        statement = self._render("table_exists")
        return bool(
            await conn.scalar(statement, bind(statement, tname=catalog_name(self.dialect, name)))
        )

    async def ensure(self, conn: SqlConnection) -> None:
        """Create the registry table if it is missing."""
        if await self.table_exists(conn, REGISTRY_TABLE):
            return
        try:
            await conn.execute(create_registry_statement(self.dialect))
            await conn.commit()
        except TargetError:
            # Another dbsim may have created it since we looked; fine if it is there now.
            await conn.rollback()
            if not await self.table_exists(conn, REGISTRY_TABLE):
                raise

    async def recorded(self, conn: SqlConnection, name: str) -> dict[str, Any] | None:
        """The fingerprint registered for ``name``, or None when dbsim did not create it."""
        statement = self._render("registry_get")
        text = await conn.scalar(statement, bind(statement, name=name))
        if text is None:
            return None
        try:
            fingerprint = json.loads(str(text))
        except ValueError:
            fingerprint = None
        if not isinstance(fingerprint, dict):
            raise WorkloadError(f"{REGISTRY_TABLE}: unreadable fingerprint for {name}: {text!r}")
        return fingerprint

    async def check_ownership(self, conn: SqlConnection, name: str) -> None:
        """Raise OwnershipError unless ``name`` is absent or this workload's (call before
        loading anything, so a refusal costs no loading time)."""
        exists = await self.table_exists(conn, name)
        recorded = None
        if exists and await self.table_exists(conn, REGISTRY_TABLE):
            recorded = await self.recorded(conn, name)
        self._refuse_foreign(name, exists, recorded)

    def _refuse_foreign(self, name: str, exists: bool, recorded: dict[str, Any] | None) -> None:
        if not exists:
            return
        if recorded is None:
            raise OwnershipError(
                f"table {name} exists but was not created by dbsim; refusing to touch it "
                f"(choose another workload.parameters.table_prefix)"
            )
        owner = recorded.get("workload")
        if owner != self.workload:
            raise OwnershipError(
                f"table {name} belongs to the dbsim workload {owner}, not {self.workload} "
                f"(choose another workload.parameters.table_prefix)"
            )

    async def begin_load(
        self, conn: SqlConnection, name: str, fingerprint: Mapping[str, Any]
    ) -> bool:
        """Whether ``name`` must be built: False when it is loaded with ``fingerprint``
        already; otherwise a stale copy of ours is dropped, the table is registered as loading
        (so an interrupted load is rebuilt next time) and True is returned."""
        wanted = {"workload": self.workload, **fingerprint}
        exists = await self.table_exists(conn, name)
        recorded = await self.recorded(conn, name)
        self._refuse_foreign(name, exists, recorded)
        if recorded is not None:
            if (
                exists
                and recorded.get("state") == STATE_LOADED
                and {k: recorded.get(k) for k in wanted} == wanted
            ):
                return False
            if exists:
                await conn.execute(drop_statement(name, self.dialect))
            await self._forget(conn, name)
            await conn.commit()
        statement = self._render("registry_put")
        state = json.dumps({**wanted, "state": STATE_LOADING}, sort_keys=True)
        await conn.execute(
            statement, bind(statement, name=name, workload=self.workload, fingerprint=state)
        )
        await conn.commit()
        return True

    async def finish_load(
        self, conn: SqlConnection, name: str, fingerprint: Mapping[str, Any]
    ) -> None:
        """Mark ``name`` loaded (and commit the work of the load with it)."""
        statement = self._render("registry_set")
        state = json.dumps(
            {"workload": self.workload, **fingerprint, "state": STATE_LOADED}, sort_keys=True
        )
        await conn.execute(statement, bind(statement, name=name, fingerprint=state))
        await conn.commit()

    async def owned(self, conn: SqlConnection, prefix: str, pattern: re.Pattern[str]) -> list[str]:
        """Registered tables of this workload whose whole name matches ``pattern``.

        ``LIKE prefix%`` only narrows the query (``_`` is a wildcard there and some databases
        compare case-insensitively); the exact match is ``pattern``'s.
        """
        if not await self.table_exists(conn, REGISTRY_TABLE):
            return []
        statement = self._render("registry_names")
        names = await conn.column(
            statement, bind(statement, workload=self.workload, pattern=f"{prefix}%")
        )
        return [str(n) for n in names if pattern.fullmatch(str(n))]

    async def drop(self, conn: SqlConnection, names: Sequence[str]) -> list[str]:
        """Drop the registered tables ``names`` (and their registry rows); return them."""
        dropped = []
        for name in names:
            recorded = await self.recorded(conn, name)
            if recorded is None or recorded.get("workload") != self.workload:
                continue  # not ours (any more): never drop it
            if await self.table_exists(conn, name):
                await conn.execute(drop_statement(name, self.dialect))
            await self._forget(conn, name)
            await conn.commit()
            dropped.append(name)
        return dropped

    async def _forget(self, conn: SqlConnection, name: str) -> None:
        statement = self._render("registry_delete")
        await conn.execute(statement, bind(statement, name=name))
