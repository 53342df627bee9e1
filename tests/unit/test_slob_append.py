"""SLOB-like appends (append_pct, not SLOB's) without a database: where they fall in the mix,
the counts the summary reports and checks, the parameter's limits, the statement each dialect
gets, and cf3's place among the tables (planned, fingerprinted, dropped by the name pattern).
The real databases are in tests/integration/test_{sqlite,postgres,mysql}_slob.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from sim.errors import ConfigError, WorkloadError
from sim.protocols import Target
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings, SqliteSettings
from storage.targets.sqlite import SqliteTarget
from workloads.slob.mix import mix_counts, mix_shares, takes_this_op
from workloads.slob.parameters import SlobParameters
from workloads.slob.schema import TEXT_COLUMNS, page_fit
from workloads.slob.workload import SQL_DIR, SlobSession, SlobWorkload


def sqlite() -> SqliteTarget:
    return SqliteTarget(SqliteSettings())


def postgres() -> PostgresTarget:
    return PostgresTarget(PostgresSettings())


def build(target: Target | None = None, **params: Any) -> SlobWorkload:
    return SlobWorkload(SlobParameters(**{"scale": 20000, **params}), target or postgres())


def dealt(workload: SlobWorkload, ops: int, index: int = 0) -> list[tuple[str, Any, Any]]:
    """The first ``ops`` operations session ``index`` deals (no connection is used)."""
    session = SlobSession(workload, index, None, seed=11)  # type: ignore[arg-type]
    return [session.next_statement() for _ in range(ops)]


def by_the_rules(u: int, a: int, sc: int, rp: int, ops: int) -> list[str]:
    """The operation names the documented order gives, counted out one candidate at a time
    (docs/workloads/slob.md): update of every operation, append of the non-updates, scan of
    the reads left, range of the reads that do not scan."""
    names, not_updates, reads, plain = [], 0, 0, 0
    for i in range(ops):
        if takes_this_op(i, u):
            names.append("update")
            continue
        not_updates += 1
        if takes_this_op(not_updates - 1, a):
            names.append("append")
            continue
        reads += 1
        if takes_this_op(reads - 1, sc):
            names.append("scan")
            continue
        plain += 1
        names.append("range" if takes_this_op(plain - 1, rp) else "read")
    return names


def counted(names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


# ------------------------------------------------------------------ the mix


@pytest.mark.parametrize(
    ("params", "per_100"),
    [
        ({"update_pct": 0, "append_pct": 30}, {"read": 70, "update": 0, "scan": 0, "append": 30}),
        ({"update_pct": 20, "append_pct": 25}, {"read": 60, "update": 20, "scan": 0, "append": 20}),
        (
            {"update_pct": 20, "append_pct": 25, "scan_pct": 50, "range_pct": 10},
            {"read": 27, "update": 20, "scan": 30, "append": 20, "range": 3},
        ),
        ({"update_pct": 100, "append_pct": 50}, {"read": 0, "update": 100, "scan": 0, "append": 0}),
        ({"update_pct": 10, "append_pct": 100}, {"read": 0, "update": 10, "scan": 0, "append": 90}),
    ],
)
def test_exact_counts_over_100_and_1000_operations(
    params: dict[str, int], per_100: dict[str, int]
) -> None:
    workload = build(**params)
    for ops in (100, 1000):
        names = [name for name, _, _ in dealt(workload, ops)]
        want = {k: v * ops // 100 for k, v in per_100.items()}
        assert {**dict.fromkeys(want, 0), **counted(names)} == want
        assert workload.expected_mix([(0, ops)]) == want
        shares = workload.operations()
        assert set(shares) == set(want)
        assert all(shares[k] == pytest.approx(100 * v / ops) for k, v in want.items())


@pytest.mark.parametrize(
    ("u", "a", "sc", "rp"),
    [
        (10, 0, 0, 0),
        (10, 7, 0, 0),
        (0, 33, 20, 0),
        (30, 13, 50, 47),
        (50, 1, 100, 0),
        (7, 99, 3, 5),
    ],
)
def test_the_session_deals_the_documented_order_and_expected_mix_counts_any_window(
    u: int, a: int, sc: int, rp: int
) -> None:
    workload = build(update_pct=u, append_pct=a, scan_pct=sc, range_pct=rp)
    names = [name for name, _, _ in dealt(workload, 1234)]
    assert names == by_the_rules(u, a, sc, rp, 1234)
    # A run counts the operations from each session's first measured one (after a warm-up)
    # to its last: any window of the sequence, several sessions summed.
    windows = [(0, 1234), (17, 1234), (250, 903), (999, 1000)]
    counts = counted([n for first, end in windows for n in names[first:end]])
    expected = workload.expected_mix(windows)
    assert {k: v for k, v in expected.items() if v} == counts
    assert ("append" in expected) == (a > 0) and ("range" in expected) == (rp > 0)


def test_append_pct_0_deals_exactly_what_slob_dealt() -> None:
    """With append_pct 0 nothing changes: the same operations, statements and values as a
    workload built before appends existed would deal (its mix reported without "append")."""
    slob = build(update_pct=20, scan_pct=10, range_pct=47)
    # The shares as SLOB's own arithmetic made them, to the last bit of the float.
    reads = 100.0 - 20
    scans = reads * 10 / 100
    ranges = (reads - scans) * 47 / 100
    shares = {"read": reads - scans - ranges, "update": 20.0, "scan": scans, "range": ranges}
    assert slob.operations() == shares
    assert slob.expected_mix([(0, 1000)]) == {"read": 382, "update": 200, "scan": 80, "range": 338}
    names = [name for name, _, _ in dealt(slob, 1000)]
    assert names == by_the_rules(20, 0, 10, 47, 1000)
    assert mix_shares(10, 0, 0, 0) == {"read": 90.0, "update": 10.0, "scan": 0.0}
    assert mix_counts(10, 0, 0, 0, [(0, 100)]) == {"read": 90, "update": 10, "scan": 0}
    assert [t.role for t in slob.planned_tables()] == ["cf1", "cf2"]
    assert slob.read_operations() == frozenset({"read", "scan", "range"})


def test_appends_are_writes_not_reads_and_add_no_data() -> None:
    without, with_appends = build(update_pct=10), build(update_pct=10, append_pct=40)
    assert with_appends.read_operations() == without.read_operations()
    assert with_appends.data_bytes() == without.data_bytes()  # cf3 starts empty
    assert {"update", "append"} <= SlobSession.WRITES


# ------------------------------------------------------------------ what an append sends


def test_an_append_is_one_row_of_cf1s_shape_with_a_key_unique_to_session_and_loop() -> None:
    workload = build(update_pct=50, append_pct=100, schemas=2, threads_per_schema=2)
    keys, values = set(), set()
    for index in range(4):
        schema = index // 2 + 1
        for name, statement, args in dealt(workload, 200, index):
            if name != "append":
                continue
            assert statement.name == "append" and f"slob_{schema}_cf3" in statement.sql
            row = dict(zip(statement.param_names, args, strict=True))
            assert set(row) == {"k", "v"}  # PostgreSQL pads nothing: fillfactor does it
            keys.add(row["k"])
            values.add(row["v"])
            assert len(row["v"]) == 128
    assert len(keys) == len(values) == 4 * 100  # 100 appends per session, none shared
    assert all(0 < key < 2**63 for key in keys)


@pytest.mark.parametrize("block", [4096, 8192, 16384])
def test_sqlite_appends_carry_the_loaders_padding(block: int) -> None:
    target = SqliteTarget(SqliteSettings(page_size_bytes=block))
    workload = build(target, block_size_bytes=block, update_pct=0, append_pct=100)
    [(name, statement, args)] = dealt(workload, 1)
    row = dict(zip(statement.param_names, args, strict=False))
    assert name == "append" and statement.param_names[-1] == "pad"
    assert row["pad"] == "p" * page_fit("sqlite", block).pad_chars
    # The column is there even where one row fills its page alone (no padding needed).
    [cf3] = [t for t in workload.planned_tables() if t.role == "cf3"]
    assert "pad" in workload.table(cf3).c
    assert (row["pad"] == "") == (block == 4096)


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite", "oracle", "sqlserver"])
def test_every_dialect_file_names_append_with_cf1s_columns(dialect: str) -> None:
    text = (SQL_DIR / f"{dialect}.sql").read_text(encoding="utf-8")
    assert "-- name: append\n" in text
    from sim.sql import Catalogue

    catalogue = Catalogue.load(SQL_DIR, dialect, SlobWorkload.required_statements)
    sql = catalogue.text("append")
    assert sql.startswith("INSERT INTO {append_table}")
    assert all(column in sql for column in ("custid", *TEXT_COLUMNS))
    assert ("pad" in sql) == (page_fit(dialect, 8192).pad_column is not None)


# ------------------------------------------------------------------ a dialect without it


class _Elsewhere(SlobWorkload):
    sql_dir: ClassVar[Path]


def _statements_without_append(tmp_path: Path, body: str | None) -> type[SlobWorkload]:
    """SLOB's statements with ``append`` replaced by ``body`` (None: left out altogether)."""
    shutil.copytree(SQL_DIR, tmp_path / "sql")
    for path in (tmp_path / "sql").glob("*.sql"):
        text = path.read_text(encoding="utf-8")
        head, _, _ = text.partition("-- name: append\n")
        if body is not None and path.name == "default.sql":
            head += f"-- name: append\n{body}\n"
        path.write_text(head, encoding="utf-8")

    class Without(_Elsewhere):
        sql_dir = tmp_path / "sql"

    return Without


