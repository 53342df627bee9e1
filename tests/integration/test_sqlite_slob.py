"""SLOB-like on a real SQLite file: one row per page, idempotent load, ownership, drop.

The runs that check only counts (the mix, the stages) share one file loaded once (``mixed``:
its load is ~0.6 CPU-s); the runs whose check reads the rows they wrote load their own."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from pathlib import Path

import pytest

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import OwnershipError
from storage.targets.settings import SqliteSettings
from storage.targets.sqlite import SqliteTarget
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration
ROWS = 10_000


def workload(path: Path, **params: object) -> tuple[SlobWorkload, SqliteTarget]:
    target = SqliteTarget(SqliteSettings(path=path))
    return SlobWorkload(SlobParameters(**{"scale": ROWS, **params}), target), target


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cf1 and cf2 loaded once (scan_pct > 0 builds cf2) for the runs that count their
    transactions: each run's own load finds them and reuses them (``built`` False), as a
    second run does, and the rows earlier runs updated change no count."""
    db = tmp_path_factory.mktemp("slob-mix") / "mix.sqlite"
    load_and_verify(*workload(db, scan_pct=20))
    return db


def test_load_gives_one_row_per_page_and_a_scattered_key_order(tmp_path: Path) -> None:
    db = tmp_path / "slob.sqlite"
    report = load_and_verify(*workload(db))
    table = report["verify"]["tables"][0]
    assert table == {
        "table": "slob_1_cf1",
        "rows": ROWS,
        "max_key": ROWS,
        "blocks": ROWS,
        "max_rows_per_block": 1,
    }
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
        # Physical order is a permutation: neighbouring keys are far apart in rowid order.
        keys = [
            k for (k,) in conn.execute("SELECT custid FROM slob_1_cf1 ORDER BY rowid LIMIT 1000")
        ]
        assert sorted(keys) != keys
        adjacent = sum(1 for a, b in itertools.pairwise(keys) if abs(a - b) == 1)
        assert adjacent < 10
        index = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'slob_1_cf1_custid'"
        ).fetchone()[0]
        assert "UNIQUE" not in index.upper()


def test_second_load_reuses_the_data(tmp_path: Path) -> None:
    db = tmp_path / "slob.sqlite"
    assert load_and_verify(*workload(db))["load"]["tables"][0]["built"] is True
    assert load_and_verify(*workload(db))["load"]["tables"][0]["built"] is False
    # A different size is ours to rebuild.
    rebuilt = load_and_verify(*workload(db, scale="100M"))
    assert rebuilt["load"]["tables"][0] == {"table": "slob_1_cf1", "rows": 12800, "built": True}


