"""SSB-like rules that need no database: parameters, the ten-operation cycle, the mix
arithmetic, pinning, the statements each session sends, and the shared helpers they use."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from sim.protocols import SqlConnection
from sim.sql import Catalogue, Statement, dialect_names
from storage.targets.settings import SqliteSettings
from storage.targets.sqlite import SqliteTarget
from workloads.common import bind, bind_order, catalog_name, parse_size_bytes
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.schema import TEXT_WIDTH
from workloads.ssb.workload import (
    SQL_DIR,
    STATEMENTS,
    SsbWorkload,
    UpdateValues,
    is_read,
    reads_before,
    table_for_session,
)

ALNUM = re.compile(r"^[A-Za-z0-9]+$")


class RecordingConnection(SqlConnection):
    """Records what a session sends; every query answers 1."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    async def scalar(self, statement: Statement, params: Sequence[Any] = ()) -> Any:
        self.calls.append(("scalar", statement.name, tuple(params)))
        return 1

    async def column(self, statement: Statement, params: Sequence[Any] = ()) -> list[Any]:
        self.calls.append(("column", statement.name, tuple(params)))
        return [1]

    async def execute(self, statement: Statement, params: Sequence[Any] = ()) -> int:
        self.calls.append(("execute", statement.name, tuple(params)))
        return 1

    async def executemany(self, statement: Statement, rows: Sequence[Sequence[Any]]) -> None:
        self.calls.append(("executemany", statement.name, ()))

    async def commit(self) -> None:
        self.calls.append(("commit", "", ()))

    async def rollback(self) -> None:
        self.calls.append(("rollback", "", ()))

    async def close(self) -> None:
        return None


def ssb(**params: Any) -> SsbWorkload:
    # Constructing the SQLite target opens nothing; the workload only reads its dialect.
    return SsbWorkload(SsbParameters(**params), SqliteTarget(SqliteSettings()))


def run_ops(workload: SsbWorkload, index: int, count: int) -> RecordingConnection:
    conn = RecordingConnection()
    session = workload.new_session(index, conn, seed=42)

    async def go() -> None:
        for _ in range(count):
            _, transaction = session.next_transaction()
            await transaction

    asyncio.run(go())
    return conn


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("pct", [0, 10, 20, 50, 80, 90, 100])
def test_read_pct_in_steps_of_ten_is_accepted(pct: int) -> None:
    assert SsbParameters(read_pct=pct).reads_per_cycle == pct // 10


@pytest.mark.parametrize("pct", [5, 85, 99, 101, 110, -10])
def test_read_pct_off_the_ten_step_grid_is_refused(pct: int) -> None:
    with pytest.raises(ValidationError, match="multiple of 10 from 0 to 100"):
        SsbParameters(read_pct=pct)


@pytest.mark.parametrize(
    ("size", "tables", "rows"),
    [("1G", 1, 131072), ("1G", 4, 32768), ("1g", 3, 43690), ("512M", 2, 32768),
     ("8M", 1, 1024), (8 * 1024 * 1024, 2, 512), ("2T", 1024, 262144), ("80MB", 1, 10240)],
)  # fmt: skip
def test_rows_per_table_is_size_over_8192_over_tables(size: Any, tables: int, rows: int) -> None:
    assert SsbParameters(database_size=size, tables=tables).rows_per_table == rows


@pytest.mark.parametrize("size", ["1X", "abc", "", "1.5G", "-1G", "0"])
def test_a_malformed_or_empty_size_is_refused(size: str) -> None:
    with pytest.raises(ValidationError, match="database_size"):
        SsbParameters(database_size=size)


def test_a_table_too_small_is_refused_with_the_arithmetic() -> None:
    with pytest.raises(ValidationError, match="gives 32 rows per table; at least 100"):
        SsbParameters(database_size="1M", tables=4)


def test_ranges_wider_than_the_table_are_refused() -> None:
    with pytest.raises(ValidationError, match="rows_select 1024 must be below the 1024 rows"):
        SsbParameters(database_size="8M", tables=1, rows_select=1024)
    with pytest.raises(ValidationError, match="rows_update 2000"):
        SsbParameters(database_size="8M", tables=1, rows_update=2000)


def test_unknown_parameters_are_refused_and_the_model_is_frozen() -> None:
    with pytest.raises(ValidationError, match="extra"):
        SsbParameters(read_percent=80)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        SsbParameters().tables = 2


def test_size_parsing_shared_helper() -> None:
    assert parse_size_bytes("4K") == 4096
    assert parse_size_bytes(" 3 m ") == 3 * 1024**2
    assert parse_size_bytes("1T") == 1024**4
    assert parse_size_bytes("123") == 123
    with pytest.raises(ValueError, match="not a size"):
        parse_size_bytes("1 GiB")


# --------------------------------------------------------------------------- the cycle and the mix


