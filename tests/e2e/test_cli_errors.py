"""Bad input end to end: exit 2, one ``error: `` line per problem, never a traceback.

The tests that take ``dbsim`` run the real binary (``python -m sim.cli``): a scenario with three
mistakes, an unknown option, a run that fails (its exit code and one error line are checked on
one run, ``test_failed_run_exits_3_with_one_error_line``), the in-process runner's comparison.
Those that take ``dbsim_in_process`` run the same command through ``sim.cli.entry.main`` in the
test process (the same directories and environment, about a second less each): what they check
is the command's decision, not the process boundary."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import (
    CliResult,
    Dbsim,
    InProcessDbsim,
    bundle_dirs,
    read_summary,
    single_bundle,
)

pytestmark = pytest.mark.e2e

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 3

# The cli module swallows the exit code that Typer returns in non-standalone mode, and
# catches click's exception classes where Typer ≥ 0.16 raises those of its vendored copy
# (typer._click); see the report that came with these tests.
FAILURE_LINE_WRAPPED = (
    "sim/cli/run.py _execute() prints a failed run's error through rich Console(stderr=True), "
    "which wraps at 80 columns when stderr is not a terminal: one problem, several lines"
)


def write(dir_: Path, name: str, text: str) -> Path:
    path = dir_ / name
    path.write_text(text, encoding="utf-8")
    return path


def assert_bad_input(result: CliResult, lines: int | None = None) -> list[str]:
    """Exit 2, only ``error: `` lines on stderr (``lines`` of them if given), no traceback;
    returns the messages without the prefix."""
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    got = result.stderr_lines
    assert got, result.describe()
    assert all(line.startswith("error: ") for line in got), result.describe()
    if lines is not None:
        assert len(got) == lines, result.describe()
    return [line[len("error: ") :] for line in got]


def assert_no_bundle(dbsim: Dbsim, out: Path | None = None) -> None:
    assert bundle_dirs(out or dbsim.cwd / "runs") == [], "a bad input created a run bundle"


# --------------------------------------------------------------------------- scenario files


def test_three_mistakes_are_reported_together(dbsim: Dbsim) -> None:
    scenario = write(
        dbsim.cwd,
        "three.yaml",
        """\
target:
  kind: sqlite
workload:
  name: slob
  parameters:
    update_pct: 60
load:
  sessions: 0
  bogus: 1
