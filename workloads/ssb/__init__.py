"""SSB-like workload (NetApp's SQL Storage Benchmark): key-range reads and updates over one
≈7.4 KB row per 8 KB page, each session pinned to one of N tables, mixed in cycles of ten."""

from sim.registry import WorkloadEntry, register_workload
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.workload import SsbWorkload

__all__ = ["SsbParameters", "SsbWorkload"]

register_workload(
    WorkloadEntry(
        "ssb",
        SsbWorkload,
        "SSB-like: pinned sessions, key-range reads/updates in cycles of ten, one row per page",
    )
)
