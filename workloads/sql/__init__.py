"""The ``sql`` workload: the user's own statements (docs/workloads/sql.md)."""

from typing import Any

from sim.dialects import NEEDS_SQL
from sim.registry import WorkloadEntry, register_workload
from workloads.sql.parameters import SqlParameters

__all__ = ["SqlParameters", "SqlUserWorkload"]

# The class by name: imported when a run builds it, not by every start that reads a scenario.
register_workload(
    WorkloadEntry(
        "sql",
        "workloads.sql.workload:SqlUserWorkload",
        "your own statements on your own tables (rolled back)",
        parameters_model=SqlParameters,
        needs=NEEDS_SQL,
    )
)


def __getattr__(name: str) -> Any:
    if name == "SqlUserWorkload":
        from workloads.sql.workload import SqlUserWorkload

        return SqlUserWorkload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
