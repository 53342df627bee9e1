"""The day shape of file production (:mod:`sim.replay.day`'s, for a file tree): the captured
curve of reproduced file system calls per second cut into steps as fio's day shape cuts its
IOPS (:func:`sim.replay.day.step_means`: each step ``compress × step_s`` captured seconds,
replayed for ``step_s`` seconds at its mean calls/s times the scale), run as the EDA mix deck
of :mod:`sim.replay.filejob` through ``dbsim run``: one run, one ``load.steps`` entry per
step at the step's operation rate, open loop.

Why one run with steps: the EDA sessions' open-loop schedule is taken afresh at every stage
(sim.core.coroutine_sessions.repace), so a step's backlog on a slow target is dropped at its
end and shows as a step that fell short, never as a stretched replay; and a ``dbsim run``
per step would wait for the ``fileops`` probes (about 5 s here) at every step. The steps'
ends are timed by the engine on the schedule (sim.core.engine: a step's end is due at the first
step's start plus the durations before it), so a late boundary delays one step's start, never
the rest: 60 steps of 1 s started at most 0.017 s off their places (quiet), where they drifted
3 ms a step at load average 12 before; whatever is left the boundary judgement shows.

The deck (its mix, sizes and processes) is derived from the production window's calls
(:func:`sim.replay.filejob.production_window`) at the burst's rate, so its processes can
carry the burst; every step runs that deck, its rate in proportion to the step's captured
calls. A step's own op mix is therefore the production window's, not the step's: the day
shape judges the calls per second per step, the deck's mix is judged by the peak replay.

The steps' windows are the run's own: its stage log (``summary.json`` ``stages``, the
engine's clock, the one its ``fileops`` rows are stamped on), each step's start and its
measured length. Judged as fio's day shape (:func:`sim.replay.day.judge_steps`): the busiest
step delivered is the captured burst's or its neighbour, the burst's height within 10 %, all
steps' calls together within ±5 % of the asked, every step within one sampling interval of
its place in the schedule.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from sim.errors import TargetError
from sim.nofollow import write_new
from sim.replay.day import Words, judge_steps, step_means, step_seconds
from sim.replay.filejob import REPRODUCED, FileShape, derive, read_series

#: A step whose captured calls are none still needs a rate above 0 (``load.steps``): this
#: one lets one session make one operation at the step's start (its first due time).
IDLE_RATE_OPS_S = 0.01
KEY = "calls_s"

FILE_WORDS = Words(
    KEY, "calls/s", "dbsim run", "the run's own stage log",
    "each step's window from the run's stage log (summary.json stages: the step's start on "
    "the engine's clock, the clock its fileops rows are stamped on, and its measured "
    "length); the origin is the median of the steps' starts less their places",
)  # fmt: skip


def calls_series(rows: list[dict[str, float]]) -> dict[str, list[float]]:
    """``fileops`` rows (:func:`sim.replay.filejob.read_series`) as a curve: per row its
    ``t``, its length (from the previous row; the first: the rows' median spacing) and the
    reproduced calls per second."""
    times = [float(r["t"]) for r in rows]
    gaps = [b - a for a, b in pairwise(times)]
    first = median(gaps) if gaps else 1.0
    return {
        "t": times,
        "interval_s": [first, *gaps],
        KEY: [sum(r.get(f"{c.lower()}_s", 0.0) for c in REPRODUCED) for r in rows],
    }


def captured_steps(
    bundle: Path, compress: float, asked_step_s: float | None
) -> tuple[float, list[tuple[int, float, float, float]]]:
    """The step length and, per step, its index, captured span and mean reproduced calls/s."""
    series = calls_series(read_series(bundle))
    if not series["t"]:
        raise TargetError(f"replay: {bundle}: the capture counted no file system calls")
    span = series["t"][-1] - series["t"][0] + series["interval_s"][0]
    step_s = step_seconds(span, compress, asked_step_s)
    steps = step_means(series, (KEY,), compress, step_s)
    return step_s, [(k, first, last, means[KEY]) for k, first, last, means in steps]


def day_scenario(
    base: dict[str, Any], steps: list[tuple[int, float, float, float]], rate_per_call: float,
    step_s: float,
) -> dict[str, Any]:  # fmt: skip
    """``base`` (:func:`sim.replay.fileplan.scenario_for`'s) with one load step per step:
    its rate the deck's operations per captured call times the step's calls."""
    load = {k: v for k, v in base["load"].items() if k not in ("rate_ops_s", "duration_s")}
    load["steps"] = [
        {"duration_s": step_s, "rate_ops_s": round(max(IDLE_RATE_OPS_S, calls * rate_per_call), 3)}
        for _, _, _, calls in steps
    ]
    return {**base, "load": load}


def stage_windows(summary: dict[str, Any]) -> dict[int, tuple[float, float]]:
    """Per step, the window the run ran it in (its stage log: start and measured length)."""
    out = {}
    for stage in summary.get("stages") or []:
        if stage.get("phase") == "measure" and stage.get("step") is not None:
            if stage.get("duration_s") is None:
                continue
            start = float(stage["t"])
            out[int(stage["step"])] = (start, start + float(stage["duration_s"]))
    return out


async def file_day_scale(
    plan: Any, capture: FileShape, scale: float, home: Path, stop: asyncio.Event,
    say: Callable[[str], None] | None, scenario_for: Callable[..., dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """One scale of a file tree's day shape: the deck's run over the steps, judged.
    ``scenario_for``: :func:`sim.replay.fileplan.scenario_for` (passed in: fileplan imports
    this module)."""
    from sim.replay.dbrun import dbsim_run

    step_s, steps = captured_steps(plan.bundle, plan.compress, plan.step_s)
    peak = max(calls for _, _, _, calls in steps)
    if peak <= 0 or capture.reproduced <= 0:
        raise TargetError(f"replay: {plan.bundle}: no reproduced call in the captured curve")
    # The deck derived at the burst: its processes carry the busiest step.
    job = derive(capture, scale * peak / capture.reproduced)
    rate_per_call = job.rate_ops_s / peak  # the deck's operations per captured call
    interval = max(0.1, min(plan.interval_s, step_s / 4))  # sampled four times a step
    name = f"day-{scale:g}x"
    if say:
        say(
            f"dbsim replay: the day shape at {scale:g}x, {len(steps)} steps of {step_s:g} s "
            f"({plan.compress:g} times compressed) as an EDA mix on {plan.target}"
        )
    base = scenario_for(job, plan.target, step_s, interval, name)
    doc = day_scenario(base, steps, rate_per_call, step_s)
    path = home / f"{name}.yaml"
    write_new(str(path), yaml.safe_dump(doc, sort_keys=False).encode("utf-8"))
    bundle = await dbsim_run(path, home, scale, stop)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    series = calls_series(read_series(bundle))
    if len(series["t"]) < 2:
        raise TargetError(
            f"replay: the day shape's run at {scale:g}x counted no file system calls: {bundle}"
        )
    series["interval_s"][0] = interval
    asked = [(k, first, last, calls * scale) for k, first, last, calls in steps]
    judged = judge_steps(asked, series, stage_windows(summary), step_s, interval, FILE_WORDS)
    return {
        "scale": scale,
        "day": {
            "compress": plan.compress,
            "step_s": step_s,
            "steps": len(steps),
            "asked": "the step's captured reproduced calls/s",
            "delivered": "the run's fileops collector over the window the run ran the step "
            "in, from its own stage log",
        },
        "eda": job.as_dict(),
        "run": {"bundle": str(bundle), "scenario": str(path)},
        "bundle": str(bundle),
        "fidelity": judged,
        "verdict": None,
    }
