"""The CPU quota of the cgroup this process runs in, and how often it was throttled.

A load generator in a container (a Kubernetes pod's ``limits.cpu``) or a cgroup given a CFS
quota runs out of CPU at its quota, not at the host's CPUs: a worker held to 0.2 core shows
its host mostly idle and its process at 20 % of one core while every session waits for CPU.
The host collector reports, when a quota applies, ``cpu_limit_cores`` (quota / period) and
``cpu_throttled_pct`` (the share of the interval's CFS periods in which the group was
throttled), so the verdict can judge the client against its real ceiling.

cgroup v2: ``cpu.max`` (``QUOTA PERIOD`` or ``max PERIOD``) and ``cpu.stat``'s
``nr_periods``/``nr_throttled`` in the group named by ``/proc/self/cgroup``'s ``0::`` line;
cgroup v1: ``cpu.cfs_quota_us`` (-1: none) and ``cpu.cfs_period_us`` in the ``cpu``
hierarchy's group, ``cpu.stat`` likewise. Only this process's own group is read (a quota on
an ancestor group is not seen). Anything unreadable means "no quota known": the figures are
left out, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTS = Path("/proc/self/mounts")


@dataclass(frozen=True)
class QuotaReading:
    """A quota (cores) and the group's cumulative CFS period counters."""

    limit_cores: float
    periods: int
    throttled: int


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def group_dirs(cgroup_text: str, mounts_text: str) -> list[Path]:
    """Where this process's CPU group may be read: the v2 group, then the v1 ``cpu`` one."""
    v2_mount = v1_mount = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2" and v2_mount is None:
            v2_mount = Path(fields[1])
        elif fields[2] == "cgroup" and "cpu" in fields[3].split(",") and v1_mount is None:
            v1_mount = Path(fields[1])
    found: list[Path] = []
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        relative = parts[2].strip().lstrip("/")
        if parts[0] == "0" and parts[1] == "" and v2_mount is not None:
            found.append(v2_mount / relative)
        elif "cpu" in parts[1].split(",") and v1_mount is not None:
            found.append(v1_mount / relative)
    return found


def parse_limit(directory_files: dict[str, str | None]) -> float | None:
    """The quota in cores from ``cpu.max`` (v2) or ``cpu.cfs_quota_us``/``cpu.cfs_period_us``
    (v1); None when there is none or it cannot be read."""
    both = directory_files.get("cpu.max")
    if both is not None:
        fields = both.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() and int(fields[1]):
            return int(fields[0]) / int(fields[1])
        return None
    quota, period = (
        directory_files.get("cpu.cfs_quota_us"),
        directory_files.get("cpu.cfs_period_us"),
    )
    try:
        q, p = int((quota or "").strip()), int((period or "").strip())
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def parse_stat(text: str | None) -> tuple[int, int] | None:
    """``nr_periods`` and ``nr_throttled`` of a ``cpu.stat``; None without them."""
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit():
            values[fields[0]] = int(fields[1])
    if "nr_periods" not in values or "nr_throttled" not in values:
        return None
    return values["nr_periods"], values["nr_throttled"]


def read_quota(cgroup: Path = PROC_CGROUP, mounts: Path = PROC_MOUNTS) -> QuotaReading | None:
    """This process's CPU quota and throttling counters, or None (no quota, unreadable)."""
    cgroup_text, mounts_text = _text(cgroup), _text(mounts)
    if cgroup_text is None or mounts_text is None:
        return None
    for directory in group_dirs(cgroup_text, mounts_text):
        names = ("cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us")
        files = {name: _text(directory / name) for name in names}
        limit = parse_limit(files)
        counters = parse_stat(_text(directory / "cpu.stat"))
        if limit is not None and counters is not None:
            return QuotaReading(limit, *counters)
    return None


def throttled_pct(prev: QuotaReading, curr: QuotaReading) -> float | None:
    """The share of the CFS periods between two readings in which the group was throttled."""
    periods = curr.periods - prev.periods
    throttled = curr.throttled - prev.throttled
    if periods <= 0 or throttled < 0:
        return None
    return 100.0 * min(throttled, periods) / periods
