"""The live page's "now" strip: operation latency beside the limiting device, with units, and
the run's SLOs against their targets — on one line above every tab, so p99 and the device's
IOPS, await and %util are on the same screen while a run goes.

Every figure is of the **measured window so far** (the one definition the run's summary, SLOs
and report use: percentiles from dbsim's HDR histograms of the window, device figures the
time-weighted means of its intervals, await weighted by I/Os), or, during warm-up, of the
latest interval, said as such ("warm-up, latest interval: not measured"). The SLOs are judged
with :func:`sim.judge.slo.evaluate`, as the end of the run judges them, and say "so far" while
the run goes. The cache check (:func:`sim.core.cache.exercised_section`, the same rule as the
end of the run) is shown as soon as the window has read enough to tell.

Pure functions of the bundle's time series and figures handed in: outside :mod:`sim.locust`
(whose import patches sockets with gevent), so they are tested without Locust.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sim import registry
from sim.bundle.figures import device_figures, finite, primary_device
from sim.bundle.reader import read_rows_if_readable
from sim.config.scenario import Slo
from sim.core.metrics import OpStats
from sim.judge.slo import Window, WindowBuilder, evaluate, format_value, verdict_line

#: Operations shown in the strip (the primary first), at most.
MAX_OPS = 3
MEASURED = "measure"


def _lengths(rows: Sequence[Mapping[str, str]]) -> dict[float, float]:
    """Each interval's end time ``t`` and its length (seconds since the previous one)."""
    times = sorted({t for r in rows if (t := finite(r.get("t"))) is not None})
    return {b: b - a for a, b in itertools.pairwise([0.0, *times]) if b > a}


def csv_window(bundle: Path) -> dict[str, Any]:
    """The bundle's time series so far, folded: ``measured`` (per op count/errors, per device
    the window's block means and %util, and its seconds) and ``latest`` (the last interval's
    per-op p99 and device figures, with its phase). Read in a native thread (files)."""
    folder = bundle / "timeseries"
    ops = read_rows_if_readable(folder / "ops.csv")
    device_source = registry.collector_with_role(registry.ROLE_DEVICE)
    block = read_rows_if_readable(folder / f"{device_source}.csv") if device_source else []
    lengths = _lengths([*ops, *block])
    builder = WindowBuilder()
    util: dict[str, list[float]] = {}
    measured_t: set[float] = set()
    for row in ops:
        t = finite(row.get("t"))
        if row.get("phase") == MEASURED and t is not None:
            builder.add_op(row.get("op") or "?", finite(row.get("count")) or 0.0,
                           finite(row.get("errors")) or 0.0)  # fmt: skip
            measured_t.add(t)
    for row in block:
        t, dev = finite(row.get("t")), row.get("entity") or "?"
        if row.get("phase") != MEASURED or t is None:
            continue
        builder.add_device(dev, row, lengths.get(t, 0.0))
        if (u := finite(row.get("util_pct"))) is not None:
            sums = util.setdefault(dev, [0.0, 0.0])
            sums[0], sums[1] = sums[0] + u * lengths.get(t, 0.0), sums[1] + lengths.get(t, 0.0)
        measured_t.add(t)
    seconds = sum(lengths.get(t, 0.0) for t in measured_t)
    window = builder.window("measured window so far", seconds)
    devices = {d: {**f, "util_pct": _mean(util.get(d))} for d, f in window.devices.items()}
    return {
        "measured": {"seconds": seconds, "ops": window.ops, "devices": devices},
        "latest": _latest(ops, block),
    }


def _mean(sums: list[float] | None) -> float | None:
    return sums[0] / sums[1] if sums and sums[1] > 0 else None