""",
    )
    result = dbsim("run", scenario)
    messages = assert_bad_input(result, lines=3)
    paths = ("load.sessions", "workload.parameters.update_pct", "load.bogus")
    for path in paths:
        naming = [m for m in messages if m.startswith(f"{path}: ")]
        assert len(naming) == 1, (path, messages)
    assert_no_bundle(dbsim)


def test_three_mistakes_validate_the_same_way(dbsim_in_process: InProcessDbsim) -> None:
    scenario = write(
        dbsim_in_process.cwd,
        "three.yaml",
        "workload:\n  name: slob\n  parameters:\n    update_pct: 60\n"
        "load:\n  sessions: 0\n  bogus: 1\n",
    )
    run = dbsim_in_process("run", scenario)
    validate = dbsim_in_process("validate", scenario)
    assert_bad_input(validate, lines=3)
    assert validate.stdout == ""
    assert sorted(validate.stderr_lines) == sorted(run.stderr_lines)


def test_missing_scenario_file(dbsim_in_process: InProcessDbsim) -> None:
    messages = assert_bad_input(dbsim_in_process("run", "no-such-scenario.yaml"), lines=1)
    assert "no-such-scenario.yaml" in messages[0]
    assert "no such" in messages[0].lower()
    assert_no_bundle(dbsim_in_process)


def test_yaml_syntax_error_gives_line_and_column(dbsim_in_process: InProcessDbsim) -> None:
    scenario = write(
        dbsim_in_process.cwd, "broken.yaml", "load:\n  sessions: 1\n  duration_s: 3: 4\n"
    )
    messages = assert_bad_input(dbsim_in_process("run", scenario), lines=1)
    match = re.search(r"broken\.yaml:(\d+):(\d+): ", messages[0])
    assert match, messages
    assert int(match.group(1)) == 3, messages  # the offending line
    assert int(match.group(2)) >= 1


def test_top_level_list_is_not_a_scenario(dbsim_in_process: InProcessDbsim) -> None:
    scenario = write(dbsim_in_process.cwd, "list.yaml", "- target\n- workload\n")
    messages = assert_bad_input(dbsim_in_process("run", scenario), lines=1)
    assert "list.yaml" in messages[0]
    assert "mapping" in messages[0]


def test_literal_password_is_refused_with_a_pointer_to_password_env(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    scenario = write(
        dbsim.cwd,
        "secret.yaml",
        "target:\n  kind: postgres\n  password: hunter2-e2e\nworkload:\n  name: slob\n",
    )
    result = dbsim("run", scenario)
    messages = assert_bad_input(result, lines=1)
    assert messages[0].startswith("target.password: "), messages
    assert "password_env" in messages[0]
    assert "hunter2-e2e" not in result.stdout + result.stderr  # never echo the secret
    assert_no_bundle(dbsim)


def test_unknown_workload_name(dbsim_in_process: InProcessDbsim) -> None:
    scenario = write(dbsim_in_process.cwd, "wl.yaml", "workload:\n  name: no-such-workload\n")
    messages = assert_bad_input(dbsim_in_process("run", scenario))
    assert any(m.startswith("workload.name: ") and "no-such-workload" in m for m in messages)


def test_unknown_target_kind(dbsim_in_process: InProcessDbsim) -> None:
    scenario = write(
        dbsim_in_process.cwd, "tk.yaml", "target:\n  kind: no-such-kind\nworkload:\n  name: slob\n"
    )
    messages = assert_bad_input(dbsim_in_process("run", scenario))
    assert any(m.startswith("target.kind: ") and "no-such-kind" in m for m in messages)
    assert any("sqlite" in m for m in messages)  # lists the known kinds


# --------------------------------------------------------------------------- command line


def test_unknown_option_is_one_line(dbsim_in_process: InProcessDbsim) -> None:
    messages = assert_bad_input(dbsim_in_process("run", "--bogus"), lines=1)
    assert "--bogus" in messages[0]


def test_unknown_option_is_one_line_without_traceback(dbsim: Dbsim) -> None:
    """What holds today, whatever the exit code: one error line and no traceback."""
    result = dbsim("run", "--bogus")
    assert result.rc != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert len(result.stderr_lines) == 1, result.describe()
    assert result.stderr_lines[0].startswith("error: ")
    assert "--bogus" in result.stderr
    assert_no_bundle(dbsim)


def test_set_without_equals(dbsim_in_process: InProcessDbsim) -> None:
    messages = assert_bad_input(dbsim_in_process("run", "--set", "load.sessions"), lines=1)
    assert "load.sessions" in messages[0]
    assert "=" in messages[0]  # says what the form is
    assert_no_bundle(dbsim_in_process)


def test_set_with_an_invalid_value(dbsim_in_process: InProcessDbsim) -> None:
    messages = assert_bad_input(dbsim_in_process("run", "--set", "load.duration_s=-1"), lines=1)
    assert messages[0].startswith("load.duration_s: "), messages
    assert_no_bundle(dbsim_in_process)


def test_set_of_an_unknown_field(dbsim_in_process: InProcessDbsim) -> None:
    messages = assert_bad_input(dbsim_in_process("validate", "--set", "load.bogus=1"), lines=1)
    assert messages[0].startswith("load.bogus: "), messages


# --------------------------------------------------------------------------- environment


def test_environment_override_is_validated(dbsim_in_process: InProcessDbsim) -> None:
    result = dbsim_in_process("run", env={"DBSIM_LOAD__SESSIONS": "0"})
    messages = assert_bad_input(result, lines=1)
    assert messages[0].startswith("load.sessions: "), messages
    assert_no_bundle(dbsim_in_process)


def test_environment_override_applies(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    result = dbsim("validate", env={"DBSIM_LOAD__SESSIONS": "3"})
    assert result.rc == 0, result.describe()
    assert yaml.safe_load(result.stdout)["load"]["sessions"] == 3
    # --set beats the environment.
    result = dbsim("validate", "--set", "load.sessions=5", env={"DBSIM_LOAD__SESSIONS": "3"})
    assert result.rc == 0, result.describe()
    assert yaml.safe_load(result.stdout)["load"]["sessions"] == 5


# --------------------------------------------------------------------------- run failures


def _failing_run(dbsim: Dbsim, out: Path, *extra: str) -> CliResult:
    # A valid scenario whose target cannot be opened: the run starts, fails, writes its bundle.
    # The missing directory's name is long enough that the message exceeds 80 columns.
    missing = out.parent / ("missing-" + "d" * 72) / "x.db"
    return dbsim("run", "--duration", "1", "-o", out, "--set", f"target.path={missing}", *extra)


def test_failed_run_writes_a_failed_bundle(dbsim: Dbsim, out_dir: Path) -> None:
    result = _failing_run(dbsim, out_dir)
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    assert any(line.startswith("error: target.path: ") for line in result.stderr_lines), (
        result.describe()
    )
    summary = read_summary(single_bundle(out_dir))
    assert summary["status"] == "failed"
    assert summary["state"] == "finished"
    assert summary["error"].startswith("target.path: ")
    assert summary["reason"].startswith("setup: ")


def test_failed_run_exits_3_with_one_error_line(dbsim: Dbsim, out_dir: Path) -> None:
    result = _failing_run(dbsim, out_dir, "--quiet")
    assert result.rc == EXIT_RUN_FAILED, result.describe()
    lines = [line for line in result.stderr_lines if line]
    assert len(lines) == 1, result.describe()
    assert lines[0].startswith("error: target.path: ") and lines[0].endswith("does not exist")


# --------------------------------------------------------------------------- schema


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_schema_is_json_schema(dbsim_in_process: InProcessDbsim) -> None:
    result = dbsim_in_process("schema")
    assert result.rc == 0, result.describe()
    assert result.stderr == ""
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["type"] == "object"
    for section in ("target", "workload", "load"):
        assert section in schema["properties"], sorted(schema["properties"])
    assert "workload" in schema.get("required", [])
    # Every reference resolves inside the document.
    defs = schema.get("$defs", {})
    for ref in _refs(schema):
        assert ref.startswith("#/$defs/"), ref
        assert ref.removeprefix("#/$defs/") in defs, ref
    # The target union offers the default kind.
    assert "sqlite" in json.dumps(schema["properties"]["target"]) + json.dumps(defs)


def test_version(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    result = dbsim("version")
    assert result.rc == 0, result.describe()
    assert re.fullmatch(r"dbsim \d+\.\d+\.\d+\S*\n", result.stdout), result.stdout


# --------------------------------------------------------------------------- the in-process runner


def test_in_process_runner_says_what_the_real_binary_says(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim
) -> None:
    """The substitution the in-process tests rely on: the same bad scenario (three mistakes,
    one from the environment) gives the same exit code, stdout and stderr both ways, and the
    test process's environment, directory and signal handlers are as they were."""
    scenario = write(dbsim.cwd, "three.yaml", "workload:\n  name: slob\nload:\n  bogus: 1\n")
    env = {"DBSIM_LOAD__SESSIONS": "0"}
    before = (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGINT))
    real = dbsim("run", scenario, "--set", "load.duration_s=-1", env=env)
    inside = dbsim_in_process("run", scenario, "--set", "load.duration_s=-1", env=env)
    assert (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGINT)) == before
    assert_bad_input(real, lines=3)
    assert (inside.rc, inside.stdout, inside.stderr) == (real.rc, real.stdout, real.stderr), (
        f"{real.describe()}\n{inside.describe()}"
    )
    assert_no_bundle(dbsim)
