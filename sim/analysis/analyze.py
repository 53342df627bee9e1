"""``analyze_bundle``: a finished (or interrupted) run's bundle in, the analysis dict out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.analysis import hosts, sections, stats
from sim.analysis.sections import as_list, rounded
from sim.analysis.series import (
    BundleSeries,
    device_figures,
    host_figures,
    load_bundle,
    primary_device,
    primary_op,
)
from sim.analysis.stats import FloatArray
from sim.analysis.verdict import (
    PLATEAU_CV,
    PLATEAU_TOLERANCE,
    SESSIONS_BUSY_RATIO,
    Findings,
    decide,
)
from sim.bundle.iops import run_iops, window_iops
from sim.core.cache import not_exercised
from sim.core.validity import verdict_sentence

SCHEMA = 1
DEVICE_SERIES = ("iops", "r_await_ms", "w_await_ms", "await_ms", "aqu_sz", "util_pct")
HOST_SERIES = ("cpu_busy_pct", "process_cpu_pct")
#: The keys of the ``io_per_op`` section (the window figures hold one more, per operation).
IO_PER_OP_KEYS = (
    "device_ios_per_op",
    "device_read_ios_per_read",
    "db_blocks_read_per_read",
    "cache_hit_pct",
)
#: Target kinds whose database runs inside dbsim's own process (its CPU is the client's).
IN_PROCESS_TARGETS = frozenset({"sqlite"})


def analyze_bundle(path: Path, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Analyse a run bundle (read only): how application latency moved with storage.

    Raises :class:`sim.errors.BundleError` when ``path`` is not a readable bundle; any
    readable bundle — a run of one interval, without storage collectors, interrupted —
    gets an answer, with None where a figure cannot be formed. ``summary``: the run's final
    summary while it is being judged, before summary.json holds it (see ``load_bundle``).
    """
    return analyze_series(load_bundle(Path(path), summary))


@dataclass
class RunContext:
    """Facts about the whole run that every window's verdict needs."""

    op: str | None
    device: str | None
    #: More than one step: the plateau is judged across steps, not within a window.
    stepped: bool
    open_loop: bool
    think: bool
    in_process_db: bool
    #: Steps in load order and the position from which IOPS sat on a plateau (None: none).
    step_order: list[int]
    plateau_from: int | None
    plateau_change: float | None
    p99_rise: float | None


def analyze_series(series: BundleSeries) -> dict[str, Any]:
    """The analysis of already-loaded series (see :func:`analyze_bundle`)."""
    devices = device_figures(series)
    device_name = primary_device(devices)
    device = devices.get(device_name) if device_name else None
    op = primary_op(series)
    curve = sections.curve_section(series, op, device)
    ctx = run_context(series, op, device_name, curve)
    io = sections.io_figures(series, op, device)
    sections.name_knee(curve.get("knee"), io["device_read_ios_per_read"], device)
    sessions = sessions_per_interval(series)
    law = sections.littles_law(series, sessions)
    return {
        "schema": SCHEMA,
        "intervals": series.n,
        "primary_op": op,
        "primary_device": device_name,
        "series": series_section(series, devices),
        "correlation": sections.correlation_section(series, device),
        "collector_coupling": sections.collector_coupling(series, op),
        "lag": sections.lag_section(series, device),
        "curve": curve,
        "io_per_op": {
            **{key: rounded(io[key]) for key in IO_PER_OP_KEYS},
            "layers": sections.layer_ios_per_op(series),
        },
        "regression": sections.regression_section(series, device),
        "littles_law": sections.littles_law_section(
            law,
            varying=len({s for s in sessions if np.isfinite(s)}) > 1,
            open_loop=ctx.open_loop,
            think=ctx.think,
        ),
        "verdict": run_verdict(series.summary, decide(findings(series, ctx, whole_run=True))),
        "segments": segments(series, ctx),
        **({"hosts": on_hosts} if (on_hosts := hosts.hosts_section(series, op, devices)) else {}),
    }


