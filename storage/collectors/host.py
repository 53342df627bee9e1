"""The load generator's own host: CPU use of the machine and of the dbsim process.

Needed to tell a client-bound run (dbsim or its host out of CPU) from a storage-bound one.
Load on the target: none (reads /proc/stat and this process's CPU times once per interval).

Values per interval: ``cpu_user_pct``, ``cpu_system_pct``, ``cpu_iowait_pct``,
``cpu_idle_pct``, ``cpu_busy_pct`` (100 − idle − iowait) of the whole host (all CPUs, as
``mpstat`` or ``vmstat`` show them), and ``process_cpu_pct``: dbsim's CPU time over the interval
as a percentage of one CPU (200 = two cores busy), with ``cpus`` for scale.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Sample

PROC_STAT = Path("/proc/stat")
# /proc/stat "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)


def read_cpu_ticks(path: Path = PROC_STAT) -> list[int]:
    """The aggregate ``cpu`` line's counters (USER_HZ ticks)."""
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("cpu "):
                    return [int(x) for x in line.split()[1:]]
    except OSError as exc:
        raise CollectorError(f"collector host: cannot read {path}: {exc.strerror}") from exc
    raise CollectorError(f"collector host: no cpu line in {path}")


def cpu_percentages(prev: list[int], curr: list[int]) -> dict[str, float]:
    """Shares of the ticks between two readings, as mpstat computes them."""
    delta = [max(c - p, 0) for p, c in zip(prev, curr, strict=False)]
    # guest time is already inside user time in /proc/stat; count the first 8 fields only.
    total = sum(delta[:8]) or 1
    user = delta[_USER] + delta[_NICE]
    system = delta[_SYSTEM] + delta[_IRQ] + delta[_SOFTIRQ]
    idle, iowait = delta[_IDLE], delta[_IOWAIT]
    return {
        "cpu_user_pct": 100.0 * user / total,
        "cpu_system_pct": 100.0 * system / total,
        "cpu_iowait_pct": 100.0 * iowait / total,
        "cpu_idle_pct": 100.0 * idle / total,
        "cpu_steal_pct": 100.0 * delta[_STEAL] / total,
        "cpu_busy_pct": 100.0 * (total - idle - iowait) / total,
    }


class HostCpuCollector(Collector):
    """CPU of the host and of this process, per interval."""

    source: ClassVar[str] = "host"

    def __init__(self, proc_stat: Path = PROC_STAT) -> None:
        self.proc_stat = proc_stat
        self._ticks: list[int] = []
        self._process = 0.0
        self._now = 0.0

    @staticmethod
    def _process_cpu_s() -> float:
        times = os.times()
        return times.user + times.system

    async def start(self, now: float) -> None:
        self._ticks = read_cpu_ticks(self.proc_stat)
        self._process = self._process_cpu_s()
        self._now = now

    async def sample(self, now: float) -> list[Sample]:
        ticks = read_cpu_ticks(self.proc_stat)
        process = self._process_cpu_s()
        elapsed = now - self._now
        if elapsed <= 0:
            return []
        values = cpu_percentages(self._ticks, ticks)
        values["process_cpu_pct"] = 100.0 * (process - self._process) / elapsed
        values["cpus"] = float(os.cpu_count() or 1)
        self._ticks, self._process, self._now = ticks, process, now
        return [Sample(source=self.source, entity=os.uname().nodename, values=values, t=now)]

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "cpus": os.cpu_count(),
            "clock": time.get_clock_info("monotonic").implementation,
        }
