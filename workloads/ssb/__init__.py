"""SSB-like workload (NetApp's SQL Storage Benchmark): key-range reads and updates over one
≈7.4 KB row per 8 KB page, each session pinned to one of N tables, mixed in cycles of ten."""

from typing import Any

from sim.dialects import NEEDS_SQL
from sim.registry import WorkloadEntry, register_workload
from workloads.ssb.parameters import SsbParameters

__all__ = ["SsbParameters", "SsbWorkload"]

# The class by name: imported when a run builds it, not by every start that reads a scenario.
register_workload(
    WorkloadEntry(
        "ssb",
        "workloads.ssb.workload:SsbWorkload",
        "SSB-like: pinned sessions, key-range reads/updates in cycles of ten, one row per page",
        parameters_model=SsbParameters,
        needs=NEEDS_SQL,
    )
)


def __getattr__(name: str) -> Any:
    if name == "SsbWorkload":
        from workloads.ssb.workload import SsbWorkload

        return SsbWorkload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
