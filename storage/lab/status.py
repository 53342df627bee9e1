"""The lab as the kernel sees it now, compared with what the state file recorded."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from storage.lab import cgroups, system
from storage.lab.pgcluster import Cluster, port_free


def describe(state: dict[str, Any], state_file: Path) -> dict[str, Any]:
    """Status of a recorded lab: ``up`` is true when the loop device is attached to the image,
    mounted, and both groups exist; ``problems`` lists every mismatch with the record.

    Ceilings and the memory limit are read back from the cgroup files, not from the record.
    """
    problems: list[str] = []
    image = state.get("image")
    loop = state.get("loop")
    attached = bool(loop and image and system.loop_backing_file(loop) == image)
    if loop and not attached:
        problems.append(f"{loop} is not attached to {image}")
    mount_point = Path(state["mount_point"])
    mounted = bool(loop) and system.mounted_source(mount_point) == loop
    if state.get("mounted") and not mounted:
        problems.append(f"{loop} is not mounted at {mount_point}")
    groups = {c: Path(p) for c, p in state.get("cgroups", {}).items()}
    for controller in cgroups.CONTROLLERS:
        if controller not in groups or not groups[controller].is_dir():
            problems.append(f"the {controller} cgroup is missing")
    blkio, memory = groups.get("blkio"), groups.get("memory")
    ceilings = state.get("ceilings", {})
    if blkio is not None and blkio.is_dir() and state.get("dev"):
        ceilings = cgroups.read_throttles(blkio, state["dev"])
    allocated = _allocated_bytes(image)
    out: dict[str, Any] = {
        "up": attached and mounted and not problems,
        "name": state["name"],
        "state_file": str(state_file),
        "device": loop,
        "dev": state.get("dev"),
        "image": image,
        "size_bytes": state["size_bytes"],
        "image_allocated_bytes": allocated,
        "mount_point": str(mount_point),
        "mounted": mounted,
        "free_bytes": system.free_bytes(mount_point) if mounted else None,
        "ceilings": ceilings,
        "memory_limit_bytes": cgroups.read_int(memory / "memory.limit_in_bytes")
        if memory
        else None,
        "memory_usage_bytes": cgroups.read_int(memory / "memory.usage_in_bytes")
        if memory
        else None,
        "cgroups": {c: str(p) for c, p in groups.items()},
        "pids": cgroups.pids(blkio) if blkio else [],
        "postgres": None,
        "problems": problems,
    }
    pg = state.get("postgres")
    if pg:
        out["postgres"] = _postgres_status(pg, mounted=mounted)
    return out


def _postgres_status(pg: dict[str, Any], *, mounted: bool) -> dict[str, Any]:
    """The lab's PostgreSQL as recorded, with whether it runs and listens now."""
    # The data directory is postgres's own (0700): without root the PID is unknown, but
    # whether something listens on the port can still be told.
    pid = Cluster(Path(pg["root"]), pg["port"]).pid() if mounted else None
    return {
        **pg,
        "host": "127.0.0.1",
        "pid": pid,
        "running": pid is not None,
        "listening": not port_free(pg["port"]),
    }


def _allocated_bytes(image: str | None) -> int | None:
    """The disk space the sparse image takes now (None when it cannot be read)."""
    if image:
        with contextlib.suppress(OSError):
            return os.stat(image).st_blocks * 512
    return None


def _ceiling(iops: int | None, bps: int | None) -> str:
    return (
        (f"{iops} IOPS" if iops else "IOPS unlimited")
        + ", "
        + (f"{system.format_size(bps)}/s" if bps else "bandwidth unlimited")
    )


def text_lines(status: dict[str, Any]) -> list[str]:
    """``status`` for people, one fact per line."""
    if "device" not in status:
        return [f"no lab is up (state: {status['state_file']})"]
    ceilings = status.get("ceilings", {})
    lines = [
        f"lab {status['name']}: {'up' if status['up'] else 'NOT up'}"
        + (" (it was already; ceilings given were applied)" if status.get("already_up") else ""),
        f"device      {status['device']} ({status['dev']}) on {status['image']}",
        f"size        {system.format_size(status['size_bytes'])}"
        f" ({system.format_size(status['image_allocated_bytes'])} allocated)",
        f"mount       {status['mount_point']}"
        + (f" ({system.format_size(status['free_bytes'])} free)" if status["mounted"] else ""),
        f"read        {_ceiling(ceilings.get('read_iops'), ceilings.get('read_bps'))}",
        f"write       {_ceiling(ceilings.get('write_iops'), ceilings.get('write_bps'))}",
        f"memory      limit {system.format_size(status['memory_limit_bytes'])}, "
        f"used {system.format_size(status['memory_usage_bytes'])}",
    ]
    lines += [f"cgroup      {path}" for path in status["cgroups"].values()]
    lines.append(f"processes   {' '.join(map(str, status['pids'])) or 'none'}")
    pg = status.get("postgres")
    if pg:
        state = "running" if pg["running"] else ("listening" if pg["listening"] else "stopped")
        lines.append(
            f"postgres    {state}, pid {pg['pid'] or '-'}, 127.0.0.1:{pg['port']}, "
            f"user {pg['user']}, password_file {pg['password_file']}"
        )
        lines.append(f"            data {pg['data_dir']}, log {pg['log']}")
    lines += [f"problem     {problem}" for problem in status["problems"]]
    if status.get("note"):
        lines.append(f"note        {status['note']}")
    return lines
