"""What a live capture costs the host it watches: its own CPU time and memory, children
included (the block-latency collector's ``bpftrace``), so that a DBA can show the capture is
light enough for production (``capture.own`` of the summary, bench/capture_cost.py).

CPU: ``getrusage`` of this process, of its children already waited for, and ``utime +
stime`` of the children still running (``/proc/self/task/<tid>/children``, then
``/proc/<pid>/stat``). Memory: the high-water mark of the resident set (``VmHWM`` of
``/proc/<pid>/status``) of this process plus each child's (for children already waited for,
``ru_maxrss`` of the largest), an upper bound of what was resident at once.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def _ticks_per_s() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError):
        return 100.0


CLOCK_TICKS = _ticks_per_s()


def child_pids(proc: Path = PROC) -> list[int]:
    """The pids of this process's running children (each thread lists the ones it started)."""
    found: list[int] = []
    try:
        tasks = list((proc / "self" / "task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            text = (task / "children").read_text()
        except OSError:
            continue
        found.extend(int(word) for word in text.split())
    return sorted(set(found))


def process_cpu_s(pid: int, proc: Path = PROC) -> float:
    """``utime + stime`` of a running process in seconds (0 when it is gone)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return 0.0
    # The command name is in parentheses and may hold spaces: fields count from after it.
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def hwm_kb(pid: int | str = "self", proc: Path = PROC) -> int:
    """``VmHWM`` (peak resident set) of a process in kB, 0 when it cannot be read."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


@dataclass
class OwnUsage:
    """The capture's own resource use since :meth:`start`."""

    started_wall: float = 0.0
    started_cpu_s: float = 0.0

    def start(self) -> None:
        self.started_wall = time.monotonic()
        self.started_cpu_s = self._cpu_s()

    def _cpu_s(self) -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        done = resource.getrusage(resource.RUSAGE_CHILDREN)
        running = sum(process_cpu_s(pid) for pid in child_pids())
        return me.ru_utime + me.ru_stime + done.ru_utime + done.ru_stime + running

    def describe(self) -> dict[str, float | int]:
        """``capture.own``: CPU seconds, their share of one core over the capture's wall-clock
        time so far, and the peak resident memory in kB."""
        elapsed = max(time.monotonic() - self.started_wall, 1e-9)
        cpu = max(self._cpu_s() - self.started_cpu_s, 0.0)
        children_done_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        rss = hwm_kb() + sum(hwm_kb(pid) for pid in child_pids()) + children_done_kb
        return {
            "cpu_s": round(cpu, 3),
            "cpu_pct_of_core": round(100.0 * cpu / elapsed, 3),
            "rss_max_kB": rss,
            "wall_s": round(elapsed, 3),
        }
