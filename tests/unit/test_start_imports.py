"""What a dbsim start does not import (issue #25: the suite starts dbsim thousands of times,
and a start's CPU is mostly imports): each probe runs in a fresh process and lists the
modules it must not have loaded. The processes are forks of one interpreter started for this
module that has imported ``sim.cli.entry`` and nothing else of dbsim (what every ``dbsim``
start imports first; ~0.2 CPU-s a probe when each imported it again): whatever that import
loads is in every probe's ``sys.modules``, so a probe can only find more, never less, than a
new interpreter would. The workloads register their classes by name
(sim.registry.WorkloadEntry), so reading a scenario imports only their parameter models."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim import registry

REPO = Path(__file__).resolve().parents[2]
#: The workloads' code and the libraries only it needs.
HEAVY = (
    "numpy",
    "sqlalchemy",
    "workloads.common",
    "workloads.slob.workload",
    "workloads.ssb.workload",
    "workloads.eda.workload",
    "workloads.sql.workload",
)


#: The forking interpreter: reads one probe a line (JSON: code, stdout and stderr paths), forks,
#: runs the code in the child as ``python -c`` would (stdin /dev/null, cwd the repository), and
#: answers with the child's exit status once it has ended (reaped: its CPU is counted).
SERVER = """
import json, os, sys, traceback
from sim.cli.entry import main  # every dbsim start imports it first
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for fd, to in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, to)
        code = 0
        try:
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


@dataclass
class Probe:
    """What one probe printed, and its exit status."""

    returncode: int
    stdout: str
    stderr: str


class ProbeServer:
    """The SERVER process, and the probes sent to it one at a time."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.count = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, code: str, timeout: float = 120) -> Probe:
        self.count += 1
        out, err = (self.where / f"probe-{self.count}.{n}" for n in ("out", "err"))
        assert self.proc.stdin and self.proc.stdout
        request = {"code": code, "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"the probe took more than {timeout} s"
        status = self.proc.stdout.readline()
        assert status, "the probe server ended"
        return Probe(int(status), _text(out), _text(err))

    def close(self) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.close()  # the server's loop ends at end of input
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeServer]:
    server = ProbeServer(tmp_path_factory.mktemp("probes"))
    try:
        yield server
    finally:
        server.close()


def _loaded_after(probes: ProbeServer, *argv: str, modules: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``modules`` ``dbsim ARGV`` (run in a fresh interpreter) loaded."""
    probe = (
        "import sys\nfrom sim.cli.entry import main\n"
        f"code = main({list(argv)!r})\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))"
    )
    done = probes.run(probe)
    return [m.strip("' ") for m in done.stdout.strip().splitlines()[-1].strip("[]").split(",") if m]


#: What a start that runs nothing must not load: numpy, SQLAlchemy, the drivers, Locust and gevent,
#: the engine (validate without --connect builds the target and the workload unopened).
RUN_MACHINERY = (
    "numpy",
    "sqlalchemy",
    "asyncpg",
    "asyncmy",
    "oracledb",
    "pyodbc",
    "locust",
    "gevent",
    "sim.core.engine",
    "sim.core.metrics",
)


@pytest.mark.parametrize("example", ["quickstart.yaml", "eda-blended.yaml", "ssb"])
def test_validate_imports_no_run_machinery(
    probes: ProbeServer, example: str, tmp_path: Path
) -> None:
    scenario = REPO / "examples" / example
    if example == "ssb":  # no example runs SSB: on SQLite, the other SQL workload with rows
        scenario = tmp_path / "ssb.yaml"
        scenario.write_text("name: s\ntarget:\n  kind: sqlite\nworkload:\n  name: ssb\n")
    # The registry imports every target and collector module: those import asyncio, ssl and
    # http.client in the functions that use them (the EDA workload's sessions do need asyncio).
    event_loop = () if example == "eda-blended.yaml" else ("asyncio", "ssl", "http.client")
    assert (
        _loaded_after(probes, "validate", str(scenario), modules=(*RUN_MACHINERY, *event_loop))
        == []
    )


def test_version_imports_no_scenario_machinery(probes: ProbeServer) -> None:
    modules = (*RUN_MACHINERY, "asyncio", "yaml", "sim.config.resolve", "sim.run.runner")
    assert _loaded_after(probes, "version", modules=modules) == []