def test_a_foreign_table_of_the_same_name_is_never_touched(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE slob_1_cf1 (precious TEXT)")
        conn.execute("INSERT INTO slob_1_cf1 VALUES ('keep me')")
    with pytest.raises(OwnershipError, match="slob_1_cf1 exists but was not created by dbsim"):
        load_and_verify(*workload(db))
    assert drop_objects(*workload(db)) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT precious FROM slob_1_cf1").fetchall() == [("keep me",)]


def test_drop_removes_only_what_dbsim_created(tmp_path: Path) -> None:
    db = tmp_path / "mixed.sqlite"
    load_and_verify(*workload(db, scan_pct=10))
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE slob_9_cf1 (mine TEXT)")  # the user's, despite the prefix
    assert drop_objects(*workload(db)) == ["slob_1_cf1", "slob_1_cf2"]
    with sqlite3.connect(db) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "slob_9_cf1" in names and "slob_1_cf1" not in names and "slob_1_cf2" not in names


@pytest.mark.parametrize(
    ("update_pct", "scan_pct", "redo"), [(10, 0, "LITE"), (30, 20, "HEAVY"), (100, 0, "LITE")]
)
def test_run_mix_follows_the_rule_exactly(
    mixed: Path, update_pct: int, scan_pct: int, redo: str
) -> None:
    slob, target = workload(
        mixed, update_pct=update_pct, scan_pct=scan_pct, redo_stress=redo, threads_per_schema=3
    )
    engine = Engine(slob, target, Load(loops_per_session=200, warmup_s=0.3))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    totals = engine.recorder.totals
    counts = {name: stats.count for name, stats in totals.items()}
    assert sum(s.error_count for s in totals.values()) == 0
    assert counts.get("update", 0) == 3 * 2 * update_pct  # 3 sessions × 200 loops
    assert slob.expected_mix(engine.result.op_ranges) == {
        "read": counts.get("read", 0),
        "update": counts.get("update", 0),
        "scan": counts.get("scan", 0),
    }


def test_mix_stays_exact_across_warmup_and_steps(mixed: Path) -> None:
    """Stage boundaries close an interval and enter the next stage atomically, so every
    completed transaction is counted in the phase whose rule it was issued under."""
    from sim.core.metrics import Interval

    slob, target = workload(mixed, update_pct=20)
    # Short stages with a shorter interval: intervals still close both on their clock
    # inside a stage and at each stage boundary, as with 1 s intervals and 1.2 s steps
    # (0.7 s of warmup and 2.4 s of unpaced sessions cost ~1.3 CPU-s; the check is counts).
    steps = [{"duration_s": 0.5, "sessions": 1}, {"duration_s": 0.5, "sessions": 3}]
    engine = Engine(slob, target, Load(warmup_s=0.3, steps=steps), interval_s=0.2)
    intervals: list[Interval] = []
    engine.events.interval.add_listener(lambda interval, samples: intervals.append(interval))
    asyncio.run(engine.run())
    counts = {name: stats.count for name, stats in engine.recorder.totals.items()}
    expected = slob.expected_mix(engine.result.op_ranges)
    assert {k: v for k, v in expected.items() if v} == counts
    indices = [i.index for i in intervals]
    assert indices == list(range(len(intervals)))
    assert [s["phase"] for s in engine.result.stage_log] == ["warmup", "measure", "measure"]


def test_updates_write_session_and_loop_specific_values(tmp_path: Path) -> None:
    db = tmp_path / "upd.sqlite"
    slob, target = workload(db, update_pct=100, redo_stress="HEAVY")
    engine = Engine(slob, target, Load(loops_per_session=20, sessions=2))
    asyncio.run(engine.run())
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT c2, c3, c20 FROM slob_1_cf1 WHERE c2 LIKE '0000%'").fetchall()
    assert rows, "no row carries an update value"
    assert all(len(c2) == 128 and c2 == c3 == c20 for c2, c3, c20 in rows)
    assert len({c2[:20] for c2, _, _ in rows}) > 20  # values differ per session and loop


def test_appends_fill_cf3_one_row_per_page_kept_across_loads_and_dropped(tmp_path: Path) -> None:
    """append_pct (not SLOB's): each append is one new row of cf1's shape in cf3, alone on its
    page; cf3 is created empty by the load, kept with its rows by the next, and dropped with
    the others."""
    db = tmp_path / "append.sqlite"
    params = {"update_pct": 10, "append_pct": 25, "scan_pct": 20, "threads_per_schema": 3}
    report = load_and_verify(*workload(db, **params))
    built = {t["table"]: t for t in report["load"]["tables"]}
    assert built["slob_1_cf3"] == {"table": "slob_1_cf3", "rows": 0, "built": True}
    slob, target = workload(db, **params)
    engine = Engine(slob, target, Load(loops_per_session=200))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    # Per session of 200: 20 updates, 45 appends (25 % of the other 180), 27 scans (20 % of
    # the 135 reads left), 108 reads.
    assert counts == {"update": 60, "append": 135, "scan": 81, "read": 324}
    assert slob.expected_mix(engine.result.op_ranges) == counts
    with sqlite3.connect(db) as conn:
        rows, keys = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT custid) FROM slob_1_cf3"
        ).fetchone()
        assert rows == keys == 135  # one row per append, no key shared by two sessions or loops
        leaves, most = conn.execute(
            "SELECT COUNT(*), MAX(ncell) FROM dbstat WHERE name = 'slob_1_cf3' "
            "AND pagetype = 'leaf'"
        ).fetchone()
        assert (leaves, most) == (135, 1)
        [(c2, c20, pad)] = conn.execute(
            "SELECT c2, c20, pad FROM slob_1_cf3 ORDER BY rowid LIMIT 1"
        ).fetchall()
        assert len(c2) == 128 and c20 == c2 and len(pad) > 0
    again = load_and_verify(*workload(db, **params))
    kept = {t["table"]: t for t in again["load"]["tables"]}
    assert kept["slob_1_cf3"]["built"] is False  # never reloaded: it holds the runs' rows
    verified = {t["table"]: t for t in again["verify"]["tables"]}
    assert verified["slob_1_cf3"] == {"table": "slob_1_cf3", "blocks": 135, "max_rows_per_block": 1}
    assert drop_objects(*workload(db)) == ["slob_1_cf1", "slob_1_cf2", "slob_1_cf3"]
    with sqlite3.connect(db) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not names & {"slob_1_cf1", "slob_1_cf2", "slob_1_cf3"}


def test_row_updates_change_one_row_each_beside_slobs_updates(tmp_path: Path) -> None:
    """row_update_pct (not SLOB's) on SQLite: of the operations that are not updates, the
    share asked update c2 and c20 of one random key each, nothing else of the row."""
    db = tmp_path / "rows.sqlite"
    params = {"update_pct": 10, "row_update_pct": 50, "append_pct": 20}
    load_and_verify(*workload(db, **params))
    slob, target = workload(db, **params)
    engine = Engine(slob, target, Load(loops_per_session=100, sessions=2))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    # Per session of 100: 10 updates, 45 row updates (50 % of the other 90), 9 appends (20 %
    # of the 45 left), 36 reads.
    assert counts == {"update": 20, "row_update": 90, "append": 18, "read": 72}
    assert slob.expected_mix(engine.result.op_ranges) == {**counts, "scan": 0}
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT c2, c3, c20 FROM slob_1_cf1 WHERE c2 GLOB '[0-9][0-9][0-9][0-9][0-9][0-9].*'"
        ).fetchall()
    # 20 SLOB updates of 63 rows and 90 row updates: every row update's value is in one row.
    singles = {c2 for c2, _, _ in rows if sum(1 for r in rows if r[0] == c2) == 1}
    # A later update of the same key hides an earlier one (a SLOB update covers 1,260 of the
    # 10,000 rows: ~6 of the 90 expected hidden).
    assert 70 <= len(singles) <= 90
    assert all(c20 == c2 and not c3[:6].isdigit() for c2, c3, c20 in rows)
