"""SLOB-like parameters: SLOB's own knobs, with units in the names.

Mapping from slob.conf: UPDATE_PCT → update_pct, SCAN_PCT → scan_pct, WORK_UNIT → work_unit,
SCALE → scale, REDO_STRESS → redo_stress, THREADS_PER_SCHEMA → threads_per_schema,
HOT_SCHEMA_FREQUENCY → hot_schema_frequency, DO_HOTSPOT / HOTSPOT_MB / HOTSPOT_OFFSET_MB /
HOTSPOT_FREQUENCY → hotspot_*. RUN_TIME, WORK_LOOP and THINK_TM_* are pacing, so they live in
the scenario's ``load`` section (duration_s, loops_per_session, think).

Not SLOB's (dbsim's own, off by default): ``range_pct``/``range_blocks`` (range reads of
consecutive blocks), ``row_update_pct`` (updates of one random row of ``cf1``: one block read
and one written, scattered over the table, as an OLTP update) and ``append_pct`` (inserts of
one new row into ``cf3``, a write that reads nothing).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workloads.naming import TABLE_PREFIX_HELP, TABLE_PREFIX_PATTERN, index_of, numbered

MIN_ROWS = 10_000
#: custid is an INTEGER column: 32-bit signed in PostgreSQL and SQL Server.
MAX_ROWS = 2**31 - 1
DEFAULT_SCALE = "80M"
DEFAULT_BLOCK_SIZE = 8192
MIB = 1024 * 1024
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT])?\s*$", re.IGNORECASE)
_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
#: cf1 (read and updated), cf2 (scanned, scan_pct > 0), cf3 (appended to, append_pct > 0).
TABLE_SUFFIXES = ("_cf1", "_cf2", "_cf3")


def _pct_rule(value: int) -> int:
    if not (0 <= value <= 50 or value == 100):
        raise ValueError("must be 0-50 or 100 (the SLOB rule)")
    return value


def parse_scale(scale: int | str, block_size_bytes: int) -> int:
    """SCALE in rows (a bare number) or bytes with K/M/G/T (divided by the block size)."""
    if isinstance(scale, int):
        return scale
    match = _SIZE.match(scale)
    if not match:
        raise ValueError(f"{scale!r} is neither a row count nor a size like 80M")
    number, unit = int(match.group(1)), match.group(2)
    if unit is None:
        return number
    return number * _UNITS[unit.upper()] // block_size_bytes


class SlobParameters(BaseModel):
    """SLOB-like workload parameters (shipped SLOB defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    update_pct: int = Field(default=10, description="Updates in every 100 operations: 0-50 or 100.")
    scan_pct: int = Field(default=0, description="Share of reads that full-scan cf2: 0-50 or 100.")
    range_pct: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Share of the reads that do not scan which read range_blocks consecutive "
        "blocks of cf1 (a dialect with block-addressed rows: PostgreSQL's TID ranges).",
    )
    range_blocks: int = Field(
        default=2, ge=2, le=64, description="Consecutive cf1 blocks a range read reads."
    )
    row_update_pct: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Not SLOB's: share of the operations that are not updates which update "
        "one random row of cf1 instead (c2 and c20 of one key: one block read and dirtied, "
        "scattered over the table, so the engine's write-back writes single blocks).",
    )
    append_pct: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Not SLOB's: share of the operations that are not updates which append "
        "instead: one new row of cf1's shape, one block, into <prefix>_<n>_cf3 (a write that "
        "reads nothing).",
    )
    work_unit: int = Field(
        default=64, ge=3, le=1024, description="Key range width; WORK_UNIT-1 rows per op."
    )
    scale: int | str = Field(
        default=DEFAULT_SCALE,
        description="Rows per schema, or bytes with K/M/G/T (÷ block size); ≥ 10,000 rows.",
    )
    block_size_bytes: int = Field(
        default=DEFAULT_BLOCK_SIZE, description="Database block (page) size."
    )
    redo_stress: Literal["LITE", "HEAVY"] = Field(
        default="LITE", description="LITE updates c2 and c20; HEAVY updates c2..c20."
    )
    schemas: int = Field(
        default=1, ge=1, le=4096, description="Schemas (tables) to load and spread sessions over."
    )
    threads_per_schema: int = Field(default=1, ge=1, le=1024)
    hot_schema_frequency: int = Field(
        default=0, ge=0, description="Every N-th loop uses schema 1 (0: off)."
    )
    do_hotspot: bool = False
    hotspot_mb: int = Field(default=8, ge=1)
    hotspot_offset_mb: int = Field(default=16, ge=0)
    hotspot_frequency: int = Field(
        default=3, ge=1, description="Every N-th loop draws its key in the hot spot."
    )
    scan_table_size: int | str = Field(
        default="1M", description="cf2 size (rows or bytes), created when scan_pct > 0."
    )
    table_prefix: str = Field(
        default="slob",
        pattern=TABLE_PREFIX_PATTERN,
        description=f"Tables are <prefix>_<n>_cf1: {TABLE_PREFIX_HELP}.",
    )
    load_batch_rows: int = Field(default=2000, ge=1, le=100_000)
    # ge=0: numpy seeds only from non-negative integers; a negative one failed mid-load.
    load_seed: int = Field(default=1, ge=0, description="Seed of the per-schema key permutations.")

    _check_update = field_validator("update_pct")(classmethod(lambda cls, v: _pct_rule(v)))
    _check_scan = field_validator("scan_pct")(classmethod(lambda cls, v: _pct_rule(v)))

    @field_validator("block_size_bytes")
    @classmethod
    def _block_size(cls, value: int) -> int:
        if value not in (2048, 4096, 8192, 16384, 32768):
            raise ValueError("must be 2048, 4096, 8192, 16384 or 32768")
        return value

    @field_validator("scale", "scan_table_size")
    @classmethod
    def _size_text(cls, value: int | str) -> int | str:
        # Checked per field, so the error names scale or scan_table_size (the model check
        # below could only name workload.parameters).
        parse_scale(value, DEFAULT_BLOCK_SIZE)
        return value

    @model_validator(mode="after")
    def _sizes(self) -> SlobParameters:
        rows = self.scale_rows
        if rows < MIN_ROWS:
            raise ValueError(f"scale: {rows} rows is below the minimum of {MIN_ROWS}")
        for name, count in (("scale", rows), ("scan_table_size", self.scan_rows)):
            if count > MAX_ROWS:
                raise ValueError(
                    f"{name}: {count} rows is above the maximum of {MAX_ROWS} (custid is an INTEGER)"
                )
        if self.do_hotspot:
            lo, hi = self.hotspot_rows
            if hi > rows or hi - lo < 2 * self.work_unit + 1:
                raise ValueError(
                    "hotspot_offset_mb + hotspot_mb must lie inside the data and hold 2×work_unit rows"
                )
        return self

    @property
    def scale_rows(self) -> int:
        return parse_scale(self.scale, self.block_size_bytes)

    @property
    def scan_rows(self) -> int:
        return max(parse_scale(self.scan_table_size, self.block_size_bytes), 1)

    @property
    def hotspot_rows(self) -> tuple[int, int]:
        """First and last key (inclusive) of the hot region."""
        first = self.hotspot_offset_mb * MIB // self.block_size_bytes + 1
        return first, first + self.hotspot_mb * MIB // self.block_size_bytes - 1

    def sql_identifiers(self) -> dict[str, list[str]]:
        """The longest names made from ``table_prefix`` (the highest schema number): tables
        ``<prefix>_<n>_cf1`` / ``_cf2`` / ``_cf3`` and cf1's index ``<table>_custid``
        (workload.py and schema.py build them the same way, with workloads.naming). The
        scenario checks them against the target's identifier rules before anything connects."""
        cf1, cf2, cf3 = (numbered(self.table_prefix, self.schemas, s) for s in TABLE_SUFFIXES)
        return {"table_prefix": [cf1, cf2, cf3, index_of(cf1)]}

    @property
    def update_columns(self) -> list[str]:
        return ["c2", "c20"] if self.redo_stress == "LITE" else [f"c{i}" for i in range(2, 21)]
