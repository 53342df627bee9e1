"""Inline SVG charts for the run report: no JavaScript, no fonts, no external resources.

Three chart kinds, each returning one ``<svg>`` element as a string that is also valid XML:

* :func:`time_panels` — stacked panels sharing one time axis (same x scale in every panel),
  each with its own y axis and optionally a right-hand axis, with vertical marks (step
  boundaries) drawn through all panels;
* :func:`scatter_chart` — points and/or connected curves with one marked point (the knee);
* :func:`histogram_chart` — bars over log-spaced buckets on a log x axis, log-scale counts.

Missing values (``None``, NaN, ±inf, and values ≤ 0 on a log axis) are gaps: a line is broken
there rather than drawn through zero, so a collector that missed a sample does not look like
an idle device.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from sim.report import draw
from sim.report.draw import AXIS, CHAR_W, GRID, HALO, INK, PALETTE
from sim.report.scales import (
    Formatter,
    Scale,
    domain,
    finite,
    fmt_number,
    fmt_us,
    log_ticks,
    nice_ticks,
)

MARK_ROWS = 3  # rows of step labels at the top of the first panel

# --------------------------------------------------------------------------- time panels


@dataclass(frozen=True)
class Series:
    """One line of a panel; ``right`` plots it against the panel's right-hand axis."""

    label: str
    ys: Sequence[float | None]
    color: str = PALETTE[0]
    dashed: bool = False
    right: bool = False


@dataclass(frozen=True)
class Panel:
    """One stacked panel: its lines, the left axis and, when a line asks, a right axis.

    Units live in the tick labels (``y_format``: 250 µs, 40%), so panels need no axis titles.
    """

    title: str
    series: Sequence[Series]
    y_format: Formatter = fmt_number
    log_y: bool = False
    y_max: float | None = None  # e.g. 100 for percentages, so 40 % does not fill the panel
    right_format: Formatter = fmt_number
    right_max: float | None = None
    #: The lowest the left axis starts at (0: a rate's axis holds 0); None: at the data's
    #: own ticks (a tolerance band of a few percent, seen, not flattened against 0).
    y_floor: float | None = 0.0


def _axis_values(series: Sequence[Series], right: bool, log: bool) -> list[float]:
    values = [finite(y) for s in series if s.right == right for y in s.ys]
    return [v for v in values if v is not None and (v > 0 or not log)]


@dataclass(frozen=True)
class _Box:
    """A plot area in pixels: ``right`` and ``bottom`` are edges, not margins."""

    left: float
    top: float
    right: float
    bottom: float


@dataclass(frozen=True)
class _TimeAxis:
    """The time axis every panel shares: its scale, ticks, and whether ticks read in minutes
    (``known`` is False when no interval has a time, so nothing is placed on it)."""

    x: Scale
    lo: float
    hi: float
    ticks: Sequence[float]
    minutes: bool
    known: bool


def time_panels(
    t: Sequence[float | None],
    panels: Sequence[Panel],
    *,
    marks: Sequence[tuple[float, str]] = (),
    bands: Sequence[tuple[float, float, str]] = (),
    width: float = 920,
    panel_height: float = 150,
    label: str = "time series",
    clock: float | None = None,
) -> str:
    """Stacked panels over one shared time axis (seconds); ``marks`` are (t, label) vertical
    lines, ``bands`` (t0, t1, label) shaded spans (the warm-up), both through every panel;
    ``clock``: the wall-clock time (epoch s) of t = 0, to label the axis in local HH:MM:SS."""
    left, right_margin, head, gap, foot = 70.0, 70.0, 24.0, 14.0, 34.0
    if not panels:
        return draw.no_chart(width, 60, label)
    height = head + len(panels) * (panel_height + head + gap) - gap + foot - head
    times = [finite(v) for v in t]
    axis = _time_axis(times, marks, bands, left, width - right_margin)
    xs = [None if v is None else axis.x(v) for v in times]
    out = [draw.svg_open(width, height, label)]
    top = head
    for index, panel in enumerate(panels):
        box = _Box(left, top, width - right_margin, top + panel_height)
        first, last = index == 0, index == len(panels) - 1
        out.append(_panel_frame(panel, box, axis, bands, band_labels=first))
        axes_svg, scales = _panel_axes(panel, box)
        out.append(axes_svg)
        out.append(_panel_lines(panel, box, xs, scales))
        out.append(_step_lines(marks, box, axis, labelled=first))
        if last:
            out.append(_time_labels(box, axis, clock))
        top = box.bottom + gap + head
    out.append("</svg>")
    return "".join(out)


