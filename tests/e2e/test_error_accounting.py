"""A run tells the truth about its failures (sim.core.validity), on the live PostgreSQL.

The failures are real: another connection of the test's own holds locks on the SLOB table
while ``dbsim run`` goes, and the sessions run with ``lock_timeout`` (a target session setting),
so the server itself refuses the statements that touch locked rows:

* the whole table locked (ACCESS EXCLUSIVE): every read and update fails — the run is invalid,
  ``failed``, exit 3, its error line names the class and the server's message;
* a key range locked FOR UPDATE: a share of the updates fails, reads do not — the share is
  measured, and judged against ``load.max_error_pct`` both ways (within → exit 0 with the
  errors shown; over → exit 3), or by an ``error_pct_max`` SLO (exit 1).

The module loads one table prefix (``dbsim load``) that its tests share (each with a scenario
and output directory of its own) and drops it at the end. The run where every operation fails
runs once per session runner (tests/support/session_runners.py): the native libpq loop classes
and words a server's error itself (and prepares the refused statement again), asyncpg by its
own exceptions. The partial failures run on the default (native) runner only: the budget and
SLO judgements do not depend on the runner, and the classing they show is the first test's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml

from tests.e2e.conftest import Dbsim, InProcessDbsim, bundle_dirs, clean_environment, read_summary
from tests.support.postgres import DATABASE, HOST, PORT, require_postgres
from tests.support.session_runners import AskedRunner, session_runner

pytestmark = pytest.mark.e2e
# The fixture the run where every operation fails takes: each session runner in turn.
__all__ = ["session_runner"]

ROWS = 10_240  # scale 80M at 8 KiB per row
WORK_UNIT = 64
#: Keys locked FOR UPDATE in the partial-failure tests: an update covers (r − 64, r) with r
#: uniform over [65, ROWS − 64], so it touches a locked row when r < LOCKED_KEYS + 64.
LOCKED_KEYS = 1_000


@pytest.fixture(scope="module", autouse=True)
def _server() -> None:
    require_postgres()


def scenario(path: Path, prefix: str, out: Path, **load: Any) -> Path:
    data = {
        "name": "errors",
        "target": {
            "kind": "postgres",
            "host": HOST,
            "port": PORT,
            "database": DATABASE,
            "session_settings": {"lock_timeout": "20ms"},
        },
        "workload": {
            "name": "slob",
            "parameters": {"table_prefix": prefix, "scale": "80M", "update_pct": 50},
        },
        "load": {"sessions": 2, "duration_s": 3, **load},
        "output": {"directory": str(out)},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def loaded_table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One loaded SLOB table for the module (scenario path, table name); dropped at the end.
    Every test releases its locks, and the runs' updates change no key, so the tests see the
    same table as if each had loaded its own."""
    base = tmp_path_factory.mktemp("errors")
    for name in ("cwd", "tmp"):
        (base / name).mkdir()
    runner = Dbsim(base / "cwd", clean_environment(base / "tmp"))
    prefix = f"err{secrets.token_hex(3)}"
    path = scenario(base / "s.yaml", prefix, base / "out")
    built = runner("load", path, "--json")
    assert built.rc == 0, built.describe()
    (table,) = [t["table"] for t in json.loads(built.stdout)["load"]["tables"]]
    try:
        yield path, table
    finally:
        InProcessDbsim(runner.cwd, runner.env)("drop", path)  # no child's start-up to clean up
        runner.cleanup()


@pytest.fixture
def loaded(loaded_table: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """The module's table, with a scenario of the test's own (its own output directory)."""
    path, table = loaded_table
    data = yaml.safe_load(path.read_text())
    data["output"]["directory"] = str(tmp_path / "out")
    mine = tmp_path / "s.yaml"
    mine.write_text(yaml.safe_dump(data), encoding="utf-8")
    return mine, table


class LockHolder:
    """A connection of the test's own holding a lock in an open transaction, on a thread with
    its own event loop, until :meth:`release`."""

    def __init__(self, statement: str) -> None:
        self.statement = statement
        self.held = threading.Event()
        self._release: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._hold()), daemon=True)

    async def _hold(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._release = asyncio.Event()
        try:
            conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=DATABASE)
            try:
                async with conn.transaction():
                    await conn.execute(self.statement)
                    self.held.set()
                    await asyncio.wait_for(self._release.wait(), 120)
            finally:
                await conn.close()
        except BaseException as exc:  # reported by __enter__ / the test
            self.error = exc
            self.held.set()

    def __enter__(self) -> LockHolder:
        self._thread.start()
        assert self.held.wait(30), "the lock was not taken within 30 s"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._release is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._release.set)
        self._thread.join(30)


def on_runner(loaded: tuple[Path, str], runner: AskedRunner) -> tuple[Path, str]:
    """The test's scenario with ``load.session_runner`` the runner asked."""
    path, table = loaded
    data = yaml.safe_load(path.read_text())
    data["load"]["session_runner"] = runner.on("postgres")
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path, table