def test_a_dialect_that_cannot_append_refuses_append_pct_in_one_line(tmp_path: Path) -> None:
    without = _statements_without_append(tmp_path, "!unsupported")
    assert without(SlobParameters(scale=20000), sqlite()).p.append_pct == 0  # unused: fine
    with pytest.raises(ConfigError) as refused:
        without(SlobParameters(scale=20000, append_pct=5), sqlite())
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("workload.parameters.append_pct: 5, but sqlite has no append")


def test_a_statement_file_without_append_fails_when_built(tmp_path: Path) -> None:
    without = _statements_without_append(tmp_path, None)
    with pytest.raises(WorkloadError, match="no sqlite statement for append"):
        without(SlobParameters(scale=20000), sqlite())


# ------------------------------------------------------------------ the parameter


@pytest.mark.parametrize("bad", [-1, 101, 1000, 12.5, "lots", None])
def test_append_pct_outside_0_to_100_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        SlobParameters(append_pct=bad)
    assert [e["loc"] for e in refused.value.errors()] == [("append_pct",)]


@pytest.mark.parametrize("good", [0, 1, 50, 51, 99, 100])
def test_append_pct_takes_any_share(good: int) -> None:
    """Not SLOB's 0-50-or-100 rule: an append is no update (it reads nothing), and the
    replay needs every share between."""
    assert SlobParameters(append_pct=good).append_pct == good