def _time_axis(
    times: Sequence[float | None],
    marks: Sequence[tuple[float, str]],
    bands: Sequence[tuple[float, float, str]],
    left: float,
    right: float,
) -> _TimeAxis:
    known = [v for v in times if v is not None]
    # The marks widen the axis: the first step starts before the first interval ends.
    span = known + [
        v
        for v in (*(m[0] for m in marks), *(b[0] for b in bands), *(b[1] for b in bands))
        if known and finite(v) is not None
    ]
    t_lo, t_hi, *t_ticks = (
        domain(span, log=False, floor=None, slack=0.05) if known else (0, 1, 0, 1)
    )
    minutes = (t_hi - t_lo) >= 600
    if minutes:
        t_ticks = [v * 60 for v in nice_ticks(t_lo / 60, t_hi / 60)]
        t_ticks = [v for v in t_ticks if t_lo <= v <= t_hi]
    return _TimeAxis(Scale(t_lo, t_hi, left, right), t_lo, t_hi, t_ticks, minutes, bool(known))


def _panel_frame(
    panel: Panel,
    box: _Box,
    axis: _TimeAxis,
    bands: Sequence[tuple[float, float, str]],
    *,
    band_labels: bool,
) -> str:
    """Title, shaded bands, legend, border and the time grid of one panel."""
    x, height = axis.x, box.bottom - box.top
    out = [draw.text(box.left, box.top - 8, panel.title, font_weight="bold")]
    for t0, t1, band in bands:
        if axis.known and t1 > t0:
            out.append(
                f'<rect x="{x(t0):.1f}" y="{box.top:.1f}" width="{x(t1) - x(t0):.1f}" '
                f'height="{height:g}" fill="{GRID}" fill-opacity="0.6"/>'
            )
            if band_labels:
                out.append(
                    draw.text((x(t0) + x(t1)) / 2, box.top + 11, band, anchor="middle", fill=AXIS)
                )
    # Once per entry: two lines drawn alike under one label (a band's two edges) are one.
    legend = list(
        dict.fromkeys((s.label, s.color, "dashed" if s.dashed else "line") for s in panel.series)
    )
    title_end = box.left + len(panel.title) * draw.CHAR_W + 16
    out.append(draw.legend(legend, box.right, box.top - 12, left=title_end))
    out.append(
        f'<rect x="{box.left}" y="{box.top:.1f}" width="{box.right - box.left:.1f}" '
        f'height="{height:g}" fill="none" stroke="{GRID}"/>'
    )
    out.extend(draw.line(x(tick), box.top, x(tick), box.bottom, GRID) for tick in axis.ticks)
    return "".join(out)


def _panel_axes(panel: Panel, box: _Box) -> tuple[str, dict[bool, Scale]]:
    """The left axis (with its grid) and, when a line asks for one, the right axis; returns
    their ticks and labels and the scale of each side (keyed by ``Series.right``)."""
    axes: list[tuple[bool, Formatter, float | None, float]] = [
        (False, panel.y_format, panel.y_max, box.left)
    ]
    if any(s.right for s in panel.series):
        axes.append((True, panel.right_format, panel.right_max, box.right))
    out: list[str] = []
    scales: dict[bool, Scale] = {}
    for on_right, fmt, y_max, axis_x in axes:
        values = _axis_values(panel.series, on_right, panel.log_y)
        if y_max is not None and not panel.log_y:
            values = [*values, y_max]
        floor = panel.y_floor if not on_right else 0.0
        lo, hi, *ticks = domain(values, log=panel.log_y, floor=floor)
        scale = scales[on_right] = Scale(lo, hi, box.bottom, box.top, log=panel.log_y)
        for tick in ticks:
            y = scale(tick)
            if not on_right:
                out.append(draw.line(box.left, y, box.right, y, GRID))
            dx, anchor = (6, "start") if on_right else (-6, "end")
            out.append(draw.text(axis_x + dx, y + 4, fmt(tick), anchor=anchor, fill=AXIS))
    return "".join(out), scales


