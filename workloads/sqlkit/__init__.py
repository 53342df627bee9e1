"""The SQL-workload kit: what a workload on a SQL target writes, and what it gets for free.

:class:`SqlWorkload` owns the ownership-safe sequence every SQL workload runs: the registry
and every table checked before anything is written, the registry and the tablespace, then per
table create → row batches → indexes → loaded, ``check_loaded`` for ``--skip-load``,
``verify``, ``drop`` and the statement inventory. A workload supplies its tables
(:class:`PlannedTable` and a SQLAlchemy table for each), its row generator, its checks and its
sessions (:class:`SqlSession`). docs/architecture.md, "Adding a workload", walks through one.

Not a workload itself, so sim.registry does not load it; ``workloads/sql/`` is kept for the
workload that runs a user's own statements.
"""

from workloads.sqlkit.session import SqlSession
from workloads.sqlkit.workload import Batch, PlannedTable, SqlWorkload

__all__ = ["Batch", "PlannedTable", "SqlSession", "SqlWorkload"]
