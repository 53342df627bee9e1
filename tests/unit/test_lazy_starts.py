"""What `dbsim --help` and a SQLite run's start leave out (each probe a fresh interpreter):
--help registers every command without the scenario's models and YAML, the lab's machinery
or asyncio, and a run preloads only its own target's SQLAlchemy dialect, none for a workload
of files (sim.run.preload)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALL_DIALECTS = (
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
)


def _probe(code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter in the repository."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_help_imports_no_scenario_lab_or_event_loop() -> None:
    heavy = (
        "yaml",
        "sim.config.resolve",
        "sim.config.scenario",
        "storage.lab.lifecycle",
        "storage.lab.array",
        "asyncio",
    )
    code = (
        "import contextlib, io, sys\nfrom sim.cli.entry import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n    code = main(['--help'])\n"
        "assert code == 0 and 'lab' in out.getvalue() and 'run' in out.getvalue(), code\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    assert _probe(code) == "[]"


def test_a_sqlite_run_preloads_only_the_sqlite_dialect() -> None:
    others = (*ALL_DIALECTS[1:], "sqlalchemy.dialects.oracle", "oracledb", "pyodbc", "asyncpg")
    code = (
        "import sys\nfrom sim.config.resolve import resolve\n"
        "from sim.run.preload import run_machinery\n"
        "scenario = resolve(None, [])\n"
        "run_machinery(scenario)\n"
        "assert 'sqlalchemy.dialects.sqlite' in sys.modules and 'numpy' in sys.modules\n"
        f"print(sorted(m for m in {others!r} if m in sys.modules))"
    )
    assert _probe(code) == "[]"


def test_a_file_tree_run_preloads_no_sqlalchemy() -> None:
    scenario = REPO / "examples" / "eda-blended.yaml"
    code = (
        "import sys\nfrom sim.config.resolve import resolve\n"
        "from sim.run.preload import RUN_MODULES, run_machinery, run_modules\n"
        f"scenario = resolve({str(scenario)!r}, [])\n"
        "assert run_modules(scenario) == RUN_MODULES, run_modules(scenario)\n"
        "run_machinery(scenario)\n"
        "assert 'numpy' in sys.modules and 'sim.core.metrics' in sys.modules\n"
        "print(sorted(m for m in sys.modules if m.startswith('sqlalchemy')))"
    )
    assert _probe(code) == "[]"


def test_a_locust_process_start_preloads_every_sql_dialect() -> None:
    from sim.run.preload import run_modules

    assert {"sqlalchemy", "sqlalchemy.schema", *ALL_DIALECTS} <= set(run_modules(None))


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("sqlite", ("sqlalchemy.dialects.sqlite",)),
        ("postgres", ("sqlalchemy.dialects.postgresql",)),
        ("mysql", ("sqlalchemy.dialects.mysql",)),
        ("oracle", ("sqlalchemy.dialects.oracle",)),
        ("sqlserver", ("sqlalchemy.dialects.mssql",)),
        ("odbc", ALL_DIALECTS),  # the dialect is in the settings: every one, as before
        ("filetree", ALL_DIALECTS),
        (None, ALL_DIALECTS),  # a Locust process's start, before any scenario
    ],
)
def test_a_run_preloads_its_kinds_dialect(kind: str | None, expected: tuple[str, ...]) -> None:
    from sim.run.preload import run_dialects

    assert run_dialects(kind) == expected


def test_the_lab_package_imports_its_machinery_at_the_first_use_of_a_name() -> None:
    code = (
        "import sys\nimport storage.lab\nfrom storage.lab.limits import DEFAULT_MOUNT\n"
        "before = 'storage.lab.lifecycle' in sys.modules\n"
        "from storage.lab import KEEP, Lab, parse_volume, system\n"
        "from storage.lab import lifecycle, volumes\n"
        "assert Lab is lifecycle.Lab and KEEP is lifecycle.KEEP, Lab\n"
        "assert parse_volume is volumes.parse_volume and DEFAULT_MOUNT == lifecycle.DEFAULT_MOUNT\n"
        "try:\n    storage.lab.no_such_name\nexcept AttributeError as exc:\n    missing = str(exc)\n"
        "print(before, system.__name__, missing)"
    )
    assert _probe(code) == (
        "False storage.lab.system module 'storage.lab' has no attribute 'no_such_name'"
    )


def test_the_lab_packages_lazy_names_and_its_exports_are_one_list() -> None:
    """storage.lab names its exports three times (for the type checker, the lazy table and
    ``__all__``, which the linter needs literal): a name in one and not the other fails here,
    and every lazy name resolves to its module's own object."""
    import importlib

    import storage.lab as lab

    lazy = lab._LAZY  # the table under test
    assert set(lab.__all__) == {*lazy, "apply_step_ceiling"}
    for name, module in lazy.items():
        assert getattr(lab, name) is getattr(importlib.import_module(module), name), name
