"""The load generator's own host: CPU use of the machine and of the dbsim process.

Needed to tell a client-bound run (dbsim or its host out of CPU) from a storage-bound one.
Load on the target: none (reads /proc/stat and this process's CPU times once per interval).

A reading that cannot be differenced from the previous one (rebooted, moved to another host:
see :func:`cpu_break`) is a reset; a malformed ``cpu`` line is unreadable (see the class).

Values per interval: ``cpu_user_pct``, ``cpu_system_pct``, ``cpu_iowait_pct``,
``cpu_idle_pct``, ``cpu_busy_pct`` (100 − idle − iowait) of the whole host (all CPUs, as
``mpstat`` or ``vmstat`` show them), and ``process_cpu_pct``: dbsim's CPU time over the interval
as a percentage of one CPU (200 = two cores busy), with ``cpus`` for scale. When this
process's cgroup has a CPU quota (a container's CPU limit), ``cpu_limit_cores`` and
``cpu_throttled_pct`` too (:mod:`storage.collectors.cpu_quota`): the client's real ceiling.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, gap_sample
from storage.collectors.cpu_quota import QuotaReading, read_quota, throttled_pct

PROC_STAT = Path("/proc/stat")
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
              "guest_nice")  # fmt: skip
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)
#: Field counts of the ``cpu`` line through the kernel's history: 2.4 (4), 2.6.0 (7), steal
#: in 2.6.11 (8), guest in 2.6.24 (9), guest_nice in 2.6.33 (10); later additions are ignored.
_CPU_LENGTHS = (4, 7, 8, 9, 10)
#: ``btime`` is worked out from the wall clock at each read and can move by a second.
BTIME_SLACK_S = 2
DETAIL_CHARS = 200


@dataclass(frozen=True)
class CpuReading:
    """The aggregate ``cpu`` line's counters (USER_HZ ticks, each a u64 printed with
    ``seq_put_decimal_ull``) and the boot time, when the file gives one."""

    ticks: tuple[int, ...]  # always 10: the fields an older kernel lacks are 0
    btime: int | None = None
    fields: int = 10


class ProcStatError(ValueError):
    """A ``/proc/stat`` text whose ``cpu`` line no kernel prints."""


def parse_proc_stat(text: str) -> CpuReading:
    """The ``cpu`` line and ``btime`` of ``/proc/stat``'s text; :class:`ProcStatError` (its
    message carries the line) for a missing, cut or malformed ``cpu`` line."""
    lines = text.split("\n")
    cut = lines.pop() if lines else ""  # the kernel ends every line: a last one without is cut
    cpu = next((line for line in lines if line.startswith("cpu ")), None)
    if cpu is None:
        if cut.startswith("cpu "):
            raise ProcStatError(f"cpu line cut short (no end of line): {cut[:DETAIL_CHARS]}")
        raise ProcStatError("no cpu line")
    parts = cpu.split()[1:]
    if not all(p.isascii() and p.isdigit() for p in parts) or (
        len(parts) not in _CPU_LENGTHS and len(parts) < 10
    ):
        raise ProcStatError(f"malformed cpu line: {cpu[:DETAIL_CHARS]}")
    btime = next((line.split()[1:2] for line in lines if line.startswith("btime ")), [])
    boot = int(btime[0]) if btime and btime[0].isascii() and btime[0].isdigit() else None
    ticks = [int(p) for p in parts[:10]]
    return CpuReading(tuple(ticks + [0] * (10 - len(ticks))), boot, min(len(parts), 10))


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise CollectorError(f"collector host: cannot read {path}: {exc.strerror}") from exc


def cpu_break(prev: CpuReading, curr: CpuReading) -> str | None:
    """Why two readings cannot be differenced (the machine rebooted, the container moved to
    another host), or None. The counters are 64-bit: any decrease is a restart, except
    iowait's alone when idle grew — the kernel may account waiting first as iowait, then as
    idle (sysstat's ``get_per_cpu_interval`` makes the same exception)."""
    both = prev.btime is not None and curr.btime is not None
    if both and abs((curr.btime or 0) - (prev.btime or 0)) > BTIME_SLACK_S:
        return f"btime: {prev.btime} -> {curr.btime}"
    if prev.fields != curr.fields:  # another kernel
        return f"cpu fields: {prev.fields} -> {curr.fields}"
    for i, (before, after) in enumerate(zip(prev.ticks, curr.ticks, strict=True)):
        if after >= before:
            continue
        if i == _IOWAIT and curr.ticks[_IDLE] > prev.ticks[_IDLE]:
            continue
        return f"cpu {CPU_FIELDS[i]}: {before} -> {after}"
    return None


def cpu_percentages(prev: Sequence[int], curr: Sequence[int]) -> dict[str, float]:
    """Shares of the ticks between two readings, as mpstat computes them. The readings must
    not straddle a restart (:func:`cpu_break`); an iowait that went back counts as 0."""
    pad = [0] * len(CPU_FIELDS)  # an older kernel's missing fields count as 0
    delta = [max(c - p, 0) for p, c in zip([*prev, *pad][:10], [*curr, *pad][:10], strict=True)]
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
    """CPU of the host and of this process, per interval.

    A reading that cannot be differenced from the previous one (see :func:`cpu_break`) gives
    a :data:`~sim.protocols.GAP_RESET` sample and becomes the baseline; a ``cpu`` line that is
    missing, cut or malformed gives a :data:`~sim.protocols.GAP_UNREADABLE` sample with the
    line, and the baseline stays, so the next good reading covers both intervals."""

    source: ClassVar[str] = "host"

    def __init__(self, proc_stat: Path = PROC_STAT) -> None:
        self.proc_stat = proc_stat
        self._reading: CpuReading | None = None
        self._process = 0.0
        self._now = 0.0
        self._quota: QuotaReading | None = None

    @staticmethod
    def _process_cpu_s() -> float:
        times = os.times()
        return times.user + times.system

    async def start(self, now: float) -> None:
        try:
            self._reading = parse_proc_stat(_read(self.proc_stat))
        except ProcStatError as exc:
            raise CollectorError(f"collector host: {self.proc_stat}: {exc}") from exc
        self._process = self._process_cpu_s()
        self._now = now
        self._quota = read_quota()

    async def sample(self, now: float) -> list[Sample]:
        if self._reading is None:
            raise CollectorError("collector host: sample() called before start()")
        text = _read(self.proc_stat)
        process = self._process_cpu_s()
        elapsed = now - self._now
        if elapsed <= 0:
            return []
        entity = os.uname().nodename
        try:
            reading = parse_proc_stat(text)
        except ProcStatError as exc:  # the baseline stays
            return [gap_sample(self.source, entity, GAP_UNREADABLE, str(exc), now)]
        prev, prev_process = self._reading, self._process
        self._reading, self._process, self._now = reading, process, now
        broken = cpu_break(prev, reading)
        if broken is None and process < prev_process:
            broken = f"process cpu: {prev_process:.2f} -> {process:.2f} s"
        if broken is not None:
            return [gap_sample(self.source, entity, GAP_RESET, broken, now)]
        values = cpu_percentages(prev.ticks, reading.ticks)
        values["process_cpu_pct"] = 100.0 * (process - prev_process) / elapsed
        values["cpus"] = float(os.cpu_count() or 1)
        self._quota_figures(values)
        return [Sample(source=self.source, entity=entity, values=values, t=now)]

    def _quota_figures(self, values: dict[str, float]) -> None:
        """The cgroup's CPU quota and the share of its periods throttled, when it has one."""
        prev, self._quota = self._quota, read_quota()
        if self._quota is None:
            return
        values["cpu_limit_cores"] = self._quota.limit_cores
        if prev is not None and (share := throttled_pct(prev, self._quota)) is not None:
            values["cpu_throttled_pct"] = share

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "cpus": os.cpu_count(),
            "clock": time.get_clock_info("monotonic").implementation,
        }
