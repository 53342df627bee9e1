"""SLOB-like tables as SQLAlchemy Core objects, compiled to DDL per dialect.

``cf1``: a numeric key plus 19 text columns of 128 characters, stored one row per block
(PostgreSQL: fillfactor 10; SQLite: a padding column that makes two rows overflow a page;
Oracle: PCTFREE 99, then MINIMIZE RECORDS_PER_BLOCK once loaded; SQL Server: a fixed-width
filler that puts every row past half a page), with a non-unique B-tree index on the key.
``cf2`` is the same shape without an index (full scans).

The loader (workload.py) runs ``create_statements(...)[0]`` before the data and the rest after
it; Oracle's MINIMIZE RECORDS_PER_BLOCK relies on that order (it reads the loaded blocks).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import CHAR, Column, Index, Integer, MetaData, String, Table, Text
from sqlalchemy.schema import CreateIndex, CreateTable

from sim.sql import Statement, quote_identifier
from workloads.common import compile_ddl
from workloads.naming import index_of

TEXT_COLUMNS = tuple(f"c{i}" for i in range(2, 21))
TEXT_WIDTH = 128
# SQLite keeps a row on its page up to ~page-35 bytes; a row longer than half the usable page
# cannot share it. The filler brings 19×128 characters past that half.
SQLITE_ROW_OVERHEAD = 40

# Oracle: a block takes new rows only while less than (100 - PCTFREE) % of it is used, so with
# 99 the first ~2.5 KB row closes the block to inserts: one row per block during the load.
ORACLE_PCTFREE = 99
ORACLE_PCTFREE_KEY = "dbsim_oracle_pctfree"

# SQL Server pages are always 8 KB: 8,192 - 96 header = 8,096 bytes for records, and every
# record also takes a 2-byte slot, so two records fit only if 2 × (r + 2) <= 8,096, i.e.
# r <= 4,046 bytes. Record size of cf1 (heap, FixedVar format):
#     4 (status bits + null-bitmap offset) + 4 (custid INT) + F (filler CHAR(F))
#   + 2 (column count) + 3 (null bitmap, 21 columns) + 2 (variable column count)
#   + 19 × 2 (variable offsets) + 19 × 128 (c2..c20 when full)      = 2,485 + F bytes.
# F = 5,000 gives 7,485 bytes ("close to 8 KB" like the reference) and still 5,013 bytes with
# every text column NULL, so the fixed part alone keeps two rows off one page whatever the data.
# 7,485 + a 14-byte row-versioning tag (RCSI/snapshot) stays under the 8,060-byte in-row limit,
# so nothing spills to row-overflow pages (which would add I/O per row).
SQLSERVER_FILLER_CHARS = 5000


def sqlite_pad_bytes(block_size_bytes: int) -> int:
    """Bytes of the SQLite padding column that push one row past half a page."""
    return max(block_size_bytes // 2 + 64 - len(TEXT_COLUMNS) * TEXT_WIDTH - SQLITE_ROW_OVERHEAD, 0)


def slob_table(name: str, dialect: str, block_size_bytes: int, *, indexed: bool) -> Table:
    """The SLOB-like table ``name`` for ``dialect``, with its one-row-per-block mechanism."""
    columns: list[Column[Any]] = [Column("custid", Integer, nullable=False)]
    columns += [Column(c, String(TEXT_WIDTH)) for c in TEXT_COLUMNS]
    kwargs: dict[str, Any] = {}
    if dialect == "sqlite" and sqlite_pad_bytes(block_size_bytes):
        columns.append(Column("pad", Text))
    if dialect == "postgres":
        # fillfactor 10 keeps one row per block; toast_tuple_target keeps the ~2.5 KB row in the
        # heap (past 2 KB PostgreSQL would move c2..c6 out to TOAST, and every read and LITE
        # update would touch a second relation).
        kwargs["postgresql_with"] = {"fillfactor": 10, "toast_tuple_target": 8160}
    if dialect == "sqlserver":
        # Filled by the server default (the loader never sends it): blank-padded to full width.
        columns.append(
            Column("filler", CHAR(SQLSERVER_FILLER_CHARS), nullable=False, server_default="")
        )
    if dialect == "oracle":
        # SQLAlchemy has no PCTFREE option; create_statements appends it from here.
        kwargs["info"] = {ORACLE_PCTFREE_KEY: ORACLE_PCTFREE}
    table = Table(name, MetaData(), *columns, **kwargs)
    if indexed:
        Index(index_of(name), table.c.custid)
    return table


def create_statements(table: Table, dialect: str) -> list[Statement]:
    """The table first, then what the loader runs once the rows are in (indexes, Oracle's
    records-per-block limit)."""
    create = compile_ddl(CreateTable(table), dialect)
    after_load: list[Statement] = []
    pctfree = table.info.get(ORACLE_PCTFREE_KEY)
    if dialect == "oracle" and pctfree is not None:
        create = Statement(create.name, f"{create.sql}\n PCTFREE {int(pctfree)}", ())
        # Records the highest rows-per-block now in the table (1) as a hard limit, so no later
        # insert can put two rows in a block even where PCTFREE alone would let it. It scans
        # the loaded blocks to find that number, hence it runs after the data.
        after_load.append(
            Statement(
                "MinimizeRecordsPerBlock",
                f"ALTER TABLE {quote_identifier(dialect, table.name)} MINIMIZE RECORDS_PER_BLOCK",
                (),
            )
        )
    indexes = [
        compile_ddl(CreateIndex(index), dialect)
        for index in sorted(table.indexes, key=lambda i: i.name or "")
    ]
    return [create, *after_load, *indexes]
