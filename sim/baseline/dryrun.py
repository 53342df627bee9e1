"""``dbsim baseline --dry-run``: the fio job file of every point, as a run would write it after
scaling — the seed's load and the scaling in ``#`` lines at its head — and nothing run.

No fio, no root, nothing written: the target is not claimed (no marker, no directory), the
free space is read with ``statvfs`` on the target or its nearest existing parent, a device's
size from ``/sys``, the mount options from ``/proc/self/mountstats``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.baseline import annotate, fio, planning
from sim.baseline.matrix import PlannedPoint
from sim.baseline.options import BaselineOptions, checked
from sim.baseline.points import human_bytes
from sim.errors import ConfigError

RUN_OVERHEAD_S = 1.0  # fio's start and the sampler's last interval, per fio process


def prepare(opts: BaselineOptions, cpus: int | None = None) -> tuple[planning.Prepared, Any]:
    """The points sized for the target, as a run would size them, without claiming it."""
    points, _envelope = checked(opts)
    target = Path(opts.target)
    device = planning.is_device(target)
    if opts.raw_device is not None and not device:
        raise ConfigError(
            f"--raw-device {opts.raw_device}: the target {target} is not a block device"
        )
    size = planning.device_size(target) if device else None
    host = planning.host_facts(target, size, cpus)
    prepared = planning.size_points(points, host, opts.size_bytes, target, device)
    return prepared, planning.mount_report(prepared.points, target, device)


def runs(point: PlannedPoint) -> tuple[int, int]:
    """The fio processes a point takes: at least and at most (search, curve)."""
    most = len(point.search) or 1
    least = min(2, most)  # a search stops, at the earliest, after its second run
    return least + len(point.curve), most + len(point.curve)


def _head(opts: BaselineOptions, prepared: planning.Prepared, mount: Any) -> list[str]:
    host, target = prepared.host, prepared.target
    lines = [
        f"# dbsim baseline --dry-run: nothing runs and nothing is written to {opts.target}",
        f"# host: {host.cpus} CPUs, {human_bytes(host.ram)} memory; room for fio: "
        f"{human_bytes(host.room) + ' (' + host.room_why + ')' if host.room is not None else host.room_why}",
    ]
    if target.kind == "files":
        lines.append(
            f"# fio's files: {prepared.files} × {human_bytes(target.size_bytes)} in {target.path}, "
            "laid out once with direct sequential writes before the first point"
        )
    elif opts.raw_device is None:
        lines.append(
            f"# a run would refuse {opts.target} until it is named again with --raw-device"
        )
    for table in (mount or {}).get("tables", []):
        lines += [f"# mount: {said}" for said in table["said"]]
    lines += [f"# {said}" for said in planning.advice(opts.presets)]
    if opts.lab:
        lines.append("# --lab: fio would run inside the lab's cgroups (root, the lab up)")
    return lines


def cost_line(opts: BaselineOptions, prepared: planning.Prepared) -> str:
    """What the run would cost: points, fio runs, minutes and the bytes laid out first."""
    least = most = 0
    for point in prepared.points:
        low, high = runs(point)
        least, most = least + low, most + high
    per_run = opts.runtime_s + opts.ramp_s + RUN_OVERHEAD_S
    laid = ""
    if prepared.target.kind == "files":
        total = prepared.files * prepared.target.size_bytes
        laid = (
            f"; {prepared.files} × {human_bytes(prepared.target.size_bytes)} = "
            f"{human_bytes(total)} laid out first"
        )
    return (
        f"# cost: {len(prepared.points)} point(s); {least}"
        + (f" to {most}" if most != least else "")
        + f" fio run(s) of {opts.runtime_s:g} s + {opts.ramp_s:g} s ramp: about "
        f"{least * per_run / 60:.0f}"
        + (f" to {most * per_run / 60:.0f}" if most != least else "")
        + f" min, plus the layout{laid}"
    )


def render(opts: BaselineOptions, cpus: int | None = None) -> str:
    """Every point's job file, headed by what the run would cost (fio runs, minutes, bytes
    laid out: on the second line, where a reader sees it first), the host, the room and the
    mount; the cost is said again at the end."""
    prepared, mount = prepare(opts, cpus)
    head = _head(opts, prepared, mount)
    cost = cost_line(opts, prepared)
    out = [head[0], cost, *head[1:]]
    for n, point in enumerate(prepared.points, 1):
        out.append("")
        out.append(f"## [{n}/{len(prepared.points)}] {point.point.id}: fio/{point.point.id}.fio")
        notes = annotate.comments(point, lab=opts.lab)
        out.append(
            fio.job_file(
                point, prepared.target, opts.runtime_s, opts.ramp_s, opts.direct, comments=notes
            ).rstrip("\n")
        )
    out += ["", cost]
    return "\n".join(out) + "\n"


def as_json(opts: BaselineOptions, cpus: int | None = None) -> dict[str, Any]:
    """The same as a document (``--dry-run --json``)."""
    prepared, mount = prepare(opts, cpus)
    return {
        "target": str(opts.target),
        "cost": cost_line(opts, prepared).removeprefix("# cost: "),
        "host": {"cpus": prepared.host.cpus, "ram_bytes": prepared.host.ram,
                 "room_bytes": prepared.host.room, "room": prepared.host.room_why},
        "files": {"count": prepared.files, "bytes_each": prepared.target.size_bytes}
        if prepared.target.kind == "files" else None,
        "mount": mount,
        "advice": planning.advice(opts.presets),
        "points": [
            {**p.to_dict(), "search": [list(s) for s in p.search], "curve": list(p.curve),
             "job_file": fio.job_file(p, prepared.target, opts.runtime_s, opts.ramp_s, opts.direct,
                                      comments=annotate.comments(p, lab=opts.lab))}
            for p in prepared.points
        ],
    }  # fmt: skip
