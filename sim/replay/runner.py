"""One scale of a replay on a file target: dbsim's own capture of the target's devices around
fio running the derived job, then the replay bundle's profile and its shape over the
intervals fio ran in.

The target is a directory: the replay writes only in the directory the baseline's ownership
rule gives fio (``sim.baseline.safety.claim_tree``: a new or empty directory, or one with
dbsim's marker), one file laid out whole before the first scale (a file only allocated would
be read as zeros without any I/O), removed at the end. The replay's bundles are written
elsewhere: on the device under test their writes would be counted as the replay's.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.baseline.fio import FioTarget, failure_line, layout_job, run_fio
from sim.baseline.safety import FIO_FILE_PREFIX
from sim.errors import ConfigError, TargetError
from sim.replay.fiojob import ReplayJob, job_text, job_windows, log_period_ms
from sim.replay.shape import Shape, between, device_series, shape_over

RAMP_S = 1.0
JOB_NAME = "replay.fio"
#: The same job without the IOPS logs the replay reads back: what ``fio FILE`` reruns and
#: ``dbsim replay --write-scenario`` writes out (:mod:`sim.replay.scenario_out`).
RERUN_NAME = "rerun.fio"
OUTPUT_NAME = "replay.json"
LAYOUT_FILE = f"{FIO_FILE_PREFIX}0"  # what layout_job's filename_format names job 0's file


@dataclass
class ScaleRun:
    scale: float
    bundle: Path
    profile: dict[str, Any]
    shape: Shape
    fio: dict[str, dict[str, float]]  # per direction, as fio reported them (fio_figures)
    fio_report: Path
    window: tuple[float, float]
    clock_t0: float = 0.0  # the capture's t = 0 on time.monotonic (CLOCK_MONOTONIC), s


def rerun_job(bundle: Path) -> Path:
    """A scale's job file without the replay's own logs, in its bundle (:data:`RERUN_NAME`)."""
    return bundle / "fio" / RERUN_NAME


def check_output_elsewhere(output: Path, work: Path) -> None:
    """Refuse bundles on the file system under test (their writes would be measured)."""
    where = Path(os.path.abspath(output))
    while not where.exists() and where != where.parent:
        where = where.parent
    if os.stat(where).st_dev == os.stat(work).st_dev:
        raise ConfigError(
            f"--output {output}: on the file system under test ({work}); the replay's own "
            "bundle writes would be counted as the replay's I/O: write it elsewhere"
        )


async def lay_out(fio: str, work: Path, size_bytes: int, stop: asyncio.Event) -> Path:
    """fio writes the replay's file whole, once (direct sequential writes)."""
    job = work / "layout.fio"
    job.write_text(layout_job(FioTarget("files", work, size_bytes), 1), encoding="utf-8")
    try:
        run = await run_fio([fio, str(job), "--output-format=terse"], stop)
    finally:
        job.unlink(missing_ok=True)
    if run.returncode != 0 or run.interrupted:
        raise TargetError(failure_line(run, f"laying out {work / LAYOUT_FILE}"))
    return work / LAYOUT_FILE


def fio_iops(document: dict[str, Any]) -> dict[str, float]:
    """Completed IOPS per direction from fio's JSON (one job per direction)."""
    return {d: f["iops"] for d, f in fio_figures(document).items()}