def run_verdict(
    summary: dict[str, Any], storage_call: dict[str, Any], *, part: bool = False
) -> dict[str, Any]:
    """The whole run's verdict: the storage call, unless the run is invalid (its operations
    failed, see :mod:`sim.core.validity`) — then no storage call is made, and the evidence the
    call would have rested on is kept for reference."""
    errors = mapping(summary, "errors")
    if not errors.get("invalid"):
        return _unless_not_exercised(summary, storage_call, part=part)
    return {
        "call": "invalid",
        "summary": "Invalid: no call for this part, the run's operations failed (see the "
        "verdict above)"
        if part
        else verdict_sentence(errors),
        "evidence": storage_call.get("evidence", []),
        "storage_call_withheld": storage_call.get("call"),
    }


def _unless_not_exercised(
    summary: dict[str, Any], storage_call: dict[str, Any], *, part: bool
) -> dict[str, Any]:
    """A run whose devices hardly read measured the caches: no storage call is made on it
    (sim.core.cache), and the call it would have had is kept for reference."""
    reason = not_exercised(summary)
    if reason is None:
        return storage_call
    return {
        "call": "not-exercised",
        "summary": "Storage not exercised: no call for this part (see the verdict above)"
        if part
        else f"Storage not exercised: {reason}, so the latencies are the caches', not the "
        "storage's.",
        "evidence": storage_call.get("evidence", []),
        "storage_call_withheld": storage_call.get("call"),
    }


def series_section(
    series: BundleSeries, devices: dict[str, dict[str, FloatArray]]
) -> dict[str, Any]:
    """The aligned measured-phase series, for plotting."""
    out: dict[str, Any] = {
        "t": as_list(series.t),
        "step": list(series.step),
        "ops_s": {op: as_list(f["ops_s"]) for op, f in sorted(series.ops.items())},
        "p50_us": {op: as_list(f["p50_us"], 1) for op, f in sorted(series.ops.items())},
        "p99_us": {op: as_list(f["p99_us"], 1) for op, f in sorted(series.ops.items())},
        "errors_s": {
            op: as_list(f["errors"] / np.maximum(series.duration_s, 1e-9), 2)
            for op, f in sorted(series.ops.items())
        },
        "device": {
            dev: {name: as_list(figs[name]) for name in DEVICE_SERIES if name in figs}
            for dev, figs in sorted(devices.items())
        },
    }
    host = host_figures(series)
    if host is not None:
        out["host"] = {name: as_list(host[name]) for name in HOST_SERIES if name in host}
    per_host = hosts.cpu_series(series)
    if per_host:
        out["hosts"] = per_host
    return out


def sessions_per_interval(series: BundleSeries) -> FloatArray:
    """Sessions active in each measured interval (NaN where unknown): from the summary's
    stage log when the run got to write it, else rebuilt from the scenario and the summary."""
    logged = stage_sessions(series.summary)
    if logged:
        return np.array([logged.get(step, np.nan) for step in series.step], dtype=np.float64)
    load = mapping(series.scenario, "load")
    summary_sessions = _positive(series.summary.get("sessions"))
    base = _positive(load.get("sessions")) or summary_sessions
    steps = load.get("steps") or []
    if not isinstance(steps, list):
        steps = []
    any_explicit = any(isinstance(s, dict) and _positive(s.get("sessions")) for s in steps)
    # Without load.sessions, a step that names no sessions runs the workload's default, which
    # the bundle records only as the run's maximum (summary "sessions") — exact unless other
    # steps named more.
    fallback = _positive(load.get("sessions")) or (None if any_explicit else summary_sessions)
    out = np.full(series.n, np.nan)
    for i, step in enumerate(series.step):
        if step is None or not steps:
            value = base if not steps else None
        elif 0 <= step < len(steps) and isinstance(steps[step], dict):
            value = _positive(steps[step].get("sessions")) or fallback
        else:
            value = None
        if value is not None:
            out[i] = value
    return out


