"""SLOB-like workload: random key-range reads and updates over one-row-per-block tables.

Facts reproduced (docs/workloads/slob.md): per schema a table ``cf1`` of SCALE rows, one row
per block, keys loaded in a per-schema random permutation so neighbouring keys live in
scattered blocks, a non-unique index on the key; a read counts WORK_UNIT−1 rows of a random
key range, an update rewrites c2/c20 (LITE) or c2..c20 (HEAVY) over such a range and commits;
exactly UPDATE_PCT updates in every 100 operations of a session, and SCAN_PCT of the reads
become a full scan of ``cf2``. Not SLOB's: ``range_pct`` of the reads that do not scan read
``range_blocks`` consecutive blocks of ``cf1`` from a random one instead (``range_read``, a
dialect that addresses rows by block), so the kernel's read-ahead makes multi-block device
requests among the single blocks (``dbsim replay``'s mean read size, docs/capture.md). Not
SLOB's either: ``append_pct`` of the operations that are not updates insert one new row of
cf1's shape into ``cf3`` (``append``), one new block written and none read, so a replay can
set a write share SLOB's updates cannot reach (the order of the mix: workloads/slob/mix.py).
Not SLOB's either: ``row_update_pct`` of the operations that are not updates update one random
row of cf1 (``update_row``): one block read and dirtied, scattered over the table as an OLTP
update's, where appended blocks are consecutive and the kernel's write-back merges them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from sim.dialects import dialect as dialect_record
from sim.errors import ConfigError, WorkloadError
from sim.protocols import Connection, SqlConnection, Target, sql_connection
from sim.sql import Statement
from workloads.common import bind_order
from workloads.naming import numbered
from workloads.slob.mix import mix_counts, mix_shares, takes_this_op
from workloads.slob.parameters import SlobParameters
from workloads.slob.schema import (
    TEXT_COLUMNS,
    TEXT_WIDTH,
    append_pad,
    create_statements,
    pad_values,
    slob_table,
)
from workloads.sqlkit import Batch, PlannedTable, SqlSession, SqlWorkload

if TYPE_CHECKING:
    # Annotations only: the workload is built without SQLAlchemy to be checked (issue #25).
    from sqlalchemy import Table

SQL_DIR = Path(__file__).parent / "sql"
WORKLOAD_NAME = "slob"
STATEMENTS = frozenset(
    {
        "read",
        "update_lite",
        "update_heavy",
        "update_row",
        "scan",
        "range_read",
        "append",
        "count_rows",
        "max_key",
        "blocks_used",
        "max_rows_per_block",
    }
)
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
#: An appended row's key is ``session × APPEND_KEY_STRIDE + loop``: unique per session and
#: loop for 2**32 loops a session (32 TiB of 8 KiB rows), and within a 64-bit key.
APPEND_KEY_STRIDE = 2**32


class SlobWorkload(SqlWorkload[SlobParameters]):
    name: ClassVar[str] = WORKLOAD_NAME
    parameters_model: ClassVar[type[BaseModel]] = SlobParameters
    sql_dir = SQL_DIR
    # range_read is !unsupported where rows have no block. append is required in every file:
    # a dialect that cannot say it marks it !unsupported, and append_pct > 0 is refused there.
    required_statements = STATEMENTS - {"range_read"}
    name_suffix = "_cf[123]"

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        #: One, unless the engine keeps more rows on a page however large they are (InnoDB).
        self.rows_per_block = dialect_record(self.dialect).min_rows_per_page
        if self.p.range_pct and not self.catalogue.has("range_read"):
            raise ConfigError(  # the scenario asks what its target cannot do: bad input
                f"workload.parameters.range_pct: {self.p.range_pct}, but {self.dialect} has no "
                "read of consecutive blocks (range_read: rows addressed by block, like "
                "PostgreSQL's TID ranges)"
            )
        if self.p.append_pct and not self.catalogue.has("append"):
            raise ConfigError(
                f"workload.parameters.append_pct: {self.p.append_pct}, but {self.dialect} has "
                "no append statement (an INSERT of one row into cf3) in workloads/slob/sql"
            )

    # ------------------------------------------------------------------ naming and mix

    def table_name(self, schema: int) -> str:
        """``<prefix>_<schema>_cf1`` (workloads.naming: no two scenarios share a name)."""
        return numbered(self.p.table_prefix, schema, "_cf1")

    def scan_table_name(self, schema: int) -> str:
        return numbered(self.p.table_prefix, schema, "_cf2")

    def append_table_name(self, schema: int) -> str:
        return numbered(self.p.table_prefix, schema, "_cf3")

    def data_bytes(self) -> int:
        """SLOB's sizing: one row per block, ``schemas`` tables of ``scale`` rows (plus the
        scanned tables when ``scan_pct`` > 0). The append tables start empty and only grow
        by what the sessions write, so they are not counted."""
        rows = self.p.scale_rows + (self.p.scan_rows if self.p.scan_pct else 0)
        return self.p.schemas * rows * self.p.block_size_bytes

    def scale_for_bytes(self, data_bytes: int) -> str:
        per_schema = -(-data_bytes // self.p.schemas)
        return f"scale: {-(-per_schema // 2**30)}G (per schema, {self.p.schemas} schema(s))"

    def read_operations(self) -> frozenset[str]:
        return frozenset({"read", "scan", "range"})

    def operations(self) -> Mapping[str, float]:
        p = self.p
        return mix_shares(p.update_pct, p.append_pct, p.scan_pct, p.range_pct, p.row_update_pct)

    def expected_mix(self, op_ranges: list[tuple[int, int]]) -> dict[str, int]:
        """Counts demanded by the rules over the given per-session operation ranges."""
        p = self.p
        return mix_counts(
            p.update_pct, p.append_pct, p.scan_pct, p.range_pct, op_ranges, p.row_update_pct
        )

    def default_sessions(self) -> int:
        return self.p.schemas * self.p.threads_per_schema

    # ------------------------------------------------------------------ tables (sqlkit)

    def _planned(self, schema: int, role: str) -> PlannedTable:
        if role == "cf3":
            return self._planned_append(schema)
        if role == "cf1":
            name, rows = self.table_name(schema), self.p.scale_rows
        else:
            name, rows = self.scan_table_name(schema), self.p.scan_rows
        fingerprint = {
            "role": role,
            "rows": rows,
            "block_size_bytes": self.p.block_size_bytes,
            "load_seed": self.p.load_seed,
            # Moving the data to another tablespace rebuilds it there (None matches a table
            # recorded before placements existed, which is in the default tablespace).
            "tablespace": self.tablespace,
        }
        return PlannedTable(name, schema, rows, fingerprint, role)

    def _planned_append(self, schema: int) -> PlannedTable:
        """cf3, created empty: no row count or seed in its fingerprint, so the rows the runs
        append are kept from run to run (a new block size or tablespace rebuilds it empty)."""
        fingerprint = {
            "role": "cf3",
            "block_size_bytes": self.p.block_size_bytes,
            "tablespace": self.tablespace,
        }
        return PlannedTable(self.append_table_name(schema), schema, 0, fingerprint, "cf3")

    def planned_tables(self) -> list[PlannedTable]:
        """Per schema ``cf1``, ``cf2`` when reads scan (``scan_pct`` > 0) and ``cf3`` when
        operations append (``append_pct`` > 0)."""
        roles = ["cf1"]
        roles += ["cf2"] if self.p.scan_pct > 0 else []
        roles += ["cf3"] if self.p.append_pct > 0 else []
        return [self._planned(s, role) for s in range(1, self.p.schemas + 1) for role in roles]

    def table(self, planned: PlannedTable) -> Table:
        return slob_table(
            planned.name,
            self.dialect,
            self.p.block_size_bytes,
            indexed=planned.role == "cf1",
            tablespace=self.tablespace,
            appended=planned.role == "cf3",
        )

    def ddl(self, table: Table) -> list[Statement]:
        """SLOB's own: the dialect's after-load statements come before the index."""
        return create_statements(table, self.dialect)

    def row_batches(
        self, planned: PlannedTable, table: Table, insert: Statement
    ) -> Iterator[Batch]:
        if planned.role == "cf3":
            return  # created empty: the sessions' appends are its rows
        import numpy as np  # here: only loading needs it, not a workload built to be checked

        schema, rows = planned.number, planned.rows
        # A different permutation per schema, so neighbouring keys live in scattered blocks.
        keys = np.random.default_rng(self.p.load_seed * 1_000_003 + schema).permutation(rows) + 1
        filler = random.Random(schema)
        base = "".join(filler.choice(_ALPHABET) for _ in range(4 * TEXT_WIDTH))
        padding = pad_values(table)
        columns = insert.param_names
        batch_size = self.p.load_batch_rows
        for start in range(0, rows, batch_size):
            batch: list[Sequence[Any]] = []
            for key in keys[start : start + batch_size].tolist():
                offset = key % (3 * TEXT_WIDTH)
                text = base[offset : offset + TEXT_WIDTH]
                values = {c: text for c in TEXT_COLUMNS}
                values["custid"] = key
                values.update(padding)
                batch.append(tuple(values[c] for c in columns))
            yield batch

    def load_facts(self) -> dict[str, Any]:
        return {"rows_per_schema": self.p.scale_rows, "schemas": self.p.schemas}

    def tables_to_verify(self) -> list[PlannedTable]:
        return [t for t in self.planned_tables() if t.role in ("cf1", "cf3")]

    async def verify_table(self, conn: SqlConnection, planned: PlannedTable) -> dict[str, Any]:
        name = planned.name
        if planned.role == "cf3":
            # It grows with every run's appends: no row count to hold it to, only the blocks.
            blocks = await self.ask(conn, "blocks_used", name)
            per_block = await self.ask(conn, "max_rows_per_block", name)
            self._expect_one_row_per_block(name, per_block)
            return {"table": name, "blocks": blocks, "max_rows_per_block": per_block}
        rows = await self.ask(conn, "count_rows", name)
        max_key = await self.ask(conn, "max_key", name)
        blocks = await self.ask(conn, "blocks_used", name)
        per_block = await self.ask(conn, "max_rows_per_block", name)
        self.expect_rows(name, rows, max_key, planned.rows)
        self._expect_one_row_per_block(name, per_block)
        return {
            "table": name,
            "rows": rows,
            "max_key": max_key,
            "blocks": blocks,
            "max_rows_per_block": per_block,
        }

    def _expect_one_row_per_block(self, name: str, per_block: int) -> None:
        if per_block > self.rows_per_block:
            raise WorkloadError(
                f"{name}: up to {per_block} rows share a block; SLOB needs one per "
                f"block (at most {self.rows_per_block} where the engine keeps more)"
            )

    def inventory_tables(self) -> list[Table]:
        """Schema 1's cf1, cf2 and cf3, whether or not this configuration scans or appends."""
        return [self.table(self._planned(1, role)) for role in ("cf1", "cf2", "cf3")]

    def inventory_identifiers(self, tables: Sequence[Table]) -> dict[str, str]:
        cf1, cf2, cf3 = (str(t.name) for t in tables)
        return {"table": cf1, "scan_table": cf2, "append_table": cf3}

    # ------------------------------------------------------------------ sessions

    def new_session(self, index: int, connection: Connection, seed: int) -> SlobSession:
        return SlobSession(self, index, sql_connection(connection), seed)


