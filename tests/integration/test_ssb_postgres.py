"""SSB-like on the local PostgreSQL: one whole row per 8 KB heap page (no TOAST), idempotent
load, ownership, drop, pinned sessions, the exact mix and committed updates.

Every test uses its own table prefix and drops what it loaded, so tests share the database
``test`` without sharing state. The runs through the engine run once per session runner, the
native libpq loop and asyncpg (tests/support/session_runners.py).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip(
    "storage.targets.postgres",
    reason="!!! storage/targets/postgres.py is not there yet: SSB on PostgreSQL NOT TESTED",
)
asyncpg = pytest.importorskip("asyncpg", reason="!!! asyncpg missing: SSB on PostgreSQL NOT TESTED")

from sim import registry  # noqa: E402 - after the skips above
from sim.config.scenario import Load  # noqa: E402
from sim.core.dataset import drop_objects, load_and_verify  # noqa: E402
from sim.core.engine import Engine  # noqa: E402
from sim.errors import OwnershipError  # noqa: E402
from sim.protocols import Target  # noqa: E402
from storage.targets.settings import PostgresSettings  # noqa: E402
from tests.support.session_runners import AskedRunner, session_runner  # noqa: E402
from workloads.ssb.parameters import SsbParameters  # noqa: E402
from workloads.ssb.workload import SsbWorkload  # noqa: E402

pytestmark = pytest.mark.integration
# The fixture this module's runs through the engine take: each session runner in turn.
__all__ = ["session_runner"]
DSN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}
SIZE = "4M"  # 256 rows in each of two tables
ROWS = 256
UPDATED = re.compile(r"^(\d{5})(\d{12})[A-Za-z0-9]{353}$")


def sql(query: str, *args: Any) -> list[Any]:
    """Run one query on a connection of its own (not dbsim's): what another client sees."""

    async def go() -> list[Any]:
        conn = await asyncpg.connect(**DSN, timeout=5)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(go())


@pytest.fixture(scope="module", autouse=True)
def server() -> None:
    try:
        sql("SELECT 1")
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"!!! PostgreSQL at 127.0.0.1:5432/test unreachable ({exc}): NOT TESTED")


@pytest.fixture
def prefix() -> Iterator[str]:
    """A table prefix of this test's own; whatever it loaded is dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        drop_objects(*workload(name))


def workload(prefix: str, **params: Any) -> tuple[SsbWorkload, Target]:
    entry = registry.target("postgres")
    assert entry.factory is not None
    target = entry.factory(PostgresSettings(database="test"))
    parameters = SsbParameters(
        **{"database_size": SIZE, "tables": 2, "table_prefix": prefix, **params}
    )
    return SsbWorkload(parameters, target), target


def c1_by_key(table: str) -> dict[int, str]:
    return {r["custid"]: r["c1"] for r in sql(f"SELECT custid, c1 FROM {table}")}


def run(ssb: SsbWorkload, target: Target, runner: AskedRunner, **load: Any) -> dict[str, int]:
    engine = Engine(ssb, target, Load(session_runner=runner.on("postgres"), **load))
    asyncio.run(engine.run())
    assert engine.result.outcome == "completed", engine.result.error
    runner.ran(engine.result.session_runner, engine.result.session_runner_why)
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0
    counts = {name: stats.count for name, stats in totals.items()}
    assert ssb.expected_mix(engine.result.op_ranges) == {
        "read": counts.get("read", 0),
        "update": counts.get("update", 0),
    }
    return counts


def test_load_gives_one_whole_row_per_heap_page_and_reloads_idempotently(prefix: str) -> None:
    report = load_and_verify(*workload(prefix))
    assert report["load"]["built"] is True
    assert report["verify"]["tables"][1] == {
        "table": f"{prefix}_2",
        "rows": ROWS,
        "max_key": ROWS,
        "unique_index": True,
        "block_size": 8192,
        "blocks": ROWS,
        "max_rows_per_block": 1,
    }
    # Key order on disk, and nothing moved out of line: the TOAST table stays empty.
    blocks = [r[0] for r in sql(f"SELECT (ctid::text::point)[0] FROM {prefix}_1 ORDER BY custid")]
    assert blocks == sorted(blocks)
    toast = sql(
        "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = $1", f"{prefix}_1"
    )
    assert toast[0][0] == 0
    before = c1_by_key(f"{prefix}_1")
    again = load_and_verify(*workload(prefix))
    assert again["load"]["built"] is False and c1_by_key(f"{prefix}_1") == before


def test_a_foreign_table_is_never_touched(prefix: str) -> None:
    sql(f"CREATE TABLE {prefix}_2 (precious TEXT)")
    try:
        sql(f"INSERT INTO {prefix}_2 VALUES ('keep me')")
        with pytest.raises(OwnershipError, match=f"{prefix}_2 exists but was not created by dbsim"):
            load_and_verify(*workload(prefix))
        assert not sql("SELECT 1 FROM pg_class WHERE relname = $1", f"{prefix}_1")
        assert drop_objects(*workload(prefix)) == []
        assert [r[0] for r in sql(f"SELECT precious FROM {prefix}_2")] == ["keep me"]
    finally:
        sql(f"DROP TABLE IF EXISTS {prefix}_2")


def test_drop_removes_only_the_registered_tables(prefix: str) -> None:
    load_and_verify(*workload(prefix))
    sql(f"CREATE TABLE {prefix}_9 (mine TEXT)")
    try:
        assert drop_objects(*workload(prefix)) == [f"{prefix}_1", f"{prefix}_2"]
        names = {
            r[0] for r in sql("SELECT relname FROM pg_class WHERE relname LIKE $1", prefix + "%")
        }
        assert f"{prefix}_9" in names and f"{prefix}_1" not in names
    finally:
        sql(f"DROP TABLE IF EXISTS {prefix}_9")


def test_pinned_sessions_exact_mix_and_committed_updates(
    prefix: str, session_runner: AskedRunner
) -> None:
    ssb, target = workload(prefix, read_pct=70, rows_select=20)
    load_and_verify(ssb, target)
    before = {n: c1_by_key(f"{prefix}_{n}") for n in (1, 2)}
    counts = run(ssb, target, session_runner, loops_per_session=40, sessions=5, seed=3)
    assert counts == {"read": 5 * 28, "update": 5 * 12}
    for n, pinned in ((1, {0, 2, 4}), (2, {1, 3})):
        after = c1_by_key(f"{prefix}_{n}")
        changed = [v for k, v in after.items() if v != before[n][k]]
        assert changed, f"no committed update in {prefix}_{n}"
        matches = [UPDATED.match(v) for v in changed]
        assert all(matches)
        assert {int(m.group(1)) for m in matches if m} == pinned


def test_point_lookups_and_a_warm_up(prefix: str, session_runner: AskedRunner) -> None:
    ssb, target = workload(prefix, read_pct=90, rows_select=0, rows_update=2)
    load = {"loops_per_session": 33, "sessions": 3, "warmup_s": 0.2, "seed": 1}
    counts = run(ssb, target, session_runner, **load)
    assert counts["read"] + counts["update"] == 3 * 33