def _panel_lines(
    panel: Panel, box: _Box, xs: Sequence[float | None], scales: dict[bool, Scale]
) -> str:
    """The panel's lines, or "no data" across it when not one point could be placed."""
    out: list[str] = []
    drawn = False
    for s in panel.series:
        scale = scales[s.right]
        ys = [finite(v) for v in s.ys]
        py = [scale(v) if v is not None and scale.accepts(v) else None for v in ys]
        drawn = drawn or any(v is not None for v in py)
        out.append(draw.polyline(xs, py, s.color, dashed=s.dashed))
    if not drawn:
        out.append(draw.no_data((box.left + box.right) / 2, (box.top + box.bottom) / 2))
    return "".join(out)


def _step_lines(
    marks: Sequence[tuple[float, str]], box: _Box, axis: _TimeAxis, *, labelled: bool
) -> str:
    """A dashed vertical line per mark on the axis; ``labelled`` adds the step labels."""
    out: list[str] = []
    x = axis.x
    row_ends = [-math.inf] * MARK_ROWS
    for when, text in sorted(marks):
        if axis.known and axis.lo <= when <= axis.hi:
            out.append(
                draw.line(x(when), box.top, x(when), box.bottom, AXIS, stroke_dasharray="4 3")
            )
            if labelled:
                # Short steps put labels close together: drop a label to the next free row
                # rather than overprint the previous one.
                start = x(when) + 3
                row = next((r for r, end in enumerate(row_ends) if start > end + 4), 0)
                row_ends[row] = start + len(text) * CHAR_W
                out.append(draw.text(start, box.top + 11 + 12 * row, text, fill=AXIS, **HALO))
    return "".join(out)


def _time_labels(box: _Box, axis: _TimeAxis, clock: float | None = None) -> str:
    """The time axis' tick labels and title, under the last panel (wall clock with ``clock``)."""

    def label(tick: float) -> str:
        if clock is not None:
            return time.strftime("%H:%M:%S", time.localtime(clock + tick))
        return f"{tick / 60:g} min" if axis.minutes else f"{tick:g} s"

    out = [
        draw.text(axis.x(tick), box.bottom + 14, label(tick), anchor="middle", fill=AXIS)
        for tick in axis.ticks
    ]
    centre = (box.left + box.right) / 2
    title = "local time" if clock is not None else "time since start"
    out.append(draw.text(centre, box.bottom + 28, title, anchor="middle", fill=AXIS))
    return "".join(out)


# --------------------------------------------------------------------------- scatter


@dataclass(frozen=True)
class Points:
    """A group of (x, y) points; ``line`` joins them in the order given (load steps keep
    their order even where IOPS fell back), ``dots`` marks each one, ``labels`` names them."""

    label: str
    xy: Sequence[tuple[float | None, float | None]]
    color: str = PALETTE[0]
    line: bool = False
    dots: bool = True
    dashed: bool = False
    labels: Sequence[str] = ()


