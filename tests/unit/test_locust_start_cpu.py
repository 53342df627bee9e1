"""What a distributed run's Locust processes leave out of their CPU (issue #25), each probe a
fresh interpreter: the master of ``dbsim run --workers`` imports no SQLAlchemy (it runs no
session), and Locust's default arguments are built once a process, not once per option of
every ``spawn`` message a worker handles (sim.locust.app.cache_default_args)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _probe(code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter in the repository."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_distributed_runs_master_starts_without_sqlalchemy() -> None:
    """What run_distributed does before its workers join: preload, the Locust environment,
    the scenario's target (the master builds it to elect the loader) and its workload."""
    code = (
        "import sys\nimport sim.locust.app as app\nfrom sim.config.resolve import resolve\n"
        "from sim.run.preload import MASTER_MODULES\n"
        "from sim.run.runner import build_target, build_workload\n"
        "app.setup_process('WARNING', MASTER_MODULES)\n"
        "scenario = resolve(None, [])\n"
        "assert scenario.target.kind == 'sqlite', scenario.target.kind\n"
        "app.environment_for(scenario, 2)\n"
        "build_workload(scenario, build_target(scenario))\n"
        "assert 'numpy' in sys.modules and 'sim.judge.slo' in sys.modules\n"
        "print(sorted(m for m in sys.modules if m.startswith('sqlalchemy')))"
    )
    assert _probe(code) == "[]"


def test_locusts_default_arguments_are_built_once_and_copied() -> None:
    code = (
        "import sim.locust.app as app\nfrom locust import argument_parser as ap\n"
        "expected = ap.default_args_dict()\n"
        "built, original = [], ap.default_args_dict\n"
        "ap.default_args_dict = lambda: built.append(1) or original()\n"
        "app.cache_default_args()\n"
        "app.cache_default_args()  # a second call keeps the first cache\n"
        "first = ap.default_args_dict()\n"
        "first['users'] = 'changed by a caller'\n"
        "again = [ap.default_args_dict() for _ in range(56)]\n"
        "print(all(a == expected for a in again), len(built), len(expected) > 40)"
    )
    assert _probe(code) == "True 1 True"
