"""SSB-like workload: key-range reads and updates, each session pinned to one table.

Facts reproduced (``WORKLOADS.md``, "SSB-like"): tables ``user_1..user_N`` of an integer key
and twenty 370-character random alphanumeric columns, one ≈7.4 KB row per 8 KB page, keys
loaded in key order (so a key range is near-sequential on disk), a unique index on the key;
rows per table = database size ÷ 8192 ÷ N. One connection per session, session ``i`` pinned to
table ``i % N + 1``. Each session repeats a cycle of ten operations: the first
``read_pct / 10`` are reads (``COUNT(c1)`` over ``custid BETWEEN s AND s+rows_select``, or a
point lookup when ``rows_select`` is 0), the rest updates (``c1`` set to a fresh 370-character
string over ``custid BETWEEN s AND s+rows_update``, committed at once), with ``s`` uniform in
``[1, rows)``. Not reproduced: the original's ignored thread option, its updates committed only
by the next read, and its tables that were sometimes never loaded.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from sim.dialects import dialect as dialect_record
from sim.errors import WorkloadError
from sim.protocols import Connection, SqlConnection, sql_connection
from sim.sql import Statement
from workloads.common import bind_order, catalog_name
from workloads.naming import numbered
from workloads.sqlkit import Batch, PlannedTable, SqlSession, SqlWorkload
from workloads.ssb.parameters import PAGE_BYTES, SsbParameters
from workloads.ssb.schema import ALL_COLUMNS, TEXT_COLUMNS, TEXT_WIDTH, index_name, ssb_table

if TYPE_CHECKING:
    # Annotations only: the workload is built without numpy or SQLAlchemy to be checked
    # (dbsim validate, issue #25); loading imports numpy in random_text and row_batches.
    import numpy as np
    from sqlalchemy import Table

SQL_DIR = Path(__file__).parent / "sql"
WORKLOAD_NAME = "ssb"
STATEMENTS = frozenset(
    {
        "read_range",
        "read_point",
        "update",
        "count_rows",
        "max_key",
        "unique_index",
        "block_size",
        "blocks_used",
        "max_rows_per_block",
    }
)
#: Bump when the loaded data changes shape, so older tables are rebuilt.
LAYOUT_VERSION = 1
CYCLE = 10
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Loaded text is cut from a random pool at random offsets: to the storage as good as fresh
# random text (no two 4 KB blocks alike, so deduplication finds nothing) at a fraction of the
# CPU of drawing 7,400 characters per row.
LOAD_POOL_CHARS = 1 << 20


def is_read(index: int, read_pct: int) -> bool:
    """Whether operation ``index`` (0-based, per session) is a read: the first
    ``read_pct / 10`` of every cycle of ten are."""
    return index % CYCLE < read_pct // 10


def reads_before(count: int, read_pct: int) -> int:
    """How many of a session's first ``count`` operations are reads."""
    per_cycle = read_pct // 10
    return count // CYCLE * per_cycle + min(count % CYCLE, per_cycle)


def table_for_session(index: int, tables: int) -> int:
    """The table number (1-based) session ``index`` (0-based) is pinned to, round-robin."""
    return index % tables + 1


def random_text(rng: np.random.Generator, length: int) -> str:
    """``length`` random alphanumerics."""
    import numpy as np  # here: see the TYPE_CHECKING imports above

    letters = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)
    return letters[rng.integers(0, len(letters), size=length)].tobytes().decode("ascii")


