"""The targets' load locks for real (issue #13): two loaders of one target never interleave.

The test holds a target's lock itself, starts two ``dbsim load`` processes at once on the same
fresh data, sees both say they wait, lets go: exactly one builds, both succeed — on an SQLite
file, a PostgreSQL table prefix and an EDA tree. PostgreSQL through asyncpg and through psqlODBC
take the same advisory lock (so either kind excludes the other), shared locks share, and a run
waiting for the lock still stops on SIGINT. Every child process is bounded in time.

The ``dbsim`` children are forked from the worker's pre-imported zygote
(tests/support/forked_dbsim.py: real processes of their own, their pids, signals, pipes and
exit codes, without the ~0.5 CPU-s of interpreter start-up and imports each of the seven
exec'd ones cost); their stderr is read unbuffered, a line at a time, on a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sim.protocols import EngineContext, Target
from storage.targets.filetree import FileTreeTarget
from storage.targets.locks import lock_id
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import (
    FileTreeSettings,
    OdbcSettings,
    PostgresSettings,
    SqliteSettings,
)
from storage.targets.sqlite import SqliteTarget
from tests.support import forked_dbsim

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 120.0
WAIT_LINE_TIMEOUT_S = 60.0
WAITING = "waiting for another loader"
PG = {"kind": "postgres", "host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}
ODBC_DRIVER = "PostgreSQL Unicode"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env["COLUMNS"] = "300"  # the console's lines unwrapped: a long path stays on its line
    return env


def _scenario(path: Path, target: dict[str, Any], workload: dict[str, Any]) -> Path:
    doc = {"name": "lock", "target": target, "workload": workload, "load": {"duration_s": 2}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@asynccontextmanager
async def _opened(target: Target) -> AsyncIterator[Target]:
    executor = concurrent.futures.ThreadPoolExecutor(2)
    try:
        await target.open(EngineContext(asyncio.get_running_loop(), executor))
        try:
            yield target
        finally:
            await target.close()
    finally:
        executor.shutdown(wait=True)


def _start(*argv: str) -> subprocess.Popen[bytes]:
    """``python -m sim.cli ARGV`` in the repository, forked from the zygote; its pipes
    unbuffered, so the lines :func:`_until_line` reads leave nothing behind in a buffer that
    :func:`_finish` would not see."""
    return forked_dbsim.popen(
        [sys.executable, "-m", "sim.cli", *argv],
        cwd=REPO,
        env=_env(),
        bufsize=0,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _until_line(proc: subprocess.Popen[bytes], text: str) -> list[str]:
    """stderr lines up to the first one holding ``text`` (bounded; the caller kills the
    process on a failure, which ends the reading thread)."""
    assert proc.stderr is not None
    stderr = proc.stderr
    seen: list[str] = []

    def read() -> None:
        while True:
            line = stderr.readline().decode()
            if not line:
                raise AssertionError(f"no {text!r} before the end: {seen}")
            seen.append(line)
            if text in line:
                return

    await asyncio.wait_for(asyncio.to_thread(read), WAIT_LINE_TIMEOUT_S)
    return seen


async def _finish(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes]:
    """The rest of its stdout and stderr once it exited (killed if not within ``timeout``)."""
    try:
        return await asyncio.to_thread(proc.communicate, timeout=timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.to_thread(proc.communicate)


async def _two_loaders_while_held(target: Target, key: str, scenario: Path) -> list[dict[str, Any]]:
    """Hold ``target``'s lock, start two ``dbsim load`` on ``scenario``, wait until both say
    they wait for it, release, and return their two reports."""
    async with _opened(target):
        async with target.load_lock(key) as held:
            assert held.held, held
            procs = [_start("load", str(scenario), "--json") for _ in range(2)]
            try:
                for proc in procs:
                    lines = await _until_line(proc, WAITING)
                    assert any(WAITING in line for line in lines)
            except BaseException:
                for proc in procs:
                    proc.kill()
                raise
        reports = []
        for proc in procs:
            out, err = await _finish(proc, CHILD_TIMEOUT_S)
            assert proc.returncode == 0, err.decode()[-3000:]
            reports.append(json.loads(out))
    return reports


def _builds(reports: list[dict[str, Any]], built: Callable[[dict[str, Any]], bool]) -> list[bool]:
    for report in reports:  # both waited for the test's lock, then for each other
        lock = report["load"]["lock"]
        assert lock["held"] is True and lock["mode"] == "exclusive" and lock["waited_s"] > 0
    return sorted(built(r["load"]) for r in reports)


def test_two_sqlite_loaders_at_once_one_builds(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    scenario = _scenario(tmp_path / "s.json", {"kind": "sqlite", "path": str(db)}, {"name": "slob"})
    target = SqliteTarget(SqliteSettings(path=db))
    reports = asyncio.run(_two_loaders_while_held(target, "slob", scenario))
    assert _builds(reports, lambda load: load["tables"][0]["built"]) == [False, True]
    assert [r["verify"]["tables"][0]["rows"] for r in reports] == [10240, 10240]
    assert {r["load"]["lock"]["how"] for r in reports} == {f"flock {tmp_path}"}


def test_two_eda_loaders_at_once_one_builds(tmp_path: Path) -> None:
    root = tmp_path / "eda"
    workload = {"name": "eda", "parameters": {"component": "EDA_FRONTEND", "job_sets": 1}}
    scenario = _scenario(tmp_path / "s.json", {"kind": "filetree", "path": str(root)}, workload)
    target = FileTreeTarget(FileTreeSettings(path=root))
    reports = asyncio.run(_two_loaders_while_held(target, "eda", scenario))
    assert _builds(reports, lambda load: bool(load["built"])) == [False, True]
    assert [r["verify"]["trees"] for r in reports] == [3, 3]


def test_two_postgres_loaders_at_once_one_builds(tmp_path: Path) -> None:
    from sim.config.resolve import resolve
    from sim.core.dataset import drop_objects
    from sim.run.runner import build_target, build_workload

    prefix = f"lk{uuid.uuid4().hex[:8]}_"
    workload = {"name": "slob", "parameters": {"table_prefix": prefix}}
    scenario = _scenario(tmp_path / "s.json", PG, workload)
    target = PostgresTarget(PostgresSettings(**{k: v for k, v in PG.items() if k != "kind"}))
    try:
        reports = asyncio.run(_two_loaders_while_held(target, prefix, scenario))
        assert _builds(reports, lambda load: load["tables"][0]["built"]) == [False, True]
        assert [r["verify"]["tables"][0]["rows"] for r in reports] == [10240, 10240]
        assert {r["load"]["lock"]["how"] for r in reports} == {
            f"pg_advisory_lock({lock_id('public', prefix)})"
        }
    finally:
        resolved = resolve(scenario, [])
        dropper = build_target(resolved)
        drop_objects(build_workload(resolved, dropper), dropper)


def test_postgres_and_psqlodbc_take_one_advisory_lock() -> None:
    """asyncpg and psqlODBC name the lock alike: each waits while the other holds it
    exclusively; shared holders of both kinds share."""
    pyodbc = pytest.importorskip("pyodbc")
    if ODBC_DRIVER not in pyodbc.drivers():
        pytest.skip(f"!!! ODBC driver {ODBC_DRIVER!r} is not installed (odbc-postgresql)")
    from storage.targets.odbc import OdbcTarget

    key = f"lk{uuid.uuid4().hex[:8]}_"
    settings = {k: v for k, v in PG.items() if k != "kind"}

    async def main() -> None:
        pg = PostgresTarget(PostgresSettings(**settings))
        odbc = OdbcTarget(OdbcSettings(driver=ODBC_DRIVER, dialect="postgres", **settings))
        waits: list[str] = []
        said_wait: list[float] = []

        def on_wait(line: str) -> None:
            waits.append(line)
            said_wait.append(time.monotonic())

        async with _opened(pg), _opened(odbc):
            async with pg.load_lock(key):
                attempt = asyncio.ensure_future(_hold(odbc.load_lock(key, on_wait=on_wait)))
                await asyncio.sleep(1.0)
                assert not attempt.done() and waits == [f"{key}* in 127.0.0.1:5432/test"]
            released = time.monotonic()
            odbc_lock = await asyncio.wait_for(attempt, 10)
            # It waited from before it said so until after the release: at least that long
            # (not the test's whole second: on a loaded host its first try starts late).
            assert odbc_lock["held"] and odbc_lock["waited_s"] >= released - said_wait[0]
            assert odbc_lock["how"] == f"postgres application lock {lock_id('public', key)}"
            async with (
                odbc.load_lock(key, shared=True) as first,
                pg.load_lock(key, shared=True) as second,
            ):
                assert first.held and second.held and second.waited_s < 0.5

    asyncio.run(main())


async def _hold(lock_cm: Any) -> dict[str, Any]:
    async with lock_cm as lock:
        described: dict[str, Any] = lock.describe()
        return described


def test_sigint_while_waiting_for_the_lock_stops_the_run(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    out = tmp_path / "runs"

    async def main() -> tuple[int, str]:
        target = SqliteTarget(SqliteSettings(path=db))
        async with _opened(target), target.load_lock("slob"):
            proc = _start("run", "--set", f"target.path={db}", "-o", str(out))
            try:
                await _until_line(proc, f"{WAITING} of {db}")
                proc.send_signal(signal.SIGINT)
                _, err = await _finish(proc, 30)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    proc.communicate()
            assert proc.returncode is not None
            return proc.returncode, err.decode()

    code, err = asyncio.run(main())
    assert code == 130, err[-3000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "interrupted" and summary["last_state"] == "loading"
