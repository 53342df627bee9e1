"""The exit-code contract of docs/index.md, row by row, for everything that is wrong before the
first session starts: settings, secrets, refusals, missing data. Each is exit 2 with one
``error:`` line naming the problem, and no bundle left behind — not even the output directory,
when this invocation would have created it; an output directory the user already had keeps
exactly what it held. ``dbsim validate`` finds each one that can be known without connecting.

Real parts only: SQLite files and file trees in the test's directory, and PostgreSQL at
127.0.0.1:5432 (db ``test``) for the credentials ``--connect`` checks. The table's first row
runs the real binary (``python -m sim.cli``); the other rows, and the cases after the table,
run the same command through ``sim.cli.entry.main`` in the test process (``dbsim_in_process``:
the same directories and environment, about a second less each), since what they check is the
command's decision. The refusal with ``--workers`` stays a child: were it not refused, it would
start worker processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_BAD_INPUT, EXIT_RUN_FAILED = 0, 2, 3
UNSET_VARIABLE = "DBSIM_CONTRACT_UNSET_PASSWORD"
POSTGRES = {"kind": "postgres", "host": "127.0.0.1", "port": 5432, "database": "test"}
SSB_SMALL = {"name": "ssb", "parameters": {"tables": 2, "database_size": "1600K"}}


def write_scenario(directory: Path, name: str, **sections: Any) -> Path:
    data: dict[str, Any] = {
        "name": name,
        "target": {"kind": "sqlite", "path": str(directory / f"{name}.sqlite")},
        "workload": SSB_SMALL,
        "load": {"loops_per_session": 5},
    }
    data.update(sections)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def the_one_error_line(result: CliResult) -> str:
    """Exit 2, one ``error:`` line (a run's console may also say which state it reached),
    nothing on stdout, no traceback."""
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    others = [line for line in result.stderr_lines if line.strip() and line not in errors]
    assert all(line.startswith("dbsim ") for line in others), result.describe()
    assert result.stdout == "", result.describe()
    return errors[0]


@dataclass(frozen=True)
class PreRunFailure:
    """One row of the table: how to cause it, what the error line says, and whether
    ``dbsim validate`` (which does not connect) can know it too."""

    name: str
    scenario: Callable[[Path], Path]
    says: tuple[str, ...]
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    validate_finds_it: bool = True


def _bad_setting(d: Path) -> Path:
    return write_scenario(d, "setting", load={"sessions": 0, "loops_per_session": 5})


def _unknown_kind(d: Path) -> Path:
    return write_scenario(d, "kind", target={"kind": "postgresql"})


def _unknown_slo_operation(d: Path) -> Path:
    return write_scenario(d, "slo", slos=[{"op": "raed", "p99_us_max": 5000}])


def _stepped(d: Path) -> Path:
    steps = [{"sessions": 1, "duration_s": 1}, {"sessions": 2, "duration_s": 1}]
    return write_scenario(d, "stepped", load={"steps": steps})


def _unset_password(d: Path) -> Path:
    return write_scenario(d, "secret", target={**POSTGRES, "password_env": UNSET_VARIABLE})


def _incompatible(d: Path) -> Path:
    return write_scenario(d, "combo", workload={"name": "eda"})


def _foreign_table(d: Path) -> Path:
    path = write_scenario(d, "foreign")
    with sqlite3.connect(d / "foreign.sqlite") as conn:
        conn.execute("CREATE TABLE user_1 (mine TEXT)")
        conn.execute("INSERT INTO user_1 VALUES ('the user''s row')")
    return path


def _foreign_directory(d: Path) -> Path:
    tree = d / "my-files"
    tree.mkdir()
    (tree / "thesis.txt").write_text("the user's file\n", encoding="utf-8")
    return write_scenario(
        d, "tree", target={"kind": "filetree", "path": str(tree)}, workload={"name": "eda"}
    )


def _missing_data(d: Path) -> Path:
    return write_scenario(d, "missing")


def _output_blocked(d: Path) -> Path:
    (d / "a-file").write_text("not a directory\n", encoding="utf-8")
    return write_scenario(d, "blocked", output={"directory": str(d / "a-file" / "runs")})


PRE_RUN_FAILURES = [
    PreRunFailure("invalid setting", _bad_setting, ("load.sessions",)),
    PreRunFailure("unknown target kind", _unknown_kind, ("target.kind", "postgresql")),
    PreRunFailure("unknown SLO operation", _unknown_slo_operation, ("slos[0].op", "raed")),
    PreRunFailure(
        "--duration with steps",
        _stepped,
        ("load.duration_s", "--duration", "load.steps"),
        extra_args=("--duration", "5"),
    ),
    PreRunFailure(
        "duration variable with steps",
        _stepped,
        ("DBSIM_LOAD__DURATION_S", "load.steps"),
        env=(("DBSIM_LOAD__DURATION_S", "5"),),
    ),
    PreRunFailure("unset password variable", _unset_password, (UNSET_VARIABLE, "is not set")),
    PreRunFailure("workload not for the target", _incompatible, ("workload.name", "eda")),
    PreRunFailure("foreign table", _foreign_table, ("user_1",), validate_finds_it=False),
    PreRunFailure(
        "foreign directory",
        _foreign_directory,
        ("my-files", "refusing"),
        validate_finds_it=False,
    ),
    PreRunFailure(
        "missing data under --skip-load",
        _missing_data,
        ("--skip-load", "dbsim load"),
        extra_args=("--skip-load",),
        validate_finds_it=False,
    ),
    PreRunFailure(
        "output directory cannot be created",
        _output_blocked,
        ("output.directory", "a-file"),
        validate_finds_it=False,
    ),
]


@pytest.mark.parametrize("case", PRE_RUN_FAILURES, ids=lambda case: case.name)
def test_run_refuses_before_the_first_session_with_exit_2_and_no_bundle(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, tmp_path: Path, case: PreRunFailure
) -> None:
    if case is not PRE_RUN_FAILURES[0]:
        dbsim = dbsim_in_process  # the first row proves the real process says the same
    scenario = case.scenario(dbsim.cwd)
    fresh_output = tmp_path / "fresh" / "runs"
    has_its_own = case.name == "output directory cannot be created"
    output = () if has_its_own else ("-o", fresh_output)
    result = dbsim("run", scenario, *output, *case.extra_args, env=dict(case.env))
    line = the_one_error_line(result)
    for needle in case.says:
        assert needle in line, result.describe()
    assert not (tmp_path / "fresh").exists(), "the refused run left its output directory"
    assert not (dbsim.cwd / "runs").exists()


@pytest.mark.parametrize(
    "case", [c for c in PRE_RUN_FAILURES if c.validate_finds_it], ids=lambda case: case.name
)
def test_validate_finds_what_run_refuses_without_connecting(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, case: PreRunFailure
) -> None:
    if case is not PRE_RUN_FAILURES[0]:
        dbsim = dbsim_in_process  # the first row proves the real process says the same
    scenario = case.scenario(dbsim.cwd)
    extra = tuple(arg for arg in case.extra_args if arg != "--skip-load")
    line = the_one_error_line(dbsim("validate", scenario, *extra, env=dict(case.env)))
    for needle in case.says:
        assert needle in line, line


def test_a_refused_run_leaves_an_existing_output_directory_as_it_was(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    dbsim = dbsim_in_process
    output = tmp_path / "my-runs"
    output.mkdir()
    (output / "notes.txt").write_text("mine\n", encoding="utf-8")
    the_one_error_line(dbsim("run", _missing_data(dbsim.cwd), "--skip-load", "-o", output))
    assert sorted(p.name for p in output.iterdir()) == ["notes.txt"]
    assert (output / "notes.txt").read_text(encoding="utf-8") == "mine\n"


def test_load_refuses_an_unset_password_variable_the_same_way(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    line = the_one_error_line(dbsim("load", _unset_password(dbsim.cwd)))
    assert f"target.password_env: environment variable {UNSET_VARIABLE} is not set" in line


def test_validate_takes_runs_options_and_prints_the_scenario_they_make(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    scenario = write_scenario(dbsim.cwd, "options")
    result = dbsim(
        "validate",
        scenario,
        "--sessions",
        "4",
        "--duration",
        "7",
        "--warmup",
        "1",
        "-o",
        "elsewhere",
        "--set",
        "load.loops_per_session=null",
    )
    assert result.rc == EXIT_OK, result.describe()
    printed = yaml.safe_load(result.stdout)
    assert printed["load"]["sessions"] == 4
    assert printed["load"]["duration_s"] == 7
    assert printed["load"]["warmup_s"] == 1
    assert printed["output"]["directory"] == "elsewhere"
    assert not (dbsim.cwd / "elsewhere").exists(), "validate wrote output"
    assert not (dbsim.cwd / "options.sqlite").exists(), "validate opened the target"


def test_validate_connect_opens_the_target_and_closes_it(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    scenario = write_scenario(dbsim.cwd, "reachable", target={**POSTGRES, "user": "postgres"})
    result = dbsim("validate", scenario, "--connect")
    assert result.rc == EXIT_OK, result.describe()
    assert yaml.safe_load(result.stdout)["target"]["kind"] == "postgres"
    # The round trip was answered and the privileges checked, one line each on stderr.
    assert "SELECT 1 answered" in result.stderr, result.describe()
    assert "✓ CREATE on the schema" in result.stderr, result.describe()


def test_validate_connect_reports_an_unreachable_target_as_a_failed_check(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    closed_port = {**POSTGRES, "port": 1, "user": "postgres"}
    scenario = write_scenario(dbsim.cwd, "unreachable", target=closed_port)
    assert dbsim("validate", scenario).rc == EXIT_OK  # without --connect nothing is opened
    result = dbsim("validate", scenario, "--connect")
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1 and "cannot connect" in errors[0], result.describe()
    assert "127.0.0.1:1" in errors[0], result.describe()
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_missing_data_with_workers_is_refused_before_any_worker_or_bundle(
    dbsim: Dbsim, tmp_path: Path
) -> None:
    fresh_output = tmp_path / "fresh" / "runs"
    result = dbsim(
        "run", _missing_data(dbsim.cwd), "--skip-load", "--workers", "1", "-o", fresh_output
    )
    line = the_one_error_line(result)
    assert "--skip-load" in line and "dbsim load" in line, line
    assert not (tmp_path / "fresh").exists(), "the refused run left its output directory"


def test_validate_takes_slob_appends_and_refuses_a_share_past_100(
    dbsim_in_process: InProcessDbsim,
) -> None:
    """append_pct (not SLOB's) is a SLOB parameter like the others: validate prints it, names
    it in its one line when it is out of range, and knows "append" as an operation an SLO
    may name only while there are appends."""
    dbsim = dbsim_in_process
    slob = {"name": "slob", "parameters": {"scale": 10_000, "update_pct": 20, "append_pct": 25}}
    slos = [{"op": "append", "p99_us_max": 50_000}]
    scenario = write_scenario(dbsim.cwd, "appends", workload=slob, slos=slos)
    result = dbsim("validate", scenario)
    assert result.rc == EXIT_OK, result.describe()
    printed = yaml.safe_load(result.stdout)
    assert printed["workload"]["parameters"]["append_pct"] == 25
    assert not (dbsim.cwd / "appends.sqlite").exists(), "validate opened the target"
    line = the_one_error_line(
        dbsim("validate", scenario, "--set", "workload.parameters.append_pct=101")
    )
    assert "workload.parameters.append_pct" in line
    line = the_one_error_line(
        dbsim("validate", scenario, "--set", "workload.parameters.append_pct=0")
    )
    assert "slos[0].op: unknown operation 'append'" in line
