"""``make test-servers`` (issue #28) read statically: the variables the Makefile exports are
exactly the ones tests/support/engines.py reads, the password variables they name are those
docker/compose.yaml gives the two servers, docker/compose.test-servers.yaml publishes the
ports they point at (on loopback only), and the target stops with one line where there is no
docker. Nothing here starts a container: the docker the last tests find is a stand-in."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import engines

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"
COMPOSE = ROOT / "docker" / "compose.yaml"
OVERRIDE = ROOT / "docker" / "compose.test-servers.yaml"
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
USES_FIXTURE = re.compile(r"^from tests\.support\.engines import .*\bsql_engine\b", re.MULTILINE)


def make_variable(name: str) -> str:
    """The value of ``NAME := …`` in the Makefile, its backslash continuations joined."""
    text = MAKEFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(rf"^{name} :=(.*)$", text, re.MULTILINE)
    assert match, f"the Makefile defines no {name}"
    return match[1].strip()


def exported() -> dict[str, str]:
    pairs = [word.split("=", 1) for word in shlex.split(make_variable("TEST_SERVERS_ENV"))]
    return {name: value for name, value in pairs}


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_makefile_exports_exactly_the_variables_engines_reads() -> None:
    assert set(exported()) == set(engines.VARIABLES)
    assert len(engines.VARIABLES) == len(set(engines.VARIABLES))


def test_the_password_variables_are_the_ones_compose_gives_the_servers() -> None:
    env, services = exported(), load(COMPOSE)["services"]
    oracle = services["oracle"]["environment"]
    sqlserver = services["sqlserver"]["environment"]
    oracle_password = env[engines.ORACLE_PASSWORD_ENV]
    sqlserver_password = env[engines.SQLSERVER_PASSWORD_ENV]
    # The names only (never a value), and the ones docker/.env.example asks for.
    assert f"${{{oracle_password}:?" in oracle["APP_USER_PASSWORD"]
    assert f"${{{sqlserver_password}:?" in sqlserver["MSSQL_SA_PASSWORD"]
    example = (ROOT / "docker" / ".env.example").read_text(encoding="utf-8")
    assert f"\n{oracle_password}=\n" in example and f"\n{sqlserver_password}=\n" in example
    # The users: the image's APP_USER, and SQL Server's sa.
    assert env[engines.ORACLE_USER] == oracle["APP_USER"]
    assert env[engines.SQLSERVER_USER] == "sa"
    assert env[engines.SQLSERVER_DRIVER] == engines.SQLSERVER_DEFAULT_DRIVER


def test_the_override_publishes_the_ports_the_tests_use_on_loopback_only() -> None:
    env, override = exported(), load(OVERRIDE)
    services = make_variable("TEST_SERVERS").split()
    assert sorted(services) == sorted(override["services"]) == ["oracle", "sqlserver"]
    assert set(services) <= set(load(COMPOSE)["services"])
    host_port, _, service_name = env[engines.ORACLE_DSN].partition("/")
    assert service_name == "FREEPDB1"
    oracle_host, oracle_port = host_port.split(":")
    published = {
        "oracle": f"{oracle_host}:{oracle_port}:1521",
        "sqlserver": f"{env[engines.SQLSERVER_HOST]}:{env[engines.SQLSERVER_PORT]}:1433",
    }
    assert {name: svc["ports"] for name, svc in override["services"].items()} == {
        name: [port] for name, port in published.items()
    }
    assert all(port.startswith("127.0.0.1:") for port in published.values())
    assert set(override["services"]["oracle"]) == {"ports"}  # nothing else changed
    assert set(override["services"]["sqlserver"]) == {"ports"}


def test_the_override_is_a_valid_compose_file() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="!!! jsonschema is not installed")
    validator = jsonschema.Draft201909Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert [e.message for e in validator.iter_errors(load(OVERRIDE))] == []


def test_it_runs_the_engine_tests_and_the_contract_tests() -> None:
    tests = make_variable("TEST_SERVERS_TESTS").split()
    assert tests == ["tests/integration/test_engines.py", "tests/contract"]
    users = {  # every module that takes the fixture is run by the target
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if USES_FIXTURE.search(path.read_text(encoding="utf-8"))
    }
    assert users <= set(tests), users


def run_make(tmp_path: Path, path: str) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("!!! make is not installed: the target's refusal NOT TESTED")
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL"}}
    env["PATH"] = path
    return subprocess.run(
        [make, "-s", "-C", str(ROOT), "test-servers"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_docker_it_stops_with_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = run_make(tmp_path, str(empty))
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        "make test-servers: no docker command (it needs Docker Engine with Compose v2; "
        "docs/databases.md)"
    ), done.stderr


def test_without_a_docker_engine_it_stops_with_one_line(tmp_path: Path) -> None:
    """A docker command whose engine does not answer (as on this machine: the client, no
    daemon); the stand-in fails every command, so nothing could start if the check were gone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text("#!/bin/sh\necho 'no daemon' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    done = run_make(tmp_path, str(bin_dir))
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith("make test-servers: no Docker engine answers"), done.stderr
    assert "no daemon" not in done.stderr  # docker info's own output is not shown
