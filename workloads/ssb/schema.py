"""SSB-like tables as SQLAlchemy Core objects, compiled to DDL per dialect.

``<prefix>_N``: an integer key ``custid`` plus twenty text columns ``c1..c20`` of 370
characters, about 7.4 KB a row, with a unique index on the key. Two such rows do not fit an
8 KB page, so every row gets a page of its own:

* SQL Server: 7.4 KB of VARCHAR is within the 8,060-byte in-row limit, one row per page.
* Oracle: PCTFREE 10 leaves no room for a second row in an 8 KB block.
* PostgreSQL: a row over ~2 KB is TOASTed by default, which would move most columns out of line
  and leave four short rows per heap page; ``toast_tuple_target = 8160`` (the maximum) keeps
  the whole row in its page (pglz could not shrink the random text anyway).
* SQLite (8 KB pages, the SQLite target's default): a table row stays on its leaf page up to
  the page size minus 35 bytes, so the 7.4 KB row is kept whole, without overflow pages, one
  cell per leaf page. With 4 KB pages each row would spill into overflow pages; with 16 KB
  pages two rows would share one. ``verify`` catches both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workloads.common import tablespace_kwargs
from workloads.naming import index_of

if TYPE_CHECKING:
    from sqlalchemy import Table

KEY_COLUMN = "custid"
TEXT_COLUMNS = tuple(f"c{i}" for i in range(1, 21))
TEXT_WIDTH = 370
#: Insert column order (the loader builds rows in it).
ALL_COLUMNS = (KEY_COLUMN, *TEXT_COLUMNS)
# The largest toast_tuple_target PostgreSQL accepts: rows below it are stored whole.
POSTGRES_TOAST_TUPLE_TARGET = 8160


def index_name(table_name: str) -> str:
    """The unique index on ``custid`` of ``table_name``."""
    return index_of(table_name)


def ssb_table(name: str, dialect: str, tablespace: str | None = None) -> Table:
    """The table ``name`` with its unique index on ``custid`` (both in ``tablespace``)."""
    # Imported here: an SSB workload is built without SQLAlchemy to be checked (issue #25).
    from sqlalchemy import Column, Index, Integer, MetaData, String, Table

    columns: list[Column[Any]] = [Column(KEY_COLUMN, Integer, nullable=False)]
    columns += [Column(c, String(TEXT_WIDTH)) for c in TEXT_COLUMNS]
    kwargs: dict[str, Any] = {}
    if dialect == "postgres":
        kwargs["postgresql_with"] = {"toast_tuple_target": POSTGRES_TOAST_TUPLE_TARGET}
    table = Table(name, MetaData(), *columns, **kwargs, **tablespace_kwargs(dialect, tablespace))
    Index(index_name(name), table.c.custid, unique=True)
    return table
