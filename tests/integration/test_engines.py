"""The contract every SQL engine keeps, through the CLI, on each engine in turn (issue #28).

Parametrised by ``sql_engine`` (tests/support/engines.py): SQLite, PostgreSQL and MariaDB
here; Oracle Database Free and SQL Server 2022 wherever they are configured (``make
test-servers``), and otherwise skipped with one loud line each. On every engine:

* ``dbsim validate --connect`` makes a round trip and exits 0;
* SLOB-like: ``dbsim load`` builds and verifies the table (every key, the engine's rows per
  block), ``dbsim run --skip-load`` runs 200 transactions per session, exactly the mix asked
  and not one failed operation, and ``dbsim drop`` leaves no table of the prefix;
* SSB-like: ``dbsim load`` builds both tables, ``dbsim drop`` removes both;
* ownership: a table of the same name that dbsim did not create makes ``dbsim load`` exit 2
  with one error line, and neither that nor ``dbsim drop`` touches its row.

Each test loads under a random table prefix of its own and drops it in a ``finally``.

``dbsim validate --connect`` runs as the real binary (``python -m sim.cli``) on every engine: a
fresh process imports the engine's driver, connects and reports what ``main`` returns. The other
commands run through ``sim.cli.entry.main`` in the test process (``in_process``, the
child's directory, environment and logging): their subject is what the command does to the engine, not
the process boundary, and each child would cost ~0.8 CPU-s of start-up alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import (
    CliResult,
    Dbsim,
    InProcessDbsim,
    child_tmp,
    clean_environment,
    dbsim,
    out_dir,
    read_summary,
    single_bundle,
    work_dir,
)
from tests.support.engines import SqlEngine, sql_engine

pytestmark = pytest.mark.integration
# Fixtures used by this module's tests: the engines, and the CLI runner of the e2e tests.
__all__ = ["child_tmp", "dbsim", "out_dir", "sql_engine", "work_dir"]

SLOB_ROWS = 10_000  # SLOB-like's smallest scale
LOOPS = 200  # SLOB-like transactions per session of the run
SSB_SIZE = "1600K"  # 200 pages: 100 rows in each of two tables
EXIT_OK, EXIT_BAD_INPUT = 0, 2


@pytest.fixture
def in_process(work_dir: Path, child_tmp: Path) -> InProcessDbsim:
    """``dbsim`` through ``sim.cli.entry.main`` in this process, with the child's directories,
    environment and logging (a warning the command logs is on its stderr, as a child's is)."""
    return InProcessDbsim(work_dir, clean_environment(child_tmp), child_logging=True)


@pytest.fixture
def prefix() -> str:
    return f"en{uuid.uuid4().hex[:8]}"


def scenario(
    dbsim: Dbsim, engine: SqlEngine, name: str, parameters: dict[str, Any], **load: Any
) -> Path:
    data = {
        "name": f"{engine.name}-{name}",
        "target": engine.target,
        "workload": {"name": name, "parameters": parameters},
        "load": load or {"loops_per_session": 5},
    }
    path = dbsim.cwd / f"{engine.name}-{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def ok(result: CliResult) -> CliResult:
    assert result.rc == EXIT_OK, result.describe()
    return result


@pytest.fixture
def dropped_after(in_process: InProcessDbsim, sql_engine: SqlEngine) -> Iterator[list[Path]]:
    """Scenarios whose objects are dropped at the end, whatever the test did."""
    paths: list[Path] = []
    yield paths
    for path in paths:
        in_process("drop", path, env=sql_engine.env)


def test_validate_connect_makes_a_round_trip(dbsim: Dbsim, sql_engine: SqlEngine) -> None:
    path = scenario(dbsim, sql_engine, "slob", {"scale": SLOB_ROWS})
    result = ok(dbsim("validate", path, "--connect", env=sql_engine.env))
    assert "SELECT 1 answered" in result.stderr, result.describe()
    assert "✗" not in result.stderr, result.describe()  # every privilege dbsim needs is held


def test_slob_load_verify_run_and_drop(
    in_process: InProcessDbsim,
    sql_engine: SqlEngine,
    prefix: str,
    out_dir: Path,
    dropped_after: list[Path],
) -> None:
    engine, env = sql_engine, sql_engine.env
    parameters = {"scale": SLOB_ROWS, "table_prefix": prefix, "update_pct": 20}
    # A count of transactions, not a duration: what is checked is the mix and the errors
    # (3 s unpaced cost ~0.5-1 CPU-s per engine in this process and proved only "> 0").
    load = {"sessions": 2, "warmup_s": 0, "loops_per_session": LOOPS}
    path = scenario(in_process, engine, "slob", parameters, **load)
    dropped_after.append(path)
    table = f"{prefix}_1_cf1"

    report = json.loads(ok(in_process("load", path, "--json", env=env)).stdout)
    [verified] = report["verify"]["tables"]
    assert verified["table"].lower() == table, verified
    assert verified["rows"] == SLOB_ROWS and verified["max_key"] == SLOB_ROWS, verified
    assert verified["max_rows_per_block"] == engine.rows_per_block, verified
    assert engine.tables(prefix) == {table}

    ok(in_process("run", "--skip-load", path, "-o", out_dir, "--quiet", env=env))
    summary = read_summary(single_bundle(out_dir))
    assert summary["state"] == "finished", summary["state"]
    assert summary["workload"]["load"]["skipped"] is True
    operations = summary["operations"]
    # update_pct 20 of each session's 200 loops: 40 updates, the other 160 reads, exactly.
    counts = {op: stats["count"] for op, stats in operations.items()}
    assert counts == {"read": 2 * LOOPS * 8 // 10, "update": 2 * LOOPS * 2 // 10}, operations
    assert {op: stats["errors"] for op, stats in operations.items()} == dict.fromkeys(
        operations, 0
    ), operations

    ok(in_process("drop", path, env=env))
    assert engine.tables(prefix) == set()


def test_ssb_load_and_drop(
    in_process: InProcessDbsim, sql_engine: SqlEngine, prefix: str, dropped_after: list[Path]
) -> None:
    parameters = {"database_size": SSB_SIZE, "tables": 2, "table_prefix": prefix}
    path = scenario(in_process, sql_engine, "ssb", parameters)
    dropped_after.append(path)
    report = json.loads(ok(in_process("load", path, "--json", env=sql_engine.env)).stdout)
    tables = report["verify"]["tables"]
    verified = {t["table"].lower(): t["rows"] for t in tables}
    assert verified == {f"{prefix}_1": 100, f"{prefix}_2": 100}, report["verify"]
    assert all(t["unique_index"] for t in tables), tables
    assert {t["max_rows_per_block"] for t in tables} == {sql_engine.rows_per_block}, tables
    assert sql_engine.tables(prefix) == set(verified)
    ok(in_process("drop", path, env=sql_engine.env))
    assert sql_engine.tables(prefix) == set()


def test_a_foreign_table_of_the_same_name_is_refused_and_left_alone(
    in_process: InProcessDbsim, sql_engine: SqlEngine, prefix: str, dropped_after: list[Path]
) -> None:
    engine, env = sql_engine, sql_engine.env
    table = f"{prefix}_1_cf1"
    path = scenario(in_process, engine, "slob", {"scale": SLOB_ROWS, "table_prefix": prefix})
    engine.sql(f"CREATE TABLE {table} (precious VARCHAR(20))")
    try:
        engine.sql(f"INSERT INTO {table} VALUES ('keep me')")
        dropped_after.append(path)
        refused = in_process("load", path, env=env)
        assert refused.rc == EXIT_BAD_INPUT, refused.describe()
        errors = [line for line in refused.stderr_lines if line.startswith("error: ")]
        assert len(errors) == 1, refused.describe()
        assert "exists but was not created by dbsim" in errors[0], errors[0]
        assert table in errors[0].lower(), errors[0]
        assert "Traceback" not in refused.stdout + refused.stderr, refused.describe()
        ok(in_process("drop", path, env=env))
        assert engine.sql(f"SELECT precious FROM {table}") == [("keep me",)]
        assert engine.tables(prefix) == {table}
    finally:
        engine.sql(f"DROP TABLE {table}")