def scatter_chart(
    groups: Sequence[Points],
    *,
    title: str,
    x_title: str,
    y_title: str,
    x_format: Formatter = fmt_number,
    y_format: Formatter = fmt_us,
    log_y: bool = False,
    mark: tuple[float, float, str] | None = None,
    width: float = 920,
    height: float = 340,
) -> str:
    """Points and curves on linear x, linear or log y, with an optional ringed point."""
    box = _Box(70.0, 34.0, width - 24.0, height - 40.0)
    pairs = [
        (fx, fy)
        for g in groups
        for fx, fy in ((finite(px), finite(py)) for px, py in g.xy)
        if fx is not None and fy is not None and (fy > 0 or not log_y)
    ]
    if not pairs:
        return draw.no_chart(width, 80, title)
    mark_xy = [(mark[0], mark[1])] if mark and finite(mark[0]) is not None else []
    x_lo, x_hi, *x_ticks = domain([p[0] for p in pairs + mark_xy], log=False)
    y_lo, y_hi, *y_ticks = domain([p[1] for p in pairs + mark_xy], log=log_y)
    x = Scale(x_lo, x_hi, box.left, box.right)
    y = Scale(y_lo, y_hi, box.bottom, box.top, log=log_y)
    out = [draw.svg_open(width, height, title), draw.text(box.left, 16, title, font_weight="bold")]
    legend = [
        (g.label, g.color, "dot" if g.dots else "dashed" if g.dashed else "line") for g in groups
    ]
    out.append(draw.legend(legend, box.right, 12))
    out.append(_plot_border(box))
    for tick in x_ticks:
        out.append(draw.line(x(tick), box.top, x(tick), box.bottom, GRID))
        out.append(draw.text(x(tick), box.bottom + 14, x_format(tick), anchor="middle", fill=AXIS))
    for tick in y_ticks:
        out.append(draw.line(box.left, y(tick), box.right, y(tick), GRID))
        out.append(draw.text(box.left - 6, y(tick) + 4, y_format(tick), anchor="end", fill=AXIS))
    centre = (box.left + box.right) / 2
    out.append(draw.text(centre, box.bottom + 30, x_title, anchor="middle", fill=AXIS))
    out.append(draw.text(box.left, box.top - 8, y_title, fill=AXIS))
    out.extend(_point_group(g, x, y) for g in groups)
    if mark and mark_xy and y.accepts(mark_xy[0][1]):
        out.append(_ring(x(mark_xy[0][0]), y(mark_xy[0][1]), mark[2], box, width))
    out.append("</svg>")
    return "".join(out)


def _plot_border(box: _Box) -> str:
    return (
        f'<rect x="{box.left}" y="{box.top}" width="{box.right - box.left:.1f}" '
        f'height="{box.bottom - box.top:.1f}" fill="none" stroke="{GRID}"/>'
    )


def _point_group(group: Points, x: Scale, y: Scale) -> str:
    """One group's joining line, dots and point labels (points y cannot place are left out)."""
    named = [
        (fx, fy, group.labels[i] if i < len(group.labels) else "")
        for i, (fx, fy) in enumerate((finite(px), finite(py)) for px, py in group.xy)
        if fx is not None and fy is not None and y.accepts(fy)
    ]
    clean = [(px, py) for px, py, _ in named]
    out: list[str] = []
    if group.line and len(clean) > 1:
        out.append(
            draw.polyline(
                [x(px) for px, _ in clean],
                [y(py) for _, py in clean],
                group.color,
                dashed=group.dashed,
            )
        )
    if group.dots:
        out.extend(
            f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" fill="{group.color}" '
            f'fill-opacity="0.55"/>'
            for px, py in clean
        )
    out.extend(
        draw.text(x(px) + 5, y(py) + 14, name, fill=group.color, font_size="10", **HALO)
        for px, py, name in named
        if name
    )
    return "".join(out)


def _ring(mx: float, my: float, label: str, box: _Box, width: float) -> str:
    """The ringed point (the knee) with a drop line to the x axis and its label, on the side
    of the ring that has room for it."""
    anchor = "end" if mx > (box.left + width) / 2 else "start"
    return (
        f'<circle cx="{mx:.1f}" cy="{my:.1f}" r="8" fill="none" stroke="{INK}" '
        f'stroke-width="2"/>'
        + draw.line(mx, my + 8, mx, box.bottom, INK, stroke_dasharray="3 3")
        + draw.text(
            mx + (-12 if anchor == "end" else 12),
            my - 10,
            label,
            anchor=anchor,
            font_weight="bold",
            **HALO,
        )
    )


