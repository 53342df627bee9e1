"""SSB-like on a real SQLite file: one row per 8 KB page, idempotent load, ownership, drop,
pinned sessions, the exact ten-operation mix and committed updates."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import OwnershipError
from storage.targets.settings import SqliteSettings
from storage.targets.sqlite import SqliteTarget
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.workload import SsbWorkload

pytestmark = pytest.mark.integration
SIZE = "4M"  # 512 pages: 256 rows in each of two tables
ROWS = 256
UPDATED = re.compile(r"^(\d{5})(\d{12})[A-Za-z0-9]{353}$")  # session, counter, random tail


def workload(path: Path, **params: Any) -> tuple[SsbWorkload, SqliteTarget]:
    target = SqliteTarget(SqliteSettings(path=path))
    parameters = SsbParameters(**{"database_size": SIZE, "tables": 2, **params})
    return SsbWorkload(parameters, target), target


def tables_in(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def c1_by_key(db: Path, table: str) -> dict[int, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute(f"SELECT custid, c1 FROM {table}").fetchall())


def run(ssb: SsbWorkload, target: SqliteTarget, **load: Any) -> dict[str, int]:
    engine = Engine(ssb, target, Load(**load))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    assert ssb.expected_mix(engine.result.op_ranges) == {
        "read": counts.get("read", 0),
        "update": counts.get("update", 0),
    }
    return counts


def test_load_gives_one_row_per_8k_page_in_key_order(tmp_path: Path) -> None:
    db = tmp_path / "ssb.sqlite"
    report = load_and_verify(*workload(db))
    assert report["verify"]["tables"] == [
        {
            "table": f"user_{n}",
            "rows": ROWS,
            "max_key": ROWS,
            "unique_index": True,
            "block_size": 8192,
            "blocks": ROWS,
            "max_rows_per_block": 1,
        }
        for n in (1, 2)
    ]
    with sqlite3.connect(db) as conn:
        # Keys in key order: rowid order is custid order, so a key range is neighbouring pages.
        keys = [k for (k,) in conn.execute("SELECT custid FROM user_1 ORDER BY rowid")]
        assert keys == list(range(1, ROWS + 1))
        # SQLite keeps a row of up to ~8 KB on its 8 KB leaf page: no overflow pages at all.
        overflow = conn.execute(
            "SELECT COUNT(*) FROM dbstat WHERE name = 'user_1' AND pagetype = 'overflow'"
        ).fetchone()[0]
        assert overflow == 0
        row = conn.execute("SELECT * FROM user_1 WHERE custid = 7").fetchone()
        assert len(row) == 21 and all(len(v) == 370 and v.isalnum() for v in row[1:])
        assert len(set(row[1:])) == 20  # random text, not one value repeated
        index = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'user_1_custid'"
        ).fetchone()[0]
        assert index.upper().startswith("CREATE UNIQUE INDEX")


def test_second_load_reuses_the_data_and_a_new_size_rebuilds(tmp_path: Path) -> None:
    db = tmp_path / "ssb.sqlite"
    assert load_and_verify(*workload(db))["load"]["built"] is True
    before = c1_by_key(db, "user_1")
    again = load_and_verify(*workload(db))["load"]
    assert again["built"] is False and c1_by_key(db, "user_1") == before
    rebuilt = load_and_verify(*workload(db, database_size="6M"))
    assert rebuilt["load"]["tables"][0] == {"table": "user_1", "rows": 384, "built": True}
    assert rebuilt["verify"]["tables"][1]["rows"] == 384


def test_a_foreign_table_of_the_same_name_is_never_touched(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE user_2 (precious TEXT)")
        conn.execute("INSERT INTO user_2 VALUES ('keep me')")
    with pytest.raises(OwnershipError, match="user_2 exists but was not created by dbsim"):
        load_and_verify(*workload(db))
    # Refused before loading anything: user_1 was not built either.
    assert "user_1" not in tables_in(db)
    assert drop_objects(*workload(db)) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT precious FROM user_2").fetchall() == [("keep me",)]


def test_drop_removes_only_what_this_workload_and_prefix_created(tmp_path: Path) -> None:
    db = tmp_path / "mixed.sqlite"
    load_and_verify(*workload(db))
    load_and_verify(*workload(db, table_prefix="user_big", tables=1))
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE user_9 (mine TEXT)")  # the user's, despite the prefix
    assert drop_objects(*workload(db)) == ["user_1", "user_2"]
    assert {"user_9", "user_big_1"} <= tables_in(db)
    assert not {"user_1", "user_2"} & tables_in(db)
    assert drop_objects(*workload(db, table_prefix="user_big")) == ["user_big_1"]
    assert drop_objects(*workload(db)) == []


def test_more_sessions_than_tables_pinned_round_robin_with_the_exact_mix(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    ssb, target = workload(db, read_pct=70, rows_select=20)
    load_and_verify(ssb, target)
    before = {t: c1_by_key(db, t) for t in ("user_1", "user_2")}
    counts = run(ssb, target, loops_per_session=40, sessions=5, seed=3)
    # Whole cycles: exactly 7 reads and 3 updates in every ten operations of each session.
    assert counts == {"read": 5 * 28, "update": 5 * 12}
    for table, pinned in (("user_1", {0, 2, 4}), ("user_2", {1, 3})):
        after = c1_by_key(db, table)  # a separate connection: the updates were committed
        changed = {k: v for k, v in after.items() if v != before[table][k]}
        assert changed, f"no committed update in {table}"
        matches = [UPDATED.match(v) for v in changed.values()]
        assert all(matches), "an updated c1 is not a fresh 370-character value"
        writers = {int(m.group(1)) for m in matches if m}
        assert writers == pinned, f"{table} was written by sessions {writers}"


def test_a_warm_up_leaves_odd_ranges_that_expected_mix_still_counts_exactly(
    tmp_path: Path,
) -> None:
    db = tmp_path / "warm.sqlite"
    ssb, target = workload(db, read_pct=80, rows_update=3)
    counts = run(ssb, target, loops_per_session=37, sessions=3, warmup_s=0.2, seed=5)
    assert counts["read"] + counts["update"] == 3 * 37


def test_point_lookups_when_rows_select_is_zero(tmp_path: Path) -> None:
    db = tmp_path / "point.sqlite"
    ssb, target = workload(db, read_pct=100, rows_select=0, tables=1, database_size="1M")
    load_and_verify(ssb, target)
    before = c1_by_key(db, "user_1")
    counts = run(ssb, target, loops_per_session=50, sessions=2, seed=1)
    assert counts == {"read": 100}
    assert c1_by_key(db, "user_1") == before  # 100 % reads write nothing