def fio_figures(document: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per direction, what fio completed: ``iops`` and the mean size ``kib`` (its bytes over
    its I/Os), from its JSON report."""
    out: dict[str, dict[str, float]] = {}
    for direction in ("read", "write"):
        iops = ios = nbytes = 0.0
        for job in document.get("jobs") or []:
            part = job.get(direction) or {}
            iops += float(part.get("iops", 0.0))
            ios += float(part.get("total_ios", 0))
            nbytes += float(part.get("io_bytes", 0))
        out[direction] = {"iops": iops, "kib": nbytes / ios / 1024 if ios else 0.0}
    return out


async def _started(
    work: Path, interval_s: float, output: Path, name: str
) -> tuple[Any, asyncio.Future[dict[str, Any]], Path]:
    """dbsim's capture of the target's devices, running: the capture, its task, its bundle."""
    from sim.capture.loop import Capture
    from sim.capture.plan import resolve_capture
    from sim.capture.watch import watched_target

    settings = [
        ("collectors.interval_s", interval_s),
        ("output.directory", str(output)),
        ("output.name", name),
    ]
    plan = resolve_capture(None, settings, [work])
    capture = Capture(plan, watched_target(plan.target, list(plan.section.paths)))
    started: dict[str, Any] = {}
    ready = asyncio.Event()

    def on_started(info: dict[str, Any]) -> None:
        started.update(info)
        ready.set()

    capture.on_started = on_started
    task = asyncio.ensure_future(capture.run())
    waiter = asyncio.ensure_future(ready.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        task.result()  # the capture's refusal
        raise TargetError("replay: the capture of the target ended before it started")
    waiter.cancel()
    return capture, task, Path(started["bundle"])


def _fio_document(run: Any, out_path: Path, scale: float) -> dict[str, Any]:
    """fio's JSON report; TargetError with fio's own words when it failed."""
    try:
        document: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TargetError(failure_line(run, f"the replay at {scale:g}x ({exc})")) from None
    errors = [int(j.get("error", 0)) for j in document.get("jobs") or []]
    if run.returncode != 0 or any(errors):
        raise TargetError(failure_line(run, f"the replay at {scale:g}x", max(errors or [0])))
    return document


async def run_scale(
    *,
    fio: str,
    job: ReplayJob,
    work: Path,
    data_file: Path,
    size_bytes: int,
    runtime_s: float,
    interval_s: float,
    output: Path,
    name: str,
    stop: asyncio.Event,
    text: str | None = None,
    rerun_text: str | None = None,
    ramp_s: float = RAMP_S,
) -> ScaleRun:
    """``job`` at its scale for ``runtime_s`` (after ``ramp_s``) under dbsim's capture of
    the target; ``text``, when given, is the job file to run instead (the day shape's), and
    ``rerun_text`` the same without its logs (:data:`RERUN_NAME`)."""
    from sim.core.result import OUTCOME_COMPLETED

    capture, task, bundle = await _started(work, interval_s, output, name)

    def now() -> float:  # the capture's clock: its t
        return float(capture.clock() - getattr(capture, "_t0", 0.0))

    (bundle / "fio").mkdir()
    job_path, out_path = bundle / "fio" / JOB_NAME, bundle / "fio" / OUTPUT_NAME
    comments = [f"dbsim replay: scale {job.scale:g}x, written for this run"]
    period = log_period_ms(interval_s)
    if text is None:  # each direction's IOPS log beside its report: where fio really ran
        logs = (bundle / "fio", period)
        text = job_text(job, data_file, size_bytes, runtime_s, ramp_s, comments, logs)
        rerun_text = job_text(job, data_file, size_bytes, runtime_s, ramp_s, comments)
    job_path.write_text(text, encoding="utf-8")
    if rerun_text is not None:
        rerun_job(bundle).write_text(rerun_text, encoding="utf-8")
    try:
        await asyncio.sleep(interval_s)  # one interval of the target before the replay
        t_start = now()
        argv = [fio, str(job_path), "--output-format=json", f"--output={out_path}"]
        run = await run_fio(argv, stop)
        t_end = now()
        if not stop.is_set():
            await asyncio.sleep(interval_s)  # the interval holding fio's end closes
    finally:
        capture.request_stop("replay finished", OUTCOME_COMPLETED)
        summary = await task
    if run.interrupted:
        raise TargetError(f"replay stopped at scale {job.scale:g}x; bundle {bundle}")
    document = _fio_document(run, out_path, job.scale)
    if summary.get("status") != OUTCOME_COMPLETED:
        raise TargetError(f"replay: the capture of the target {summary.get('status')}: {bundle}")
    t0 = float(getattr(capture, "_t0", 0.0))
    ran = list(job_windows(bundle / "fio", document, t0, period).values())
    # fio's own clock (sim.replay.fiojob): the span all its jobs ran in; else dbsim's view
    window = (max(w[0] for w in ran), min(w[1] for w in ran)) if ran else (t_start + ramp_s, t_end)
    profile = _profile(bundle)
    shape = _shape_in(profile, window, ramp_s, on_fio_clock=bool(ran))
    return ScaleRun(job.scale, bundle, profile, shape, fio_figures(document), out_path, window, t0)


def _shape_in(
    profile: dict[str, Any], window: tuple[float, float], ramp_s: float, on_fio_clock: bool
) -> Shape:
    """The replay's shape over its intervals wholly inside fio's measured run."""
    series = device_series(profile)
    picked = between(series, *window)
    clock = ", on fio's own clock" if on_fio_clock else ""
    how = (
        f"the {len(picked)} intervals wholly inside fio's measured run (t = {window[0]:.1f} "
        f"to {window[1]:.1f} s, after its {ramp_s:g} s ramp{clock})"
    )
    return shape_over(series, picked, how)


def _profile(bundle: Path) -> dict[str, Any]:
    """The replay bundle's profile, written into it as ``dbsim profile`` writes it."""
    from sim.bundle.files import atomic_write
    from sim.profile import PROFILE_NAME, build_profile
    from sim.safeio import strict_json

    doc = build_profile(bundle)
    atomic_write(bundle / PROFILE_NAME, strict_json(doc) + "\n")
    return doc
