"""``dbsim replay`` of file production (a capture that counted file system calls) on a
directory: per scale an EDA mix deck (:mod:`sim.replay.filejob`) run through ``dbsim run``
with the ``fileops`` collector on the target's file system, then the calls it made judged
against the captured ones times the scale, before any verdict.

Fidelity (over the run's measured stage; documented in docs/capture.md, "Replaying file
production"): the reproduced calls per second ±5 % of the capture's times the scale, each
class's share of them within ±2 points, mean read and write sizes ±10 %. A scale whose EDA
processes fell behind their schedule by more than 2.5 % (the run's own operation rate
against the asked) is **unfaithful** because the target (with this host) could not deliver
it: its delivered calls are the ceiling.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from sim.bundle.files import new_bundle_dir
from sim.errors import TargetError
from sim.nofollow import write_new
from sim.replay import REPLAY_VERSION, verdict
from sim.replay.fidelity import FIO_SHORT, IOPS_TOL, SIZE_TOL, Check, points, relative
from sim.replay.filejob import (
    NOT_REPRODUCED,
    REPRODUCED,
    FileJob,
    FileShape,
    derive,
    production_window,
    read_series,
    shape_over,
)

SHARE_POINTS = 2.0
WARMUP_S = 2.0
#: bpftrace attaches the fileops probes in about 5 s here (longer beside busy CPUs, and its
#: compiling takes a CPU): the run waits for them before its load starts.
ATTACH_WAIT_S = 30.0
#: How long a scale's run may take beyond its measured stage (start, tree, bpftrace, end).
RUN_SLACK_S = 120.0


def scenario_for(
    job: FileJob, target: Path, duration_s: float, interval_s: float, name: str
) -> dict[str, Any]:
    return {
        "name": name,
        "target": {"kind": "filetree", "path": str(target)},
        "workload": {"name": "eda", "parameters": job.parameters},
        "load": {
            "mode": "open",
            "sessions": job.sessions,
            "rate_ops_s": round(job.rate_ops_s, 2),
            "warmup_s": WARMUP_S,
            "duration_s": duration_s,
        },
        "collectors": {
            "interval_s": interval_s,
            "timeout_s": ATTACH_WAIT_S + 5,
            "fileops": {"enabled": True, "attach_wait_s": ATTACH_WAIT_S},
        },
    }


async def _dbsim_run(path: Path, home: Path, scale: float, stop: asyncio.Event) -> Path:
    """``dbsim run`` of the scenario at ``path`` (its own process); its bundle."""
    from sim.replay.dbrun import dbsim_run

    return await dbsim_run(path, home, scale, stop)


def rows_in_stage(
    rows: list[dict[str, float]], start: float, end: float, interval_s: float
) -> list[dict[str, float]]:
    """The ``fileops`` rows whose intervals lie wholly inside ``start`` to ``end`` (a row is
    stamped at its interval's end)."""
    return [r for r in rows if r["t"] - interval_s >= start - 1e-6 and r["t"] <= end + 1e-6]


def _stage_rows(
    bundle: Path, summary: dict[str, Any], start: float, end: float, interval_s: float, scale: float
) -> list[dict[str, float]]:
    """The fileops rows wholly inside the measured stage; TargetError saying why when there
    are fewer than two (the collector's own reason where it gave one)."""
    rows = rows_in_stage(read_series(bundle), start, end, interval_s)
    if len(rows) >= 2:
        return rows
    said = [
        str(c.get("unavailable"))
        for c in summary.get("collectors") or []
        if c.get("source") == "fileops" and c.get("unavailable")
    ]
    why = f"fileops: {said[0]}" if said else f"{len(rows)} interval(s) of fileops"
    raise TargetError(
        f"replay: the run at {scale:g}x counted no file system calls over its measured stage "
        f"({why}): {bundle}"
    )


async def run_file_scale(
    job: FileJob, target: Path, home: Path, duration_s: float, interval_s: float, name: str,
    stop: asyncio.Event,
) -> dict[str, Any]:  # fmt: skip
    """``job`` through ``dbsim run``; the calls over its measured stage and its summary."""
    from sim.replay.dbrun import measured_stage
    from sim.replay.runner import _profile
    from sim.replay.shape import between, device_series
    from sim.replay.shape import shape_over as device_shape

    path = home / f"{name}.yaml"
    text = yaml.safe_dump(scenario_for(job, target, duration_s, interval_s, name), sort_keys=False)
    write_new(str(path), text.encode("utf-8"))
    bundle = await _dbsim_run(path, home, job.scale, stop)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    stage = measured_stage(summary)
    start, end = float(stage["t"]), float(stage["t"]) + float(stage["duration_s"])
    rows = _stage_rows(bundle, summary, start, end, interval_s, job.scale)
    how = f"the {len(rows)} intervals wholly inside the run's measured stage (t = {start:.1f} to {end:.1f} s)"
    series = device_series(_profile(bundle))
    return {
        "bundle": bundle,
        "scenario": path,
        "shape": shape_over(rows, how),
        "device": device_shape(series, between(series, start, end), how),
        "stage": stage,
        "delivered_ops_s": _delivered_ops(stage),
    }


def _delivered_ops(stage: dict[str, Any]) -> float | None:
    """The operations the run's sessions completed per second over its measured stage."""
    done, seconds = stage.get("session_ops"), float(stage.get("duration_s") or 0.0)
    if not isinstance(done, list) or seconds <= 0:
        return None
    return sum(float(n or 0) for n in done) / seconds


def checks(capture: FileShape, replay: FileShape, scale: float) -> list[Check]:
    """The calls/s, each class's share and the mean sizes judged, each check with the band
    it was judged against (:func:`sim.replay.fidelity.relative` and
    :func:`~sim.replay.fidelity.points`: ``dbsim compare`` draws that band)."""
    out = [relative("calls/s", "1/s", capture.reproduced * scale, replay.reproduced, IOPS_TOL)]
    for cls in REPRODUCED:
        if not capture.rates.get(cls) and not replay.rates.get(cls):
            continue
        out.append(points(f"{cls} share", capture.share(cls), replay.share(cls), SHARE_POINTS))
    for figure, a, b in (
        ("read size", capture.read_kib, replay.read_kib),
        ("write size", capture.write_kib, replay.write_kib),
    ):
        if a is None or b is None or a == 0:
            continue
        out.append(relative(figure, "KiB", a, b, SIZE_TOL))
    return out


def cause(
    failed: list[Check], job: FileJob, delivered_ops: float | None, capture: FileShape, scale: float
) -> str:
    """Why a scale departed: the deck behind its schedule with the calls short (the target
    too slow: a ceiling), behind and caught up (the host too busy to hold the schedule: no
    ceiling), a REMOVE rate the deck cannot reach, or another mix on the file system."""
    behind = delivered_ops is not None and delivered_ops < (1 - FIO_SHORT) * job.rate_ops_s
    calls = next((c for c in failed if c.figure == "calls/s"), None)
    short = calls is not None and (calls.delivered or 0.0) < (calls.expected or 0.0)
    if behind and short:
        return (
            f"target too slow to deliver the asked calls (the EDA processes asked "
            f"{job.rate_ops_s:,.0f} ops/s and completed {delivered_ops:,.0f}/s, measured by "
            "dbsim run: the target, or this host's CPU, is the limit)"
        )
    if behind:
        return (
            f"the deck fell behind its schedule and caught up (completed {delivered_ops:,.0f} "
            f"of {job.rate_ops_s:,.0f} ops/s, in bursts): this host was too busy to hold it"
        )
    made_s = sum(capture.rates.get(call, 0.0) for call in ("CREATE", "MKDIR"))
    if capture.rates.get("REMOVE", 0.0) > made_s:
        return (
            "the workload cannot reach the REMOVE rate: EDA sessions remove only what they created"
        )
    first = failed[0]
    if first.figure.endswith("size"):
        return f"the file system's {first.figure} is not the deck's ({first.off}): reads or writes cut short"
    return (
        f"the file system saw another mix than the deck made ({first.figure} {first.off}): "
        "other processes on it, or an operation's calls other than its footprint"
    )


def judge(capture: FileShape, run: dict[str, Any], job: FileJob, scale: float) -> dict[str, Any]:
    found = checks(capture, run["shape"], scale)
    failed = [c for c in found if not c.ok]
    asked = capture.reproduced * scale
    per = run["shape"].per_interval
    return {
        "faithful": not failed,
        "checks": [c.as_dict() for c in found],
        "failed": [c.figure for c in failed],
        "cause": cause(failed, job, run["delivered_ops_s"], capture, scale) if failed else None,
        "per_interval": {
            "intervals": len(per),
            "lowest_pct": 100 * min(per) / asked if per and asked else None,
            "highest_pct": 100 * max(per) / asked if per and asked else None,
        },
    }


async def execute_files(plan: Any, stop: asyncio.Event, say: Any = None) -> dict[str, Any]:
    """Every scale of a file replay in turn; the document ``replay.json`` holds."""
    from sim.replay.runner import check_output_elsewhere

    capture = production_window(plan.bundle)
    where = plan.target if plan.target.exists() else plan.target.parent
    check_output_elsewhere(plan.output, where)
    home = new_bundle_dir(plan.output, "replay")
    scales = []
    if plan.compress is not None:  # the day shape (sim.replay.fileday)
        from sim.replay.fileday import file_day_scale

        for scale in plan.scales:
            entry = await file_day_scale(plan, capture, scale, home, stop, say, scenario_for)
            scales.append(entry)
        return _document(plan, home, capture, scales)
    for scale in plan.scales:
        job = derive(capture, scale)
        if say:
            say(
                f"dbsim replay: {scale:g}x as an EDA mix for {plan.duration_s:g} s on {plan.target}"
            )
        run = await run_file_scale(
            job, plan.target, home, plan.duration_s, plan.interval_s, f"{scale:g}x", stop
        )
        judged = judge(capture, run, job, scale)
        device = run["device"]
        scales.append({
            "scale": scale,
            "eda": job.as_dict(),
            "run": {"bundle": str(run["bundle"]), "scenario": str(run["scenario"]), "delivered_ops_s": run["delivered_ops_s"], "asked_ops_s": job.rate_ops_s},
            "bundle": str(run["bundle"]),
            "files": run["shape"].as_dict(),
            "replay": device.as_dict(),
            "fidelity": judged,
            "verdict": verdict.verdict_if_faithful(judged, plan.production, device, plan.slos),
        })  # fmt: skip
    return _document(plan, home, capture, scales)


def headroom(scales: list[dict[str, Any]], capture: FileShape) -> dict[str, Any]:
    if any("day" in s for s in scales):  # the day shape judges fidelity only
        return {"largest_passing_scale": None}
    passing = [
        s["scale"]
        for s in scales
        if s["fidelity"]["faithful"] and s["verdict"] and s["verdict"]["slos_met"]
    ]
    out: dict[str, Any] = {"largest_passing_scale": max(passing) if passing else None}
    slow = [
        s
        for s in scales
        if not s["fidelity"]["faithful"]
        and str(s["fidelity"]["cause"]).startswith("target too slow")
    ]
    if slow and capture.reproduced > 0:
        first = min(slow, key=lambda s: s["scale"])
        delivered = first["files"]["reproduced_calls_s"]
        out["ceiling"] = {
            "at_scale": first["scale"],
            "asked_calls_s": capture.reproduced * first["scale"],
            "delivered_calls_s": delivered,
            "times_capture": delivered / capture.reproduced,
            "what": "measured: the reproduced file system calls per second the replay delivered "
            "at the first scale the target could not deliver",
        }
    return out


def _document(
    plan: Any, home: Path, capture: FileShape, scales: list[dict[str, Any]]
) -> dict[str, Any]:
    not_reproduced = {c: capture.rates.get(c, 0.0) for c in NOT_REPRODUCED if capture.rates.get(c)}
    return {
        "replay_version": REPLAY_VERSION,
        "files": True,
        "directory": str(home),
        "capture": {
            "bundle": str(plan.bundle),
            "kind": plan.profile.get("kind"),
            "origin": plan.profile.get("origin"),
            "files": capture.as_dict(),
            "not_reproduced_calls_s": not_reproduced,
            "shape": plan.production.as_dict(),
        },
        "target": {"directory": str(plan.target), "driver": "dbsim run, workload eda"},
        "duration_s": plan.duration_s,
        "interval_s": plan.interval_s,
        "tolerances": {
            "calls_pct": 100 * IOPS_TOL,
            "share_points": SHARE_POINTS,
            "size_pct": 100 * SIZE_TOL,
            "behind_schedule_pct": 100 * FIO_SHORT,
        },
        "slos_ms": plan.slos,
        "scales": scales,
        "headroom": headroom(scales, capture),
        "exit_code": verdict.exit_code(scales),
    }
