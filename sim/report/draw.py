"""SVG drawing primitives shared by the charts: text, lines, gapped paths, legends.

Every string that reaches an attribute or a text node is escaped here, so a chart label
taken from the bundle (an operation or device name) cannot inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

# Okabe-Ito: distinguishable for colour-blind readers and in greyscale print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
GRID = "#e3e6ea"
AXIS = "#5b6470"
INK = "#1f2933"
# A white outline under annotation text keeps it legible where it crosses lines and dots.
HALO = {"stroke": "#fff", "stroke_width": "3", "paint_order": "stroke"}
CHAR_W = 6.2  # approximate width of one 11 px sans-serif character, for legend layout


def text(x: float, y: float, label: str, *, anchor: str = "start", **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(label)}</text>'


def line(x1: float, y1: float, x2: float, y2: float, color: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}"{extra}/>'
    )


def svg_open(width: float, height: float, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" '
        f'font-family="DejaVu Sans, Liberation Sans, Arial, sans-serif" font-size="11" '
        f'fill="{INK}" class="chart">'
    )


def polyline(
    xs: Sequence[float | None], ys: Sequence[float | None], color: str, *, dashed: bool = False
) -> str:
    """One path broken at every gap; isolated points get a dot so they stay visible."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys, strict=False):
        if x is None or y is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x, y))
    parts: list[str] = []
    commands = " ".join(
        "M" + " L".join(f"{x:.1f} {y:.1f}" for x, y in run) for run in runs if len(run) > 1
    )
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    if commands:
        parts.append(
            f'<path d="{commands}" fill="none" stroke="{color}" stroke-width="1.7" '
            f'stroke-linejoin="round" stroke-linecap="round"{dash}/>'
        )
    points = sum(len(run) for run in runs)
    for run in runs:
        # Few points: mark each one, a reader counts intervals; many: only isolated ones.
        if len(run) == 1 or points <= 40:
            parts.extend(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="{color}"/>' for x, y in run
            )
    return "".join(parts)


def legend(
    items: Sequence[tuple[str, str, str]], right: float, y: float, left: float | None = None
) -> str:
    """Legend entries right-aligned on one row: (label, colour, kind); kind is ``line``,
    ``dashed`` or ``dot``, drawn the way the chart draws that series. When the row would reach
    ``left`` (the end of the panel's title), the first entries that fit are kept and the row
    ends with how many were left out."""
    widths = [len(label) * CHAR_W + 36 for label, _, _ in items]
    kept, tail = list(items), ""
    if left is not None and right - sum(widths) < left:
        room = right - left - 9 * CHAR_W
        count = 0
        while count < len(items) and sum(widths[: count + 1]) <= room:
            count += 1
        kept, tail = list(items[:count]), f"+{len(items) - count} more"
    out: list[str] = []
    x = right
    if tail:
        x -= len(tail) * CHAR_W
        out.append(text(x, y + 4, tail, fill=AXIS))
        x -= 12
    for label, color, kind in reversed(kept):
        x -= len(label) * CHAR_W + 4
        out.append(text(x, y + 4, label))
        x -= 20
        if kind == "dot":
            out.append(f'<circle cx="{x + 8:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>')
        else:
            dash = {"stroke_dasharray": "5 3"} if kind == "dashed" else {}
            out.append(line(x, y, x + 16, y, color, stroke_width="2.2", **dash))
        x -= 12
    return "".join(out)


def no_data(x: float, y: float) -> str:
    return text(x, y, "no data", anchor="middle", fill=AXIS, font_style="italic")


def no_chart(width: float, height: float, title: str) -> str:
    return (
        svg_open(width, height, title)
        + text(8, 16, title, font_weight="bold")
        + no_data(width / 2, height / 2)
        + "</svg>"
    )
