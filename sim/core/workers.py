"""``dbsim run --workers auto``: how many local worker processes a run needs.

One dbsim process drives its sessions from one interpreter, so its Python work — dealing,
timing, recording, and the call's own Python layers — runs on one core at a time whatever the
session count (the GIL is released only inside the system calls). A file workload that asks
for more than that core gives is spread over local worker processes through Locust's
master/worker mode (sim.locust.distributed), with the same merged bundle; anything else runs in
one process, where it has no Locust in between.

The rule, for file-tree targets (database targets spend their time in the server, not in the
client, and keep one process):

* closed loop with more than one session: as fast as the storage answers, so CPU-bound on a
  page-cached tree — one worker per CPU, at most one per session;
* open loop: the requested rate times :data:`CLIENT_CPU_US_PER_FILE_OP` of client CPU per
  operation, against :data:`CORE_SHARE` of a core per process;
* a single session, or a single CPU: one process.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.errors import ConfigError

if TYPE_CHECKING:  # an annotation only: `dbsim --help` (sim.cli.run) builds no scenario model
    from sim.config.scenario import ScenarioBase

#: Client CPU one file operation costs a session on its own thread, on the development VM
#: (bench/eda_bench.py: 5–8 µs for a cached stat, 17–27 µs for the EDA_FRONTEND mix); the
#: larger figure, so a process is not planned fuller than it can run.
CLIENT_CPU_US_PER_FILE_OP = 30.0
#: Share of one core a worker process is planned to use (the rest: its loop, the collectors,
#: Locust's reports).
CORE_SHARE = 0.7
AUTO = "auto"
FILE_TARGETS = frozenset({"filetree"})


@dataclass(frozen=True)
class WorkerPlan:
    """How many worker processes, and why (printed, and kept in the summary)."""

    workers: int
    reason: str


def parse_workers(value: str) -> int | None:
    """``--workers``' value: a count (0: one process, no Locust), or None for ``auto``."""
    if value.strip().lower() == AUTO:
        return None
    try:
        count = int(value)
    except ValueError:
        raise ConfigError(
            f"--workers: {value!r} is neither a number of worker processes nor 'auto'"
        ) from None
    if count < 0:
        raise ConfigError(f"--workers: {count} is not a number of worker processes")
    return count


def plan_workers(scenario: ScenarioBase, sessions: int, cpus: int | None = None) -> WorkerPlan:
    """The plan for ``--workers auto`` (see the module docstring)."""
    cpus = cpus or os.cpu_count() or 1
    kind = scenario.target.kind  # type: ignore[attr-defined]
    load = scenario.load
    if kind not in FILE_TARGETS:
        return WorkerPlan(0, f"a {kind} target: the server does the work, one process drives it")
    if sessions < 2 or cpus < 2:
        return WorkerPlan(0, f"{sessions} session(s) on {cpus} CPU(s): one process")
    if load.asks_iops:
        return WorkerPlan(0, "load asked in device IOPS: calibrated and run by one process")
    if load.mode == "closed":
        workers = min(cpus, sessions)
        return WorkerPlan(
            workers,
            f"closed loop, {sessions} sessions on {cpus} CPUs: one worker per CPU "
            "(a closed loop on a cached tree is bound by the client's CPU)",
        )
    rates = [s.rate_ops_s for s in load.steps if s.rate_ops_s] or [load.rate_ops_s or 0.0]
    peak = max(rates)
    cores = peak * CLIENT_CPU_US_PER_FILE_OP / 1e6 / CORE_SHARE
    workers = min(cpus, sessions, max(1, math.ceil(cores)))
    if workers < 2:
        return WorkerPlan(
            0, f"open loop at {peak:,.0f} ops/s: about {cores:.2f} of a core, one process"
        )
    return WorkerPlan(
        workers,
        f"open loop at {peak:,.0f} ops/s: about {cores:.1f} cores of client CPU "
        f"({CLIENT_CPU_US_PER_FILE_OP:g} µs per operation), {workers} workers",
    )
