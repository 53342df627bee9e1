"""SSB-like parameters: the knobs of NetApp's SQL Storage Benchmark, with units in the names.

Mapping from the original: database size → ``database_size``, number of tables → ``tables``,
read percentage → ``read_pct``, rows per read/update → ``rows_select`` / ``rows_update``. Its
user (thread) count is the scenario's ``load.sessions`` (default: one session per table); it
has no think time and no run time of its own, pacing lives in the scenario's ``load`` section.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workloads.naming import TABLE_PREFIX_HELP, TABLE_PREFIX_PATTERN, index_of, numbered
from workloads.sizes import parse_size_bytes

#: The original sizes its tables for one row per 8 KB page (SQL Server's page size).
PAGE_BYTES = 8192
#: Below this a table is too small to spread random keys over.
MIN_ROWS_PER_TABLE = 100
DEFAULT_DATABASE_SIZE = "1G"
DEFAULT_TABLES = 4
DEFAULT_READ_PCT = 80
DEFAULT_TABLE_PREFIX = "user"  # tables user_1..user_N, as the original names them
#: custid is an INTEGER column: 32-bit signed in PostgreSQL and SQL Server.
MAX_ROWS_PER_TABLE = 2**31 - 1


class SsbParameters(BaseModel):
    """SSB-like workload parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    database_size: int | str = Field(
        default=DEFAULT_DATABASE_SIZE,
        description=(
            "Total data over all tables, bytes or a size with K/M/G/T (binary); rows per table "
            "= size ÷ 8192 ÷ tables, one ≈7.4 KB row per 8 KB page."
        ),
    )
    tables: int = Field(
        default=DEFAULT_TABLES,
        ge=1,
        le=4096,
        description="Tables <prefix>1..<prefix>N; session i works on table i % N + 1.",
    )
    read_pct: int = Field(
        default=DEFAULT_READ_PCT,
        description="Reads in every cycle of ten operations, in steps of 10 (100, 90, 80 …).",
    )
    rows_select: int = Field(
        default=0, ge=0, description="A read counts custid s..s+rows_select; 0: a point lookup."
    )
    rows_update: int = Field(
        default=0, ge=0, description="An update rewrites c1 of custid s..s+rows_update."
    )
    table_prefix: str = Field(
        default=DEFAULT_TABLE_PREFIX,
        pattern=TABLE_PREFIX_PATTERN,
        description=f"Tables are <prefix>_1..<prefix>_N: {TABLE_PREFIX_HELP}.",
    )
    load_batch_rows: int = Field(
        default=500, ge=1, le=100_000, description="Rows per insert batch (≈7.4 KB each)."
    )
    # ge=0: numpy seeds only from non-negative integers; a negative one failed mid-load.
    load_seed: int = Field(default=1, ge=0, description="Seed of the loaded random text.")

    @field_validator("database_size")
    @classmethod
    def _size(cls, value: int | str) -> int | str:
        if parse_size_bytes(value) <= 0:
            raise ValueError("must be more than 0 bytes")
        return value

    @field_validator("read_pct")
    @classmethod
    def _read_pct(cls, value: int) -> int:
        if not 0 <= value <= 100 or value % 10:
            raise ValueError(
                f"{value} is not allowed: SSB mixes in cycles of ten operations, so read_pct "
                f"must be a multiple of 10 from 0 to 100 (100/0, 90/10, 80/20 …)"
            )
        return value

    @model_validator(mode="after")
    def _rows(self) -> SsbParameters:
        rows = self.rows_per_table
        if rows < MIN_ROWS_PER_TABLE:
            raise ValueError(
                f"database_size {self.database_size} over {self.tables} table(s) gives {rows} rows "
                f"per table; at least {MIN_ROWS_PER_TABLE} are needed "
                f"({MIN_ROWS_PER_TABLE * PAGE_BYTES * self.tables} bytes in all)"
            )
        if rows > MAX_ROWS_PER_TABLE:
            raise ValueError(
                f"database_size {self.database_size} over {self.tables} table(s) gives {rows} rows "
                f"per table; at most {MAX_ROWS_PER_TABLE} fit (custid is an INTEGER)"
            )
        for name, width in (("rows_select", self.rows_select), ("rows_update", self.rows_update)):
            if width >= rows:
                raise ValueError(f"{name} {width} must be below the {rows} rows per table")
        return self

    def sql_identifiers(self) -> dict[str, list[str]]:
        """The longest names made from ``table_prefix`` (the highest table number): the table
        ``<prefix>_<n>`` and its index ``<table>_custid`` (workload.py and schema.py build them
        the same way, with workloads.naming). The scenario checks them against the target's identifier rules before
        anything connects."""
        last = numbered(self.table_prefix, self.tables)
        return {"table_prefix": [last, index_of(last)]}

    @property
    def database_size_bytes(self) -> int:
        return parse_size_bytes(self.database_size)

    @property
    def rows_per_table(self) -> int:
        """Rows (and so 8 KB pages) per table: database size ÷ 8192 ÷ tables."""
        return self.database_size_bytes // PAGE_BYTES // self.tables

    @property
    def reads_per_cycle(self) -> int:
        """How many of every ten operations are reads (they come first in the cycle)."""
        return self.read_pct // 10
