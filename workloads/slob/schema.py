"""SLOB-like tables as SQLAlchemy Core objects, compiled to DDL per dialect.

``cf1``: a numeric key plus 19 text columns of 128 characters, stored one row per block by
the dialect record's ``one_row_per_page`` (sim.dialects.PageFit; each target module says how:
PostgreSQL fillfactor 10, SQLite a padding column, Oracle PCTFREE 99 and MINIMIZE
RECORDS_PER_BLOCK once loaded, SQL Server a fixed-width filler), with a non-unique B-tree
index on the key.
``cf2`` is the same shape without an index (full scans).
``cf3`` (not SLOB's: ``append_pct``) is the same shape without an index, created empty; each
append inserts one row, which the same mechanism keeps in a block of its own. Its key is 64-bit
(a value per session and loop, never a row number), and where the dialect pads, the padding
column is always there, because the ``append`` statement names it whatever its length.

The loader (workload.py) runs ``create_statements(...)[0]`` before the data and the rest after
it; an after-load statement such as Oracle's MINIMIZE RECORDS_PER_BLOCK relies on that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.dialects import PageFit
from sim.dialects import dialect as dialect_record
from sim.sql import Statement, quote_identifier
from workloads.common import compile_ddl, index_statement, tablespace_kwargs
from workloads.naming import index_of

# SQLAlchemy is imported by the functions that build and compile the tables: a SLOB workload
# is built without it to be checked (dbsim validate, a refused run; issue #25).
if TYPE_CHECKING:
    from sqlalchemy import Table

PAGE_FIT_KEY = "dbsim_page_fit"
#: Table info: the table is created empty and filled by the sessions (cf3), so no after-load
#: statement runs on it (Oracle refuses MINIMIZE RECORDS_PER_BLOCK on an empty table).
EMPTY_AT_LOAD_KEY = "dbsim_empty_at_load"

TEXT_COLUMNS = tuple(f"c{i}" for i in range(2, 21))
TEXT_WIDTH = 128
#: The row's own data (the text columns full), from which a dialect sizes its padding.
ROW_BYTES = len(TEXT_COLUMNS) * TEXT_WIDTH


def page_fit(dialect: str, block_size_bytes: int) -> PageFit:
    """How ``dialect`` keeps one SLOB row per block (its record's ``one_row_per_page``); a
    dialect whose engine fixes the page size uses that size, not ``block_size_bytes``."""
    record = dialect_record(dialect)
    return record.one_row_per_page(ROW_BYTES, record.page_bytes or block_size_bytes)


def slob_table(
    name: str,
    dialect: str,
    block_size_bytes: int,
    *,
    indexed: bool,
    tablespace: str | None = None,
    appended: bool = False,
) -> Table:
    """The SLOB-like table ``name`` for ``dialect``, with its one-row-per-block mechanism,
    in ``tablespace`` with its index when one is given; ``appended``: the append table cf3
    (created empty, a 64-bit key, the padding column whenever the dialect pads)."""
    from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

    fit = page_fit(dialect, block_size_bytes)
    key_type = BigInteger if appended else Integer
    columns: list[Column[Any]] = [Column("custid", key_type, nullable=False)]
    columns += [Column(c, String(TEXT_WIDTH)) for c in TEXT_COLUMNS]
    if fit.pad_column is not None and (fit.pad_chars or appended):
        columns.append(Column(fit.pad_column, Text))
    columns += fit.columns
    placed = tablespace_kwargs(dialect, tablespace)
    info = {PAGE_FIT_KEY: fit, EMPTY_AT_LOAD_KEY: appended, **placed.pop("info", {})}
    table = Table(name, MetaData(), *columns, info=info, **fit.table_kwargs, **placed)
    if indexed:
        Index(index_of(name), table.c.custid)
    return table


def pad_values(table: Table) -> dict[str, str]:
    """The padding column's value for every row the loader inserts into ``table`` (none when
    the dialect needs no padding)."""
    fit: PageFit = table.info[PAGE_FIT_KEY]
    if fit.pad_column is None or not fit.pad_chars:
        return {}
    return {fit.pad_column: "p" * fit.pad_chars}


def append_pad(dialect: str, block_size_bytes: int) -> str:
    """The padding an appended row carries (what the loader gives each row of cf1; empty
    where the dialect's rows need none)."""
    return "p" * page_fit(dialect, block_size_bytes).pad_chars


def create_statements(table: Table, dialect: str) -> list[Statement]:
    """The table first, then what the loader runs once the rows are in (the dialect's
    after-load statements, e.g. Oracle's records-per-block limit, which reads the loaded
    blocks, except on a table created empty; then the indexes)."""
    from sqlalchemy.schema import CreateTable  # here: see the TYPE_CHECKING import above

    fit: PageFit = table.info[PAGE_FIT_KEY]
    create = compile_ddl(CreateTable(table), dialect)
    if fit.create_suffix:
        create = Statement(create.name, f"{create.sql}{fit.create_suffix}", ())
    quoted = quote_identifier(dialect, table.name)
    after_load = [
        Statement(n, sql.format(table=quoted), ())
        for n, sql in fit.after_load
        if not table.info.get(EMPTY_AT_LOAD_KEY)
    ]
    indexes = [
        index_statement(index, dialect)
        for index in sorted(table.indexes, key=lambda i: i.name or "")
    ]
    return [create, *after_load, *indexes]
