"""The report's figures: time series on one time axis, latency versus IOPS, histograms."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sim.report.draw import PALETTE
from sim.report.markup import Safe, esc, us
from sim.report.scales import finite, fmt_ms, fmt_number, fmt_pct, fmt_us
from sim.report.svg import (
    Panel,
    Points,
    Series,
    histogram_chart,
    scatter_chart,
    time_panels,
)

MAX_DEVICES = 4  # more lines than this in one panel stop being readable


def op_order(summary: Mapping[str, Any], analysis: Mapping[str, Any] | None) -> list[str]:
    """Operations, the analysis' primary one first, then by count (most frequent first)."""
    operations = summary.get("operations") or {}
    ops = sorted(operations, key=lambda op: (-(finite(operations[op].get("count")) or 0), op))
    primary = (analysis or {}).get("primary_op")
    if primary in ops:
        ops.remove(primary)
        ops.insert(0, primary)
    return ops


def op_colors(ops: Sequence[str]) -> dict[str, str]:
    return {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(ops)}


def devices(series: Mapping[str, Any], primary: str | None) -> list[str]:
    names = sorted(series.get("device") or {})
    if primary in names:
        names.remove(primary)
        names.insert(0, primary)
    return names[:MAX_DEVICES]


def step_marks(series: Mapping[str, Any], steps: Sequence[Any]) -> list[tuple[float, str]]:
    """(t, label) at the start of every load step, from the series' per-interval step index.

    ``t`` values are interval ends, so a step starts where the previous interval ended; the
    first step starts one (median) interval before the first end.
    """
    t = [finite(v) for v in series.get("t") or []]
    step = list(series.get("step") or [])
    known = [v for v in t if v is not None]
    gaps = [b - a for a, b in itertools.pairwise(known)]
    period = statistics.median(gaps) if gaps else 1.0
    marks: list[tuple[float, str]] = []
    previous: Any = None
    for i, (when, index) in enumerate(zip(t, step, strict=False)):
        if when is None or index is None or index == previous:
            continue
        start = t[i - 1] if i > 0 and previous is not None else None
        start = start if start is not None else max(when - period, 0.0)
        spec = steps[int(index)] if 0 <= int(index) < len(steps) else {}
        marks.append((start, step_label(int(index), spec)))
        previous = index
    return marks if len(marks) > 1 else []


def stage_marks(
    stages: Sequence[Any],
) -> tuple[list[tuple[float, str]], list[tuple[float, float, str]]]:
    """Step marks and the warm-up band from the engine's stage log (exact start times)."""
    entries = [e for e in stages if isinstance(e, dict) and finite(e.get("t")) is not None]
    marks: list[tuple[float, str]] = []
    bands: list[tuple[float, float, str]] = []
    for i, entry in enumerate(entries):
        start = float(entry["t"])
        if entry.get("phase") == "warmup" and i + 1 < len(entries):
            bands.append((start, float(entries[i + 1]["t"]), "warm-up"))
        elif entry.get("phase") == "measure" and isinstance(entry.get("step"), int):
            marks.append((start, step_label(entry["step"], entry)))
    return (marks if len(marks) > 1 else []), bands


LAB_NAMES = {
    "read_iops": "r IOPS",
    "write_iops": "w IOPS",
    "read_bps": "r B/s",
    "write_bps": "w B/s",
    "qos_iops": "QoS IOPS",
    "qos_bps": "QoS B/s",
}


def step_label(index: int, spec: Any) -> str:
    """``step 2: 4 sess. 500/s ≤300 r IOPS`` from a step's settings (or its stage entry)."""
    spec = spec if isinstance(spec, Mapping) else {}
    label = f"step {index + 1}"
    if spec.get("sessions"):
        label += f": {spec['sessions']} sess."
    if finite(spec.get("rate_iops")):  # asked in device IOPS (its ops/s came from them)
        label += f" {fmt_number(float(spec['rate_iops']))} IOPS asked"
    elif finite(spec.get("rate_ops_s")):
        label += f" {fmt_number(float(spec['rate_ops_s']))}/s"
    lab = spec.get("lab") if isinstance(spec.get("lab"), Mapping) else {}
    label += "".join(
        f" ≤{fmt_number(float(v))} {LAB_NAMES.get(k, k)}"
        for k, v in lab.items()
        if finite(v) and k != "service_us"  # a service time, not a ceiling
    )
    return label


