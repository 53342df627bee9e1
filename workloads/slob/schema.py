"""SLOB-like tables as SQLAlchemy Core objects, compiled to DDL per dialect.

``cf1``: a numeric key plus 19 text columns of 128 characters, stored one row per block
(PostgreSQL: fillfactor 10; SQLite: a padding column that makes two rows overflow a page;
Oracle: PCTFREE 99; SQL Server: a filler that brings the row close to 8 KB), with a
non-unique B-tree index on the key. ``cf2`` is the same shape without an index (full scans).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Index, Integer, MetaData, String, Table, Text, insert
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable
from sqlalchemy.sql.elements import ClauseElement

from sim.sql import Statement, sqlalchemy_dialect, to_paramstyle

TEXT_COLUMNS = tuple(f"c{i}" for i in range(2, 21))
TEXT_WIDTH = 128
REGISTRY_TABLE = "dbsim_objects"
# SQLite keeps a row on its page up to ~page-35 bytes; a row longer than half the usable page
# cannot share it. The filler brings 19×128 characters past that half.
SQLITE_ROW_OVERHEAD = 40


def sqlite_pad_bytes(block_size_bytes: int) -> int:
    return max(block_size_bytes // 2 + 64 - len(TEXT_COLUMNS) * TEXT_WIDTH - SQLITE_ROW_OVERHEAD, 0)


def slob_table(name: str, dialect: str, block_size_bytes: int, *, indexed: bool) -> Table:
    columns: list[Column[Any]] = [Column("custid", Integer, nullable=False)]
    columns += [Column(c, String(TEXT_WIDTH)) for c in TEXT_COLUMNS]
    kwargs: dict[str, Any] = {}
    if dialect == "sqlite" and sqlite_pad_bytes(block_size_bytes):
        columns.append(Column("pad", Text))
    if dialect == "postgres":
        kwargs["postgresql_with"] = {"fillfactor": 10}
    table = Table(name, MetaData(), *columns, **kwargs)
    if indexed:
        Index(f"{name}_custid", table.c.custid)
    return table


def registry_table() -> Table:
    """Objects dbsim created: the only ones it will ever write to or drop."""
    return Table(
        REGISTRY_TABLE,
        MetaData(),
        Column("name", String(128), primary_key=True),
        Column("workload", String(32), nullable=False),
        Column("fingerprint", Text, nullable=False),
    )


def compile_ddl(element: ClauseElement, dialect: str) -> Statement:
    sql = str(element.compile(dialect=sqlalchemy_dialect(dialect))).strip()
    return Statement(name=type(element).__name__, sql=sql, param_names=())


def create_statements(table: Table, dialect: str) -> list[Statement]:
    return [compile_ddl(CreateTable(table), dialect)] + [
        compile_ddl(CreateIndex(index), dialect)
        for index in sorted(table.indexes, key=lambda i: i.name or "")
    ]


def create_registry_statement(dialect: str) -> Statement:
    return compile_ddl(CreateTable(registry_table(), if_not_exists=True), dialect)


def drop_statement(table: Table, dialect: str) -> Statement:
    return compile_ddl(DropTable(table, if_exists=True), dialect)


def insert_statement(table: Table, dialect: str, paramstyle: str) -> Statement:
    """INSERT of every column, binds in the driver's paramstyle, in column order."""
    named_dialect = type(sqlalchemy_dialect(dialect))(paramstyle="named")  # type: ignore[call-arg]
    sql = str(insert(table).compile(dialect=named_dialect))
    sql, order = to_paramstyle(sql, paramstyle)
    return Statement(name=f"insert_{table.name}", sql=sql, param_names=order)