def run(dbsim: Dbsim, path: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    out = Path(yaml.safe_load(path.read_text())["output"]["directory"])
    before = set(bundle_dirs(out))
    result = dbsim("run", path, "--skip-load", *extra, timeout=90)
    (bundle,) = set(bundle_dirs(out)) - before
    return result, read_summary(bundle) | {"_bundle": str(bundle)}


def test_every_operation_failing_is_an_invalid_failed_run(
    dbsim: Dbsim, loaded: tuple[Path, str], session_runner: AskedRunner
) -> None:
    path, table = on_runner(loaded, session_runner)
    with LockHolder(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE'):
        result, summary = run(dbsim, path)
    assert result.rc == 3, result.describe()
    session_runner.ran_summary(summary)
    assert summary["status"] == "failed"
    errors = summary["errors"]
    assert errors["invalid"] is True
    for op in ("read", "update"):
        entry = errors["operations"][op]
        assert entry["completed"] == 0 and entry["errors"] == entry["issued"] > 0
        assert entry["dominant"] == "LockNotAvailableError"
        assert "lock timeout" in entry["example"]
    error_lines = [line for line in result.stderr_lines if line.startswith("error:")]
    assert len(error_lines) == 1, result.describe()
    assert "100 % of read failed" in error_lines[0]
    assert "LockNotAvailableError" in error_lines[0]
    assert "canceling statement due to lock timeout" in error_lines[0]
    # Said before any figure, and the mix line does not vouch for failed operations.
    assert result.stdout.lstrip().startswith("INVALID RUN"), result.describe()
    assert "of them failed" in result.stdout
    bundle = Path(summary["_bundle"])
    analysis = json.loads((bundle / "analysis.json").read_text())
    assert analysis["verdict"]["call"] == "invalid"
    assert analysis["verdict"]["summary"].startswith("invalid: 100 % of read failed")
    report = (bundle / "report.html").read_text()
    assert "Errors (failed operations/s)" in report
    assert "Invalid." in report or "invalid:" in report


def _partial(dbsim: Dbsim, loaded: tuple[Path, str], *extra: str) -> tuple[Any, dict[str, Any]]:
    path, table = loaded
    lock = (
        f'SELECT count(*) FROM (SELECT 1 FROM "{table}" WHERE custid <= {LOCKED_KEYS} FOR UPDATE) x'
    )
    with LockHolder(lock):
        return run(dbsim, path, *extra)


def _update_share(summary: dict[str, Any]) -> float:
    update = summary["errors"]["operations"]["update"]
    read = summary["errors"]["operations"]["read"]
    assert read["errors"] == 0, "reads do not wait for row locks (MVCC)"
    assert update["completed"] > 0 and update["errors"] > 0
    assert set(update["classes"]) == {"LockNotAvailableError"}
    return float(update["error_pct"])


def expected_share() -> float:
    # r is uniform over ROWS − 2 × WORK_UNIT keys from WORK_UNIT + 1; the update's range
    # (r − 64, r) holds a locked key when r − 63 ≤ LOCKED_KEYS: LOCKED_KEYS − 1 values of r.
    return 100 * (LOCKED_KEYS - 1) / (ROWS - 2 * WORK_UNIT)


def test_a_partial_failure_within_the_budget_completes_with_the_errors_shown(
    dbsim: Dbsim, loaded: tuple[Path, str]
) -> None:
    result, summary = _partial(dbsim, loaded, "--set", "load.max_error_pct=40")
    assert result.rc == 0, result.describe()
    assert summary["status"] == "completed"
    share = _update_share(summary)
    # The share the lock predicts (≈ 9.9 %), within what the run's updates can vary by: each
    # hits a locked key with that probability, so the share of n updates has a binomial
    # spread, 3.3 standard deviations of it allowed. n is the host's: quiet ~1,000 updates in
    # the 3 s (±3 points); a CI host beside other load made 32 (one error: 3.1 %, ±17 points).
    update = summary["errors"]["operations"]["update"]
    n = update["completed"] + update["errors"]
    p = expected_share() / 100
    allowed = 100 * 3.3 * math.sqrt(p * (1 - p) / n)
    assert abs(share - expected_share()) <= allowed, (share, expected_share(), n)
    assert summary["errors"]["invalid"] is False
    assert summary["errors"]["budget_pct"] == 40
    assert "errors (measured window)" in result.stdout
    assert "LockNotAvailableError" in result.stdout


def test_a_partial_failure_over_the_budget_fails_the_run(
    dbsim: Dbsim, loaded: tuple[Path, str]
) -> None:
    result, summary = _partial(dbsim, loaded)  # the default budget: 1 %
    assert result.rc == 3, result.describe()
    assert summary["status"] == "failed"
    share = _update_share(summary)
    assert share > 1.0
    (line,) = [line for line in result.stderr_lines if line.startswith("error:")]
    assert f"{share:g} % of update failed" in line and "budget 1 %" in line, line


def test_an_error_slo_judges_the_share_instead_of_the_budget(
    dbsim: Dbsim, loaded: tuple[Path, str], tmp_path: Path
) -> None:
    path, table = loaded
    data = yaml.safe_load(path.read_text())
    data["slos"] = [{"op": "update", "error_pct_max": 1}]
    path.write_text(yaml.safe_dump(data))
    result, summary = _partial(dbsim, (path, table))
    assert result.rc == 1, result.describe()  # slo missed, not a failed run
    assert summary["status"] == "completed"
    assert summary["errors"]["invalid"] is False
    assert summary["errors"]["budget_from"].startswith("slos")
    (verdict,) = summary["slos"]["verdicts"]
    assert verdict["met"] is False and verdict["measured"] == pytest.approx(
        _update_share(summary), abs=0.01
    )
