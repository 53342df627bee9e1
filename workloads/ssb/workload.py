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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from sim.dialects import NEEDS_SQL, dialect_of
from sim.dialects import dialect as dialect_record
from sim.errors import WorkloadError
from sim.protocols import (
    Connection,
    ProgressCallback,
    SqlConnection,
    Target,
    Workload,
    connect_sql,
    sql_connection,
)
from sim.sql import Catalogue, Statement, quote_identifier, refresh_page_counts
from workloads.common import (
    bind,
    bind_order,
    catalog_name,
    create_statements,
    drop_statement,
    insert_statement,
    tablespace_of,
)
from workloads.naming import like_prefix, numbered, owned_pattern
from workloads.ownership import TableRegistry
from workloads.ssb.parameters import PAGE_BYTES, SsbParameters
from workloads.ssb.schema import ALL_COLUMNS, TEXT_COLUMNS, TEXT_WIDTH, index_name, ssb_table
from workloads.tablespace import drop_tablespace, ensure_tablespace

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
    letters = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)
    return letters[rng.integers(0, len(letters), size=length)].tobytes().decode("ascii")


class SsbWorkload(Workload):
    """SSB-like: tables of one row per page, sessions pinned to tables, ten-operation cycles."""

    name: ClassVar[str] = WORKLOAD_NAME
    parameters_model: ClassVar[type[BaseModel]] = SsbParameters
    needs: ClassVar[str] = NEEDS_SQL

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        if not isinstance(parameters, SsbParameters):
            raise WorkloadError(f"ssb needs SsbParameters, not {type(parameters).__name__}")
        self.p: SsbParameters = parameters
        if dialect_of(target) is None:
            raise WorkloadError(f"ssb runs on SQL targets, not {target.kind}")
        self.dialect = target.dialect
        # Fails here, before anything runs, if a dialect lacks a statement.
        self.catalogue = Catalogue.load(SQL_DIR, self.dialect, required=STATEMENTS)
        self.registry = TableRegistry(WORKLOAD_NAME, self.dialect, target.paramstyle)
        self._own_names = owned_pattern(self.p.table_prefix)
        self.tablespace = tablespace_of(target)

    # ------------------------------------------------------------------ naming and mix

    def table_pattern(self) -> str:
        return f"^{self._own_names.pattern}$"

    def table_name(self, number: int) -> str:
        """Table ``number`` (1-based): ``<prefix>_<number>`` (workloads.naming)."""
        return numbered(self.p.table_prefix, number)

    def render(self, name: str, **identifiers: str) -> Statement:
        return self.catalogue.render(name, self.target.paramstyle, **identifiers)

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

    # ------------------------------------------------------------------ load

    def _fingerprint(self) -> dict[str, Any]:
        return {
            "layout": LAYOUT_VERSION,
            "rows": self.p.rows_per_table,
            "columns": len(TEXT_COLUMNS),
            "text_width": TEXT_WIDTH,
            "load_seed": self.p.load_seed,
            # Another tablespace rebuilds the data there (None: the default, as before).
            "tablespace": self.tablespace,
        }

    async def load(self, progress: ProgressCallback) -> dict[str, Any]:
        """Create and fill the tables that are missing or stale; reuse the others."""
        names = [self.table_name(n) for n in range(1, self.p.tables + 1)]
        conn = await connect_sql(self.target)
        try:
            # Refuse a foreign table before spending time loading any other.
            for name in names:
                await self.registry.check_ownership(conn, name)
            await self.registry.ensure(conn)
            await ensure_tablespace(self.target, conn, self.registry)
            tables = [
                await self._load_table(conn, number, name, progress)
                for number, name in enumerate(names, 1)
            ]
        finally:
            await conn.close()
        return {
            "tables": tables,
            "rows_per_table": self.p.rows_per_table,
            "table_count": self.p.tables,
            "built": any(t["built"] for t in tables),
        }

    async def _load_table(
        self, conn: SqlConnection, number: int, name: str, progress: ProgressCallback
    ) -> dict[str, Any]:
        rows = self.p.rows_per_table
        fingerprint = self._fingerprint()
        if not await self.registry.begin_load(conn, name, fingerprint):
            return {"table": name, "rows": rows, "built": False}
        table = ssb_table(name, self.dialect, self.tablespace)
        create_table, *create_indexes = create_statements(table, self.dialect)
        await self.registry.create_table(conn, name, create_table)  # with dbsim's marker
        insert = insert_statement(table, self.dialect, self.target.paramstyle)
        await self._insert_rows(conn, insert, name, number, progress)
        for statement in create_indexes:  # after the data: one sort instead of N inserts
            await conn.execute(statement)
        await self.registry.finish_load(conn, name, fingerprint)
        return {"table": name, "rows": rows, "built": True}

    async def _insert_rows(
        self,
        conn: SqlConnection,
        insert: Statement,
        table_name: str,
        number: int,
        progress: ProgressCallback,
    ) -> None:
        rows = self.p.rows_per_table
        what = f"load {table_name}"
        rng = np.random.default_rng((self.p.load_seed, number))
        pool = random_text(rng, LOAD_POOL_CHARS)
        order = bind_order(insert, ALL_COLUMNS)
        batch_size = self.p.load_batch_rows
        progress(what, 0, rows)
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
            await conn.bulk_insert(insert, table_name, insert.param_names, batch)
            await conn.commit()
            progress(what, last - 1, rows)

    async def check_loaded(self) -> dict[str, Any]:
        """``--skip-load``: every table the sessions will touch is dbsim's and loaded with
        this configuration's fingerprint (no data is read)."""
        wanted = {self.table_name(n): self._fingerprint() for n in range(1, self.p.tables + 1)}
        return await self.registry.check_loaded_on(self.target, wanted)

    # ------------------------------------------------------------------ verify and drop

    async def verify(self) -> dict[str, Any]:
        """Row count, highest key, one row per block and the unique index, per table."""
        conn = await connect_sql(self.target)
        try:
            tables = [
                await self._verify_table(conn, self.table_name(n))
                for n in range(1, self.p.tables + 1)
            ]
        finally:
            await conn.close()
        return {"tables": tables}

    async def _verify_table(self, conn: SqlConnection, name: str) -> dict[str, Any]:
        names = {
            "tname": catalog_name(self.dialect, name),
            "iname": catalog_name(self.dialect, index_name(name)),
        }

        for statement in refresh_page_counts(self.dialect, quote_identifier(self.dialect, name)):
            await conn.execute(statement)

        async def ask(statement_name: str) -> int:
            statement = self.render(statement_name, table=name)
            return int(await conn.scalar(statement, bind(statement, **names)) or 0)

        entry = {
            "table": name,
            "rows": await ask("count_rows"),
            "max_key": await ask("max_key"),
            "unique_index": await ask("unique_index") == 1,
            "block_size": await ask("block_size"),
            "blocks": await ask("blocks_used"),
            "max_rows_per_block": await ask("max_rows_per_block"),
        }
        expected = self.p.rows_per_table
        if entry["rows"] != expected or entry["max_key"] != expected:
            raise WorkloadError(
                f"{name}: {entry['rows']} rows, max key {entry['max_key']}; "
                f"expected {expected} and {expected}"
            )
        if not entry["unique_index"]:
            raise WorkloadError(f"{name}: the unique index {index_name(name)} on custid is missing")
        # Smaller blocks pass the rows-per-block count (each row spills into a second block,
        # overflow or chained), so the block size is checked on its own. An engine that keeps
        # several rows on a page however large they are (InnoDB: two on its 16 KiB pages) is
        # held to that many rows per page of that many times 8 KiB.
        shared = dialect_record(self.dialect).min_rows_per_page
        if entry["block_size"] != PAGE_BYTES * shared:
            raise WorkloadError(
                f"{name}: the database uses {entry['block_size']}-byte blocks; SSB needs "
                f"{PAGE_BYTES * shared}-byte blocks, one ≈7.4 KB row per {PAGE_BYTES} bytes"
            )
        per_block = entry["max_rows_per_block"]
        assert isinstance(per_block, int)
        if per_block > shared:
            raise WorkloadError(
                f"{name}: up to {per_block} rows share a block; SSB needs one "
                f"≈7.4 KB row per {PAGE_BYTES}-byte block (are rows stored out of line?)"
            )
        return entry

    async def drop(self) -> list[str]:
        """Drop every table this workload registered under ``table_prefix`` (any count)."""
        conn = await connect_sql(self.target)
        try:
            like = like_prefix(self.p.table_prefix)
            names = await self.registry.owned(conn, like, self._own_names)
            dropped = await self.registry.drop(
                conn, sorted(names, key=lambda n: int(n.rsplit("_", 1)[-1]))
            )
            return dropped + await drop_tablespace(self.target, conn, self.registry)
        finally:
            await conn.close()

    def statement_inventory(self) -> list[Statement]:
        table = ssb_table(self.table_name(1), self.dialect, self.tablespace)
        ddl = [
            *self.registry.inventory(table.name),
            *create_statements(table, self.dialect),
            insert_statement(table, self.dialect, self.target.paramstyle),
            drop_statement(table.name, self.dialect),
        ]
        identifiers = {"table": table.name}
        return ddl + [self.render(n, **identifiers) for n in sorted(self.catalogue.statements)]

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