def test_an_import_writes_its_capture_without_numpy(probes: ProbeServer, tmp_path: Path) -> None:
    iostat = REPO / "tests" / "data" / "iostat" / "iostatplot_object1_indented.out"
    argv = ("import", "iostat", str(iostat), "-o", str(tmp_path))
    assert _loaded_after(probes, *argv, modules=RUN_MACHINERY) == []


def test_the_capture_loop_imports_no_numpy(probes: ProbeServer) -> None:
    # dbsim capture writes intervals without operations (sim.core.intervals), no histograms.
    probe = "import sys\nimport sim.capture.loop\nprint('numpy' in sys.modules)"
    done = probes.run(probe)
    assert done.stdout.split() == ["False"], done.stderr[-2000:]


def test_drop_imports_neither_numpy_nor_the_load_progress(
    probes: ProbeServer, tmp_path: Path
) -> None:
    scenario = tmp_path / "drop.yaml"
    scenario.write_text(
        f"name: d\ntarget:\n  kind: sqlite\n  path: {tmp_path / 'absent.db'}\n"
        "workload:\n  name: slob\n"
    )
    assert _loaded_after(probes, "drop", str(scenario), modules=(*RUN_MACHINERY, "rich")) == []


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_scenario_refused_by_its_fields_imports_no_workload(
    probes: ProbeServer, tmp_path: Path, command: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nworkload:\n  name: slob\nload:\n  sessions: -1\n")
    modules = (*HEAVY, *RUN_MACHINERY, "rich", "sim.run.runner")
    assert _loaded_after(probes, command, str(bad), modules=modules) == []


def test_the_schema_imports_no_workload(probes: ProbeServer) -> None:
    assert _loaded_after(probes, "schema") == []


def test_a_file_tree_scenario_imports_no_sql_workload(probes: ProbeServer) -> None:
    loaded = _loaded_after(probes, "validate", str(REPO / "examples" / "eda-blended.yaml"))
    assert "workloads.eda.workload" in loaded  # validate builds the workload it checks
    assert not {"sqlalchemy", "workloads.common", "workloads.slob.workload"} & set(loaded)


@pytest.mark.parametrize("name", sorted(registry.workloads()))
def test_an_entry_by_name_says_what_its_class_says(name: str) -> None:
    entry = registry.workloads()[name]
    cls = entry.workload_class
    assert (entry.class_name, entry.parameters_model, entry.needs) == (
        cls.__name__,
        cls.parameters_model,
        cls.needs,
    )


def test_an_entry_by_name_without_its_model_is_refused() -> None:
    with pytest.raises(TypeError, match="parameters_model and needs"):
        registry.WorkloadEntry("x", "workloads.slob.workload:SlobWorkload", "x")


def test_choosing_a_sqlite_runs_runner_leaves_the_native_sql_loops_out(probes: ProbeServer) -> None:
    probe = (
        "import sys\n"
        "from sim.config.resolve import resolve\n"
        "from sim.core.session_choice import choose_runner\n"
        "from sim.run.runner import build_target\n"
        "scenario = resolve(None, [])\n"
        "choose_runner(scenario.load, [], build_target(scenario))\n"
        "print(sorted(m for m in ('storage.targets.pgloop_session', 'asyncpg', 'asyncmy')"
        " if m in sys.modules))"
    )
    done = probes.run(probe)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_the_kinds_asked_for_a_native_loop_are_the_loops_backends() -> None:
    from sim.core.session_choice import NATIVE_SQL_KINDS
    from storage.targets.pgloop_session import BACKENDS

    assert set(NATIVE_SQL_KINDS) == set(BACKENDS)


def test_the_native_sql_loops_module_leaves_asyncmy_out_until_an_error_is_classed(
    probes: ProbeServer,
) -> None:
    probe = (
        "import sys\n"
        "import storage.targets.pgloop_session\n"
        "from storage.targets import marialoop\n"
        "before = 'asyncmy' in sys.modules\n"
        "print(before, marialoop.error_class(1146), marialoop.error_class(2013))"
    )
    done = probes.run(probe)
    # 1146 (no such table) is a ProgrammingError by asyncmy's table, read when first asked.
    assert done.stdout.split() == ["False", "ProgrammingError", "OperationalError"], done.stderr
