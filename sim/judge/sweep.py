"""Sweeps: step the load up until an SLO breaks; the answer is the highest load that met them all.

A scenario's ``load.sweep`` expands into ``load.steps`` when the scenario is validated, so the
engine runs a sweep like any stepped run::

    load:
      sweep:
        vary: sessions        # or rate_ops_s (mode: open)
        start: 1
        factor: 2             # each step multiplies the load, or `step: 4` adds to it
        max: 64               # never more than this (the last step may be below it)
        step_duration_s: 30
        stop_on_breach: true  # the default

With ``stop_on_breach``, :func:`attach` judges each step as the next one starts and stops the
run (still "completed") at the first step that missed an SLO. That live call only stops early
(it lacks the boundary's last part-interval, published a moment later); the summary's result
is judged afterwards on the bundle's files (:func:`service_levels`).

``summary["sweep"]`` (docs/validation.md): ``points`` (one per step run), ``highest_passing``
(the highest-load point meeting every SLO below the first breach — conservative: a pass after
a breach is noise, listed in ``passing_after_breach``), ``device_iops_at_highest_passing``,
``first_breach`` and ``knee`` (the analysis' latency-versus-load curve). ``summary["slos"]``
holds the verdicts of the highest passing step (none passed: of the first breach), so a sweep
exits 0 when some load met every SLO and 1 when even the first step missed one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.bundle.figures import finite, primary_device
from sim.bundle.reader import read_interval_histograms, read_rows_if_readable
from sim.config.scenario import Slo, Sweep
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED, OUTCOME_INTERRUPTED
from sim.judge import slo as slo_mod
from sim.judge.slo import Window, WindowBuilder

if TYPE_CHECKING:  # only annotations name these types
    from sim.config.scenario import ScenarioBase
    from sim.core.engine import Engine
    from sim.core.metrics import Interval
    from sim.core.result import RunResult
    from sim.core.stages import Stage
    from sim.protocols import Sample

log = logging.getLogger(__name__)

#: A step that ran less than this share of its planned time (stopped, interrupted) is shown
#: but not judged: a fraction of a second of figures proves nothing either way.
COMPLETE_FRACTION = 0.9


# --------------------------------------------------------------------------- step figures


def step_windows(bundle: Path, stages: Sequence[Mapping[str, Any]]) -> dict[int, Window]:
    """One window per measured step, from the bundle's ops.csv, histogram log and the time
    series of the device collectors (block.csv, the device latency quantiles), with each
    step's measured seconds from the stage log. An interval belongs to the last stage that
    started before it ended: a step boundary closes the interval in flight, so none spans two
    steps (an interval ending exactly at a boundary is the earlier step's)."""
    starts = [
        (float(s["t"]), s["step"], finite(s.get("duration_s")))
        for s in stages
        if s.get("phase") == "measure" and isinstance(s.get("step"), int) and "t" in s
    ]
    if not starts:
        return {}

    def step_at(t_end: float) -> int | None:
        found = None
        for t, step, _ in starts:
            if t < t_end:
                found = step
        return found

    series = bundle / "timeseries"

    ops_rows = read_rows_if_readable(series / "ops.csv")
    device_source = slo_mod.device_source()
    device_rows = read_rows_if_readable(series / f"{device_source}.csv") if device_source else []
    latency_source = slo_mod.device_latency_source()
    latency_rows = read_rows_if_readable(series / f"{latency_source}.csv") if latency_source else []
    builders: dict[int, WindowBuilder] = {step: WindowBuilder() for _, step, _ in starts}
    # Each interval covers the time since the previous one ended (any phase).
    ends = sorted({t for r in (*ops_rows, *device_rows) if (t := finite(r.get("t"))) is not None})
    length = {t: t - previous for previous, t in zip([0.0, *ends], ends, strict=False)}
    for row in ops_rows:
        t, step = finite(row.get("t")), None
        if t is not None and row.get("phase") == "measure":
            step = step_at(t)
        if step is not None and row.get("op"):
            builders[step].add_op(
                row["op"],
                finite(row.get("count")) or 0.0,
                finite(row.get("errors")) or 0.0,
            )
    for row, latency in (*((r, False) for r in device_rows), *((r, True) for r in latency_rows)):
        t = finite(row.get("t"))
        if t is None or row.get("phase") != "measure" or (step := step_at(t)) is None:
            continue
        add = builders[step].add_device_latency if latency else builders[step].add_device
        add(row.get("entity") or "", row, length.get(t, 0.0))
    for t_end, op, hist in read_interval_histograms(bundle):
        if (step := step_at(t_end)) is not None:
            builders[step].add_op(op, 0.0, 0.0, hist)
    windows = {}
    for _, step, duration in starts:
        if duration is None:  # a stage the run never finished: the time its intervals cover
            duration = sum(v for k, v in length.items() if step_at(k) == step)
        windows[step] = builders[step].window(f"step {step + 1}", duration)
    return windows


# --------------------------------------------------------------------------- live stop


class BreachMonitor:
    """Judges each step's SLOs when the next step starts and stops the run at the first
    breach (engine listeners: ``interval``, ``stage``, ``finished``)."""

    def __init__(self, engine: Engine, slos: list[Slo]) -> None:
        self.engine = engine
        self.slos = slos
        self.builders: dict[int, WindowBuilder] = {}
        self.seconds: dict[int, float] = {}
        self.reason: str | None = None
        self.device_source = slo_mod.device_source()
        self.latency_source = slo_mod.device_latency_source()

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        """Fold a measured interval into its step's figures."""
        if not interval.measured or interval.step is None:
            return
        builder = self.builders.setdefault(interval.step, WindowBuilder())
        seconds = max(interval.t_end - interval.t_start, 0.0)
        self.seconds[interval.step] = self.seconds.get(interval.step, 0.0) + seconds
        for op, stats in interval.ops.items():
            builder.add_op(op, stats.count, stats.error_count, stats.histogram)
        for sample in samples:
            if sample.gap:  # a gap has no figures to weigh
                continue
            if sample.source == self.device_source:
                builder.add_device(sample.entity, sample.values, seconds)
            elif sample.source == self.latency_source:
                builder.add_device_latency(sample.entity, sample.values, seconds)

    def on_stage(self, stage: Stage, log: dict[str, Any]) -> None:
        """At the start of step k+1, judge step k; stop the run if it missed an SLO."""
        if self.reason is not None or stage.phase != "measure" or not stage.step:
            return
        done = stage.step - 1
        builder = self.builders.get(done, WindowBuilder())
        verdicts = slo_mod.evaluate(
            self.slos, builder.window(f"step {done + 1}", self.seconds.get(done, 0.0))
        )
        if slo_mod.all_met(verdicts):
            return
        missed = sorted(
            {f"{v['slo']} {v.get('op') or v.get('device')}" for v in verdicts if not v["met"]}
        )
        self.reason = f"sweep: step {done + 1} missed {', '.join(missed)}; later steps not run"
        log["sweep_stop"] = self.reason
        self.engine.request_stop(self.reason)

    def on_finished(self, result: RunResult) -> None:
        """A run the sweep stopped did what was asked of it: completed, not interrupted."""
        if result.outcome == OUTCOME_INTERRUPTED and result.reason == self.reason:
            result.outcome = OUTCOME_COMPLETED


def attach(engine: Engine, scenario: ScenarioBase) -> BreachMonitor | None:
    """Wire the stop-on-breach monitor when the scenario sweeps with SLOs and asks for it."""
    sweep = scenario.load.sweep
    if sweep is None or not sweep.stop_on_breach or not scenario.slos:
        return None
    monitor = BreachMonitor(engine, list(scenario.slos))
    for hook in ("interval", "stage", "finished"):
        getattr(engine.events, hook).add_listener(getattr(monitor, f"on_{hook}"))
    return monitor


# --------------------------------------------------------------------------- result


def _point(
    stage: dict[str, Any], window: Window, sweep: Sweep, op: str | None, device: str | None
) -> dict[str, Any]:
    duration = finite(stage.get("duration_s")) or 0.0
    dev = window.devices.get(device or "") or {}
    figures = window.ops.get(op or "") or {}
    return {
        "step": stage["step"],
        "label": f"step {stage['step'] + 1}",
        "sessions": stage.get("sessions"),
        "rate_ops_s": stage.get("rate_ops_s"),
        "rate_iops": stage.get("rate_iops"),
        "load": stage.get(sweep.vary),
        "duration_s": duration,
        "complete": duration >= COMPLETE_FRACTION * sweep.step_duration_s,
        "ops_s": _round(sum(f["ops_s"] or 0.0 for f in window.ops.values()), 2),
        "p99_us": figures.get("p99_us"),
        "device_iops": _round(dev.get("iops"), 1),
        "await_ms": _round(dev.get("await_ms"), 3),
        # The read/write split `dbsim size` takes (--read-iops, --write-iops, …).
        "device_rates": {k: _round(dev.get(k), 1) for k in ("r_s", "w_s", "rkB_s", "wkB_s")},
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def sweep_sections(
    sweep: Sweep, slos: list[Slo], summary: dict[str, Any], bundle: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``summary["sweep"]`` and ``summary["slos"]`` of a sweep run, from its bundle."""
    stages = [s for s in summary.get("stages") or [] if isinstance(s, dict)]
    measured = [s for s in stages if s.get("phase") == "measure" and isinstance(s.get("step"), int)]
    windows = step_windows(bundle, measured)
    # The device a storage SLO names, else the run's busiest: every step is read on one device.
    named = [s.device for s in slos if s.device]
    device = named[0] if named else primary_device(Window.from_summary(summary).devices)
    operations = summary.get("operations") or {}
    op = max(sorted(operations), key=lambda o: operations[o].get("count") or 0, default=None)
    points: list[dict[str, Any]] = []
    verdicts_of: dict[int, list[dict[str, Any]]] = {}
    for stage in measured:
        window = windows.get(stage["step"]) or Window(f"step {stage['step'] + 1}", 0.0)
        point = _point(stage, window, sweep, op, device)
        if point["complete"]:
            verdicts = at_iops(slo_mod.evaluate(slos, window, device), [stage])
            verdicts_of[point["step"]] = verdicts
            point["slo_met"] = slo_mod.all_met(verdicts)
            point["breaches"] = [v for v in verdicts if not v["met"]]
        else:
            point["slo_met"] = None
            point["breaches"] = []
        points.append(point)
    judged = [p for p in points if p["slo_met"] is not None]
    breach = next((p for p in judged if not p["slo_met"]), None)
    before = [p for p in judged if p["slo_met"] and (breach is None or p["step"] < breach["step"])]
    highest = max(before, key=lambda p: p["load"] or 0, default=None)
    iops = [p["device_iops"] for p in judged if p["device_iops"] is not None]
    result: dict[str, Any] = {
        "vary": sweep.vary,
        "stop_on_breach": sweep.stop_on_breach,
        "steps_planned": len(sweep.values()),
        "steps_run": len(points),
        "main_op": op,
        "device": device,
        "points": points,
        "highest_passing": highest,
        "device_iops_at_highest_passing": highest["device_iops"] if highest else None,
        "max_device_iops": max(iops) if iops else None,
        "first_breach": breach and {k: breach[k] for k in ("step", "label", "load", "breaches")},
        "passing_after_breach": [
            p["step"] for p in judged if breach and p["step"] > breach["step"] and p["slo_met"]
        ],
        "knee": _knee(bundle, summary),
    }
    chosen = highest or breach
    if chosen is not None:
        what = "highest load meeting every SLO" if highest else "first step, missed"
        section = {
            "met": highest is not None,
            "window": f"{chosen['label']} ({what})",
            "verdicts": verdicts_of[chosen["step"]],
        }
    else:
        section = {"met": False, "window": None, "verdicts": [], "note": "no step ran to its end"}
    return result, section


def _knee(bundle: Path, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The knee of the analysis' latency-versus-load curve (x in device IOPS when a block
    device was measured, else in ops/s), or None; the bundle's series read with ``summary``,
    the one being judged."""
    from sim.analysis import analyze_bundle
    from sim.errors import SimError

    try:
        curve = analyze_bundle(bundle, summary).get("curve") or {}
    except SimError as exc:
        log.info("sweep: no knee: %s", exc)
        return None
    knee = curve.get("knee")
    return {**knee, "x_is": curve.get("x")} if isinstance(knee, dict) else None


def service_levels(scenario: ScenarioBase, summary: dict[str, Any], bundle: Path) -> dict[str, Any]:
    """The summary's ``slos`` (and ``sweep``) sections for a finished run; empty when the
    scenario has neither. Never raises: an evaluation that fails leaves ``slos.met`` None and
    says why (the CLI then exits 3 rather than vouch for an unjudged run)."""
    slos, sweep = list(scenario.slos), scenario.load.sweep
    if not slos and sweep is None:
        return {}
    if summary.get("status") == OUTCOME_FAILED:
        return {"slos": {"met": None, "note": "the run failed: nothing to judge"}} if slos else {}
    try:
        if sweep is None:
            section = slo_mod.summary_section(slos, summary)
            stages = [s for s in summary.get("stages") or [] if isinstance(s, dict)]
            at_iops(section["verdicts"], [s for s in stages if s.get("phase") == "measure"])
            return {"slos": section}
        result, section = sweep_sections(sweep, slos, summary, bundle)
        return {"sweep": result, "slos": section} if slos else {"sweep": result}
    except Exception as exc:  # a bug here must not cost the run's summary
        log.warning("SLO evaluation failed", exc_info=True)
        return {"slos": {"met": None, "error": f"{type(exc).__name__}: {exc}"}} if slos else {}


def at_iops(
    verdicts: list[dict[str, Any]], stages: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Name in each verdict (``at``) the device IOPS its window was asked for and delivered,
    when the load was asked in IOPS (sim.run.calibration): "p99 ≤ 2 ms at 20,000 IOPS"."""
    asked = sorted({float(s["rate_iops"]) for s in stages if finite(s.get("rate_iops"))})
    if not asked:
        return verdicts
    text = f"{asked[0]:,.0f}" + (f"-{asked[-1]:,.0f}" if len(asked) > 1 else "")
    text += " IOPS asked"
    got = [finite(s.get("delivered_iops")) for s in stages]
    device = next((s.get("calibration_device") for s in stages if s.get("calibration_device")), "")
    if len(stages) == 1 and got[0] is not None:
        text += f", {got[0]:,.0f} delivered on {device}"
    for verdict in verdicts:
        verdict["at"] = text
    return verdicts


def sweep_line(sweep: dict[str, Any]) -> str:
    """The sweep's answer in one line, for the console."""
    best = sweep.get("highest_passing")
    if not best:
        return "sweep: no step met every SLO"
    noun = "session" + ("" if best["load"] == 1 else "s")
    units = {"sessions": noun, "rate_iops": "IOPS asked"}
    load = f"{best['load']:g} {units.get(str(sweep.get('vary')), 'ops/s offered')}"
    text = f"sweep: highest load meeting every SLO: {load} ({best['label']}): {best['ops_s']:,.0f} ops/s"
    if best.get("device_iops") is not None:
        text += f", {sweep.get('device')} {best['device_iops']:,.0f} IOPS"
    knee = sweep.get("knee")
    if knee and knee.get("x") is not None:
        unit = "IOPS" if knee.get("x_is") == "device_iops" else "ops/s"
        text += f"; {knee.get('name') or 'knee'} at {knee['x']:,.0f} {unit}"
    return text
