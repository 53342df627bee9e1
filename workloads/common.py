"""What every SQL workload shares: sizes, DDL per dialect and bind order.

* Sizes: :func:`parse_size_bytes` reads ``"80M"``-style sizes (:mod:`workloads.sizes`).
* DDL: SQLAlchemy Core tables compiled per dialect (:func:`compile_ddl`,
  :func:`create_statements`, :func:`drop_statement`, :func:`insert_statement`). No
  ``IF [NOT] EXISTS``: Oracle before 23ai and SQL Server before 2016 lack it, so existence is
  checked first (the registry's ``object_identity`` statement).
* Binds: :func:`bind_order` maps a statement's bind parameters onto a fixed argument order
  (dialects may name a parameter twice or in another order).
* Ownership: :mod:`workloads.ownership` (the ``dbsim_registry`` registry and the identity
  checks every write path makes); table names: :mod:`workloads.naming`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sim.dialects import dialect as dialect_record
from sim.errors import WorkloadError
from sim.protocols import Target
from sim.sql import Statement, quote_identifier, sqlalchemy_dialect, to_paramstyle

# Re-exported: their home is workloads.sizes, which the parameter models import.
from workloads.sizes import SIZE_UNITS as SIZE_UNITS
from workloads.sizes import parse_size_bytes as parse_size_bytes

# SQLAlchemy (~90 ms of a start) is imported by the functions that compile DDL, so building a
# workload to check it (`dbsim validate`, a refused run) does not load it (issue #25).
if TYPE_CHECKING:
    from sqlalchemy import Index, Table
    from sqlalchemy.sql.elements import ClauseElement

# --------------------------------------------------------------------------- DDL and binds

#: SQLAlchemy's keyword that puts a table in a tablespace, per dialect that has one.
TABLE_TABLESPACE_KEYWORD = {"postgres": "postgresql_tablespace", "oracle": "oracle_tablespace"}
#: The key of ``Table.info`` naming the table's tablespace (its indexes go there too).
TABLESPACE_KEY = "dbsim_tablespace"


def tablespace_of(target: Target) -> str | None:
    """The tablespace the target puts the workload's tables and indexes in (None: the
    database's default), from the target's ``tablespace`` (PostgreSQL, Oracle)."""
    name = getattr(target, "tablespace", None)
    return name if isinstance(name, str) and name else None


def tablespace_kwargs(dialect: str, tablespace: str | None) -> dict[str, Any]:
    """The Table keyword arguments that put a table in ``tablespace`` (with ``info``, which
    :func:`index_statement` reads for the table's indexes)."""
    if tablespace is None:
        return {}
    keyword = TABLE_TABLESPACE_KEYWORD.get(dialect)
    if keyword is None:
        raise WorkloadError(f"{dialect}: tablespaces are not supported for this dialect")
    return {keyword: tablespace, "info": {TABLESPACE_KEY: tablespace}}


def index_statement(index: Index, dialect: str) -> Statement:
    """CREATE INDEX, in its table's tablespace when the table has one (PostgreSQL through
    SQLAlchemy's ``postgresql_tablespace``; Oracle, which SQLAlchemy gives no index option,
    with a ``TABLESPACE`` clause appended)."""
    from sqlalchemy.schema import CreateIndex  # here: see the TYPE_CHECKING imports above

    tablespace = index.table.info.get(TABLESPACE_KEY) if index.table is not None else None
    if tablespace and dialect == "postgres":
        index.dialect_options["postgresql"]["tablespace"] = tablespace
    statement = compile_ddl(CreateIndex(index), dialect)
    if tablespace and dialect == "oracle":
        clause = f" TABLESPACE {quote_identifier(dialect, tablespace)}"
        return Statement(statement.name, statement.sql + clause, ())
    return statement


def compile_ddl(element: ClauseElement, dialect: str) -> Statement:
    """A DDL element compiled for ``dialect``, named after its kind (``CreateTable`` …)."""
    sql = str(element.compile(dialect=sqlalchemy_dialect(dialect))).strip()
    return Statement(name=type(element).__name__, sql=sql, param_names=())


def create_statements(table: Table, dialect: str) -> list[Statement]:
    """CREATE TABLE, then CREATE INDEX for each index (by name): load data in between."""
    from sqlalchemy.schema import CreateTable  # here: see the TYPE_CHECKING imports above

    return [compile_ddl(CreateTable(table), dialect)] + [
        index_statement(index, dialect)
        for index in sorted(table.indexes, key=lambda i: i.name or "")
    ]


def drop_statement(name: str, dialect: str) -> Statement:
    """``DROP TABLE name`` (its indexes go with it) plus the dialect's ``drop_suffix``;
    check that it exists first."""
    from sqlalchemy import MetaData, Table  # here: see the TYPE_CHECKING imports above
    from sqlalchemy.schema import DropTable

    drop = compile_ddl(DropTable(Table(name, MetaData())), dialect)
    suffix = dialect_record(dialect).drop_suffix
    return Statement(drop.name, f"{drop.sql} {suffix}", ()) if suffix else drop


def insert_statement(table: Table, dialect: str, paramstyle: str) -> Statement:
    """INSERT of every column the loader supplies (all but server-filled ones, those with a
    server default), binds in the driver's paramstyle, in column order."""
    from sqlalchemy import insert  # here: see the TYPE_CHECKING imports above

    named_dialect = type(sqlalchemy_dialect(dialect))(paramstyle="named")  # type: ignore[call-arg]
    supplied = [c.name for c in table.columns if c.server_default is None]
    if len(supplied) == len(table.columns):
        sql = str(insert(table).compile(dialect=named_dialect))
    else:
        sql = str(insert(table).compile(dialect=named_dialect, column_keys=supplied))
    sql, order = to_paramstyle(sql, paramstyle)
    return Statement(name=f"insert_{table.name}", sql=sql, param_names=order)


def catalog_name(dialect: str, name: str) -> str:
    """``name`` as the dialect's catalogue stores it: a dialect that upper-cases names that
    need no quotes (Oracle; SQLAlchemy leaves lower-case names unquoted) gets it upper-cased,
    the others keep it as written."""
    if dialect_record(dialect).folds_unquoted != "upper":
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