@pytest.mark.parametrize("pct", [0, 30, 80, 100])
def test_the_first_read_pct_tenths_of_every_cycle_are_reads(pct: int) -> None:
    k = pct // 10
    for cycle in range(5):
        kinds = [is_read(cycle * 10 + j, pct) for j in range(10)]
        assert kinds == [True] * k + [False] * (10 - k)


@pytest.mark.parametrize("pct", [0, 10, 70, 100])
def test_reads_before_counts_the_cycle(pct: int) -> None:
    for n in range(0, 137):
        assert reads_before(n, pct) == sum(is_read(i, pct) for i in range(n))


@pytest.mark.parametrize("pct", [0, 20, 70, 90, 100])
def test_expected_mix_on_odd_ranges_matches_a_brute_force_count(pct: int) -> None:
    workload = ssb(read_pct=pct, database_size="8M")
    ranges = [(3, 17), (0, 0), (9, 10), (11, 123), (7, 8), (20, 30), (5, 5), (1, 1000)]
    reads = sum(is_read(i, pct) for first, end in ranges for i in range(first, end))
    total = sum(end - first for first, end in ranges)
    assert workload.expected_mix(ranges) == {"read": reads, "update": total - reads}


def test_operations_are_the_named_read_and_update_weights() -> None:
    assert ssb(read_pct=80).operations() == {"read": 80.0, "update": 20.0}
    assert ssb(read_pct=100).operations() == {"read": 100.0, "update": 0.0}


# --------------------------------------------------------------------------- pinning and sessions


def test_sessions_are_pinned_to_tables_round_robin() -> None:
    assert [table_for_session(i, 3) for i in range(7)] == [1, 2, 3, 1, 2, 3, 1]
    workload = ssb(tables=3, database_size="8M")
    assert workload.default_sessions() == 3
    tables = [workload.new_session(i, RecordingConnection(), i).table for i in range(5)]
    assert tables == ["user_1", "user_2", "user_3", "user_1", "user_2"]


def test_a_session_sends_reads_then_committed_updates_on_its_own_table() -> None:
    workload = ssb(read_pct=70, rows_select=9, rows_update=4, database_size="1M", tables=1)
    rows = workload.p.rows_per_table
    conn = run_ops(workload, index=0, count=30)
    sent = [(kind, name) for kind, name, _ in conn.calls]
    one_cycle = [("scalar", "read_range")] * 7 + [("execute", "update"), ("commit", "")] * 3
    assert sent == one_cycle * 3
    for _, name, params in conn.calls:
        if name == "read_range":
            s, e = params
            assert 1 <= s < rows and e == min(s + 9, rows)
        elif name == "update":
            value, s, e = params
            assert 1 <= s < rows and e == min(s + 4, rows)
            assert len(value) == TEXT_WIDTH and ALNUM.match(value)


def test_rows_select_zero_is_a_point_lookup() -> None:
    workload = ssb(read_pct=100, rows_select=0, database_size="1M", tables=1)
    conn = run_ops(workload, index=0, count=20)
    assert {name for _, name, _ in conn.calls} == {"read_point"}
    assert all(len(params) == 1 and 1 <= params[0] < 128 for _, _, params in conn.calls)


def test_keys_clip_at_the_last_row() -> None:
    workload = ssb(read_pct=100, rows_select=99, database_size="1M", tables=1)
    conn = run_ops(workload, index=0, count=400)
    ends = [params[1] for _, _, params in conn.calls]
    assert max(ends) == 128 and min(params[0] for _, _, params in conn.calls) >= 1


def test_update_values_are_fresh_370_alphanumerics() -> None:
    import random

    values = UpdateValues(7, random.Random(1))
    seen = [values.next() for _ in range(5000)]
    assert len(set(seen)) == len(seen)
    assert all(len(v) == TEXT_WIDTH and ALNUM.match(v) and v.startswith("00007") for v in seen)
    other = UpdateValues(8, random.Random(1)).next()
    assert other not in seen


# --------------------------------------------------------------------------- statements


@pytest.mark.parametrize("dialect", dialect_names())
def test_every_dialect_has_every_statement(dialect: str) -> None:
    catalogue = Catalogue.load(SQL_DIR, dialect, required=STATEMENTS)
    assert set(catalogue.statements) == STATEMENTS


def test_bind_helpers_map_names_to_positions() -> None:
    statement = Statement(
        "update", "UPDATE t SET c1 = ? WHERE custid BETWEEN ? AND ?", ("v", "s", "e")
    )
    assert bind_order(statement, ("s", "e", "v")) == [2, 0, 1]
    assert bind(statement, s=1, e=2, v="x", extra=0) == ("x", 1, 2)
    repeated = Statement("q", "SELECT ? WHERE ? = ?", ("n", "n", "m"))
    assert bind_order(repeated, ("m", "n")) == [1, 1, 0]


def test_oracle_catalogue_names_are_upper_case_unless_quoted() -> None:
    assert catalog_name("oracle", "user_1") == "USER_1"
    assert catalog_name("oracle", "User_1") == "User_1"
    assert catalog_name("postgres", "user_1") == "user_1"
    assert catalog_name("sqlserver", "User_1") == "User_1"
