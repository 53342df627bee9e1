"""EDA-like file-tree workload (SPEC SFS 2014 SP2 EDA / EDA_BLENDED; see docs/workloads/eda.md)."""

from typing import Any

from sim.registry import WorkloadEntry, register_workload
from workloads.eda.parameters import EdaParameters

__all__ = ["EdaParameters", "EdaWorkload"]

# The class by name: imported when a run builds it, not by every start that reads a scenario.
register_workload(
    WorkloadEntry(
        "eda",
        "workloads.eda.workload:EdaWorkload",
        "EDA-like: front-end metadata and small files, back-end streaming, on a file tree",
        parameters_model=EdaParameters,
        needs="filetree",
    )
)


def __getattr__(name: str) -> Any:
    if name == "EdaWorkload":
        from workloads.eda.workload import EdaWorkload

        return EdaWorkload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
