"""Import, before any session runs, what a run would otherwise import in the middle of it.

Commands that only read a scenario (``validate``, ``drop``, ``import``, ``version``) import
numpy, SQLAlchemy, rich and the metrics at the point of use, so they start in a third of the
CPU (issue #25). A run uses all of them, and a first import made while sessions run is a stall:
on ``dbsim run``'s asyncio loop the sessions' operations wait behind it (an outlier in the
measured latencies), and on a Locust process's gevent hub nothing is served until it ends —
tests/integration/test_distributed.py's hub monitor caught numpy (the SLO judge's first live
window) and rich (a worker's load progress) blocking the hub for over 0.4 s on a busy host.
So every process that runs a scenario calls :func:`run_machinery` while nothing is timed:
``dbsim run`` before it prepares the run (sim.cli.run), a worker's ``build_engine``
(sim.locust.host) and each Locust process at its start (sim.locust.app). tests/e2e/test_run_imports.py checks that a run
makes no first import between its first session and the end of its measured window.
"""

from __future__ import annotations

import importlib

#: Deferred at the point of use for the commands that run nothing; imported whole by a run.
RUN_MODULES = (
    "numpy",
    "numpy.random",  # loaded by numpy at its first use: the workloads' key generators
    "hdrh.histogram",
    "sqlalchemy",
    "sqlalchemy.schema",
    # SQLAlchemy loads a dialect when a statement is first compiled for it (a session's start).
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
    "rich.console",
    "rich.progress",
    "sim.core.metrics",
    "sim.core.cache",
    "sim.judge.slo",
)


def run_machinery() -> None:
    """Import :data:`RUN_MODULES` now (each a dictionary lookup once imported)."""
    for name in RUN_MODULES:
        importlib.import_module(name)