def _latest(ops: Sequence[Mapping[str, str]], block: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The last interval of each file: its phase, per op p99 and ops/s, per device figures."""
    last_t = max((t for r in ops if (t := finite(r.get("t"))) is not None), default=None)
    rows = [r for r in ops if finite(r.get("t")) == last_t]
    block_t = max((t for r in block if (t := finite(r.get("t"))) is not None), default=None)
    devs = [r for r in block if finite(r.get("t")) == block_t]
    return {
        "phase": rows[0].get("phase") if rows else None,
        "t": last_t,
        "ops": {
            r.get("op") or "?": {"p99_us": finite(r.get("p99_us")), "ops_s": finite(r.get("ops_s"))}
            for r in rows
        },
        "devices": {
            r.get("entity") or "?": {**device_figures(r), "util_pct": finite(r.get("util_pct"))}
            for r in devs
        },
    }


def _ms(value_ms: float | None) -> str:
    return "–" if value_ms is None else format_value("await_ms_max", value_ms)


def _rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _item(key: str, label: str, text: str, value: float | None) -> dict[str, Any]:
    return {"key": key, "label": label, "text": text, "value": value}


def now_panel(
    window: Mapping[str, Any],
    latency_ms: Mapping[str, Mapping[str, float]],
    *,
    running: bool,
    primary_op: str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The strip: ``scope`` (which figures these are) and ``items`` (each with its unit in
    ``text``: ``read p99 5.79 ms``, ``vda 7,942 IOPS``, ``await 2.71 ms``, ``util 33 %``).
    ``latency_ms``: per op the measured window's percentiles in ms (``p99``…), from dbsim's
    HDR histograms; ``primary_op``/``device``: the analysis' choice when it has one."""
    measured = window.get("measured") or {}
    latest = window.get("latest") or {}
    in_window = bool(measured.get("seconds")) and bool(measured.get("ops"))
    if in_window:
        seconds = float(measured["seconds"])
        scope = f"measured window so far, {seconds:,.0f} s" if running else "measured window"
        ops = {
            op: {"p99_ms": (latency_ms.get(op) or {}).get("p99"), "ops_s": f.get("ops_s")}
            for op, f in measured["ops"].items()
        }
        devices = measured.get("devices") or {}
    else:
        phase = latest.get("phase")
        scope = (
            f"{'warm-up' if phase == 'warmup' else phase}, latest interval: not measured"
            if phase
            else "no interval yet"
        )
        ops = {
            op: {"p99_ms": None if f.get("p99_us") is None else f["p99_us"] / 1000,
                 "ops_s": f.get("ops_s")}
            for op, f in (latest.get("ops") or {}).items()
        }  # fmt: skip
        devices = latest.get("devices") or {}
    order = sorted(ops, key=lambda op: (op != primary_op, -(ops[op].get("ops_s") or 0.0), op))
    items = []
    for op in order[:MAX_OPS]:
        p99, rate = ops[op].get("p99_ms"), ops[op].get("ops_s")
        shown = "–" if p99 is None else format_value("p99_us_max", p99 * 1000)
        items.append(_item(f"op-{op}-p99", f"{op} p99", f"{op} p99 {shown}", p99))
        items.append(_item(f"op-{op}-rate", f"{op} ops/s", f"{_rate(rate)} ops/s", rate))
    if in_window:
        count = sum(f.get("count") or 0.0 for f in measured["ops"].values())
        errors = sum(f.get("errors") or 0.0 for f in measured["ops"].values())
        if errors > 0:  # failed operations are said beside the latency they would distort
            share = 100 * errors / (count + errors)
            items.append(_item("errors", "errors", f"errors {share:.2g} % of operations", share))
    dev = device if device in devices else primary_device(devices)
    if dev is not None:
        figures = devices[dev]
        iops, wait, util = figures.get("iops"), figures.get("await_ms"), figures.get("util_pct")
        items.append(_item("device-iops", f"{dev} IOPS", f"{dev} {_rate(iops)} IOPS", iops))
        items.append(_item("device-await", "await", f"await {_ms(wait)}", wait))
        shown = "–" if util is None else f"{util:.0f} %"
        items.append(_item("device-util", "%util", f"util {shown}", util))
    elif ops:
        items.append(_item("device-none", "device", "no block device figures yet", None))
    return {"scope": scope, "device": dev, "items": items}


def slo_lines(
    slos: Sequence[Slo],
    window: Mapping[str, Any],
    latency_us: Mapping[str, Mapping[str, float]],
    *,
    running: bool,
    device: str | None = None,
) -> list[dict[str, Any]]:
    """Each SLO limit against the measured window so far, as the end of the run judges it:
    ``{"met", "text"}`` with ``SLO met so far: read p99 ≤ 5.00 ms: 4.21 ms (margin +15.8 %)``.
    Nothing to judge before the window has an interval: one line saying so per limit."""
    if not slos:
        return []
    measured = window.get("measured") or {}
    if not measured.get("seconds"):
        return [
            {"met": None, "text": f"SLO {line}: waiting for the measured window"}
            for line in target_texts(slos)
        ]
    ops = {
        op: {**figures, **(latency_us.get(op) or {})}
        for op, figures in (measured.get("ops") or {}).items()
    }
    judged = Window("measured window so far", measured["seconds"], ops, measured["devices"])
    out = []
    for verdict in evaluate(slos, judged, device):
        text = verdict_line(verdict)
        margin = verdict.get("margin_pct")
        if isinstance(margin, int | float) and abs(margin) >= 1000:
            # A margin of millions of percent says one thing: far from the target.
            measured, limit = verdict.get("measured") or 0.0, verdict.get("limit") or 0.0
            ratio = measured / limit if limit else 0.0
            far = f"{ratio:,.0f} times the target" if ratio >= 1 else "far inside the target"
            text = text.replace(f"(margin {margin:+,.1f} %)", f"({far})")

        if running:
            text = text.replace("SLO met", "SLO met so far", 1).replace(
                "SLO MISSED", "SLO MISSED so far", 1
            )
        out.append({"met": verdict.get("met"), "text": text})
    return out


def target_texts(slos: Sequence[Slo]) -> list[str]:
    """``read p99 ≤ 5.00 ms`` for each limit of each SLO."""
    from sim.judge.slo import LABELS

    out = []
    for slo in slos:
        scope = slo.device or "the busiest device" if slo.storage else slo.op or "all operations"
        scope = "all operations" if scope == "*" else scope
        for name, limit in slo.limits():
            label, sign = LABELS.get(name, (name, "vs"))
            out.append(f"{scope} {label} {sign} {format_value(name, limit)}")
    return out


@dataclass(frozen=True)
class _Counted:
    """An operation's count in the window (what the cache check reads of an OpStats)."""

    count: float


def exercised_now(
    window: Mapping[str, Any], read_ops: Collection[str], *, running: bool = True
) -> dict[str, Any] | None:
    """The end of run's cache check on the window so far (None before it can tell): whether
    the watched devices read while the workload's ``read_ops`` read."""
    from sim.core.cache import exercised_section

    measured = window.get("measured") or {}
    seconds = float(measured.get("seconds") or 0.0)
    if seconds <= 0 or not read_ops:
        return None
    counts = {op: _Counted(f.get("count") or 0.0) for op, f in (measured.get("ops") or {}).items()}
    totals = cast("Mapping[str, OpStats]", counts)
    section = exercised_section(measured.get("devices") or {}, totals, read_ops, seconds)
    if section.get("exercised") is None:
        return None
    so_far = " so far" if running else ""
    if section["exercised"]:
        text = (
            f"storage exercised{so_far}: {', '.join(section['devices'])} read "
            f"{section['device_r_s']:,.1f}/s for {section['read_ops_s']:,.1f} reading "
            f"operations/s ({section['device_reads_pct']:.3g} %)"
        )
    else:
        text = f"STORAGE NOT EXERCISED{so_far}: {section['reason']}: the latencies are the caches'"
    return {"exercised": section["exercised"], "text": text}


#: Locust's percentile keys (ms) in the web UI's statistics, by the SLO figure they give.
LOCUST_KEYS = {"p50_us": 0.5, "p95_us": 0.95, "p99_us": 0.99}


def latency_from_locust(figures: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per operation the measured window's p50/p95/p99 in µs (``p99_us``) and p99 in ms
    (``p99``), from the web UI's statistics (dbsim's HDR histograms, in ms)."""
    out: dict[str, dict[str, float]] = {}
    for op, row in figures.items():
        if op == "Aggregated":
            continue
        found = {
            name: float(row[key]) * 1000
            for name, q in LOCUST_KEYS.items()
            if isinstance(row.get(key := f"response_time_percentile_{q}"), int | float)
        }
        if "p99_us" in found:
            found["p99"] = found["p99_us"] / 1000
        out[op] = found
    return out


def live_extras(
    view: Mapping[str, Any],
    figures: Mapping[str, Mapping[str, float]],
    *,
    running: bool,
    read_ops: Collection[str] = (),
) -> dict[str, Any]:
    """What the live page's header shows beside the verdict: ``now`` (latency beside the
    limiting device, with units), ``slos`` (each against its target) and ``cache`` (the
    storage-exercised check, once it can tell)."""
    window = view.get("window") or {}
    latency = latency_from_locust(figures)
    device = view.get("primary_device")
    slos = []
    for raw in view.get("slos") or []:
        try:
            slos.append(Slo.model_validate(raw))
        except ValueError:  # validated when the view was built; kept safe all the same
            continue
    return {
        "now": now_panel(window, latency, running=running, primary_op=view.get("primary_op"),
                         device=device),
        "slos": slo_lines(slos, window, latency, running=running, device=device),
        "cache": exercised_now(window, read_ops, running=running),
    }  # fmt: skip
