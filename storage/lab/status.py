"""The lab as the kernel sees it now, compared with what the state file recorded."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from storage.lab import array, cgroups, identity, system
from storage.lab.pgcluster import Cluster, cache_cap_settings, port_free
from storage.lab.volumes import DEFAULT_VOLUME, attached_file

#: The first volume's facts, also at the top of the status (as before there were volumes).
FIRST_VOLUME_KEYS = (
    "device",
    "dev",
    "image",
    "size_bytes",
    "image_allocated_bytes",
    "mount_point",
    "mounted",
    "free_bytes",
    "ceilings",
)


def describe(state: dict[str, Any], state_file: Path) -> dict[str, Any]:
    """Status of a recorded lab: ``up`` is true when every volume's loop device is attached
    to its image and mounted, and both groups exist; ``problems`` lists every mismatch with
    the record. ``volumes`` has one entry per volume; the first one's facts are also given at
    the top level.

    Ceilings and the memory limit are read back from the cgroup files, not from the record.
    """
    problems: list[str] = []
    groups = {c: Path(p) for c, p in state.get("cgroups", {}).items()}
    for controller in cgroups.CONTROLLERS:
        if controller not in groups or not groups[controller].is_dir():
            problems.append(f"the {controller} cgroup is missing")
    blkio, memory = groups.get("blkio"), groups.get("memory")
    shown = [_volume_status(v, blkio, problems) for v in state["volumes"]]
    out: dict[str, Any] = {
        "up": all(v["attached"] and v["mounted"] for v in shown) and not problems,
        "name": state["name"],
        "state_file": str(state_file),
        "root": state["root"],
        **{key: shown[0][key] for key in FIRST_VOLUME_KEYS},
        "volumes": shown,
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
        out["postgres"] = _postgres_status(pg, running=_any_mounted(pg, shown))
        out["postgres"]["cache_cap_bytes"] = state.get("pg_cache_cap_bytes")
    return out


def _volume_status(
    volume: dict[str, Any], blkio: Path | None, problems: list[str]
) -> dict[str, Any]:
    image, loop = volume.get("image"), volume.get("loop")
    name = volume["name"]
    target = attached_file(volume)
    attached, mounted = _attached_and_mounted(volume)
    if loop and not attached:
        problems.append(f"volume {name}: {loop} is not attached to {target}")
    mount_point = Path(volume["mount_point"])
    if volume.get("mounted") and not mounted:
        problems.append(f"volume {name}: {loop} is not mounted at {mount_point}")
    ceilings = volume.get("ceilings", {})
    if blkio is not None and blkio.is_dir() and volume.get("dev"):
        ceilings = cgroups.read_throttles(blkio, volume["dev"])
    return {
        "name": name,
        "device": loop,
        "dev": volume.get("dev"),
        "image": image,
        "size_bytes": volume["size_bytes"],
        "image_allocated_bytes": _allocated_bytes(image),
        "mount_point": str(mount_point),
        "attached": attached,
        "mounted": mounted,
        "free_bytes": system.free_bytes(mount_point) if mounted else None,
        "ceilings": ceilings,
        "tablespace_dir": volume.get("tablespace_dir"),
        "array": array.describe(volume["array"], problems, name) if volume.get("array") else None,
    }


def _attached_and_mounted(volume: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the loop device still reads the lab's image and the lab's mount is on top at
    its place, by the identities recorded at ``up``; by name for a state written before
    they were (dbsim before issue #24)."""
    loop, ids = volume.get("loop"), volume.get("identity")
    if not loop:
        return False, False
    target = attached_file(volume)
    by_name = bool(target) and system.loop_backing_file(loop) == target
    if ids is None:
        return by_name, system.mounted_source(Path(volume["mount_point"])) == loop
    mounted = bool(ids.get("mount")) and identity.mount_differs(ids["mount"]) is None
    if not os.access(loop, os.R_OK):  # `status` without root cannot open the device
        return by_name, mounted
    now = identity.loop_identity(loop)
    attached = bool(ids.get("loop")) and identity.loop_differs(ids["loop"], now) is None
    if volume.get("array") and ids.get("loop") and now and now["backing_ino"] is None:
        attached = now["rdev"] == ids["loop"]["rdev"]  # the array's server is gone: see teardown
    return attached, mounted