def stage_sessions(summary: dict[str, Any]) -> dict[int | None, float]:
    """Measured stage (step index, or None without steps) → sessions, from summary "stages"
    (absent in bundles of runs killed before the end, and in older ones)."""
    out: dict[int | None, float] = {}
    stages = summary.get("stages")
    for stage in stages if isinstance(stages, list) else []:
        if not isinstance(stage, dict) or stage.get("phase") != "measure":
            continue
        step, sessions = stage.get("step"), _positive(stage.get("sessions"))
        if sessions is not None and (step is None or isinstance(step, int)):
            out[step] = sessions
    return out


def mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` if it is a mapping, else an empty one (a hand-edited file may hold
    anything; the analysis then goes without that fact)."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def run_context(
    series: BundleSeries, op: str | None, device: str | None, curve: dict[str, Any]
) -> RunContext:
    """Run-wide facts: sessions, pacing, and the stepped IOPS plateau if any."""
    load = mapping(series.scenario, "load")
    think = mapping(load, "think")
    target = mapping(series.summary, "target").get("kind") or mapping(
        series.scenario, "target"
    ).get("kind")
    step_order = sorted({s for s in series.step if s is not None})
    plateau_from: int | None = None
    change = rise = None
    points = curve["points"]
    if step_order and device is not None and len(points) >= 2:
        plateau_from = sections.plateau_start(points)
        start = plateau_from if plateau_from is not None else 0
        x = [v for p in points[start:] if (v := sections.median_x(p)) is not None]
        y = [p["p99_us"] for p in points[start:] if p["p99_us"] is not None]
        if x and x[0] > 0:
            change = max(abs(v - x[0]) for v in x) / x[0]
        if len(y) >= 2 and y[0] > 0:
            rise = y[-1] / y[0] - 1.0
    return RunContext(
        op=op,
        device=device,
        stepped=len(step_order) >= 2,
        open_loop=load.get("mode") == "open",
        think=bool(_positive(think.get("max_ms"))),
        in_process_db=target in IN_PROCESS_TARGETS,
        step_order=step_order,
        plateau_from=plateau_from,
        plateau_change=change,
        p99_rise=rise,
    )


def findings(
    window: BundleSeries, ctx: RunContext, *, whole_run: bool, step: int | None = None
) -> Findings:
    """The verdict's inputs over one window of the run."""
    devices = device_figures(window)
    device = devices.get(ctx.device) if ctx.device else None
    io = sections.io_figures(window, ctx.op, device)
    law = sections.littles_law(window, sessions_per_interval(window))
    host = host_figures(window)
    r, what, n = sections.coupling(window, ctx.op, device)
    others = sections.collector_coupling(window, ctx.op)
    p99: float | None = None
    if whole_run and ctx.op:
        p99 = _positive(mapping(mapping(window.summary, "operations"), ctx.op).get("p99_us"))
    if p99 is None and ctx.op in window.ops:
        p99 = stats.nan_median(window.ops[ctx.op]["p99_us"])
    mean_sessions = law.sessions if law else None
    return Findings(
        op=ctx.op,
        device=ctx.device,
        p99_us=p99,
        iops=_iops(window, ctx, device, whole_run),
        util_pct=stats.nan_mean(device["util_pct"]) if device and "util_pct" in device else None,
        await_ms=stats.nan_median(device["await_ms"]) if device and "await_ms" in device else None,
        ios_per_op=io["device_ios_per_op"],
        sync_ios_per_op=io["device_sync_ios_per_op"],
        db_reads_per_op=io["db_blocks_read_per_op"],
        cache_hit_pct=io["cache_hit_pct"],
        coupling_r=r,
        coupling_what=what,
        coupling_n=n,
        collector_coupling=[(c["title"], c["r"], c["n"], c["what"]) for c in others],
        plateau=_plateau(window, ctx, device, law, whole_run, step),
        stepped_plateau=ctx.plateau_from is not None,
        **hosts.client_findings(window, host, mean_sessions),
        **hosts.storage_findings(window, ctx.op, devices),
        littles_ratio=law.ratio if law else None,
        in_process_db=ctx.in_process_db,
        open_loop=ctx.open_loop,
    )


def _iops(
    window: BundleSeries, ctx: RunContext, device: dict[str, FloatArray] | None, whole_run: bool
) -> float | None:
    """The device's IOPS over the window, by the one definition (sim.bundle.iops): for the
    whole run the summary's mean (the block table's figure), else the length-weighted mean of
    the window's intervals."""
    if device is None or "iops" not in device:
        return None
    figure = run_iops(window.summary, ctx.device) if whole_run else None
    return figure if figure is not None else window_iops(device["iops"], window.duration_s)


def _plateau(
    window: BundleSeries,
    ctx: RunContext,
    device: dict[str, FloatArray] | None,
    law: stats.LittlesLaw | None,
    whole_run: bool,
    step: int | None,
) -> tuple[float | None, float, bool, str] | None:
    """IOPS plateau evidence: across steps for a stepped run, else the IOPS steadiness of
    the window while its sessions waited inside operations."""
    if device is None or "iops" not in device:
        return None
    if ctx.stepped:
        found = ctx.plateau_from is not None
        if whole_run or step is None:
            if found:
                first = ctx.step_order[ctx.plateau_from or 0] + 1
                within = 100 * (ctx.plateau_change or 0.0)
                meaning = (
                    f"from step {first} on, IOPS stayed within ±{within:.0f} % while the load "
                    f"rose and p99 rose {1 + (ctx.p99_rise or 0.0):.1f}×"
                )
            else:
                meaning = (
                    "across the steps IOPS followed the load (or p99 did not rise): no ceiling"
                )
            return ctx.plateau_change, PLATEAU_TOLERANCE, found, meaning
        at = ctx.step_order.index(step) if step in ctx.step_order else -1
        reached = found and at >= (ctx.plateau_from or 0)
        meaning = (
            "this step ran at the IOPS ceiling the steps revealed"
            if reached
            else "this step ran below the IOPS ceiling"
            if found
            else "the steps revealed no IOPS ceiling"
        )
        return ctx.plateau_change if reached else None, PLATEAU_TOLERANCE, reached, meaning
    cv = stats.coefficient_of_variation(device["iops"])
    if cv is None or window.n < 3:
        return None
    ratio = law.ratio if law else None
    waiting = ratio is not None and ratio >= SESSIONS_BUSY_RATIO and not ctx.open_loop
    passed = cv <= PLATEAU_CV and waiting
    busy = sections.sessions_busy(ratio, open_loop=ctx.open_loop)
    meaning = f"IOPS varied by {100 * cv:.0f} % (coefficient of variation) {busy}"
    return cv, PLATEAU_CV, passed, meaning


def segments(series: BundleSeries, ctx: RunContext) -> list[dict[str, Any]]:
    """Per step when the run has steps, else the two halves of the measured window."""
    parts: list[tuple[str, np.ndarray, int | None]] = []
    steps = sorted({s for s in series.step if s is not None})
    if steps:
        step_arr = np.array([-1 if s is None else s for s in series.step])
        parts = [(f"step {s + 1}", np.flatnonzero(step_arr == s), s) for s in steps]
    elif series.n:
        first = (series.n + 1) // 2
        index = np.arange(series.n)
        parts = [("first half", index[:first], None), ("second half", index[first:], None)]
    out: list[dict[str, Any]] = []
    for label, index, step in parts:
        if index.size == 0:
            continue
        window = series.subset(index)
        device = device_figures(window).get(ctx.device) if ctx.device else None
        p99 = window.ops[ctx.op]["p99_us"] if ctx.op in window.ops else None
        out.append(
            {
                "label": label,
                "intervals": window.n,
                "verdict": run_verdict(
                    series.summary,
                    decide(findings(window, ctx, whole_run=False, step=step)),
                    part=True,
                ),
                "p99_us": rounded(stats.nan_median(p99), 1) if p99 is not None else None,
                "device_iops": rounded(window_iops(device["iops"], window.duration_s), 3)
                if device
                else None,
                "await_ms": rounded(stats.nan_mean(device["await_ms"])) if device else None,
            }
        )
    return out
