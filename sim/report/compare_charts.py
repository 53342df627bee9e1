"""The compare page's charts: both runs overlaid on one time axis, the latency-versus-load
curves of both, each side in its own colour.

Apart from :mod:`sim.report.compare` because drawing is its own role: the verdict, the table and
the console read the comparison's rows, the charts read each run's bundle again (its
per-interval series, :func:`sim.report.data.series_from_bundle`) and lay both on one axis with
the run report's charts (:mod:`sim.report.svg`).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sim.report.draw import PALETTE
from sim.report.markup import Safe, esc, section
from sim.report.scales import finite, fmt_ms, fmt_us
from sim.report.svg import Panel, Points, Series, scatter_chart, time_panels

#: The two sides' colours in every chart: baseline blue, candidate vermilion (Okabe-Ito).
SIDE_COLORS = {"baseline": PALETTE[0], "candidate": PALETTE[1]}


def _side_series(result: Mapping[str, Any], role: str) -> dict[str, Any] | None:
    """The first run of a side's per-interval series (the report's shape), None when its
    bundle has none to read."""
    from sim.errors import SimError
    from sim.report.data import series_from_bundle

    try:
        series = series_from_bundle(Path(result[role]["path"]))
    except (OSError, SimError, ValueError):
        return None
    return series if series.get("t") else None


def _period(times: Sequence[float]) -> float:
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return statistics.median(gaps) if gaps else 1.0


def overlay_axis(
    sides: Mapping[str, Mapping[str, Any]],
) -> tuple[list[float], dict[str, list[int | None]]]:
    """One time axis (seconds since each run's start, on the intervals' grid) for both runs,
    and for each run the position on it of each of its intervals: the runs' intervals end at
    slightly different offsets, so each is snapped to the nearest multiple of the interval."""
    all_t = [float(v) for s in sides.values() for v in s.get("t") or [] if finite(v) is not None]
    period = _period(sorted(set(all_t)))
    grid = sorted({round(t / period) for t in all_t})
    where = {k: i for i, k in enumerate(grid)}
    positions = {
        role: [None if finite(v) is None else where[round(float(v) / period)] for v in s["t"]]
        for role, s in sides.items()
    }
    return [k * period for k in grid], positions


def _placed(values: Sequence[Any], positions: Sequence[int | None], n: int) -> list[float | None]:
    out: list[float | None] = [None] * n
    for value, at in zip(values, positions, strict=False):
        if at is not None:
            out[at] = finite(value)
    return out


def _primary_op(result: Mapping[str, Any]) -> str | None:
    """The operation to chart: the one whose p99 row decided (or is listed first)."""
    rows = [r for r in result["rows"] if r["metric"] == "p99_us"]
    for r in rows:
        if r["change"] in ("worse", "better"):
            return str(r["scope"]).split()[-1]
    return str(rows[0]["scope"]).split()[-1] if rows else None


def overlaid_panels(
    result: Mapping[str, Any], sides: Mapping[str, Mapping[str, Any]], op: str | None
) -> tuple[list[float], list[Panel]]:
    """Throughput and p99/p50 of ``op``, the primary device's IOPS and await of each run,
    baseline and candidate overlaid in each panel."""
    t, positions = overlay_axis(sides)
    n = len(t)
    throughput, latency, iops, awaits = [], [], [], []
    for role, series in sides.items():
        color, pos = SIDE_COLORS[role], positions[role]
        if op:
            throughput.append(
                Series(role, _placed((series.get("ops_s") or {}).get(op, []), pos, n), color)
            )
            for name, dashed in (("p99", False), ("p50", True)):
                values = (series.get(f"{name}_us") or {}).get(op, [])
                latency.append(
                    Series(f"{role} {name}", _placed(values, pos, n), color, dashed=dashed)
                )
        device = result[role].get("device")
        figures = (series.get("device") or {}).get(device or "") or {}
        if figures:
            iops.append(Series(f"{role} {device}", _placed(figures.get("iops", []), pos, n), color))
            for label, key, dashed in (
                ("read", "r_await_ms", False),
                ("write", "w_await_ms", True),
            ):
                awaits.append(
                    Series(
                        f"{role} {label}",
                        _placed(figures.get(key, []), pos, n),
                        color,
                        dashed=dashed,
                    )
                )
    panels = []
    if throughput:
        panels.append(Panel(f"Throughput of {op} (ops/s)", throughput))
        panels.append(
            Panel(
                f"Latency of {op} (log scale)",
                latency,
                y_format=fmt_us,
                log_y=True,
            )
        )
    if iops:
        panels.append(Panel("Device IOPS", iops))
        panels.append(Panel("Device await", awaits, y_format=fmt_ms))
    return t, panels


def curve_groups(
    result: Mapping[str, Any], sides: Mapping[str, Mapping[str, Any]], op: str | None
) -> tuple[list[Points], str]:
    """Each run's p99 and p50 of ``op`` per interval against its primary device's IOPS (or
    all operations' ops/s when a run has no device), with each side's median per load
    level joined: the latency-versus-load curves of both runs on one chart."""
    groups: list[Points] = []
    # One load axis for both: device IOPS when both runs have a device, else ops/s.
    by_device = all(
        (s.get("device") or {}).get(result[role].get("device") or "") for role, s in sides.items()
    )
    x_title = "device IOPS (each run's primary device)" if by_device else "ops/s (all operations)"
    for role, series in sides.items():
        if by_device:
            xs = series["device"][result[role]["device"]].get("iops") or []
        else:
            per_op = list((series.get("ops_s") or {}).values())
            xs = [sum(finite(v) or 0.0 for v in col) for col in zip(*per_op, strict=False)]
        color = SIDE_COLORS[role]
        p99 = (series.get("p99_us") or {}).get(op or "", [])
        p50 = (series.get("p50_us") or {}).get(op or "", [])
        groups.append(Points(f"{role} p99", list(zip(xs, p99, strict=False)), color))
        steps = series.get("step") or []
        if len({s for s in steps if s is not None}) > 1:
            # Stepped: each step's median p99 joined (the p50 line would be a fourth item
            # per run, more than the legend holds beside the title).
            groups.append(
                Points(
                    f"{role} steps",
                    _step_medians(xs, p99, steps),
                    color,
                    line=True,
                    dots=False,
                )
            )
        else:
            groups.append(
                Points(
                    f"{role} p50", _sorted_pairs(xs, p50), color, line=True, dots=False,
                    dashed=True,
                )
            )  # fmt: skip
    return groups, x_title


def _sorted_pairs(xs: Sequence[Any], ys: Sequence[Any]) -> list[tuple[float | None, float | None]]:
    pairs = [(finite(x), finite(y)) for x, y in zip(xs, ys, strict=False)]
    known = sorted((x, y) for x, y in pairs if x is not None and y is not None)
    return [(x, y) for x, y in known]


def _step_medians(
    xs: Sequence[Any], ys: Sequence[Any], steps: Sequence[Any]
) -> list[tuple[float | None, float | None]]:
    by_step: dict[int, list[tuple[float, float]]] = {}
    for x, y, s in zip(xs, ys, steps, strict=False):
        fx, fy = finite(x), finite(y)
        if s is not None and fx is not None and fy is not None:
            by_step.setdefault(int(s), []).append((fx, fy))
    return [
        (statistics.median(x for x, _ in pts), statistics.median(y for _, y in pts))
        for _, pts in sorted(by_step.items())
    ]


def charts_section(result: Mapping[str, Any]) -> str:
    """Both runs on one time axis (throughput, latency, device IOPS and await) and their
    latency-versus-load curves; the first run of each side when runs were repeated."""
    sides = {role: _side_series(result, role) for role in ("baseline", "candidate")}
    known = {role: s for role, s in sides.items() if s is not None}
    if not known:
        return section(
            "charts", "Charts", Safe('<p class="note">Neither run has per-interval series.</p>')
        )
    op = _primary_op(result)
    t, panels = overlaid_panels(result, known, op)
    svg = time_panels(t, panels, label="both runs on one time axis", panel_height=130)
    repeats = any(len(result[r].get("runs") or []) > 1 for r in known)
    caption = (
        "Baseline blue, candidate vermilion, one point per measured interval, on one axis of "
        "seconds since each run's start (the warm-up is not plotted)"
        + ("; the first run of each side" if repeats else "")
        + (
            f"; {', '.join(sorted(set(sides) - set(known)))} has no series"
            if len(known) < 2
            else ""
        )
        + ". A gap in a line is an interval without a value."
    )
    groups, x_title = curve_groups(result, known, op)
    curve = scatter_chart(
        groups,
        title=f"{op} latency vs load",
        x_title=x_title,
        y_title="latency (log scale)",
        log_y=True,
    )
    curve_caption = (
        "Each dot is one measured interval's p99; a dashed line joins a run's p50 in order "
        "of load, a solid one a stepped run's median p99 per step. The same latency further "
        "right is more load carried at that latency."
    )
    return section(
        "charts",
        "Charts: baseline and candidate overlaid",
        Safe(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"),
        Safe(f"<figure>{curve}<figcaption>{esc(curve_caption)}</figcaption></figure>"),
    )