def _any_mounted(pg: dict[str, Any], shown: list[dict[str, Any]]) -> bool:
    """Whether the cluster's directory can be read: on the host, or on a mounted volume."""
    root = Path(pg["root"])
    on = [v for v in shown if Path(v["mount_point"]) in (root, *root.parents)]
    return all(v["mounted"] for v in on)


def _postgres_status(pg: dict[str, Any], *, running: bool) -> dict[str, Any]:
    """The lab's PostgreSQL as recorded, with whether it runs and listens now."""
    # The data directory is postgres's own (0700): without root the PID is unknown, but
    # whether something listens on the port can still be told.
    pid = Cluster(Path(pg["root"]), pg["port"]).pid() if running else None
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


def _volume_lines(volume: dict[str, Any], named: bool) -> list[str]:
    ceilings = volume.get("ceilings", {})
    lines = [
        f"device      {volume['device']} ({volume['dev']}) on {volume['image']}",
        f"size        {system.format_size(volume['size_bytes'])}"
        f" ({system.format_size(volume['image_allocated_bytes'])} allocated)",
        f"mount       {volume['mount_point']}"
        + (f" ({system.format_size(volume['free_bytes'])} free)" if volume["mounted"] else ""),
        f"read        {_ceiling(ceilings.get('read_iops'), ceilings.get('read_bps'))}"
        " (host blkio throttle)",
        f"write       {_ceiling(ceilings.get('write_iops'), ceilings.get('write_bps'))}"
        " (host blkio throttle)",
    ]
    if volume.get("array"):
        lines += array.text_lines(volume["array"])
    if volume.get("tablespace_dir"):
        lines.append(f"tablespace  {volume['tablespace_dir']} (empty, owned by postgres)")
    if not named:
        return lines
    return [f"volume      {volume['name']}", *("  " + line for line in lines)]


def text_lines(status: dict[str, Any]) -> list[str]:
    """``status`` for people, one fact per line."""
    if "volumes" not in status:
        return [f"no lab is up (state: {status['state_file']})"]
    named = [v["name"] for v in status["volumes"]] != [DEFAULT_VOLUME]
    lines = [
        f"lab {status['name']}: {'up' if status['up'] else 'NOT up'}"
        + (" (it was already; ceilings given were applied)" if status.get("already_up") else "")
    ]
    if named:
        lines.append(f"root        {status['root']}")
    for volume in status["volumes"]:
        lines += _volume_lines(volume, named)
    lines.append(
        f"memory      limit {system.format_size(status['memory_limit_bytes'])}, "
        f"used {system.format_size(status['memory_usage_bytes'])}"
    )
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
        cap = pg.get("cache_cap_bytes")
        if cap:
            lines.append(
                f"            cache cap {system.format_size(cap)}: the memory limit, "
                f"shared_buffers {cache_cap_settings(cap)['shared_buffers']}"
            )
    lines += [f"problem     {problem}" for problem in status["problems"]]
    return lines


def postgres_target(status: dict[str, Any], volume: dict[str, Any]) -> dict[str, Any]:
    """The scenario ``target`` for the lab's PostgreSQL with its data in a tablespace
    ``lab_<volume>`` on ``volume`` (an entry of the status's ``volumes``), created and owned by
    dbsim — one definition for the lab's tests and bench/migration_demo.py."""
    pg = status["postgres"]
    return {
        "kind": "postgres",
        "host": "127.0.0.1",
        "port": pg["port"],
        "user": "postgres",
        "database": "postgres",
        "password_file": pg["password_file"],
        "tablespace": {
            "name": f"lab_{volume['name']}",
            "location": volume["tablespace_dir"],
            "create": True,
        },
    }
