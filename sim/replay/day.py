"""The day shape: the captured rate curve replayed compressed in time, scaled.

The capture's whole span is cut into steps of ``compress × step_s`` captured seconds; each
becomes ``step_s`` seconds of replay at that step's mean read and write IOPS (times the
scale), with the production window's request sizes, sequential share and concurrency (in
proportion to the step's load). All steps are jobs of one fio process, each starting at its
place in the schedule (``startdelay``, counted by fio from one origin, its genesis) and
running its ``step_s`` (``runtime``): the replay is open loop from the intended schedule, so a
slow target shows as a step that fell short, never as a replay stretched in time.

The steps' windows are fio's own: every job writes an IOPS log stamped on CLOCK_MONOTONIC
(``log_alternate_epoch``, clock id 1), the capture's clock (``time.monotonic``), so a step's
start is its first log sample less one averaging period and its end that start plus fio's
own runtime of the job. The schedule's origin is the median over the steps of (start less the
step's place): the place most steps kept. Delivered is the replay's capture over each step's
own window; a step that started or ended more than one sampling interval off its place
(beside CPU load a step can run into the next) fails "step boundaries" and the replay is
unfaithful, whatever its IOPS. Why this and not one fio per step started by dbsim: measured
here, the one fio's jobs started within 26 ms of their places quiet and within 0.2 s beside
``stress-ng --cpu 2`` (fio at nice 19), while a fio process per step pays its start-up (a
second of job set-up when busy) at every step, and fio's ``thinktime`` or trace replay
cannot hold a rate curve. Judged: the busiest step of the replay must be the captured
burst's step or its neighbour (within one compressed interval), at the burst's height within
10 %, and all the steps' I/O together within ±5 % of the asked.

The cutting (:func:`step_means`) and the judging (:func:`judge_steps`, its figures and words
given by :class:`Words`) are shared with a file tree's day shape (:mod:`sim.replay.fileday`:
calls per second, its windows from ``dbsim run``'s stage log).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.replay.fidelity import IOPS_TOL
from sim.replay.fiojob import derive, direction_lines, global_lines, job_windows, log_lines
from sim.replay.shape import EPS_S, Shape, device_series

MIN_STEP_S = 2.0
MAX_STEPS = 120
PEAK_HEIGHT_TOL = 0.10
IDLE_SHARE = 0.10


@dataclass(frozen=True)
class Step:
    index: int
    first_t: float  # the captured span it stands for (s, the capture's clock)
    last_t: float
    read_iops: float
    write_iops: float


def step_seconds(span_s: float, compress: float, asked: float | None) -> float:
    """``asked``, else the shortest step that keeps the replay within :data:`MAX_STEPS`."""
    if asked is not None:
        return asked
    return max(MIN_STEP_S, math.ceil(span_s / compress / MAX_STEPS))


def step_means(
    series: dict[str, Any], keys: tuple[str, ...], compress: float, step_s: float
) -> list[tuple[int, float, float, dict[str, float]]]:
    """The curve ``series`` (rows of ``t``, ``interval_s`` and the ``keys``' rates) cut into
    steps of ``compress × step_s`` captured seconds from its first row's start: per step its
    index, the captured span it stands for and each key's mean rate over the rows whose
    middle falls in it. The day shapes of fio (:func:`steps_of`) and of a file tree
    (:mod:`sim.replay.fileday`) both cut their curves here."""
    chunk = step_s * compress
    t0 = float(series["t"][0]) - float(series["interval_s"][0])
    groups: dict[int, list[int]] = {}
    for i, (t, length) in enumerate(zip(series["t"], series["interval_s"], strict=True)):
        groups.setdefault(int((float(t) - float(length) / 2 - t0) // chunk), []).append(i)
    out = []
    for k in range(max(groups) + 1):
        picked = groups.get(k, [])
        seconds = sum(float(series["interval_s"][i]) for i in picked)
        means = {
            key: sum(float(series[key][i] or 0) * float(series["interval_s"][i]) for i in picked)
            / seconds
            if seconds
            else 0.0
            for key in keys
        }
        out.append((k, t0 + k * chunk, t0 + (k + 1) * chunk, means))
    return out


def steps_of(profile: dict[str, Any], compress: float, step_s: float) -> list[Step]:
    keys = ("read_iops", "write_iops")
    return [
        Step(k, first, last, means["read_iops"], means["write_iops"])
        for k, first, last, means in step_means(device_series(profile), keys, compress, step_s)
    ]


def day_text(
    production: Shape,
    steps: list[Step],
    scale: float,
    correction: dict[str, dict[str, float]],
    where: tuple[Path, int],
    step_s: float,
    logs: tuple[Path, int] | None = None,
) -> str:
    """One fio job file: per step and direction, a job at its place in the schedule;
    ``logs`` (a directory, the averaging period in ms): each job's IOPS log there, stamped
    on the monotonic clock."""
    first = derive(production, scale, correction)
    lines = [f"# {c}" for c in first.rules]
    lines += [*global_lines(where[0], where[1], first.random_pct), "thread=1"]
    if logs is not None:
        lines += log_lines(logs[1])
    for step in steps:
        load = step.read_iops + step.write_iops
        if load <= 0:
            continue
        inflight = (production.inflight or 1.0) * load / production.iops
        shape = dataclasses.replace(
            production, read_iops=step.read_iops, write_iops=step.write_iops, inflight=inflight
        )
        for d in derive(shape, scale, correction).directions:
            name = job_name(step.index, d.rw)
            lines += direction_lines(d, name)
            lines += [f"startdelay={step.index * step_s:g}s", f"runtime={step_s:g}s"]
            if logs is not None:
                lines.append(f"write_iops_log={logs[0] / name}")
    return "\n".join(lines) + "\n"


def job_name(index: int, rw: str) -> str:
    return f"step{index}-{rw}"


def fio_windows(
    log_dir: Path, fio_report: dict[str, Any], clock_t0: float, period_ms: int
) -> dict[int, tuple[float, float]]:
    """Per step, the window its jobs really ran (s, the capture's t), from fio's own clock
    (:func:`sim.replay.fiojob.job_windows`): its jobs' earliest start and latest end."""
    windows: dict[int, tuple[float, float]] = {}
    for name, (start, end) in job_windows(log_dir, fio_report, clock_t0, period_ms).items():
        if not name.startswith("step"):
            continue
        index = int(name[4:].split("-", 1)[0])
        old = windows.get(index, (start, end))
        windows[index] = (min(old[0], start), max(old[1], end))
    return windows


def sampled_spans(series: dict[str, list[Any]]) -> list[tuple[float, float]]:
    """Each row's real span in the replay's own live capture: from the previous row's ``t``
    (the first: its length). A live row's rates are over the time since the previous reading;
    the profile shortens a late one to the capture's interval (an import's gap), but beside
    CPU load the sampler ran 1.9 s late once, and that row's IOPS were over all of it."""
    times = [float(t) for t in series["t"]]
    return [
        (times[i - 1] if i else times[0] - float(series["interval_s"][0]), t)
        for i, t in enumerate(times)
    ]


def _inside(a: float, b: float, window: tuple[float, float]) -> bool:
    return a >= window[0] - EPS_S and b <= window[1] + EPS_S


@dataclass(frozen=True)
class Words:
    """What a day shape's judgement says of its figures and of where its windows came from:
    fio's device IOPS and its logs, or a file tree's calls and ``dbsim run``'s stages."""

    key: str  # the figures' key suffix in replay.json: asked_<key>, delivered_<key>
    unit: str  # as printed
    runner: str  # what ran the steps and kept their windows
    clock: str  # where the windows come from, in a few words
    what: str  # the schedule's explanation, in replay.json


FIO_WORDS = Words(
    "iops", "IOPS", "fio", "fio's own clock",
    "each step's window from fio's own IOPS logs on the monotonic clock (first sample less "
    "one averaging period; plus fio's runtime of the job); the origin is the median of the "
    "steps' starts less their places",
)  # fmt: skip


def _step_rows(
    asked: list[tuple[int, float, float, float]],
    series: dict[str, Any],
    windows: dict[int, tuple[float, float]],
    origin: float | None,
    step_s: float,
    words: Words,
) -> list[dict[str, Any]]:
    """One row per step (``asked``: index, captured span, asked rate): asked, delivered over
    the replay's intervals wholly inside the window the step ran in (a step without one: its
    place), how far it ran from its place. ``series[words.key]``: the replay's rate."""
    spans = sampled_spans(series)
    rows: list[dict[str, Any]] = []
    for index, first_t, last_t, want in asked:
        place = None if origin is None else origin + index * step_s
        window = windows.get(index)
        if window is None and place is not None:
            window = (place, place + step_s)
        off = None
        if place is not None and index in windows:
            ran = windows[index]
            off = max(abs(ran[0] - place), abs(ran[1] - place - step_s))
        picked = [i for i, (a, b) in enumerate(spans) if window and _inside(a, b, window)]
        seconds = sum(spans[i][1] - spans[i][0] for i in picked)
        done = sum(float(series[words.key][i] or 0) * (spans[i][1] - spans[i][0]) for i in picked)
        rows.append(
            {"step": index, "captured_t": [first_t, last_t], f"asked_{words.key}": want,
             f"delivered_{words.key}": done / seconds if seconds else None,
             "intervals": len(picked), "window_t": list(window) if window else None,
             "boundary_off_s": off}
        )  # fmt: skip
    return rows


def judge_day(
    steps: list[Step],
    profile: dict[str, Any],
    windows: dict[int, tuple[float, float]],
    step_s: float,
    scale: float,
    interval_s: float,
) -> dict[str, Any]:
    """fio's day shape: each step's read and write IOPS times ``scale`` against the replay's
    device IOPS (:func:`judge_steps`)."""
    asked = [(s.index, s.first_t, s.last_t, (s.read_iops + s.write_iops) * scale) for s in steps]
    return judge_steps(asked, device_series(profile), windows, step_s, interval_s, FIO_WORDS)


def judge_steps(
    asked: list[tuple[int, float, float, float]],
    series: dict[str, Any],
    windows: dict[int, tuple[float, float]],
    step_s: float,
    interval_s: float,
    words: Words,
) -> dict[str, Any]:
    """Per step, asked and delivered (the replay's intervals wholly inside the window the
    step ran in; a step without load, its place in the schedule) and how far the step's
    start and end were from their places; the burst's position and height; all steps
    together. A boundary off by more than ``interval_s`` is unfaithful."""
    asked_k, got_k = f"asked_{words.key}", f"delivered_{words.key}"
    origin = statistics.median(w[0] - k * step_s for k, w in windows.items()) if windows else None
    rows = _step_rows(asked, series, windows, origin, step_s, words)
    measured = [r for r in rows if r[got_k] is not None]
    peak = max(rows, key=lambda r: r[asked_k])
    top = max(measured, key=lambda r: r[got_k]) if measured else None
    height = peak[got_k]
    asked_all = sum(r[asked_k] for r in measured)
    got_all = sum(r[got_k] for r in measured)
    worst = max(rows, key=lambda r: -1.0 if r["boundary_off_s"] is None else r["boundary_off_s"])
    # A step without a window (fio: no dense log, sim.replay.fiojob.job_windows) has no
    # boundary to show; below a tenth of the burst (the capture's idle edges) it is measured
    # at its place.
    least = IDLE_SHARE * max(r[asked_k] for r in rows)
    unlogged = [r["step"] for r in rows if r[asked_k] >= least and r["step"] not in windows]
    bounds_ok = not unlogged and (worst["boundary_off_s"] or 0.0) <= interval_s
    position_ok = top is not None and abs(top["step"] - peak["step"]) <= 1
    height_ok = height is not None and abs(height / peak[asked_k] - 1) <= PEAK_HEIGHT_TOL
    total_ok = asked_all > 0 and abs(got_all / asked_all - 1) <= IOPS_TOL
    failed = [name for name, ok in (("step boundaries", bounds_ok), ("burst position", position_ok),
                                    ("burst height", height_ok),
                                    (f"{words.unit} over the steps", total_ok))
              if not ok]  # fmt: skip
    return {
        "steps": rows,
        "step_s": step_s,
        "unit": words.unit,
        "schedule": {
            "origin_t": origin,
            "worst_step": worst["step"] if worst["boundary_off_s"] is not None else None,
            "worst_off_s": worst["boundary_off_s"],
            "tolerance_s": interval_s,
            "what": words.what,
        },
        "peak": {
            "asked_step": peak["step"],
            asked_k: peak[asked_k],
            "delivered_at_asked_step": height,
            "busiest_delivered_step": top["step"] if top else None,
        },
        "total": {asked_k: asked_all, got_k: got_all},
        "faithful": not failed,
        "failed": failed,
        "cause": None
        if not failed
        else _cause(failed, height, peak[asked_k], worst, unlogged, words),
    }


def _cause(
    failed: list[str],
    height: float | None,
    asked: float,
    worst: dict[str, Any],
    unlogged: list[int],
    words: Words,
) -> str:
    if "step boundaries" in failed:
        if unlogged:
            return (
                f"{words.runner} logged no window for step {unlogged[0]}: its boundaries are "
                "unknown"
            )
        return (
            f"step {worst['step']} ran {worst['boundary_off_s']:.2f} s off its place in the "
            f"schedule ({words.clock}), more than one sampling interval: the steps ran into "
            "each other"
        )
    if height is not None and height < (1 - PEAK_HEIGHT_TOL) * asked:
        return f"target too slow to deliver the asked {words.unit} at the burst"
    return f"the replay's {failed[0]} departs from the capture's"
