"""SLOB-like physical-I/O workload (see docs/workloads/slob.md)."""

from sim.registry import WorkloadEntry, register_workload
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

__all__ = ["SlobParameters", "SlobWorkload"]

register_workload(
    WorkloadEntry(
        "slob", SlobWorkload, "SLOB-like: random key-range reads and updates, one row per block"
    )
)
