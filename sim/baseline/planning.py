"""From planned points to what fio will be given here: each point's working set, fio's files,
and the target's mount options beside the seed's — the same for a run and for ``--dry-run``.

Nothing here writes: the free space and the device size are read (``statvfs``, ``/sys``), the
mount options from ``/proc/self/mountstats``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sim.baseline import mounts, workset
from sim.baseline.fio import FioTarget
from sim.baseline.matrix import PlannedPoint
from sim.baseline.points import MountOption, human_bytes
from sim.baseline.presets import PRESETS
from sim.baseline.safety import BASELINE_DIR, FIO_FILE_PREFIX


@dataclass(frozen=True)
class Prepared:
    """The points sized for this host, fio's target, and what the scaling read."""

    points: list[PlannedPoint]
    target: FioTarget
    host: workset.HostFacts
    files: int  # fio's files laid out once (files targets), one per job of the widest point


def is_device(path: Path) -> bool:
    return path.exists() and stat.S_ISBLK(path.stat().st_mode)


def device_size(path: Path) -> int | None:
    """A block device's size from ``/sys`` (readable without opening the device), or None."""
    try:
        st = path.stat()
        sysdir = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
        return int((sysdir / "size").read_text().split()[0]) * 512
    except (OSError, ValueError, IndexError):
        return None


def _ours(work: Path) -> int:
    """Bytes of dbsim's fio files already in the work directory (kept by --keep-files)."""
    if not work.is_dir():
        return 0
    return sum(
        p.stat().st_size
        for p in work.iterdir()
        if p.name.startswith(FIO_FILE_PREFIX) and p.is_file()
    )


def host_facts(
    target: Path, device_bytes: int | None, cpus: int | None = None
) -> workset.HostFacts:
    """CPUs, memory, and the room fio may use: a device's size, or half the space available
    on a directory target (dbsim's own kept files counted as free)."""
    cpus = cpus or os.cpu_count() or 1
    ram = workset.host_ram()
    if device_bytes is not None:
        return workset.HostFacts(cpus, ram, device_bytes, f"{target}'s {human_bytes(device_bytes)}")
    try:
        room, why = workset.tree_room(target, _ours(Path(target) / BASELINE_DIR))
    except OSError as exc:
        return workset.HostFacts(cpus, ram, None, f"free space unknown ({exc.strerror})")
    return workset.HostFacts(cpus, ram, room, why)


def size_points(
    points: list[PlannedPoint],
    host: workset.HostFacts,
    override: int | None,
    target: Path,
    device: bool,
) -> Prepared:
    """Each point's working set (:func:`sim.baseline.workset.working_set`) and fio's target:
    for a directory, the files laid out once; for a device, the span of the largest point."""
    sized = [(p, workset.working_set(p.seed, host, override)) for p in points]
    if device:
        span = max(w.bytes for _, w in sized)
        done = [replace(p, work=w, job_bytes=w.bytes) for p, w in sized]
        return Prepared(done, FioTarget("device", target, span), host, 0)
    files, each = workset.layout([(w, p.numjobs) for p, w in sized], host.room)
    done = []
    for p, w in sized:
        share = min(workset.per_job(w, p.numjobs), each)
        if share * p.numjobs < w.bytes - workset.MIB * p.numjobs:
            w = replace(w, rule=f"{w.rule}; fio's files hold {human_bytes(each)} per job: "
                                f"{human_bytes(share * p.numjobs)} used")  # fmt: skip
        done.append(replace(p, work=w, job_bytes=share))
    return Prepared(done, FioTarget("files", Path(target) / BASELINE_DIR, each), host, files)


def mount_tables(points: list[PlannedPoint]) -> dict[str, tuple[MountOption, ...]]:
    """The seed tables among ``points`` that state mount options, with those options."""
    return {p.seed.table: p.seed.mount for p in points if p.seed.mount}


def mount_report(points: list[PlannedPoint], target: Path, device: bool) -> dict[str, Any] | None:
    """The target's mount options beside each table's (None when no table states any)."""
    tables = mount_tables(points)
    if not tables:
        return None
    if device:
        facts = mounts.MountFacts(None, "block device", str(target))
    else:
        facts = mounts.read_facts(Path(target))
    return mounts.report(facts, tables)


def advice(preset_names: list[str]) -> list[str]:
    """What the presets ask the output to say besides the figures (how to compare, …)."""
    return list(dict.fromkeys(a for n in preset_names if n in PRESETS for a in PRESETS[n].advice))