def timeseries_figure(
    series: Mapping[str, Any],
    ops: Sequence[str],
    primary_device: str | None,
    steps: Sequence[Any] = (),
    warmup_s: float | None = None,
    stages: Sequence[Any] = (),
    layers: Sequence[Panel] = (),
) -> Safe:
    """Throughput, latency, device and host panels stacked over one time axis, then the
    ``layers`` below the host (other collectors' panels: an array, NFS, the database); step
    starts and the warm-up come from the stage log when the bundle has one (else they are
    inferred from the series and the scenario's steps)."""
    colors = op_colors(ops)
    ops = [op for op in ops if op in (series.get("ops_s") or {})] or sorted(
        series.get("ops_s") or {}
    )
    panels = [
        *_operation_panels(series, ops, colors),
        *_error_panels(series, colors),
        *_device_panels(series, devices(series, primary_device)),
        *_host_panels(series),
        *layers,
    ]
    if not panels or not series.get("t"):
        return Safe('<p class="note">No measured intervals in this bundle: nothing to plot.</p>')
    marks, bands = _time_marks(series, steps, warmup_s, stages)
    svg = time_panels(
        series["t"],
        panels,
        marks=marks,
        bands=bands,
        label="time series of the run",
    )
    caption = "One point per measured interval, all panels on the same time axis"
    caption += "; dashed vertical lines mark the start of each load step. " if marks else ". "
    caption += "A gap in a line is an interval without a value."
    return Safe(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")


def _operation_panels(
    series: Mapping[str, Any], ops: Sequence[str], colors: Mapping[str, str]
) -> list[Panel]:
    """Throughput and latency (p99 and p50) per operation; none without operations."""
    if not ops:
        return []
    ops_s = series.get("ops_s") or {}
    throughput = Panel(
        "Throughput (ops/s)",
        [Series(op, ops_s.get(op, []), colors.get(op, PALETTE[0])) for op in ops],
    )
    latency = [
        Series(
            f"{op} {name}",
            (series.get(key) or {}).get(op, []),
            colors.get(op, PALETTE[0]),
            dashed=name == "p50",
        )
        for op in ops
        for name, key in (("p99", "p99_us"), ("p50", "p50_us"))
    ]
    return [
        throughput,
        Panel(
            "Latency per operation: p99 solid, p50 dashed (log scale)",
            latency,
            y_format=fmt_us,
            log_y=True,
        ),
    ]


def _error_panels(series: Mapping[str, Any], colors: Mapping[str, str]) -> list[Panel]:
    """Failed operations per second, only when some operation failed."""
    errors_s = series.get("errors_s") or {}
    failing = [op for op in sorted(errors_s) if any(finite(v) for v in errors_s[op])]
    if not failing:
        return []
    return [
        Panel(
            "Errors (failed operations/s)",
            [Series(op, errors_s[op], colors.get(op, PALETTE[0])) for op in failing],
        )
    ]


def _device_panels(series: Mapping[str, Any], names: Sequence[str]) -> list[Panel]:
    """IOPS, await, and utilisation with queue size of the devices ``names``."""
    if not names:
        return []
    figures = series.get("device") or {}
    dev_color = {dev: PALETTE[(i + 2) % len(PALETTE)] for i, dev in enumerate(names)}
    iops = [Series(dev, figures[dev].get("iops", []), dev_color[dev]) for dev in names]
    awaits = [
        Series(f"{dev} {label}", figures[dev].get(key, []), dev_color[dev], dashed=dashed)
        for dev in names
        for label, key, dashed in (
            ("r_await", "r_await_ms", False),
            ("w_await", "w_await_ms", True),
        )
    ]
    queue = [
        Series(f"{dev} %util", figures[dev].get("util_pct", []), dev_color[dev]) for dev in names
    ] + [
        Series(
            f"{dev} aqu-sz (right)",
            figures[dev].get("aqu_sz", []),
            PALETTE[4],
            dashed=True,
            right=True,
        )
        for dev in names
    ]
    return [
        Panel("Device IOPS", iops),
        Panel("Device await: reads solid, writes dashed", awaits, y_format=fmt_ms),
        Panel("Device utilisation and queue size", queue, y_format=fmt_pct, y_max=100),
    ]


def _host_panels(series: Mapping[str, Any]) -> list[Panel]:
    """Host CPU busy and dbsim's own CPU, when the host collector gave any value: one pair
    of lines per worker host in a run on several hosts."""
    per_host = series.get("hosts") or {}
    if per_host:
        # One panel per figure, one line per host named alone (a legend of four long names
        # leaves some out); colours as the device panels give them after the hosts' sum.
        ordered = sorted(per_host.items())
        return [
            Panel(
                title,
                [
                    Series(host, figures.get(key, []), PALETTE[(i + 3) % len(PALETTE)])
                    for i, (host, figures) in enumerate(ordered)
                ],
                y_format=fmt_pct,
                y_max=100,
            )
            for title, key in (
                ("Host CPU busy, per host", "cpu_busy_pct"),
                ("dbsim process CPU per host (% of one CPU)", "process_cpu_pct"),
            )
        ]
    host = series.get("host") or {}
    if not any(finite(v) is not None for values in host.values() for v in values):
        return []
    lines = [
        Series("host busy", host.get("cpu_busy_pct", []), PALETTE[6]),
        Series(
            "dbsim process (% of one CPU)",
            host.get("process_cpu_pct", []),
            PALETTE[3],
            dashed=True,
        ),
    ]
    return [Panel("Host CPU", lines, y_format=fmt_pct, y_max=100)]


def _time_marks(
    series: Mapping[str, Any],
    steps: Sequence[Any],
    warmup_s: float | None,
    stages: Sequence[Any],
) -> tuple[list[tuple[float, str]], list[tuple[float, float, str]]]:
    """Step marks and warm-up band: exact from the stage log, else inferred from the series'
    step index and the scenario's warm-up."""
    if stages:
        return stage_marks(stages)
    # The series hold measured intervals only; the warm-up before them is shown as a band
    # so the empty start of the axis is not mistaken for missing data.
    bands = [(0.0, warmup_s, "warm-up")] if warmup_s and warmup_s > 0 else []
    return step_marks(series, steps), bands


def curve_figure(
    series: Mapping[str, Any],
    analysis: Mapping[str, Any] | None,
    primary_op: str | None,
    primary_device: str | None,
) -> Safe:
    """p50 and p99 of the primary operation against load, with the knee ringed."""
    curve = (analysis or {}).get("curve") or {}
    xs, x_title = _load_axis(series, curve, primary_device)
    p50 = (series.get("p50_us") or {}).get(primary_op or "", [])
    p99 = (series.get("p99_us") or {}).get(primary_op or "", [])
    groups = [
        Points("p99 per interval", list(zip(xs, p99, strict=False)), PALETTE[1]),
        Points("p50 per interval", list(zip(xs, p50, strict=False)), PALETTE[0]),
    ]
    points = [p for p in curve.get("points") or [] if isinstance(p, dict)]
    steps = sorted({s for s in series.get("step") or [] if s is not None})
    # With load steps the analysis gives one point per step, in step order: name them.
    names = [f"step {s + 1}" for s in steps] if len(steps) == len(points) else []
    if points:
        groups += _curve_lines(points, names)
    knee = curve.get("knee") if isinstance(curve.get("knee"), dict) else None
    svg = scatter_chart(
        groups,
        title=f"Latency of {primary_op} versus load",
        x_title=x_title,
        y_title="latency (log scale)",
        log_y=True,
        mark=_knee_mark(knee),
    )
    joined = "one point per load step" if names else "intervals binned by load"
    caption = (
        f"Each dot is one measured interval; the lines join the analysis' {joined}. "
        f"{_knee_note(knee, analysis)}"
    )
    return Safe(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")


def _load_axis(
    series: Mapping[str, Any], curve: Mapping[str, Any], primary_device: str | None
) -> tuple[list[Any], str]:
    """The load per interval the analysis' curve is drawn against, and its axis title: the
    primary device's IOPS, or without a device all operations' ops/s together."""
    dev = devices(series, primary_device)
    if curve.get("x", "device_iops" if dev else "ops_s") == "device_iops" and dev:
        return (series.get("device") or {})[dev[0]].get("iops", []), f"{dev[0]} IOPS"
    per_op = list((series.get("ops_s") or {}).values())
    xs = [sum(finite(v) or 0.0 for v in column) for column in zip(*per_op, strict=False)]
    return xs, "ops/s (all operations)"


def _curve_lines(points: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[Points]:
    """The analysis' p99 (its points named) and p50 curves, joined in the order given."""
    return [
        Points(
            "p99 curve",
            [(p.get("x"), p.get("p99_us")) for p in points],
            PALETTE[1],
            line=True,
            dots=False,
            labels=names,
        ),
        Points(
            "p50 curve",
            [(p.get("x"), p.get("p50_us")) for p in points],
            PALETTE[0],
            line=True,
            dots=False,
            dashed=True,
        ),
    ]


def _knee_mark(knee: Mapping[str, Any] | None) -> tuple[float, float, str] | None:
    """The knee as the chart's ringed point and its label, when it has both coordinates."""
    if not knee or finite(knee.get("x")) is None or finite(knee.get("p99_us")) is None:
        return None
    x, p99 = float(knee["x"]), float(knee["p99_us"])
    name = "knee" if knee.get("kind") in (None, "storage") else f"{knee['kind']} knee"
    return x, p99, f"{name} ≈ {fmt_number(x)}, p99 {fmt_us(p99)}"


def _knee_note(knee: Mapping[str, Any] | None, analysis: Mapping[str, Any] | None) -> str:
    """What the ring means (a plateau is the storage's ceiling), or why there is none."""
    if knee and knee.get("kind") not in (None, "storage"):
        return (
            f"The ring marks a {knee.get('name')} ({knee.get('method', 'method n/a')}): the "
            "device hardly read while the workload read, so the latency turned upwards with "
            "the caches' work (write-back, checkpoints), not at the storage's read limit."
        )
    if knee and "plateau" in str(knee.get("method")):
        return (
            f"The ring marks the knee ({knee.get('method')}): from there on the device's IOPS "
            "stayed flat while the load and the p99 latency kept rising, the storage's ceiling."
        )
    if knee:
        return (
            f"The ring marks the knee ({knee.get('method', 'method n/a')}): beyond about "
            f"{fmt_number(float(knee.get('x') or 0))} the p99 latency rises faster than the load."
        )
    if analysis:
        return "The analysis found no knee: latency did not turn upwards within the load range."
    return "No analysis in this bundle, so no curve or knee; the dots are the raw intervals."


def histogram_figures(
    histograms: Mapping[str, Sequence[tuple[float, float, int]]],
    operations: Mapping[str, Any],
    ops: Sequence[str],
) -> Safe:
    """One log-scale latency histogram per operation, p50/p99/p99.9 marked."""
    colors = op_colors(ops)
    names = [op for op in ops if op in histograms] + sorted(set(histograms) - set(ops))
    if not names:
        return Safe('<p class="note">No measured histograms in this bundle.</p>')
    figures = []
    for op in names:
        stats = operations.get(op) or {}
        markers = [
            (value, f"{label} {us(value)}")
            for label, key in (("p50", "p50_us"), ("p99", "p99_us"), ("p99.9", "p99_9_us"))
            if (value := finite(stats.get(key))) is not None
        ]
        count = sum(n for _, _, n in histograms[op])
        svg = histogram_chart(
            histograms[op],
            title=f"{op}: {count:,} operations",
            markers=markers,
            color=colors.get(op, PALETTE[0]),
        )
        figures.append(f"<figure>{svg}</figure>")
    caption = (
        "Operations per latency bucket over the measured window (5 buckets per decade; both "
        "axes logarithmic, so the tail stays visible)."
    )
    return Safe(f'<div class="grid2">{"".join(figures)}</div><p class="note">{esc(caption)}</p>')
