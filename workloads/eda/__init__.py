"""EDA-like file-tree workload (SPEC SFS 2014 SP2 EDA / EDA_BLENDED; see docs/workloads/eda.md)."""

from sim.registry import WorkloadEntry, register_workload
from workloads.eda.parameters import EdaParameters
from workloads.eda.workload import EdaWorkload

__all__ = ["EdaParameters", "EdaWorkload"]

register_workload(
    WorkloadEntry(
        "eda",
        EdaWorkload,
        "EDA-like: front-end metadata and small files, back-end streaming, on a file tree",
    )
)