class SsbWorkload(SqlWorkload[SsbParameters]):
    """SSB-like: tables of one row per page, sessions pinned to tables, ten-operation cycles."""

    name: ClassVar[str] = WORKLOAD_NAME
    parameters_model: ClassVar[type[BaseModel]] = SsbParameters
    sql_dir = SQL_DIR
    required_statements = STATEMENTS

    # ------------------------------------------------------------------ naming and mix

    def table_name(self, number: int) -> str:
        """Table ``number`` (1-based): ``<prefix>_<number>`` (workloads.naming)."""
        return numbered(self.p.table_prefix, number)

    def data_bytes(self) -> int:
        return self.p.database_size_bytes

    def scale_for_bytes(self, data_bytes: int) -> str:
        return f"database_size: {-(-data_bytes // 2**30)}G"

    def read_operations(self) -> frozenset[str]:
        return frozenset({"read"})

    def operations(self) -> Mapping[str, float]:
        return {"read": float(self.p.read_pct), "update": float(100 - self.p.read_pct)}

    def default_sessions(self) -> int:
        """One session per table, like the original's one user thread per table."""
        return self.p.tables

    def expected_mix(self, op_ranges: list[tuple[int, int]]) -> dict[str, int]:
        """Exact counts of the ten-operation cycle over each session's ``[first, end)``."""
        reads = updates = 0
        for first, end in op_ranges:
            n = reads_before(end, self.p.read_pct) - reads_before(first, self.p.read_pct)
            reads += n
            updates += (end - first) - n
        return {"read": reads, "update": updates}

    # ------------------------------------------------------------------ tables (sqlkit)

    def planned_tables(self) -> list[PlannedTable]:
        fingerprint = {
            "layout": LAYOUT_VERSION,
            "rows": self.p.rows_per_table,
            "columns": len(TEXT_COLUMNS),
            "text_width": TEXT_WIDTH,
            "load_seed": self.p.load_seed,
            # Another tablespace rebuilds the data there (None: the default, as before).
            "tablespace": self.tablespace,
        }
        return [
            PlannedTable(self.table_name(n), n, self.p.rows_per_table, fingerprint)
            for n in range(1, self.p.tables + 1)
        ]

    def table(self, planned: PlannedTable) -> Table:
        return ssb_table(planned.name, self.dialect, self.tablespace)

    def row_batches(
        self, planned: PlannedTable, table: Table, insert: Statement
    ) -> Iterator[Batch]:
        import numpy as np  # here: see the TYPE_CHECKING imports above

        rows = planned.rows
        rng = np.random.default_rng((self.p.load_seed, planned.number))
        pool = random_text(rng, LOAD_POOL_CHARS)
        order = bind_order(insert, ALL_COLUMNS)
        batch_size = self.p.load_batch_rows
        # Keys in key order: a key range is a run of neighbouring pages.
        for first in range(1, rows + 1, batch_size):
            last = min(first + batch_size, rows + 1)
            offsets = rng.integers(
                0, LOAD_POOL_CHARS - TEXT_WIDTH, size=(last - first, len(TEXT_COLUMNS))
            )
            batch: list[Sequence[Any]] = []
            for key, row_offsets in zip(range(first, last), offsets.tolist(), strict=True):
                values = [key] + [pool[o : o + TEXT_WIDTH] for o in row_offsets]
                batch.append(tuple(values[i] for i in order))
            yield batch

    def load_facts(self) -> dict[str, Any]:
        return {"rows_per_table": self.p.rows_per_table, "table_count": self.p.tables}

    async def verify_table(self, conn: SqlConnection, planned: PlannedTable) -> dict[str, Any]:
        """Row count, highest key, one row per block and the unique index."""
        name = planned.name
        iname = catalog_name(self.dialect, index_name(name))

        async def ask(statement_name: str) -> int:
            return await self.ask(conn, statement_name, name, iname=iname)

        rows, max_key = await ask("count_rows"), await ask("max_key")
        unique_index = await ask("unique_index") == 1
        block_size = await ask("block_size")
        blocks, per_block = await ask("blocks_used"), await ask("max_rows_per_block")
        entry = {
            "table": name,
            "rows": rows,
            "max_key": max_key,
            "unique_index": unique_index,
            "block_size": block_size,
            "blocks": blocks,
            "max_rows_per_block": per_block,
        }
        self.expect_rows(name, rows, max_key, planned.rows)
        if not unique_index:
            raise WorkloadError(f"{name}: the unique index {index_name(name)} on custid is missing")
        # Smaller blocks pass the rows-per-block count (each row spills into a second block,
        # overflow or chained), so the block size is checked on its own. An engine that keeps
        # several rows on a page however large they are (InnoDB: two on its 16 KiB pages) is
        # held to that many rows per page of that many times 8 KiB.
        shared = dialect_record(self.dialect).min_rows_per_page
        if block_size != PAGE_BYTES * shared:
            raise WorkloadError(
                f"{name}: the database uses {block_size}-byte blocks; SSB needs "
                f"{PAGE_BYTES * shared}-byte blocks, one ≈7.4 KB row per {PAGE_BYTES} bytes"
            )
        if per_block > shared:
            raise WorkloadError(
                f"{name}: up to {per_block} rows share a block; SSB needs one "
                f"≈7.4 KB row per {PAGE_BYTES}-byte block (are rows stored out of line?)"
            )
        return entry

    # ------------------------------------------------------------------ sessions

    def new_session(self, index: int, connection: Connection, seed: int) -> SsbSession:
        return SsbSession(self, index, sql_connection(connection), seed)


class UpdateValues:
    """Fresh 370-character alphanumeric values for one session, cheaply: a per-session random
    pool, rotated, behind the session number and a counter (so no two values are alike)."""

    ROTATION = 1024

    def __init__(self, session: int, rng: random.Random) -> None:
        self.head = f"{session:05d}"
        self.tail_width = TEXT_WIDTH - len(self.head) - 12
        self.pool = "".join(rng.choices(ALPHABET, k=self.tail_width + self.ROTATION))
        self.count = 0

    def next(self) -> str:
        n = self.count
        self.count = n + 1
        offset = n * 7 % self.ROTATION  # 7 is coprime with 1024: every offset in turn
        return f"{self.head}{n:012d}{self.pool[offset : offset + self.tail_width]}"


class SsbSession(SqlSession):
    """One SSB user: its table, its place in the ten-operation cycle, its random keys."""

    READ_ARGS = ("s", "e")
    UPDATE_ARGS = ("v", "s", "e")

    def __init__(self, workload: SsbWorkload, index: int, conn: SqlConnection, seed: int) -> None:
        super().__init__(conn)
        p = workload.p
        self.index = index
        self.rng = random.Random(seed)
        self.table = workload.table_name(table_for_session(index, p.tables))
        self.read = workload.render(
            "read_range" if p.rows_select else "read_point", table=self.table
        )
        self.update = workload.render("update", table=self.table)
        self.read_bind = bind_order(self.read, self.READ_ARGS)
        self.update_bind = bind_order(self.update, self.UPDATE_ARGS)
        self.read_pct = p.read_pct
        self.rows = p.rows_per_table
        self.rows_select = p.rows_select
        self.rows_update = p.rows_update
        self.values = UpdateValues(index, self.rng)
        self.ops = 0

    def next_statement(self) -> tuple[str, Statement, tuple[Any, ...]]:
        """The next operation of the ten-operation cycle and its parameters."""
        i = self.ops
        self.ops = i + 1
        s = self.rng.randrange(1, self.rows)
        if is_read(i, self.read_pct):
            read = (s, min(s + self.rows_select, self.rows))
            return "read", self.read, tuple(read[k] for k in self.read_bind)
        update = (self.values.next(), s, min(s + self.rows_update, self.rows))
        return "update", self.update, tuple(update[k] for k in self.update_bind)
