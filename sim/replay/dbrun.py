"""One scale of a replay on a database: the user's scenario with the derived SLOB-like
parameters and ``load.rate_iops`` written beside the replay (the user's file is only read),
run through the normal run path (``dbsim run``, its own process: calibration, the closed loop
on the delivered IOPS, the scenario's collectors), then the run bundle profiled as
``dbsim profile`` does and its shape taken over the measured stage."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.errors import ConfigError, TargetError
from sim.nofollow import write_new
from sim.replay.dbjob import DbJob
from sim.replay.shape import Shape, between, device_series, shape_over

WORKLOAD = "slob"
DEFAULT_SESSIONS = 8
CALIBRATION_S = 6.0


@dataclass
class DbScaleRun:
    scale: float
    bundle: Path
    summary: dict[str, Any]
    profile: dict[str, Any]
    shape: Shape
    stage: dict[str, Any]
    scenario: Path


def read_scenario(path: Path) -> dict[str, Any]:
    """The user's scenario: a mapping whose workload is the SLOB-like one."""
    from sim.config.resolve import read_scenario_file

    doc = read_scenario_file(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("workload"), dict):
        raise ConfigError(f"--on {path}: not a scenario (no workload section)")
    name = doc["workload"].get("name")
    if name != WORKLOAD:
        raise ConfigError(
            f"--on {path}: workload {name!r}; a replay on a database derives SLOB-like "
            "parameters (workload: slob) from the capture's mix: give a slob scenario"
        )
    return doc


def scenario_for(base: dict[str, Any], job: DbJob, duration_s: float, name: str) -> dict[str, Any]:
    """The user's scenario with the job's parameters and the load asked in device IOPS."""
    doc = json.loads(json.dumps(base))  # a deep copy
    doc["name"] = name
    doc["workload"].setdefault("parameters", {}).update(job.parameters)
    sessions = (base.get("load") or {}).get("sessions") or DEFAULT_SESSIONS
    doc["load"] = {
        "mode": "open",
        "sessions": sessions,
        "rate_iops": round(job.rate_iops, 1),
        "calibration_s": min(CALIBRATION_S, duration_s),
        "warmup_s": job.warmup_s,
        "duration_s": duration_s,
    }
    doc.pop("slos", None)  # the replay judges the device latencies itself
    return doc


def _failure(bundle: Path) -> str | None:
    """A failed run's own reason from its summary (the calibration's, storage not exercised,
    or the error budget's), None without one."""
    try:
        summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    calibration = summary.get("calibration") or {}
    reason = calibration.get("error") or (summary.get("errors") or {}).get("reason")
    return str(reason) if reason else None


def measured_stage(summary: dict[str, Any]) -> dict[str, Any]:
    stages = [s for s in summary.get("stages") or [] if s.get("phase") == "measure"]
    if not stages:
        raise TargetError(f"replay: the run has no measured stage ({summary.get('status')})")
    return dict(stages[-1])


async def run_db_scale(
    *, base: dict[str, Any], job: DbJob, duration_s: float, home: Path, name: str,
    skip_load: bool, stop: asyncio.Event,
) -> DbScaleRun:  # fmt: skip
    """``job`` through ``dbsim run`` on the scenario's target; its shape over the measured
    stage's intervals."""
    from sim.replay.runner import _profile

    path = home / f"{name}.yaml"
    # In the replay's own new directory; created, never written over, no link followed.
    text = yaml.safe_dump(scenario_for(base, job, duration_s, name), sort_keys=False)
    write_new(str(path), text.encode("utf-8"))
    bundle = await dbsim_run(path, home, job.scale, stop, ["--skip-load"] if skip_load else [])
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    stage = measured_stage(summary)
    profile = _profile(bundle)
    series = device_series(profile)
    start, end = float(stage["t"]), float(stage["t"]) + float(stage["duration_s"])
    picked = between(series, start, end)
    how = f"the {len(picked)} intervals wholly inside the measured stage (t = {start:.1f} to {end:.1f} s)"
    shape = shape_over(series, picked, how)
    return DbScaleRun(job.scale, bundle, summary, profile, shape, stage, path)


async def dbsim_run(
    path: Path, home: Path, scale: float, stop: asyncio.Event, extra: list[str] | None = None
) -> Path:
    """``dbsim run`` of the scenario at ``path`` in a process of its own (bundles under
    ``home/runs``), stopped with SIGTERM when ``stop`` is set; its bundle. A run that exits
    other than 0 or 1 (SLOs missed), or prints no bundle, raises with its cause."""
    argv = [sys.executable, "-m", "sim.cli", "run", str(path), "-o", str(home / "runs"), "-q"]
    proc = await asyncio.create_subprocess_exec(
        *argv, *(extra or []), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )  # fmt: skip
    waiter = asyncio.ensure_future(proc.communicate())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if stop.is_set() and not waiter.done():
        proc.terminate()  # dbsim run ends its bundle as interrupted on SIGTERM
    out, err = await waiter
    stopper.cancel()
    if stop.is_set():
        raise TargetError(f"replay stopped at scale {scale:g}x")
    lines = out.decode(errors="replace").strip().splitlines()
    if proc.returncode not in (0, 1) or not lines:
        said = err.decode(errors="replace").strip().splitlines()
        why = _failure(Path(lines[-1])) if lines else None
        raise TargetError(
            f"replay: dbsim run at {scale:g}x exited {proc.returncode}: "
            f"{why or (said[-1] if said else 'no message')} ({path})"
        )
    return Path(lines[-1])
