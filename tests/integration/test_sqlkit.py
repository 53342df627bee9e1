"""The SQL-workload kit (workloads.sqlkit), live on SQLite and PostgreSQL.

* The key-value workload of docs/architecture.md, "Adding a workload", exactly as the page
  shows it (its blocks are written to files and imported): loaded, loaded again (kept),
  run with ``--skip-load`` through the engine, verified, dropped; on PostgreSQL once per
  session runner, the native libpq loop and asyncpg (tests/support/session_runners.py).
* The one ownership order, for every SQL workload: a foreign table under any planned name is
  refused before anything is written — no registry, no first table, the victim unchanged.
  Before the kit, SLOB created ``dbsim_registry`` before it looked.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from sim.errors import OwnershipError
from sim.protocols import Target, Workload
from tests.integration.test_sql_ownership import Db, PostgresDb, SqliteDb
from tests.support.postgres import postgres_problem
from tests.support.session_runners import AskedRunner
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.workload import SsbWorkload

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
_BLOCK = re.compile(r"^```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def walkthrough_files() -> dict[str, str]:
    """The blocks of "Adding a workload" that name their file on their first line."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Adding a workload\n", 1)[1].split("\n## ", 1)[0]
    files = {}
    for match in _BLOCK.finditer(section):
        first, _, _ = match["body"].partition("\n")
        name = first.lstrip("#-").strip()
        if name.startswith("workloads/kv/"):
            files[name] = match["body"]
    return files


@pytest.fixture(scope="module")
def kv(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The page's ``workloads/kv/workload.py`` imported from files holding the page's text
    (its ``__init__.py`` is not run: registering ``kv`` would add it to every registry user)."""
    files = walkthrough_files()
    assert sorted(files) == [
        "workloads/kv/__init__.py",
        "workloads/kv/sql/default.sql",
        "workloads/kv/workload.py",
    ]
    root = tmp_path_factory.mktemp("kv")
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        "kv_walkthrough", root / "workloads/kv/workload.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pydantic look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        yield SqliteDb(tmp_path / "kit.sqlite")
        return
    problem = postgres_problem()
    if problem:
        pytest.skip(f"!!! PostgreSQL on 127.0.0.1:5432 is not reachable: {problem}")
    schema = f"kit_{uuid.uuid4().hex[:10]}"
    admin = PostgresDb("public")
    admin.sql(f"CREATE SCHEMA {schema}")
    try:
        yield PostgresDb(schema)
    finally:
        admin.sql(f"DROP SCHEMA {schema} CASCADE")


def kv_workload(kv: ModuleType, db: Db, **params: Any) -> tuple[Workload, Target]:
    target = db.target()
    return kv.KvWorkload(kv.KvParameters(**params), target), target


@pytest.mark.parametrize(
    ("db", "runner"),
    [("sqlite", None), ("postgres", AskedRunner("native")), ("postgres", AskedRunner("loop"))],
    ids=["sqlite", "postgres-native", "postgres-loop"],
    indirect=["db"],
)
def test_the_walkthrough_workload_loads_runs_verifies_and_drops(
    kv: ModuleType, db: Db, runner: AskedRunner | None
) -> None:
    asked = runner.on("postgres") if runner else "auto"
    first = load_and_verify(*kv_workload(kv, db, rows=300, load_batch_rows=128))
    assert first["load"]["built"] is True
    assert first["load"]["tables"] == [
        {"table": "kv_1", "rows": 300, "built": True},
        {"table": "kv_2", "rows": 300, "built": True},
    ]
    assert first["verify"]["tables"] == [
        {"table": "kv_1", "rows": 300, "max_key": 300},
        {"table": "kv_2", "rows": 300, "max_key": 300},
    ]
    assert db.sql("SELECT v FROM kv_2 WHERE k = 257") == [("value 257",)]
    again = load_and_verify(*kv_workload(kv, db, rows=300, load_batch_rows=128))
    assert again["load"]["built"] is False

    workload, target = kv_workload(kv, db, rows=300, read_pct=50)
    load = Load(loops_per_session=40, sessions=2, session_runner=asked)
    engine = Engine(workload, target, load, skip_load=True)
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    if runner:
        runner.ran(engine.result.session_runner, engine.result.session_runner_why)
    assert engine.result.load_report["skipped"] is True
    totals = engine.recorder.totals
    assert sorted(totals) == ["read", "update"] and sum(t.count for t in totals.values()) == 80
    assert sum(t.error_count for t in totals.values()) == 0
    updated = db.sql("SELECT COUNT(*) FROM kv_1 WHERE v NOT LIKE 'value %'")
    assert updated[0][0] > 0  # the updates were committed

    # Other rows than those loaded: kv_1 and kv_2 are rebuilt, not used as they are.
    rebuilt = load_and_verify(*kv_workload(kv, db, rows=200))
    assert [t["built"] for t in rebuilt["load"]["tables"]] == [True, True]
    assert drop_objects(*kv_workload(kv, db)) == ["kv_1", "kv_2"]
    assert {"kv_1", "kv_2"}.isdisjoint(db.names())
    assert drop_objects(*kv_workload(kv, db)) == []


def _slob(db: Db) -> tuple[Workload, Target]:
    target = db.target()
    return SlobWorkload(SlobParameters(scale=10_000, schemas=2), target), target


def _ssb(db: Db) -> tuple[Workload, Target]:
    target = db.target()
    return SsbWorkload(SsbParameters(database_size="1600K", tables=2), target), target


@pytest.mark.parametrize(
    ("workload_name", "victim", "columns"),
    [
        ("slob", "slob_2_cf1", "c2 VARCHAR(128), c20 VARCHAR(128)"),
        ("ssb", "user_2", "c1 VARCHAR(370)"),
        ("kv", "kv_2", "v VARCHAR(64)"),
    ],
)
def test_a_foreign_table_is_refused_before_anything_is_written(
    kv: ModuleType, db: Db, workload_name: str, victim: str, columns: str
) -> None:
    """The foreign table is the second planned one: the first is not created either."""
    build: dict[str, Callable[[], tuple[Workload, Target]]] = {
        "slob": lambda: _slob(db),
        "ssb": lambda: _ssb(db),
        "kv": lambda: kv_workload(kv, db),
    }
    before = db.victim(victim, columns)
    names = db.names()
    with pytest.raises(OwnershipError, match=f"table {victim} exists but was not created by dbsim"):
        load_and_verify(*build[workload_name]())
    assert db.names() == names  # no dbsim_registry, no first table, no index
    assert db.checksum(victim) == before