class SsbSession:
    """One SSB user: its table, its place in the ten-operation cycle, its random keys."""

    READ_ARGS = ("s", "e")
    UPDATE_ARGS = ("v", "s", "e")

    def __init__(self, workload: SsbWorkload, index: int, conn: SqlConnection, seed: int) -> None:
        p = workload.p
        self.index = index
        self.conn = conn
        self.blocking = getattr(conn, "blocking", None)  # a test double may have none
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

    def replace_connection(self, connection: Connection) -> None:
        self.conn = sql_connection(connection)
        self.blocking = self.conn.blocking

    @property
    def blocking_ready(self) -> bool:
        """Whether :meth:`next_call` can be used: the driver blocks (sqlite3, pyodbc)."""
        return self.blocking is not None

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        name, params = self._next()
        if name == "read":
            return name, self.conn.scalar(self.read, params)
        return name, self._update(params)

    def next_call(self) -> tuple[str, Callable[[], Any]]:
        """The same operation as a blocking call (sim.core.session_threads)."""
        name, params = self._next()
        blocking = self.blocking
        assert blocking is not None
        if name == "read":
            return name, partial(blocking.scalar, self.read, params)
        return name, partial(blocking.execute_committed, self.update, params)

    def _next(self) -> tuple[str, tuple[Any, ...]]:
        """The next operation of the ten-operation cycle and its parameters."""
        i = self.ops
        self.ops = i + 1
        s = self.rng.randrange(1, self.rows)
        if is_read(i, self.read_pct):
            read = (s, min(s + self.rows_select, self.rows))
            return "read", tuple(read[k] for k in self.read_bind)
        update = (self.values.next(), s, min(s + self.rows_update, self.rows))
        return "update", tuple(update[k] for k in self.update_bind)

    async def _update(self, params: tuple[Any, ...]) -> None:
        await self.conn.execute(self.update, params)
        await self.conn.commit()
