"""SLOB-like physical-I/O workload (see docs/workloads/slob.md)."""

from typing import Any

from sim.dialects import NEEDS_SQL
from sim.registry import WorkloadEntry, register_workload
from workloads.slob.parameters import SlobParameters

__all__ = ["SlobParameters", "SlobWorkload"]

# The class by name: imported when a run builds it, not by every start that reads a scenario.
register_workload(
    WorkloadEntry(
        "slob",
        "workloads.slob.workload:SlobWorkload",
        "SLOB-like: random key-range reads and updates, one row per block",
        parameters_model=SlobParameters,
        needs=NEEDS_SQL,
    )
)


def __getattr__(name: str) -> Any:
    if name == "SlobWorkload":
        from workloads.slob.workload import SlobWorkload

        return SlobWorkload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
