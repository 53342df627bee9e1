"""``dbsim run --skip-load``, ``dbsim load`` and ``dbsim drop`` as a user runs them (issues #13,
#20): missing data and foreign objects are bad input, exit 2 with one ``error:`` line, before
any session starts and without leaving a bundle behind; the victim's data is unchanged. Loads,
runs and the first refusal of each test go through the real binary; the later refusals run
the same command through ``sim.cli.entry.main`` in the test process."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import (
    CliResult,
    Dbsim,
    InProcessDbsim,
    bundle_dirs,
    read_summary,
    single_bundle,
)

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def scenario(dbsim: Dbsim, db: Path) -> Path:
    data = {
        "name": "skip",
        "target": {"kind": "sqlite", "path": str(db)},
        "workload": {
            "name": "ssb",
            "parameters": {"tables": 2, "database_size": "1600K", "read_pct": 0},
        },
        "load": {"loops_per_session": 10},
    }
    path = dbsim.cwd / "skip.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def refused(result: CliResult) -> str:
    """Exit 2, exactly one ``error: …`` line (a run's console also says which state it
    reached: ``dbsim checking ssb``), nothing on stdout, no traceback."""
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    lines = [line for line in result.stderr_lines if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    assert all(line.startswith("dbsim ") for line in lines if line not in errors), result.describe()
    assert result.stdout == "", result.describe()
    return errors[0]


def checksum(db: Path, table: str) -> str:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_skip_load_without_data_exits_2_naming_the_tables_and_dbsim_load(
    dbsim: Dbsim, out_dir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "empty.sqlite"
    line = refused(dbsim("run", "--skip-load", scenario(dbsim, db), "-o", out_dir))
    assert "missing user_1, user_2" in line and "`dbsim load`" in line, line
    assert bundle_dirs(out_dir) == []  # nothing ran: no bundle left behind


def test_load_then_skip_load_runs_and_a_recreated_table_is_refused_everywhere(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, out_dir: Path, tmp_path: Path
) -> None:
    db = tmp_path / "shared.sqlite"
    path = scenario(dbsim, db)
    loaded = dbsim("load", path)
    assert loaded.rc == EXIT_OK, loaded.describe()
    ran = dbsim("run", "--skip-load", path, "-o", out_dir, "--quiet")
    assert ran.rc == EXIT_OK, ran.describe()
    summary = read_summary(single_bundle(out_dir))
    assert summary["workload"]["load"]["skipped"] is True
    assert summary["operations"]["update"]["count"] == 20  # 2 sessions × 10 loops, no reads

    # Someone drops dbsim's user_1 and makes their own under the same name.
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE user_1")
        conn.execute("CREATE TABLE user_1 (custid INTEGER, c1 TEXT)")
        conn.executemany("INSERT INTO user_1 VALUES (?, ?)", [(k, "precious") for k in range(200)])
    before = checksum(db, "user_1")
    # drop through the real binary; load and run the same way in this process (InProcessDbsim).
    commands = (("drop", path), ("load", path), ("run", "--skip-load", path, "-o", out_dir))
    for n, args in enumerate(commands):
        line = refused((dbsim if n == 0 else dbsim_in_process)(*args))
        assert "user_1 is not the table dbsim created" in line, line
        assert checksum(db, "user_1") == before
    assert len(bundle_dirs(out_dir)) == 1  # the refused run left no second bundle