# ------------------------------------------------------------------ cf3 among the tables


def test_cf3_is_planned_empty_once_per_schema_and_kept_across_runs() -> None:
    workload = build(append_pct=10, scan_pct=10, schemas=2)
    planned = workload.planned_tables()
    assert [(t.name, t.role, t.rows) for t in planned] == [
        ("slob_1_cf1", "cf1", 20000),
        ("slob_1_cf2", "cf2", 1024 * 1024 // 8192),
        ("slob_1_cf3", "cf3", 0),
        ("slob_2_cf1", "cf1", 20000),
        ("slob_2_cf2", "cf2", 1024 * 1024 // 8192),
        ("slob_2_cf3", "cf3", 0),
    ]
    cf3 = planned[2]
    # No row count or seed: what the runs appended stays while the configuration says so.
    assert dict(cf3.fingerprint) == {"role": "cf3", "block_size_bytes": 8192, "tablespace": None}
    other = build(append_pct=90, scan_pct=0, schemas=2, scale=40000, load_seed=7)
    assert [t.fingerprint for t in other.planned_tables() if t.role == "cf3"] == [
        cf3.fingerprint,
        planned[5].fingerprint,
    ]
    assert [t.name for t in workload.tables_to_verify()] == [
        "slob_1_cf1",
        "slob_1_cf3",
        "slob_2_cf1",
        "slob_2_cf3",
    ]
    table = workload.table(cf3)
    assert not table.indexes
    assert list(workload.row_batches(cf3, table, workload.render("read", table="x"))) == []
    assert workload.owned_names().fullmatch("slob_12_cf3")
    assert not workload.owned_names().fullmatch("slob_1_cf4")
    assert SlobParameters(table_prefix="abc", schemas=30).sql_identifiers() == {
        "table_prefix": ["abc_30_cf1", "abc_30_cf2", "abc_30_cf3", "abc_30_cf1_custid"]
    }


def test_oracle_creates_cf3_with_pctfree_and_without_the_after_load_limit() -> None:
    """MINIMIZE RECORDS_PER_BLOCK derives its limit from the rows a table holds: cf3 has
    none when it is created, so only PCTFREE 99 (which holds for inserts) keeps its rows
    apart; cf1 keeps both."""
    from storage.targets.oracle import OracleTarget
    from storage.targets.settings import OracleSettings

    workload = build(OracleTarget(OracleSettings(password_env="X")), append_pct=10)
    cf1, cf3 = (workload.table(t) for t in workload.planned_tables())
    create, *after = workload.ddl(cf3)
    assert "PCTFREE 99" in create.sql and after == []
    assert any("MINIMIZE RECORDS_PER_BLOCK" in s.sql for s in workload.ddl(cf1))
