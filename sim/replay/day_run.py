"""One scale of the day shape (:mod:`sim.replay.day`): the schedule's job file run under
dbsim's capture of the target, judged step by step over the windows fio ran the steps in."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.errors import TargetError
from sim.replay.day import day_text, fio_windows, judge_day, step_seconds, steps_of
from sim.replay.fiojob import derive, log_period_ms
from sim.replay.runner import rerun_job


async def day_scale(
    plan: Any, scale: float, correction: dict[str, dict[str, float]], scale_run: Any,
    say: Callable[[str], None] | None,
) -> dict[str, Any]:  # fmt: skip
    span = float(plan.profile["span"]["seconds"])
    step_s = step_seconds(span, plan.compress, plan.step_s)
    steps = steps_of(plan.profile, plan.compress, step_s)
    runtime = len(steps) * step_s
    if say:
        say(
            f"dbsim replay: the day shape at {scale:g}x, {len(steps)} steps of {step_s:g} s "
            f"({plan.compress:g} times compressed) on {plan.target}"
        )
    first = derive(plan.production, scale, correction)
    where = scale_run.keywords["data_file"], scale_run.keywords["size_bytes"]
    # Sampled four times a step; fio's IOPS logs (beside the replay's bundles, not on the
    # target) say where each step really ran.
    interval = min(plan.interval_s, step_s / 4)
    period = log_period_ms(interval)
    logs = Path(scale_run.keywords["output"]) / f"day-{scale:g}x-fio-logs"
    logs.mkdir()
    text = day_text(plan.production, steps, scale, correction, where, step_s, (logs, period))
    rerun = day_text(plan.production, steps, scale, correction, where, step_s)
    run = await scale_run(
        job=first, runtime_s=runtime, name=f"day-{scale:g}x", text=text, rerun_text=rerun,
        ramp_s=0.0, interval_s=interval,
    )  # fmt: skip
    try:
        report = json.loads(Path(run.fio_report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TargetError(f"replay: fio's report of the day shape at {scale:g}x: {exc}") from None
    windows = fio_windows(logs, report, run.clock_t0, period)
    judged = judge_day(steps, run.profile, windows, step_s, scale, interval)
    return {
        "scale": scale,
        "day": {"compress": plan.compress, "step_s": step_s, "steps": len(steps)},
        "job": first.as_dict(),
        "bundle": str(run.bundle),
        "fio_report": str(run.fio_report),
        "job_file": str(rerun_job(run.bundle)),
        "fio_logs": str(logs),
        "fio": run.fio,
        "replay": run.shape.as_dict(),
        "fidelity": judged,
        "verdict": None,
    }
