"""``dbsim replay``: the inputs checked before anything runs, then every scale in turn.

A calibration at 1x comes first, and its correction (the request path's,
:mod:`sim.replay.correction`) is applied to every scale. Each scale: derive the fio job from
the production's shape (:mod:`sim.replay.fiojob`), run it under dbsim's own capture of the
target (:mod:`sim.replay.runner`), judge fidelity (:mod:`sim.replay.fidelity`), and only for a
faithful scale give the verdict (:mod:`sim.replay.verdict`). The whole answer is
``replay.json`` in the replay's directory, beside one capture bundle per scale.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bundle.files import new_bundle_dir
from sim.errors import ConfigError
from sim.replay import REPLAY_VERSION, fidelity, verdict
from sim.replay.correction import calibration
from sim.replay.correction import section as calibration_section
from sim.replay.fiojob import derive
from sim.replay.shape import Shape, production_window

MIB = 1 << 20
DEFAULT_SIZE = 1 << 30
FREE_SHARE = 0.5
MIN_SIZE = 16 * MIB
CALIBRATION_S = 10.0


@dataclass(frozen=True)
class ReplayPlan:
    bundle: Path
    profile: dict[str, Any]
    production: Shape
    target: Path
    scales: tuple[float, ...]
    duration_s: float
    interval_s: float
    size_bytes: int | None
    slos: dict[str, float]
    output: Path
    compress: float | None = None  # the day shape: captured seconds per replayed second
    step_s: float | None = None


def parse_scales(text: str) -> tuple[float, ...]:
    try:
        scales = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--scale {text!r}: expected numbers separated by commas (1,2,3)"
        ) from None
    if not scales or any(s <= 0 for s in scales):
        raise ConfigError(f"--scale {text!r}: every scale must be above 0")
    return tuple(sorted(set(scales)))


def check_target(on: Path) -> Path:
    """A directory to replay in (new, or one the ownership rule lets fio write in)."""
    try:
        st = os.stat(on)
    except FileNotFoundError:
        if not on.parent.is_dir():
            raise ConfigError(f"--on {on}: neither it nor its parent directory exists") from None
        return Path(os.path.abspath(on))
    if stat.S_ISBLK(st.st_mode):
        raise ConfigError(
            f"--on {on}: a raw block device is not replayed on yet (the replay's own capture "
            "watches a file system's devices): give a directory on a file system of it"
        )
    if stat.S_ISREG(st.st_mode) and on.suffix in (".yaml", ".yml"):
        return Path(os.path.abspath(on))  # a database scenario (sim.replay.dbplan)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"--on {on}: not a directory")
    return Path(os.path.abspath(on))


def is_scenario(target: Path) -> bool:
    return target.suffix in (".yaml", ".yml") and target.is_file()


def runs_fio(plan: ReplayPlan) -> bool:
    """Whether the replay runs fio jobs (block-level production), not ``dbsim run`` scenarios
    (a database replay, or file production replayed as an EDA mix deck)."""
    from sim.replay.filejob import is_file_capture

    return not is_scenario(plan.target) and not is_file_capture(plan.bundle)


def make_plan(
    bundle: Path,
    on: Path,
    scales: str,
    *,
    duration_s: float,
    interval_s: float,
    size_bytes: int | None,
    slos: list[str] | None,
    output: Path,
    compress: float | None = None,
    step_s: float | None = None,
) -> ReplayPlan:
    from sim.profile import build_profile

    if duration_s < 3 * interval_s or duration_s <= 0:
        raise ConfigError(f"--duration {duration_s:g}: at least 3 intervals ({3 * interval_s:g} s)")
    if not 0.1 <= interval_s <= 60:
        raise ConfigError(f"--interval {interval_s:g}: 0.1 to 60 s")
    if size_bytes is not None and size_bytes < MIN_SIZE:
        raise ConfigError(f"--size: at least {MIN_SIZE // MIB} MiB")
    if compress is not None and compress <= 0:
        raise ConfigError(f"--compress {compress:g}: above 0 (48 replays a day in 30 minutes)")
    if step_s is not None and step_s < 2 * interval_s:
        raise ConfigError(f"--step {step_s:g}: at least two intervals ({2 * interval_s:g} s)")
    parsed = parse_scales(scales)
    target = check_target(on)
    if is_scenario(target):
        from sim.replay.dbrun import read_scenario

        if compress is not None:
            raise ConfigError(
                f"--compress: the day shape is replayed with fio or as a file tree, not on {on}"
            )
        read_scenario(target)  # refused now, before anything runs
    checked_slos = verdict.parse_slos(slos)
    profile = build_profile(bundle)
    production = production_window(profile)
    return ReplayPlan(
        bundle, profile, production, target, parsed, duration_s, interval_s, size_bytes,
        checked_slos, output, compress, step_s,
    )  # fmt: skip


def file_size(plan: ReplayPlan, work: Path) -> int:
    if plan.size_bytes is not None:
        return plan.size_bytes
    st = os.statvfs(work)
    room = int(st.f_bavail * st.f_frsize * FREE_SHARE)
    size = min(DEFAULT_SIZE, room)
    size -= size % MIB
    if size < MIN_SIZE:
        raise ConfigError(f"--on {plan.target}: less than {2 * MIN_SIZE // MIB} MiB free")
    return size


async def execute(plan: ReplayPlan, stop: asyncio.Event, say: Any = None) -> dict[str, Any]:
    """Every scale in turn; the document ``replay.json`` holds."""
    if is_scenario(plan.target):
        from sim.replay.dbplan import execute_db

        return await execute_db(plan, stop, say)
    from sim.replay.filejob import is_file_capture

    if is_file_capture(plan.bundle):  # file production: an EDA mix deck (sim.replay.fileplan)
        from sim.replay.fileplan import execute_files

        return await execute_files(plan, stop, say)
    from sim.baseline.fio import find_fio, fio_version
    from sim.baseline.safety import claim_tree, release_tree
    from sim.replay.day_run import day_scale
    from sim.replay.runner import check_output_elsewhere, lay_out, run_scale

    fio = find_fio()
    version = fio_version(fio)
    work = claim_tree(plan.target)
    try:
        check_output_elsewhere(plan.output, work)
        home = new_bundle_dir(plan.output, "replay")
        size = file_size(plan, work)
        data_file = await lay_out(fio, work, size, stop)
        scale_run = functools.partial(
            run_scale, fio=fio, work=work, data_file=data_file, size_bytes=size,
            interval_s=plan.interval_s, output=home, stop=stop,
        )  # fmt: skip
        first = derive(plan.production, 1.0)
        if say:
            say(f"dbsim replay: calibrating at 1x for {_calibration_s(plan):g} s on {plan.target}")
        calibrated = await scale_run(job=first, runtime_s=_calibration_s(plan), name="calibration")
        correction = calibration(calibrated, first)
        scales = []
        for scale in plan.scales:
            if plan.compress is not None:
                scales.append(await day_scale(plan, scale, correction, scale_run, say))
                continue
            job = derive(plan.production, scale, correction)
            if say:
                say(f"dbsim replay: {scale:g}x for {plan.duration_s:g} s on {plan.target}")
            run = await scale_run(job=job, runtime_s=plan.duration_s, name=f"{scale:g}x")
            scales.append(_scale_entry(plan, job, run))
    finally:
        release_tree(plan.target)
    doc = _document(plan, home, size, version, scales)
    doc["calibration"] = calibration_section(calibrated, first, _calibration_s(plan))
    return doc


def _scale_entry(plan: ReplayPlan, job: Any, run: Any) -> dict[str, Any]:
    """One scale of ``replay.json``: the job, fidelity, and the verdict when faithful."""
    from sim.replay.runner import rerun_job

    asked = {d.rw.removeprefix("rand"): d.iops for d in job.directions}
    done = {d: f["iops"] for d, f in run.fio.items()}
    judged = fidelity.judge(plan.production, run.shape, run.scale, done, asked)
    judgement = verdict.verdict_if_faithful(judged, plan.production, run.shape, plan.slos)
    return {
        "scale": run.scale,
        "job": job.as_dict(),
        "bundle": str(run.bundle),
        "fio_report": str(run.fio_report),
        "job_file": str(rerun_job(run.bundle)),
        "fio": run.fio,
        "replay": run.shape.as_dict(),
        "fidelity": judged,
        "verdict": judgement,
    }


def _calibration_s(plan: ReplayPlan) -> float:
    return min(plan.duration_s, CALIBRATION_S)


def _document(
    plan: ReplayPlan, home: Path, size: int, version: str, scales: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "replay_version": REPLAY_VERSION,
        "directory": str(home),
        "capture": {
            "bundle": str(plan.bundle),
            "kind": plan.profile.get("kind"),
            "origin": plan.profile.get("origin"),
            "shape": plan.production.as_dict(),
        },
        "target": {"directory": str(plan.target), "file_bytes": size, "driver": version},
        "duration_s": plan.duration_s,
        "interval_s": plan.interval_s,
        "tolerances": {
            "iops_pct": 100 * fidelity.IOPS_TOL,
            "read_share_points": fidelity.READ_SHARE_POINTS,
            "size_pct": 100 * fidelity.SIZE_TOL,
        },
        "slos_ms": plan.slos,
        "scales": scales,
        "headroom": verdict.headroom(scales, plan.production.iops),
        "exit_code": verdict.exit_code(scales),
    }
