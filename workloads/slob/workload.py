"""SLOB-like workload: random key-range reads and updates over one-row-per-block tables.

Facts reproduced (docs/workloads/slob.md): per schema a table ``cf1`` of SCALE rows, one row
per block, keys loaded in a per-schema random permutation so neighbouring keys live in
scattered blocks, a non-unique index on the key; a read counts WORK_UNIT−1 rows of a random
key range, an update rewrites c2/c20 (LITE) or c2..c20 (HEAVY) over such a range and commits;
exactly UPDATE_PCT updates in every 100 operations of a session, and SCAN_PCT of the reads
become a full scan of ``cf2``.
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
    drop_statement,
    insert_statement,
    tablespace_of,
)
from workloads.naming import like_prefix, numbered, owned_pattern
from workloads.ownership import TableRegistry
from workloads.slob.parameters import SlobParameters
from workloads.slob.schema import (
    TEXT_COLUMNS,
    TEXT_WIDTH,
    create_statements,
    pad_values,
    slob_table,
)
from workloads.tablespace import drop_tablespace, ensure_tablespace

SQL_DIR = Path(__file__).parent / "sql"
WORKLOAD_NAME = "slob"
STATEMENTS = frozenset(
    {
        "read",
        "update_lite",
        "update_heavy",
        "scan",
        "count_rows",
        "max_key",
        "blocks_used",
        "max_rows_per_block",
    }
)


def takes_this_op(index: int, pct: int) -> bool:
    """Whether operation ``index`` (0-based) is one of the ``pct`` in its block of 100.

    Spreads them evenly: any 100 consecutive operations starting at a multiple of 100 hold
    exactly ``pct``, and any prefix is within one of ``pct`` percent.
    """
    return (index + 1) * pct // 100 > index * pct // 100


class SlobWorkload(Workload):
    name: ClassVar[str] = WORKLOAD_NAME
    parameters_model: ClassVar[type[BaseModel]] = SlobParameters
    needs: ClassVar[str] = NEEDS_SQL

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        assert isinstance(parameters, SlobParameters)
        self.p: SlobParameters = parameters
        if dialect_of(target) is None:
            raise WorkloadError(f"slob runs on SQL targets, not {target.kind}")
        # Fails here, before anything runs, if a dialect lacks a statement.
        self.catalogue = Catalogue.load(SQL_DIR, target.dialect, required=STATEMENTS)
        self.registry = TableRegistry(WORKLOAD_NAME, target.dialect, target.paramstyle)
        #: One, unless the engine keeps more rows on a page however large they are (InnoDB).
        self.rows_per_block = dialect_record(target.dialect).min_rows_per_page
        self.tablespace = tablespace_of(target)

    # ------------------------------------------------------------------ naming

    def table_pattern(self) -> str:
        return f"^{owned_pattern(self.p.table_prefix, '_cf[12]').pattern}$"

    def table_name(self, schema: int) -> str:
        """``<prefix>_<schema>_cf1`` (workloads.naming: no two scenarios share a name)."""
        return numbered(self.p.table_prefix, schema, "_cf1")

    def scan_table_name(self, schema: int) -> str:
        return numbered(self.p.table_prefix, schema, "_cf2")

    def render(self, name: str, **identifiers: str) -> Statement:
        return self.catalogue.render(name, self.target.paramstyle, **identifiers)

    def data_bytes(self) -> int:
        """SLOB's sizing: one row per block, ``schemas`` tables of ``scale`` rows (plus the
        scanned tables when ``scan_pct`` > 0)."""
        rows = self.p.scale_rows + (self.p.scan_rows if self.p.scan_pct else 0)
        return self.p.schemas * rows * self.p.block_size_bytes

    def scale_for_bytes(self, data_bytes: int) -> str:
        per_schema = -(-data_bytes // self.p.schemas)
        return f"scale: {-(-per_schema // 2**30)}G (per schema, {self.p.schemas} schema(s))"

    def read_operations(self) -> frozenset[str]:
        return frozenset({"read", "scan"})

    def operations(self) -> Mapping[str, float]:
        update = float(self.p.update_pct)
        reads = 100.0 - update
        scan = reads * self.p.scan_pct / 100
        return {"read": reads - scan, "update": update, "scan": scan}

    def expected_mix(self, op_ranges: list[tuple[int, int]]) -> dict[str, int]:
        """Counts demanded by the rules over the given per-session operation ranges."""
        u, sc = self.p.update_pct, self.p.scan_pct
        totals = {"read": 0, "update": 0, "scan": 0}
        for first, end in op_ranges:
            updates = end * u // 100 - first * u // 100
            # Reads are numbered separately; read number = operations before it minus updates.
            read_first, read_end = first - first * u // 100, end - end * u // 100
            scans = read_end * sc // 100 - read_first * sc // 100 if sc else 0
            totals["update"] += updates
            totals["scan"] += scans
            totals["read"] += (end - first) - updates - scans
        return totals

    def default_sessions(self) -> int:
        return self.p.schemas * self.p.threads_per_schema

    # ------------------------------------------------------------------ load

    def _fingerprint(self, role: str, rows: int) -> dict[str, Any]:
        return {
            "role": role,
            "rows": rows,
            "block_size_bytes": self.p.block_size_bytes,
            "load_seed": self.p.load_seed,
            # Moving the data to another tablespace rebuilds it there (None matches a table
            # recorded before placements existed, which is in the default tablespace).
            "tablespace": self.tablespace,
        }

    def _planned_tables(self) -> list[tuple[int, str, str, int]]:
        """(schema, role, table name, rows) for every table this configuration loads."""
        planned = []
        for schema in range(1, self.p.schemas + 1):
            planned.append((schema, "cf1", self.table_name(schema), self.p.scale_rows))
            if self.p.scan_pct > 0:
                planned.append((schema, "cf2", self.scan_table_name(schema), self.p.scan_rows))
        return planned

    async def load(self, progress: ProgressCallback) -> dict[str, Any]:
        conn = await connect_sql(self.target)
        try:
            await self.registry.ensure(conn)
            planned = self._planned_tables()
            # Refuse before loading anything, so a foreign table costs no loading time.
            for _, _, name, _ in planned:
                await self.registry.check_ownership(conn, name)
            await ensure_tablespace(self.target, conn, self.registry)
            tables = [
                await self._load_table(conn, schema, role, name, rows, progress)
                for schema, role, name, rows in planned
            ]
        finally:
            await conn.close()
        return {"tables": tables, "rows_per_schema": self.p.scale_rows, "schemas": self.p.schemas}

    async def _load_table(
        self,
        conn: SqlConnection,
        schema: int,
        role: str,
        name: str,
        rows: int,
        progress: ProgressCallback,
    ) -> dict[str, Any]:
        fingerprint = self._fingerprint(role, rows)
        if not await self.registry.begin_load(conn, name, fingerprint):
            return {"table": name, "rows": rows, "built": False}
        dialect = self.target.dialect
        table = slob_table(
            name,
            dialect,
            self.p.block_size_bytes,
            indexed=role == "cf1",
            tablespace=self.tablespace,
        )
        statements = create_statements(table, dialect)
        # The table (with dbsim's marker and identity); indexes after the data (faster load).
        await self.registry.create_table(conn, name, statements[0])
        insert = insert_statement(table, dialect, self.target.paramstyle)
        await self._insert_rows(conn, insert, name, rows, schema, progress, pad_values(table))
        for statement in statements[1:]:
            await conn.execute(statement)
        await self.registry.finish_load(conn, name, fingerprint)
        return {"table": name, "rows": rows, "built": True}

    async def _insert_rows(
        self,
        conn: SqlConnection,
        insert: Statement,
        table_name: str,
        rows: int,
        schema: int,
        progress: ProgressCallback,
        padding: Mapping[str, str],
    ) -> None:
        what = f"load {table_name}"
        # A different permutation per schema, so neighbouring keys live in scattered blocks.
        keys = np.random.default_rng(self.p.load_seed * 1_000_003 + schema).permutation(rows) + 1
        filler = random.Random(schema)
        alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        base = "".join(filler.choice(alphabet) for _ in range(4 * TEXT_WIDTH))
        columns = insert.param_names
        batch_size = self.p.load_batch_rows
        done = 0
        progress(what, 0, rows)
        for start in range(0, rows, batch_size):
            batch: list[Sequence[Any]] = []
            for key in keys[start : start + batch_size].tolist():
                offset = key % (3 * TEXT_WIDTH)
                text = base[offset : offset + TEXT_WIDTH]
                values = {c: text for c in TEXT_COLUMNS}
                values["custid"] = key
                values.update(padding)
                batch.append(tuple(values[c] for c in columns))
            await conn.bulk_insert(insert, table_name, columns, batch)
            await conn.commit()
            done += len(batch)
            progress(what, done, rows)

    async def check_loaded(self) -> dict[str, Any]:
        """``--skip-load``: every table the sessions will touch is dbsim's and loaded with
        this configuration's fingerprint (no data is read)."""
        wanted = {
            name: self._fingerprint(role, rows) for _, role, name, rows in self._planned_tables()
        }
        return await self.registry.check_loaded_on(self.target, wanted)

    # ------------------------------------------------------------------ verify and drop

    async def verify(self) -> dict[str, Any]:
        conn = await connect_sql(self.target)
        report: dict[str, Any] = {"tables": []}
        try:
            for schema in range(1, self.p.schemas + 1):
                name = self.table_name(schema)
                ids = {"table": name}
                quoted = quote_identifier(self.target.dialect, name)
                for statement in refresh_page_counts(self.target.dialect, quoted):
                    await conn.execute(statement)
                rows = int(await conn.scalar(self.render("count_rows", **ids)) or 0)
                max_key = int(await conn.scalar(self.render("max_key", **ids)) or 0)
                tname = catalog_name(self.target.dialect, name)
                blocks_used = self.render("blocks_used", **ids)
                blocks = int(await conn.scalar(blocks_used, bind(blocks_used, tname=tname)) or 0)
                per_block_sql = self.render("max_rows_per_block", **ids)
                per_block = int(
                    await conn.scalar(per_block_sql, bind(per_block_sql, tname=tname)) or 0
                )
                entry = {
                    "table": name,
                    "rows": rows,
                    "max_key": max_key,
                    "blocks": blocks,
                    "max_rows_per_block": per_block,
                }
                report["tables"].append(entry)
                expected = self.p.scale_rows
                if rows != expected or max_key != expected:
                    raise WorkloadError(
                        f"{name}: {rows} rows, max key {max_key}; expected {expected} and {expected}"
                    )
                if per_block > self.rows_per_block:
                    raise WorkloadError(
                        f"{name}: up to {per_block} rows share a block; SLOB needs one per "
                        f"block (at most {self.rows_per_block} where the engine keeps more)"
                    )
        finally:
            await conn.close()
        return report

    async def drop(self) -> list[str]:
        """Drop this prefix's registered tables (``<prefix>_<n>_cf1`` / ``_cf2``) only."""
        pattern = owned_pattern(self.p.table_prefix, "_cf[12]")
        conn = await connect_sql(self.target)
        try:
            names = await self.registry.owned(conn, like_prefix(self.p.table_prefix), pattern)
            dropped = await self.registry.drop(conn, sorted(names))
            return dropped + await drop_tablespace(self.target, conn, self.registry)
        finally:
            await conn.close()

    def statement_inventory(self) -> list[Statement]:
        dialect = self.target.dialect
        size, placed = self.p.block_size_bytes, self.tablespace
        cf1 = slob_table(self.table_name(1), dialect, size, indexed=True, tablespace=placed)
        cf2 = slob_table(self.scan_table_name(1), dialect, size, indexed=False, tablespace=placed)
        ddl = self.registry.inventory(cf1.name)
        for table in (cf1, cf2):
            ddl += create_statements(table, dialect)
            ddl.append(insert_statement(table, dialect, self.target.paramstyle))
            ddl.append(drop_statement(table.name, dialect))
        identifiers = {"table": cf1.name, "scan_table": cf2.name}
        dml = []
        for name in sorted(self.catalogue.statements):
            fields = self.catalogue.template_fields(name)
            dml.append(self.render(name, **{k: v for k, v in identifiers.items() if k in fields}))
        return ddl + dml

    # ------------------------------------------------------------------ sessions

    def new_session(self, index: int, connection: Connection, seed: int) -> SlobSession:
        return SlobSession(self, index, sql_connection(connection), seed)


