"""python-oracledb at the floor pyproject.toml declares: installed beside this environment
(``pip install --no-deps --target``, ahead of the venv's own copy on PYTHONPATH), the Oracle
target's connection code runs up to the refused connection with no TypeError; the release
before the floor fails there with one (issue #28: ``program=`` arrived in 2.5.0).

Needs PyPI (or the machine's pip index); without it the test skips with one loud line."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from storage.targets.oracle_connect import ORACLEDB_FLOOR

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BEFORE_FLOOR = "2.4.1"
PROBE = """
import os, socket, sys
import oracledb
import storage.targets
from sim.connect_check import ConnectFailed, connect_check
from storage.targets.oracle import OracleTarget
from storage.targets.settings import OracleSettings

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ["DBSIM_FLOOR_PW"] = "floor-pw"
print("oracledb", oracledb.__version__, flush=True)
try:
    connect_check(OracleTarget(OracleSettings(port=port, password_env="DBSIM_FLOOR_PW")))
except ConnectFailed as exc:
    print("refused:", exc)
"""


def _install(version: str, where: Path) -> Path:
    target = where / f"oracledb-{version}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            f"oracledb=={version}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"!!! cannot install oracledb=={version} from the package index: "
            f"{done.stderr.strip().splitlines()[-1:]}"
        )
    return target


@pytest.fixture(scope="module")
def floor_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The floor, installed once for the module's two tests that run it (a pip install is
    ~1 CPU-s; the tests only read the installed package, never change it)."""
    return _install(ORACLEDB_FLOOR, tmp_path_factory.mktemp("oracledb-floor"))


def _probe(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
        check=False,
    )


#: Every name dbsim's Oracle code uses, and the keyword arguments its pools are made with
#: (thin and thick, every address form): all must exist at the floor.
API = """
import inspect
import oracledb
import storage.targets
from pathlib import Path
from storage.targets.oracle import OracleTarget
from storage.targets.oracle_connect import connect_params
from storage.targets.settings import OracleSettings

names = ["create_pool_async", "create_pool", "init_oracle_client", "clientversion", "AsyncLOB",
         "LOB", "POOL_GETMODE_TIMEDWAIT", "AsyncConnectionPool", "ConnectionPool", "Error",
         "DatabaseError", "AsyncConnection"]
missing = [n for n in names if not hasattr(oracledb, n)]
missing += [f"AsyncConnectionPool.{m}" for m in ("acquire", "drop", "close")
            if not hasattr(oracledb.AsyncConnectionPool, m)]
missing += [f"ConnectionPool.{m}" for m in ("acquire", "release", "close")
            if not hasattr(oracledb.ConnectionPool, m)]
def keywords(fn):
    found = inspect.signature(fn).parameters.values()
    assert not any(p.kind is p.VAR_KEYWORD for p in found), fn  # a named keyword each
    return {p.name for p in found}


maker = {"thin": keywords(oracledb.create_pool_async), "thick": keywords(oracledb.create_pool)}
shapes = [
    OracleSettings(),
    OracleSettings(sid="ORCL", protocol="tcps", wallet_location=Path("/w"), wallet_password_env="W"),
    OracleSettings(dsn="SALES", config_dir=Path("/etc/oracle")),
    OracleSettings(dsn="SALES", driver_mode="thick", lib_dir=Path("/opt/ic")),
]
for settings in shapes:
    target = OracleTarget(settings)
    params = {**connect_params(settings, "pw", "wpw"), "min": 0, "max": 1, "increment": 1,
              "getmode": 0, "wait_timeout": 1}
    missing += sorted(set(params) - maker[settings.driver_mode])
print("missing:", sorted(set(missing)))
"""


def test_every_name_and_keyword_dbsim_uses_exists_at_the_floor(floor_site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{floor_site}{os.pathsep}{REPO}", "W": "x"}
    done = subprocess.run(
        [sys.executable, "-c", API],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert "missing: []" in done.stdout, done.stdout + done.stderr


def test_pyproject_declares_the_floor() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = f"oracledb>={ORACLEDB_FLOOR.removesuffix('.0')}"
    assert wanted in project["project"]["dependencies"]


def test_the_floor_connects_up_to_the_refusal(floor_site: Path) -> None:
    done = _probe(floor_site)
    assert f"oracledb {ORACLEDB_FLOOR}" in done.stdout, done.stdout + done.stderr
    assert "refused:" in done.stdout and "DPY-6005" in done.stdout, done.stdout + done.stderr
    assert "TypeError" not in done.stderr, done.stderr


def test_the_release_before_the_floor_would_not(tmp_path: Path) -> None:
    done = _probe(_install(BEFORE_FLOOR, tmp_path))
    assert f"oracledb {BEFORE_FLOOR}" in done.stdout, done.stdout + done.stderr
    assert "unexpected keyword argument 'program'" in done.stderr, done.stdout + done.stderr
