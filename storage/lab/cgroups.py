"""cgroup v1 ``blkio`` and ``memory`` groups for the lab.

The groups are created under this process's own group in each hierarchy (read from
``/proc/self/cgroup``): on hosts where processes are already confined to a sub-group, a group
made at the root would escape that confinement, and on some it would not be allowed at all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sim.errors import ConfigError, TargetError

CONTROLLERS = ("blkio", "memory")
THROTTLE_FILES = {
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
}
RMDIR_TRIES = 50
RMDIR_PAUSE_S = 0.1


def v1_mounts(mounts_text: str | None = None) -> dict[str, Path]:
    """Controller name -> mount point of each cgroup v1 hierarchy (``cpu,cpuacct`` gives both)."""
    if mounts_text is None:
        mounts_text = Path("/proc/self/mounts").read_text()
    found: dict[str, Path] = {}
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "cgroup":
            continue
        for option in fields[3].split(","):
            found.setdefault(option, Path(fields[1]))
    return found


def own_paths(cgroup_text: str | None = None) -> dict[str, str]:
    """Controller name -> this process's group path in that hierarchy (``/process_api/x``)."""
    if cgroup_text is None:
        cgroup_text = Path("/proc/self/cgroup").read_text()
    paths: dict[str, str] = {}
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1]:
            for controller in parts[1].split(","):
                paths[controller] = parts[2]
    return paths


def lab_groups(name: str) -> dict[str, Path]:
    """Where the lab's groups go: ``<mount>/<own path>/<name>`` per controller, or
    :class:`ConfigError` when cgroup v1 ``blkio`` or ``memory`` is not mounted."""
    mounts = v1_mounts()
    missing = [c for c in CONTROLLERS if c not in mounts]
    if missing:
        raise ConfigError(
            f"dbsim lab needs cgroup v1 {' and '.join(missing)} mounted (see /proc/mounts); "
            "this host has "
            + ("cgroup v2 only" if not mounts else f"v1 {', '.join(sorted(mounts))}")
        )
    own = own_paths()
    return {c: mounts[c] / own.get(c, "/").lstrip("/") / name for c in CONTROLLERS}


def create(path: Path) -> None:
    """Make a group; refuse one that already exists, since dbsim did not create it."""
    try:
        path.mkdir()
    except FileExistsError as exc:
        raise ConfigError(
            f"cgroup {path} already exists and this lab did not create it; "
            "run `dbsim lab down` if it is a lab's, or remove it yourself"
        ) from exc
    except OSError as exc:
        raise TargetError(f"lab: cannot create cgroup {path}: {exc.strerror}") from exc


def write(path: Path, value: str) -> None:
    """Write one value to a cgroup control file (one ``write`` call, as the kernel wants)."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise TargetError(f"lab: cannot write {value!r} to {path}: {exc.strerror}") from exc


def set_throttle(group: Path, kind: str, dev: str, value: int | None) -> None:
    """Set one ``blkio.throttle.*_device`` rule; ``None`` or 0 removes it (unlimited)."""
    write(group / THROTTLE_FILES[kind], f"{dev} {int(value or 0)}")


def read_throttles(group: Path, dev: str) -> dict[str, int | None]:
    """The rules in force for ``dev``, read back from the kernel (``None``: unlimited)."""
    out: dict[str, int | None] = {}
    for kind, filename in THROTTLE_FILES.items():
        out[kind] = None
        try:
            lines = (group / filename).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) == 2 and fields[0] == dev:
                out[kind] = int(fields[1]) or None
    return out


def pids(group: Path) -> list[int]:
    """The processes in a group (``cgroup.procs``)."""
    try:
        return [int(x) for x in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def read_int(path: Path) -> int | None:
    """An integer control file (``memory.usage_in_bytes`` …), or None."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def remove(group: Path) -> list[str]:
    """Move every task to the parent group, then remove ``group``; the problems, if any.

    ``rmdir`` fails with EBUSY while a task is still being moved or exiting, so it is retried
    for a few seconds before giving up.
    """
    problems: list[str] = []
    if not group.is_dir():
        return problems
    last: OSError | None = None
    for _ in range(RMDIR_TRIES):
        problems = []  # only the last attempt's problems count
        for pid in pids(group):
            try:
                write(group.parent / "cgroup.procs", str(pid))
            except TargetError as exc:
                if Path(f"/proc/{pid}").exists():  # an exited task needs no moving
                    problems.append(str(exc))
        try:
            group.rmdir()
            return []
        except FileNotFoundError:
            return []
        except OSError as exc:
            last = exc
        time.sleep(RMDIR_PAUSE_S)
    reason = last.strerror if last is not None else "unknown"
    problems.append(f"cannot remove cgroup {group}: {reason} (tasks: {pids(group)})")
    return problems
