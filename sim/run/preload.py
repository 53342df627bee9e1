"""Import, before any session runs, what a run would otherwise import in the middle of it.

Commands that only read a scenario (``validate``, ``drop``, ``import``, ``version``) import
numpy, SQLAlchemy, rich and the metrics at the point of use, so they start in a third of the
CPU (issue #25). A run uses all of them (SQLAlchemy and its target's dialect: a SQL
workload's run), and a first import made while sessions run is a stall:
on ``dbsim run``'s asyncio loop the sessions' operations wait behind it (an outlier in the
measured latencies), and on a Locust process's gevent hub nothing is served until it ends —
tests/integration/test_distributed.py's hub monitor caught numpy (the SLO judge's first live
window) and rich (a worker's load progress) blocking the hub for over 0.4 s on a busy host.
So every process that runs a scenario calls :func:`run_machinery` while nothing is timed:
``dbsim run`` before it prepares the run (sim.cli.run), each Locust process at its start
(sim.locust.app: ``dbsim ui`` everything, its scenario not known yet; a worker
:data:`RUN_MODULES` but not SQLAlchemy, which its ``build_engine`` (sim.locust.host) imports
with the target's dialect, in gevent's thread pool, when a scenario needs SQL; a ``dbsim run
--workers`` master, which runs no session, only :data:`MASTER_MODULES`).
tests/e2e/test_run_imports.py checks that a run makes no first import between its first
session and the end of its measured window.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.config.scenario import ScenarioBase

#: Deferred at the point of use for the commands that run nothing; imported whole by a run.
RUN_MODULES = (
    "numpy",
    "numpy.random",  # loaded by numpy at its first use: the workloads' key generators
    "hdrh.histogram",
    "rich.console",
    "rich.progress",
    "sim.core.metrics",
    "sim.core.cache",
    "sim.judge.slo",
)
#: What a Locust master of ``dbsim run --workers`` preloads: a run's modules without SQLAlchemy
#: (~0.27 CPU-s of its start). It runs no session and compiles no SQL (its workers do); it
#: merges the workers' histograms, judges the SLOs and writes the bundle.
MASTER_MODULES = RUN_MODULES
#: What a run of a SQL workload imports besides: SQLAlchemy (a workload of files, the EDA
#: one, never imports it: ~0.13 CPU-s of its start), then its target's dialect
#: (:func:`run_dialects`).
SQL_MODULES = ("sqlalchemy", "sqlalchemy.schema")
#: SQLAlchemy loads a dialect when a statement is first compiled for it (a session's start):
#: the dialects a run imports when its target kind's own is not known (:func:`run_dialects`).
SQL_DIALECT_MODULES = (
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
)


def run_dialects(kind: str | None) -> tuple[str, ...]:
    """The SQLAlchemy dialect modules a run on a ``kind`` target imports before its sessions:
    its dialect record's own (a SQLite run does not pay PostgreSQL's and MySQL's, ~0.04 CPU-s
    of every ``dbsim run`` start), or :data:`SQL_DIALECT_MODULES` when the kind's record does
    not say (``odbc``: the dialect is in its settings; no kind given: a Locust process's start)."""
    if kind is None:
        return SQL_DIALECT_MODULES
    from sim import registry

    entry = registry.targets().get(kind)
    if entry is not None and entry.dialect is not None:
        return (entry.dialect.sqlalchemy_module,)
    return SQL_DIALECT_MODULES


def run_modules(scenario: ScenarioBase | None = None) -> tuple[str, ...]:
    """What a run of ``scenario`` imports before its first session: :data:`RUN_MODULES`, and
    for a workload that needs SQL, SQLAlchemy and the target's dialect. Without a scenario (a
    Locust process's start) all of them."""
    if scenario is None:
        return (*RUN_MODULES, *SQL_MODULES, *SQL_DIALECT_MODULES)
    from sim import registry
    from sim.dialects import NEEDS_SQL

    if registry.workload(scenario.workload.name).needs != NEEDS_SQL:  # type: ignore[attr-defined]
        return RUN_MODULES
    kind = scenario.target.kind  # type: ignore[attr-defined]
    return (*RUN_MODULES, *SQL_MODULES, *run_dialects(kind))


def run_machinery(scenario: ScenarioBase | None = None) -> None:
    """Import :func:`run_modules` of ``scenario`` now (each a dictionary lookup once imported)."""
    preload(run_modules(scenario))


def preload(modules: tuple[str, ...]) -> None:
    """Import ``modules`` now."""
    for name in modules:
        importlib.import_module(name)