# --------------------------------------------------------------------------- histogram


def histogram_chart(
    buckets: Sequence[tuple[float, float, int]],
    *,
    title: str,
    markers: Sequence[tuple[float, str]] = (),
    color: str = PALETTE[0],
    width: float = 450,
    height: float = 220,
) -> str:
    """Bars of (lo_us, hi_us, count) on a log µs axis and a log count axis; ``markers`` are
    labelled vertical lines (p50, p99 …)."""
    box = _Box(52.0, 30.0, width - 14.0, height - 34.0)
    bars = [(lo, hi, n) for lo, hi, n in buckets if lo > 0 and hi > lo and n > 0]
    if not bars:
        return draw.no_chart(width, 80, title)
    x_lo, x_hi, *x_ticks = domain([bars[0][0], bars[-1][1]], log=True)
    x_ticks = [v for v in x_ticks if math.log10(v).is_integer()] or x_ticks
    top_count = max(n for _, _, n in bars)
    y_hi = 10.0 ** math.ceil(math.log10(top_count) + 1e-9) if top_count > 1 else 10.0
    # Baseline below 1 so a bucket holding a single operation still shows as a bar.
    x = Scale(x_lo, x_hi, box.left, box.right, log=True)
    y = Scale(0.5, y_hi, box.bottom, box.top, log=True)
    out = [draw.svg_open(width, height, title), draw.text(box.left, 16, title, font_weight="bold")]
    out.append(_plot_border(box))
    for tick in log_ticks(1.0, y_hi):
        if math.log10(tick).is_integer():
            out.append(draw.line(box.left, y(tick), box.right, y(tick), GRID))
            out.append(
                draw.text(box.left - 5, y(tick) + 4, fmt_number(tick), anchor="end", fill=AXIS)
            )
    for tick in x_ticks:
        out.append(draw.line(x(tick), box.top, x(tick), box.bottom, GRID))
        out.append(draw.text(x(tick), box.bottom + 14, fmt_us(tick), anchor="middle", fill=AXIS))
    centre = (box.left + box.right) / 2
    out.append(draw.text(centre, box.bottom + 28, "latency", anchor="middle", fill=AXIS))
    out.extend(_bar(lo, hi, n, x, y, box, color) for lo, hi, n in bars)
    out.extend(
        _marker(x(value), rank, text, box)
        for rank, (value, text) in enumerate(markers)
        if finite(value) is not None and x_lo <= value <= x_hi
    )
    out.append("</svg>")
    return "".join(out)


def _bar(lo: float, hi: float, n: int, x: Scale, y: Scale, box: _Box, color: str) -> str:
    """One bucket's bar, its range and count as the hover title."""
    x0, x1 = x(lo), x(hi)
    return (
        f'<rect x="{x0 + 0.5:.1f}" y="{y(n):.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
        f'height="{box.bottom - y(n):.1f}" fill="{color}" fill-opacity="0.8">'
        f"<title>{escape(f'{fmt_us(lo)} – {fmt_us(hi)}: {n:,}')}</title></rect>"
    )


def _marker(mx: float, rank: int, text: str, box: _Box) -> str:
    """A labelled percentile line; labels stack downwards by ``rank`` so close percentiles do
    not overprint, and near the right edge go to the left of their line so they are not cut
    off."""
    flip = mx + len(text) * CHAR_W * 0.9 > box.right
    return draw.line(mx, box.top, mx, box.bottom, INK, stroke_dasharray="3 2") + draw.text(
        mx - 3 if flip else mx + 3,
        box.top + 10 + 11 * rank,
        text,
        anchor="end" if flip else "start",
        font_size="10",
        **HALO,
    )
