"""Issue #20: input that hung or crashed dbsim, each case as a ``dbsim`` child process.

Every case must end within :data:`HANG_TIMEOUT_S` (a FIFO used to block ``open()`` forever and
SIGTERM with it), exit 2, print only ``error:`` lines — naming the file or the field — and never
a traceback nor "unexpected". The bundle cases damage copies of one real bundle (a 1-second
run of the default scenario with one SLO whose limit is 1e308: the same run's summary is what
the strict-JSON case checks, so the module starts one run, not two).

The cases that cannot block (YAML after the first, a scenario over the size limit, duplicate
keys, a file that is not a scenario, oversized numbers, too many steps, a bundle with wrong
types, literal secrets, a password file of bad bytes or none) run the same command through
``sim.cli.entry.main`` in the test process instead (``dbsim_in_process``: the same directories
and environment, about a second less each); every FIFO, device and nesting case stays a child
under the hang bound, and so does the raw non-UTF-8 byte in argv (the process decodes it).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    CliResult,
    Dbsim,
    InProcessDbsim,
    clean_environment,
    single_bundle,
)

pytestmark = pytest.mark.e2e

EXIT_BAD_INPUT = 2
#: A hang bound, not a speed: a refusal takes ~2 s, and 8 parallel workers on two busy cores
#: stretched one past 20 s (make test, with other suites beside it).
HANG_TIMEOUT_S = 60.0
PG = "target: {kind: postgres, host: 127.0.0.1, port: 5432, database: test, user: postgres}\n"
SLOB = "workload: {name: slob}\n"


def assert_refused(result: CliResult, *names: str, lines: int | None = 1) -> list[str]:
    """Exit 2, only ``error:`` lines (``lines`` of them), each naming one of ``names``."""
    text = result.stdout + result.stderr
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in text and "unexpected" not in text, result.describe()
    got = result.stderr_lines
    assert got and all(line.startswith("error: ") for line in got), result.describe()
    if lines is not None:
        assert len(got) == lines, result.describe()
    for line in got:
        assert any(name in line for name in names), f"names none of {names}: {result.describe()}"
    return got


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def bounded(dbsim: Dbsim, *args: str | os.PathLike[str], **kwargs: object) -> CliResult:
    return dbsim(*args, timeout=HANG_TIMEOUT_S, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- scenario files


@pytest.mark.parametrize("command", ["validate", "load", "drop", "run"])
def test_a_fifo_as_the_scenario(dbsim: Dbsim, command: str) -> None:
    scenario = fifo(dbsim.cwd / "scenario.yaml")
    (line,) = assert_refused(bounded(dbsim, command, scenario), str(scenario))
    assert line.endswith("a FIFO, not a regular file; a scenario file must be one"), line


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self"])
def test_a_device_or_directory_as_the_scenario(dbsim: Dbsim, path: str) -> None:
    (line,) = assert_refused(bounded(dbsim, "validate", path), path)
    assert "not a regular file" in line


def test_a_scenario_above_the_size_limit(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    big = write(dbsim.cwd / "big.yaml", SLOB + "description: " + "x" * (1 << 20) + "\n")
    (line,) = assert_refused(bounded(dbsim, "validate", big), str(big))
    assert "a scenario file is at most 1 MiB" in line


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("collectors: {ontap: &a !!pairs [[x, *a]]}\n", "inside its own anchor"),
        ("collectors: {ontap: &a !!omap [{x: *a}]}\n", "inside its own anchor"),
        ("load: {sessions: !!int abc}\n", "load.sessions: !!int 'abc' is not an integer"),
        ("load: {warmup_s: !!float soon}\n", "load.warmup_s: !!float 'soon' is not a number"),
        ("load: {seed: " + "7" * 5000 + "}\n", "load.seed: a number of 5000 characters"),
        ("description: !!binary aGk=\n", "description: tag !!binary is not accepted"),
    ],
)
def test_yaml_that_escaped_as_unexpected(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, text: str, field: str
) -> None:
    if not text.startswith("collectors: {ontap: &a !!pairs"):
        dbsim = dbsim_in_process  # the first case proves the real process says the same
    scenario = write(dbsim.cwd / "s.yaml", SLOB + text)
    (line,) = assert_refused(bounded(dbsim, "validate", scenario), "s.yaml:")
    assert field in line, line


def test_huge_numbers_in_set_and_environment(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    digits = "9" * 5000
    (line,) = assert_refused(bounded(dbsim, "validate", "--set", f"load.seed={digits}"), "--set")
    assert line == "error: --set load.seed: a number of 5000 characters (at most 100)"
    result = bounded(dbsim, "validate", env={"DBSIM_LOAD__SEED": digits})
    (line,) = assert_refused(result, "DBSIM_LOAD__SEED")
    assert line == "error: environment DBSIM_LOAD__SEED: a number of 5000 characters (at most 100)"


def test_a_duplicate_key_is_refused_not_silently_replaced(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    scenario = write(
        dbsim.cwd / "dup.yaml",
        "workload:\n  name: slob\n  parameters:\n    table_prefix: mine\n    table_prefix: theirs\n",
    )
    (line,) = assert_refused(bounded(dbsim, "validate", scenario), "dup.yaml:5:5:")
    assert "workload.parameters.table_prefix: duplicate key (first at line 4" in line


def test_a_file_that_is_not_a_scenario_is_not_printed_back(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    # /etc/shadow's shape: every line ends in ':', which YAML reads as a key with no value.
    lines = [f"user{i}:$6$S4ltS3cr3t{i}$hash:19000:0:99999:7:::" for i in range(5)]
    shadow = write(dbsim.cwd / "shadow", "\n".join(lines) + "\n")
    result = bounded(dbsim, "validate", shadow)
    (line,) = assert_refused(result, str(shadow))
    assert "not a scenario: none of its 5 top-level keys is a section" in line
    assert "S4ltS3cr3t" not in result.stdout + result.stderr


def test_a_non_utf8_byte_in_a_path(dbsim: Dbsim) -> None:
    odd = os.fsdecode(b"/tmp/dbsim-\xff.db")  # passed to the child as the raw byte
    result = bounded(dbsim, "validate", "--set", f"target.path={odd}")
    assert_refused(result, "target.path: contains a byte that is not UTF-8 text")
    result = bounded(dbsim, "run", "--duration", "1", "-o", os.fsdecode(b"out-\xff"))
    assert_refused(result, "output.directory: contains a byte that is not UTF-8 text")
    assert not list(dbsim.cwd.iterdir())  # no bundle directory was created


# --------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_compare_thresholds_that_are_not_a_file(dbsim: Dbsim, kind: str) -> None:
    path = Path(kind) if kind.startswith("/") else fifo(dbsim.cwd / "t.yaml")
    result = bounded(dbsim, "compare", "a", "b", "--thresholds", path)
    (line,) = assert_refused(result, str(path))
    assert "not a regular file; a thresholds file must be one" in line


# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[CliResult, Path]:
    """The module's one real run, a child: the default scenario (SQLite, SLOB) with an SLO
    whose limit is 1e308, ``--json``; its result (stdout) and its bundle."""
    root = tmp_path_factory.mktemp("hostile-bundle")
    (root / "tmp").mkdir()
    runner = Dbsim(root, clean_environment(root / "tmp"))
    scenario = write(root / "slo.yaml", SLOB + "slos:\n  - {p99_us_max: 1.0e+308}\n")
    # Paced (open loop, issue #25): what is read is its JSON and bundle, not its throughput.
    pace = ("--set", "load.mode=open", "--set", "load.rate_ops_s=400")
    result = runner("run", scenario, "--duration", "1", *pace, "-q", "-o", root / "runs", "--json")
    assert result.rc == 0, result.describe()
    return result, single_bundle(root / "runs")


@pytest.fixture(scope="module")
def real_bundle(real_run: tuple[CliResult, Path]) -> Path:
    return real_run[1]


def damaged(real: Path, where: Path, how: str) -> Path:
    bundle = where / f"20990101-000000-{how}"
    shutil.copytree(real, bundle)
    summary = bundle / "summary.json"
    if how == "fifo":
        summary.unlink()
        fifo(summary)
    elif how == "zero":
        summary.unlink()
        summary.symlink_to("/dev/zero")
    elif how == "deep":
        summary.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif how == "types":
        data = json.loads(summary.read_text(encoding="utf-8"))
        data["operations"]["read"] = "fast"
        summary.write_text(json.dumps(data), encoding="utf-8")
    return bundle


BUNDLE_DAMAGE = {
    "fifo": "a FIFO, not a regular file",
    "zero": "a character device, not a regular file",
    "deep": "nested more than 16 levels deep",
    "types": "operations.read: Input should be a valid dictionary (got str)",
}


@pytest.mark.parametrize("how", sorted(BUNDLE_DAMAGE))
def test_damaged_bundles_in_report_runs_and_compare(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, real_bundle: Path, how: str
) -> None:
    if how == "types":  # nothing to block on or recurse into: the command's decision only
        dbsim = dbsim_in_process
    runs = dbsim.cwd / "runs"
    runs.mkdir()
    bundle = damaged(real_bundle, runs, how)
    summary = str(bundle / "summary.json")
    expected = f"{summary}: {BUNDLE_DAMAGE[how]}"
    (line,) = assert_refused(bounded(dbsim, "report", bundle), summary)
    assert line.startswith(f"error: report: {expected}"), line
    (line,) = assert_refused(bounded(dbsim, "compare", real_bundle, bundle), summary)
    assert line.startswith(f"error: candidate: {expected}"), line
    shutil.copytree(real_bundle, runs / real_bundle.name)
    result = bounded(dbsim, "runs", runs, "--json")
    (line,) = assert_refused(result, summary)
    assert line.startswith(f"error: {expected}"), line
    # The good bundle is still listed, the damaged one as unreadable.
    rows = {row["run"]: row["status"] for row in json.loads(result.stdout)}
    assert rows == {real_bundle.name: "completed", bundle.name: "unreadable"}


@pytest.mark.parametrize("command", ["load", "drop"])
def test_a_fifo_as_the_tree_marker(dbsim: Dbsim, command: str) -> None:
    """A FIFO planted as the tree's marker is refused, never opened for a blocking read: a
    reader that waits for a writer would hang here until the bound fails the test."""
    root = dbsim.cwd / "tree"
    root.mkdir()
    fifo(root / ".dbsim-tree")
    scenario = write(
        dbsim.cwd / "eda.yaml",
        f"target: {{kind: filetree, path: {root}}}\nworkload: {{name: eda}}\n",
    )
    assert_refused(bounded(dbsim, command, scenario), ".dbsim-tree")


def test_summary_json_is_strict_json_with_a_huge_limit(real_run: tuple[CliResult, Path]) -> None:
    result, bundle = real_run  # the run the damaged-bundle cases copy

    def refuse(name: str) -> None:
        pytest.fail(f"{name} written as JSON")

    for text in (result.stdout, (bundle / "summary.json").read_text("utf-8")):
        summary = json.loads(text, parse_constant=refuse)
        verdicts = summary["slos"]["verdicts"]
        assert verdicts and all(v["limit"] == 1e308 and v["met"] for v in verdicts)
        assert all(v["margin_pct"] is None for v in verdicts)  # was Infinity


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize("kind", ["invalid utf-8", "/dev/zero", "fifo", "empty"])
def test_password_files_that_cannot_be_a_password(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, kind: str
) -> None:
    if kind in ("invalid utf-8", "empty"):  # a regular file: nothing to block on
        dbsim = dbsim_in_process
    path = dbsim.cwd / "pw"
    if kind == "fifo":
        fifo(path)
    elif kind == "/dev/zero":
        path = Path(kind)
    else:
        path.write_bytes(b"\xff\xfehunter2\n" if kind == "invalid utf-8" else b"")
    scenario = write(dbsim.cwd / "pg.yaml", PG.replace("}", f", password_file: {path}}}") + SLOB)
    result = bounded(dbsim, "load", scenario)
    assert_refused(result, f"target.password_file: {path}: ")
    assert "hunter2" not in result.stdout + result.stderr


def test_a_literal_secret_anywhere_is_refused_by_validate_and_never_printed(
    dbsim_in_process: InProcessDbsim,
) -> None:
    dbsim = dbsim_in_process
    scenario = write(
        dbsim.cwd / "ontap.yaml",
        SLOB + "collectors:\n  ontap:\n    cluster: https://c\n    password: S3cr3t-ontap-20\n"
        "    username_env: U\n    nested: [{api_token: S3cr3t-token-20}]\n",
    )
    for command in ("validate", "run"):
        result = bounded(dbsim, command, scenario)
        lines = assert_refused(result, "collectors.ontap.", lines=3)
        assert lines == [
            "error: collectors.ontap.password: a literal password is not accepted; name an "
            "environment variable with password_env or a file with password_file",
            "error: collectors.ontap.nested[0].api_token: a literal api_token is not accepted; "
            "name an environment variable with password_env or a file with password_file",
            # collectors.ontap is validated with the scenario: its unknown field is named too
            "error: collectors.ontap.nested: Extra inputs are not permitted",
        ]
        assert "S3cr3t" not in result.stdout + result.stderr


# --------------------------------------------------------------------------- load shape


@pytest.mark.timing  # a wall-clock bound on a CPU-bound run (51 s beside 8 workers)
def test_many_tiny_steps_cost_linear_time(dbsim: Dbsim, out_dir: Path) -> None:
    steps = "".join("  - {duration_s: 0.001}\n" for _ in range(1000))
    scenario = write(dbsim.cwd / "steps.yaml", SLOB + "load:\n  sessions: 1\n  steps:\n" + steps)
    started = time.monotonic()
    result = dbsim("run", scenario, "-q", "-o", out_dir, timeout=120)
    elapsed = time.monotonic() - started
    assert result.rc == 0, result.describe()
    summary = json.loads((single_bundle(out_dir) / "summary.json").read_text("utf-8"))
    assert sum(1 for s in summary["stages"] if s.get("step") is not None) == 1000
    # 15 s before (the whole summary rewritten per step); ~5 s now, most of it the report.
    assert elapsed < 60, elapsed


def test_more_steps_than_the_limit_are_refused(dbsim_in_process: InProcessDbsim) -> None:
    dbsim = dbsim_in_process
    steps = "[" + ", ".join(["{duration_s: 1}"] * 10_001) + "]"
    scenario = write(dbsim.cwd / "steps.yaml", SLOB + f"load: {{steps: {steps}}}\n")
    (line,) = assert_refused(bounded(dbsim, "validate", scenario), "load.steps")
    assert "at most 10000 items" in line, line