class _SchemaStatements:
    __slots__ = ("read", "scan", "update")

    def __init__(self, workload: SlobWorkload, schema: int) -> None:
        table = workload.table_name(schema)
        self.read = workload.render("read", table=table)
        update_name = "update_lite" if workload.p.redo_stress == "LITE" else "update_heavy"
        self.update = workload.render(update_name, table=table)
        self.scan = workload.render("scan", scan_table=workload.scan_table_name(schema))


_FILL = "abcdefghijklmnopqrstuvwxyz"


class SlobSession:
    """One SLOB session: its schema, its position in the 100-operation mix, its random keys."""

    READ_ARGS = ("lo", "hi")
    UPDATE_ARGS = ("v", "lo", "hi")

    def __init__(self, workload: SlobWorkload, index: int, conn: SqlConnection, seed: int) -> None:
        p = workload.p
        self.p = p
        self.index = index
        self.conn = conn
        self.blocking = getattr(conn, "blocking", None)  # a test double may have none
        self.rng = random.Random(seed)
        self.ops = 0
        self.reads = 0
        schema = (index // p.threads_per_schema) % p.schemas + 1
        self.own = _SchemaStatements(workload, schema)
        self.hot = self.own if schema == 1 else _SchemaStatements(workload, 1)
        read_bind = bind_order(self.own.read, self.READ_ARGS)
        if read_bind not in ([0, 1], [1, 0]):
            raise WorkloadError(f"{self.own.read.name}: binds must be lo and hi, once each")
        self.read_in_order = read_bind == [0, 1]
        self.update_bind = bind_order(self.own.update, self.UPDATE_ARGS)
        # Parameters the hot path reads, as plain attributes (no model lookups per op).
        self.random = self.rng.random
        self.work_unit = p.work_unit
        self.update_pct = p.update_pct
        self.scan_pct = p.scan_pct
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

    def _key(self, loop: int) -> int:
        # random() scaled is several times cheaper than randint() and as uniform for this.
        if self.do_hotspot and loop % self.hotspot_frequency == 0:
            return self.hot_lo + int(self.random() * self.hot_span)
        return self.key_lo + int(self.random() * self.key_span)

    def replace_connection(self, connection: Connection) -> None:
        self.conn = sql_connection(connection)
        self.blocking = self.conn.blocking

    @property
    def blocking_ready(self) -> bool:
        """Whether :meth:`next_call` can be used: the driver blocks (sqlite3, pyodbc)."""
        return self.blocking is not None

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        name, statement, params = self._next()
        if name == "update":
            return name, self._update(statement, params)
        return name, self.conn.scalar(statement, params)

    def next_call(self) -> tuple[str, Callable[[], Any]]:
        """The same operation as a blocking call (sim.core.session_threads)."""
        name, statement, params = self._next()
        blocking = self.blocking
        assert blocking is not None
        if name == "update":
            return name, partial(blocking.execute_committed, statement, params)
        return name, partial(blocking.scalar, statement, params)

    def _next(self) -> tuple[str, Statement, tuple[Any, ...]]:
        """The next operation of the mix: its name, statement and parameters."""
        i = self.ops
        self.ops = loop = i + 1
        statements = self.hot if self.hot_every and loop % self.hot_every == 0 else self.own
        hi = self._key(loop)
        lo = hi - self.work_unit
        pct = self.update_pct
        if pct and (loop * pct // 100 > i * pct // 100):  # takes_this_op(i, pct), inlined
            # A value unique to this session and loop, 128 characters like the column.
            value = f"{self.index:06d}.{loop:012d}.".ljust(TEXT_WIDTH, _FILL[loop % 26])
            args = (value, lo, hi)
            return "update", statements.update, tuple(args[k] for k in self.update_bind)
        j = self.reads
        self.reads = j + 1
        if self.scan_pct and takes_this_op(j, self.scan_pct):
            return "scan", statements.scan, ()
        if self.read_in_order:
            return "read", statements.read, (lo, hi)
        return "read", statements.read, (hi, lo)

    async def _update(self, statement: Statement, params: tuple[Any, ...]) -> None:
        await self.conn.execute(statement, params)
        await self.conn.commit()
