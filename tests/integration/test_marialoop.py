"""MariaDB sessions on both runners (issue #33): the native Connector/C loop and the asyncmy
fallback, against the live server on 127.0.0.1:3306 (root, database ``test``).

The SLOB mix test runs once per runner (the summary names the runner, the mix is exact, the
updates reach the table); the loop itself is checked on the live server for what Python folds
from it: an error classed as asyncmy classes it and its message masked, a statement the
server refuses prepared again by each operation, NULL and text binds. Signals on the native
runner: tests/e2e/test_signal_sweep_native.py; a server restart: test_marialoop_reconnect.py.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pymysql = pytest.importorskip("pymysql", reason="!!! PyMySQL missing: MariaDB NOT TESTED")

from sim.config.scenario import Load  # noqa: E402 - after the skip above
from sim.core.dataset import drop_objects, load_and_verify  # noqa: E402
from sim.core.engine import Engine  # noqa: E402
from storage.targets import marialoop  # noqa: E402
from storage.targets.mysql import MysqlTarget  # noqa: E402
from storage.targets.mysql_record import MysqlSettings  # noqa: E402
from tests.support.native_loops import batch, require_native  # noqa: E402
from tests.support.open_loop import schedule_bound  # noqa: E402
from workloads.slob.parameters import SlobParameters  # noqa: E402
from workloads.slob.workload import SlobWorkload  # noqa: E402

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
DSN = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
RUNNERS = {"native": "native", "loop": "event loop"}
ROWS = 10_000  # SLOB's minimum


@pytest.fixture(autouse=True, scope="module")
def _server() -> None:
    try:
        pymysql.connect(**DSN).close()
    except pymysql.MySQLError as exc:
        pytest.skip(f"!!! MariaDB on {DSN['host']}:{DSN['port']} is not reachable: {exc}")


@pytest.fixture(params=sorted(RUNNERS))
def runner(request: pytest.FixtureRequest) -> str:
    if request.param == "native":
        require_native(marialoop)
    return str(request.param)


def slob(prefix: str, **params: Any) -> tuple[SlobWorkload, MysqlTarget]:
    target = MysqlTarget(MysqlSettings())
    return SlobWorkload(SlobParameters(scale=ROWS, table_prefix=prefix, **params), target), target


@pytest.fixture(scope="module")
def loaded() -> Iterator[str]:
    prefix = f"ml{uuid.uuid4().hex[:6]}"
    try:
        load_and_verify(*slob(prefix))
        yield prefix
    finally:
        drop_objects(*slob(prefix))


def test_slob_runs_on_the_runner_asked_with_the_exact_mix(loaded: str, runner: str) -> None:
    workload, target = slob(loaded, update_pct=30, redo_stress="HEAVY")
    load = Load(sessions=3, loops_per_session=60, seed=4, session_runner=runner)  # type: ignore[arg-type]
    engine = Engine(workload, target, load)
    asyncio.run(engine.run())
    result = engine.result
    assert result.outcome == "completed", result.error
    assert result.session_runner == RUNNERS[runner], result.session_runner_why
    totals = engine.recorder.totals
    assert sum(s.error_count for s in totals.values()) == 0, {
        name: s.error_count for name, s in totals.items()
    }
    counts = {name: stats.count for name, stats in totals.items()}
    assert counts == {"read": 3 * 42, "update": 3 * 18}
    assert workload.expected_mix(result.op_ranges) == {"read": 126, "update": 54, "scan": 0}
    conn = pymysql.connect(**DSN, autocommit=True)
    try:
        with conn.cursor() as cursor:  # HEAVY rewrote c2..c20 with the session's value
            cursor.execute(
                f"SELECT count(*) FROM `{loaded}_1_cf1` WHERE c2 REGEXP '^[0-9]{{6}}[.]'"
            )
            assert int(cursor.fetchone()[0]) > 0
    finally:
        conn.close()


def test_failed_statements_are_classed_as_asyncmy_and_masked() -> None:
    require_native(marialoop)
    secret = f"pw{secrets.token_hex(6)}"
    loop = marialoop.loop_for(MysqlSettings(), None)
    assert loop.connect() is None
    add, failure = loop.prepare(marialoop.native_sql("SELECT %s + 1, '100%%'"), 1)
    assert failure is None
    missing, refused = loop.prepare(f"SELECT * FROM no_such_table_{secrets.token_hex(3)}", 0)
    assert refused is not None and refused[0] == 1146
    cast = loop.prepare("SELECT CAST(? AS DATE) + INTERVAL 1 DAY FROM DUAL WHERE ? > 0", 2)[0]
    done, errors, failures = batch(loop, [(add, (41,)), (missing, ()), (cast, (secret, None)),
                                          (add, ("2",))])  # fmt: skip
    assert done == 4
    assert errors[0] == 0 and errors[2] == 0 and errors[3] == 0  # NULL and text parameters
    code, state, text, lost = failures[errors[1] - 1]
    assert (code, state, lost) == (1146, "42S02", 0)
    assert marialoop.error_class(code) == "ProgrammingError"  # as asyncmy raises it
    line = marialoop.failure_message("point", (code, state, f"{text} {secret}", lost), [secret])
    assert line.startswith("mysql: point: ProgrammingError: (1146, ")
    assert secret not in line
    assert marialoop.failure_lost((2013, "HY000", "Lost connection", 0))
    loop.close()


@pytest.mark.timing
def test_open_loop_keeps_the_asked_rate_natively(loaded: str) -> None:
    """300 ops/s over 2 native sessions for 6 s (test_pgloop.py's bounds and length, the same
    runner): above, the schedule's due starts and one operation per session
    (``schedule_bound``); below, a backlog left by a stall of the shared host or server at the
    window's end of at most 20 % of the run (0.8): 1.2 s."""
    require_native(marialoop)
    rate, duration = 300.0, 6.0
    workload, target = slob(loaded, update_pct=0)
    load = Load(sessions=2, warmup_s=0.3, duration_s=duration, seed=5, mode="open",
                rate_ops_s=rate, session_runner="native")  # fmt: skip
    engine = Engine(workload, target, load)
    asyncio.run(engine.run())
    result = engine.result
    assert result.outcome == "completed", result.error
    assert result.session_runner == "native", result.session_runner_why
    done = sum(s.count for s in engine.recorder.totals.values())
    expected = rate * result.measured_s
    assert 0.8 * expected <= done <= schedule_bound(load, result.measured_s), (done, expected)