class _SchemaStatements:
    __slots__ = ("append", "range", "read", "row_update", "scan", "update")

    def __init__(self, workload: SlobWorkload, schema: int) -> None:
        table = workload.table_name(schema)
        self.read = workload.render("read", table=table)
        update_name = "update_lite" if workload.p.redo_stress == "LITE" else "update_heavy"
        self.update = workload.render(update_name, table=table)
        self.row_update = workload.render("update_row", table=table)
        self.scan = workload.render("scan", scan_table=workload.scan_table_name(schema))
        has_range = workload.p.range_pct and workload.catalogue.has("range_read")
        self.range = workload.render("range_read", table=table) if has_range else None
        appended = workload.append_table_name(schema)
        has_append = workload.p.append_pct and workload.catalogue.has("append")
        self.append = workload.render("append", append_table=appended) if has_append else None


_FILL = "abcdefghijklmnopqrstuvwxyz"


class SlobSession(SqlSession):
    """One SLOB session: its schema, its position in the 100-operation mix, its random keys."""

    READ_ARGS = ("lo", "hi")
    UPDATE_ARGS = ("v", "lo", "hi")
    APPEND_ARGS = ("k", "v", "pad")
    ROW_UPDATE_ARGS = ("v", "k")
    #: Committed one by one, as the engine's transaction or the native loop's autocommit.
    WRITES = frozenset({"update", "row_update", "append"})

    def __init__(self, workload: SlobWorkload, index: int, conn: SqlConnection, seed: int) -> None:
        super().__init__(conn)
        p = workload.p
        self.p = p
        self.index = index
        self.rng = random.Random(seed)
        self.ops = 0
        self.reads = 0
        self.plain_reads = 0
        self.not_updates = 0
        self.not_row_updates = 0
        schema = (index // p.threads_per_schema) % p.schemas + 1
        self.own = _SchemaStatements(workload, schema)
        self.hot = self.own if schema == 1 else _SchemaStatements(workload, 1)
        read_bind = bind_order(self.own.read, self.READ_ARGS)
        if read_bind not in ([0, 1], [1, 0]):
            raise WorkloadError(f"{self.own.read.name}: binds must be lo and hi, once each")
        self.read_in_order = read_bind == [0, 1]
        self.update_bind = bind_order(self.own.update, self.UPDATE_ARGS)
        self.row_update_bind = bind_order(self.own.row_update, self.ROW_UPDATE_ARGS)
        if set(self.row_update_bind) != {0, 1}:
            raise WorkloadError(f"{self.own.row_update.name}: binds must be v and k")
        # Parameters the hot path reads, as plain attributes (no model lookups per op).
        self.random = self.rng.random
        self.work_unit = p.work_unit
        self.update_pct = p.update_pct
        self.append_pct = p.append_pct
        self.row_update_pct = p.row_update_pct
        self._bind_append(workload)
        self.scan_pct = p.scan_pct
        self.range_pct = p.range_pct
        self.range_blocks = p.range_blocks
        # A range starts at a block drawn uniformly; cf1 holds rows_per_block rows a block.
        self.range_span = max(p.scale_rows // workload.rows_per_block - p.range_blocks, 1)
        if self.own.range is not None:
            order = bind_order(self.own.range, ("lo_block", "hi_block"))
            if order not in ([0, 1], [1, 0]):
                raise WorkloadError(f"{self.own.range.name}: binds must be lo_block and hi_block")
            self.range_in_order = order == [0, 1]
        self.hot_every = p.hot_schema_frequency
        self.do_hotspot = p.do_hotspot
        self.hotspot_frequency = p.hotspot_frequency
        # A read or update covers keys (r − WORK_UNIT, r): r is uniform in
        # [WORK_UNIT + 1, SCALE − WORK_UNIT], or inside the hot region.
        self.key_lo = p.work_unit + 1
        self.key_span = p.scale_rows - 2 * p.work_unit
        hot_first, hot_last = p.hotspot_rows
        self.hot_lo = hot_first + p.work_unit
        self.hot_span = hot_last - self.hot_lo + 1

    def _bind_append(self, workload: SlobWorkload) -> None:
        """The append statement's bind order, its padding and this session's keys."""
        statement = self.own.append
        if statement is None:
            return
        self.append_bind = bind_order(statement, self.APPEND_ARGS)
        if not {0, 1} <= set(self.append_bind):
            raise WorkloadError(f"{statement.name}: binds must include k and v")
        # Only a statement that names the padding computes it (SQL Server's page fit imports
        # SQLAlchemy, which a session need not load otherwise).
        has_pad = 2 in self.append_bind
        self.append_pad = append_pad(workload.dialect, self.p.block_size_bytes) if has_pad else ""
        self.append_key_base = self.index * APPEND_KEY_STRIDE

    def _unique_value(self, loop: int) -> str:
        """A value unique to this session and loop, 128 characters like the text columns."""
        return f"{self.index:06d}.{loop:012d}.".ljust(TEXT_WIDTH, _FILL[loop % 26])

    def _key(self, loop: int) -> int:
        # random() scaled is several times cheaper than randint() and as uniform for this.
        if self.do_hotspot and loop % self.hotspot_frequency == 0:
            return self.hot_lo + int(self.random() * self.hot_span)
        return self.key_lo + int(self.random() * self.key_span)

    def next_statement(self) -> tuple[str, Statement, tuple[Any, ...]]:
        """The next operation of the mix: its name, statement and parameters."""
        i = self.ops
        self.ops = loop = i + 1
        statements = self.hot if self.hot_every and loop % self.hot_every == 0 else self.own
        hi = self._key(loop)
        lo = hi - self.work_unit
        pct = self.update_pct
        if pct and (loop * pct // 100 > i * pct // 100):  # takes_this_op(i, pct), inlined
            args = (self._unique_value(loop), lo, hi)
            return "update", statements.update, tuple(args[k] for k in self.update_bind)
        pct = self.row_update_pct
        if pct:
            # The operations that are not updates are numbered for the row updates among them.
            n = self.not_updates
            self.not_updates = n + 1
            if (n + 1) * pct // 100 > n * pct // 100:  # takes_this_op(n, pct), inlined
                one = (self._unique_value(loop), hi)
                bound = tuple(one[k] for k in self.row_update_bind)
                return "row_update", statements.row_update, bound
        pct = self.append_pct
        if pct:
            # The operations that are neither kind of update are numbered for the appends.
            n = self.not_row_updates
            self.not_row_updates = n + 1
            taken = (n + 1) * pct // 100 > n * pct // 100  # takes_this_op(n, pct), inlined
            if taken and statements.append is not None:  # None: refused when built
                row = (self.append_key_base + loop, self._unique_value(loop), self.append_pad)
                return "append", statements.append, tuple(row[k] for k in self.append_bind)
        j = self.reads
        self.reads = j + 1
        if self.scan_pct and takes_this_op(j, self.scan_pct):
            return "scan", statements.scan, ()
        if self.range_pct:
            k = self.plain_reads
            self.plain_reads = k + 1
            if takes_this_op(k, self.range_pct) and statements.range is not None:
                first = int(self.random() * self.range_span)
                blocks = (first, first + self.range_blocks)
                return "range", statements.range, blocks if self.range_in_order else blocks[::-1]
        if self.read_in_order:
            return "read", statements.read, (lo, hi)
        return "read", statements.read, (hi, lo)
