"""A file workload's load (an EDA run on a file tree, local or NFS) in its own units.

A file-tree run is sized by the operations it issued, never by the block IOPS of whatever local
disk sat under the tree: those are the host's page-cache write-back, not the workload. The
figures, in order of preference:

* the NFS client's calls per second (the collector declaring :data:`sim.registry.ROLE_NFS`,
  nfsiostat's ``ops_s`` per mount and per NFS operation) when the tree was on NFS and the run
  had one measured stage: what the filer served, in the unit the vendors' NFS pages use;
* else the workload's file operations per second from its score's load point (the one the
  user picks with ``--step``, else the highest valid one, else the only one), with that load
  point's MiB/s: what a filer under this tree would have to serve. The score's job sets are
  named with it, since that is the unit an EDA benchmark's result is given in.

Reading operations (stat, access, read, readdir; NFS GETATTR, LOOKUP, READ …) count as reads,
the others (create, write, unlink, chmod, mkdir …; NFS WRITE, CREATE, SETATTR …) as writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.errors import ConfigError
from storage.envelopes.sizing import Workload
from storage.envelopes.units import fmt

FILE_OPS = "file ops/s"
NFS_OPS = "NFS ops/s"
#: File operations of dbsim's file workloads that change nothing on the storage.
READING_OPS = frozenset(
    {"stat", "access", "read_file", "random_read", "seq_read", "readdir", "open", "lookup"}
)
#: NFS calls that change the file system (v3 and v4 names); the others read.
CHANGING_NFS = frozenset(
    {"WRITE", "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK",
     "SETATTR", "COMMIT", "OPEN_DOWNGRADE", "CLOSE", "LOCK", "LOCKU", "ALLOCATE",
     "DEALLOCATE", "CLONE", "COPY", "SETACL"}
)  # fmt: skip


def is_file_run(summary: Mapping[str, Any]) -> bool:
    """A run on a file tree (an EDA run): its target kind is filetree or its workload scored."""
    target = summary.get("target")
    workload = summary.get("workload")
    return (isinstance(target, dict) and target.get("kind") == "filetree") or (
        isinstance(workload, dict) and isinstance(workload.get("score"), dict)
    )


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def file_workload(summary: Mapping[str, Any], name: str, step: int | None) -> Workload:
    """The file workload of ``summary`` (see the module docstring); ConfigError when the bundle
    holds no file operations (or no such step)."""
    points = _load_points(summary)
    if step is None and len(points) <= 1:
        nfs = _nfs_workload(summary, name)
        if nfs is not None:
            return nfs
    point, why = _pick(summary, points, step, name)
    found = summary.get("operations")
    ops: dict[str, Any] = found if isinstance(found, dict) else {}
    rates = {op: _num(s.get("ops_s")) for op, s in ops.items() if isinstance(s, dict)}
    total = _num(point.get("achieved_ops_s")) if point else sum(rates.values())
    if total <= 0:
        raise ConfigError(f"size: bundle {name}: no file operations measured")
    whole = sum(rates.values())
    reading = sum(v for op, v in rates.items() if op in READING_OPS)
    share = reading / whole if whole > 0 else 0.5
    mibps = _num(point.get("mib_s")) if point else 0.0
    job_sets = point.get("job_sets") if point else None
    note = "the workload's file operations (stat, open, read, write, create …), not block IOPS"
    if isinstance(job_sets, int | float):
        valid = point.get("valid") if point else None
        state = "" if valid is None else (", valid" if valid else ", not valid")
        note += f"; {job_sets:g} job set(s){state}, {fmt(total, 1)} ops/s at that load point"
    return Workload(
        read_iops=total * share,
        write_iops=total * (1 - share),
        read_mibps=mibps * share,
        write_mibps=mibps * (1 - share),
        origin=f"bundle {name}, {why}",
        op_unit=FILE_OPS,
        note=note,
    )


def _load_points(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    workload = summary.get("workload")
    score = workload.get("score") if isinstance(workload, dict) else None
    points = score.get("load_points") if isinstance(score, dict) else None
    return [p for p in points or [] if isinstance(p, dict)]


def _pick(
    summary: Mapping[str, Any], points: list[dict[str, Any]], step: int | None, name: str
) -> tuple[dict[str, Any] | None, str]:
    """The load point to size and why that one."""
    if not points:
        if step is not None:
            raise ConfigError(f"size: --step {step}: bundle {name} has no scored load points")
        return None, "the measured window's file operations"
    if step is not None:
        for point in points:
            if point.get("step") is not None and point["step"] + 1 == step:
                return point, f"step {step} (chosen with --step), its file operations"
        raise ConfigError(f"size: --step {step}: bundle {name} has steps 1..{len(points)}")
    if len(points) == 1:
        return points[0], "the measured window's file operations"
    workload = summary.get("workload")
    score = workload.get("score") if isinstance(workload, dict) else {}
    best = score.get("highest_valid") if isinstance(score, dict) else None
    if isinstance(best, dict) and isinstance(best.get("step"), int):
        point = next(p for p in points if p.get("step") == best["step"])
        return point, f"step {best['step'] + 1} (the highest valid load point), its file operations"
    raise ConfigError(
        f"size: bundle {name} has {len(points)} load points and none is valid: give "
        f"--step 1..{len(points)}"
    )


def _nfs_workload(summary: Mapping[str, Any], name: str) -> Workload | None:
    """The NFS client's calls of the busiest mount, when the run measured them."""
    from sim import registry

    source = registry.collector_with_role(registry.ROLE_NFS)
    storage = summary.get("storage")
    table = storage.get(source) if source and isinstance(storage, dict) else None
    if not isinstance(table, dict):
        return None
    mounts = {k: v for k, v in table.items() if isinstance(v, dict) and ":" not in k}
    mounts = {k: v for k, v in mounts.items() if _num(v.get("ops_s")) > 0}
    if not mounts:
        return None
    mount = max(mounts, key=lambda m: _num(mounts[m].get("ops_s")))
    total = _num(mounts[mount].get("ops_s"))
    changing = sum(
        _num(v.get("ops_s"))
        for k, v in table.items()
        if isinstance(v, dict) and k.startswith(f"{mount}:") and k.split(":", 1)[1] in CHANGING_NFS
    )
    changing = min(changing, total)
    read_mibps = _num(mounts[mount].get("read_kB_s")) / 1024
    write_mibps = _num(mounts[mount].get("write_kB_s")) / 1024
    return Workload(
        read_iops=total - changing,
        write_iops=changing,
        read_mibps=read_mibps,
        write_mibps=write_mibps,
        origin=f"bundle {name}, NFS mount {mount}, measured-window means",
        op_unit=NFS_OPS,
        note="the NFS client's calls (GETATTR, LOOKUP, READ, WRITE …), not block IOPS",
    )
