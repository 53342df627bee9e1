"""``report.html`` of a storage baseline bundle: fio's figures per point, the device's iostat
figures over the same window, and the published envelope beside them.

Same rules as the run report (:mod:`sim.report`): one self-contained page, inline SVG, no
script, every value escaped. The chart is on a log scale: a published array figure and one
client's measurement can be two decades apart, and both must stay readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.baseline import page_steps
from sim.bundle.figures import primary_device_figures
from sim.bundle.files import atomic_write
from sim.bundle.reader import read_json_file
from sim.errors import ConfigError
from sim.report import sections
from sim.report.data import load_summary
from sim.report.draw import AXIS, GRID, PALETTE, legend, line, svg_open, text
from sim.report.markup import Safe, esc, num, page, para, section, table
from sim.report.scales import Scale, log_ticks

REPORT_NAME = "report.html"
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760.0, 300.0, 64.0, 16.0, 28.0, 70.0


def iops_chart(points: list[dict[str, Any]], rows: dict[str, dict[str, Any]]) -> str:
    """Grouped bars per point: fio's IOPS, the device's IOPS (iostat) and the published."""
    series = _iops_series(points, rows)
    values = [v for _, _, vs in series for v in vs if v]
    if not values:
        return ""
    ticks = log_ticks(min(values), max(values))
    scale = Scale(ticks[0], ticks[-1], HEIGHT - BOTTOM, TOP, log=True)
    band = (WIDTH - LEFT - RIGHT) / max(len(points), 1)
    bar = band * 0.8 / len(series)
    parts = [svg_open(WIDTH, HEIGHT, "IOPS per point: fio, device and published")]
    for tick in ticks:
        y = scale(tick)
        parts.append(line(LEFT, y, WIDTH - RIGHT, y, GRID))
        parts.append(text(LEFT - 6, y + 4, f"{tick:,.0f}", anchor="end", fill=AXIS))
    for i, point in enumerate(points):
        x0 = LEFT + i * band + band * 0.1
        for j, (_, color, vs) in enumerate(series):
            value = vs[i]
            if not value:
                continue
            y = scale(value)
            parts.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{y:.1f}" width="{bar * 0.92:.1f}" '
                f'height="{HEIGHT - BOTTOM - y:.1f}" fill="{color}"><title>{esc(point["id"])}: '
                f"{value:,.0f}</title></rect>"
            )
        cx = LEFT + (i + 0.5) * band
        parts.append(
            text(
                cx,
                HEIGHT - BOTTOM + 14,
                point["id"],
                anchor="end",
                transform=f"rotate(-35 {cx:.1f} {HEIGHT - BOTTOM + 14:.1f})",
            )
        )
    parts.append(legend([(name, color, "dot") for name, color, _ in series], WIDTH - RIGHT, 14))
    parts.append("</svg>")
    return "".join(parts)


def _iops_series(
    points: list[dict[str, Any]], rows: dict[str, dict[str, Any]]
) -> list[tuple[str, str, list[float | None]]]:
    """The chart's bar series (name, colour, one value per point): fio's IOPS, the primary
    device's reads plus writes per second, and the published figure where there is one."""
    series: list[tuple[str, str, list[float | None]]] = [
        ("fio IOPS", PALETTE[0], [p.get("iops") for p in points]),
        (
            "device r/s + w/s",
            PALETTE[2],
            [
                sum(
                    primary_device_figures(p.get("device") or {}).get(k, 0.0)
                    for k in ("r_s", "w_s")
                )
                or None
                for p in points
            ],
        ),
    ]
    if rows:
        series.append(
            (
                "published",
                PALETTE[1],
                [((rows.get(p["id"]) or {}).get("published") or {}).get("iops") for p in points],
            )
        )
    return series


def _ms(value: object) -> str:
    return "–" if not isinstance(value, int | float) else f"{value / 1000:,.3f}"


def points_table(points: list[dict[str, Any]], rows: dict[str, dict[str, Any]]) -> Safe:
    body = []
    for p in points:
        if p.get("status") != "completed":
            body.append([p["id"], f"{p['numjobs']}×{p['iodepth']}", p.get("status")] + [""] * 9)
            continue
        read, write = p["read"], p["write"]
        busiest = primary_device_figures(p.get("device") or {})
        row = rows.get(p["id"]) or {}
        published = row.get("published") or {}
        body.append(
            [
                p["id"],
                f"{p['numjobs']}×{p['iodepth']}",
                num(read["iops"], 0),
                num(write["iops"], 0),
                num(p["mib_s"], 1),
                f"{_ms(read.get('p50_us'))} / {_ms(read.get('p99_us'))}" if read["ios"] else "–",
                f"{_ms(write.get('p50_us'))} / {_ms(write.get('p99_us'))}" if write["ios"] else "–",
                f"{num(busiest.get('r_s'), 0)} + {num(busiest.get('w_s'), 0)}" if busiest else "–",
                "; ".join(f"{d}: {t}" for d, t in (p.get("printed") or {}).items()),
                num(published.get("iops"), 0) if published else "–",
                f"{row['ratio']:.3f}" if "ratio" in row else "–",
                "; ".join(published.get("flags") or []),
            ]
        )
    return table(
        [
            "point",
            "jobs×qd",
            "read IOPS",
            "write IOPS",
            "MiB/s",
            "read p50 / p99 ms",
            "write p50 / p99 ms",
            "device r/s + w/s",
            "fio printed",
            "published IOPS",
            "measured ÷ published",
            "published figure's flags",
        ],
        body,
        left={0, 1, 8, 11},
        caption="Per point: fio's own figures (completion latency), the device (iostat -x "
        "arithmetic) over the same measured window, and the published figure",
    )


def render_html(bundle: Path) -> str:
    summary = load_summary(bundle)
    baseline = read_json_file(bundle / "baseline.json", what="baseline.json")
    if not isinstance(baseline, dict):
        raise ConfigError(f"{bundle / 'baseline.json'}: not a JSON object")
    points = baseline.get("points") or []
    comparison = baseline.get("comparison") or {}
    rows = {r["id"]: r for r in comparison.get("rows", [])}
    parts = [sections.header(summary, bundle)]
    fio_info = baseline.get("fio") or {}
    intro = (
        f"{len(points)} point(s) measured by {fio_info.get('version', 'fio')} on "
        f"{baseline.get('target')}: {baseline.get('runtime_s')} s each after a "
        f"{baseline.get('ramp_s')} s ramp. fio's job files and reports are in fio/."
    )
    parts.append(section("points", "Points", para(intro), Safe(iops_chart(points, rows)),
                         points_table(points, rows)))  # fmt: skip
    extra = (
        page_steps.search_section(points),
        page_steps.curve_section(points),
        page_steps.scaling_section(points, baseline.get("mount"), baseline.get("advice")),
    )
    parts += [part for part in extra if part is not None]
    if comparison:
        parts.append(
            section(
                "envelope",
                f"Published envelope: {comparison.get('title', comparison.get('envelope'))}",
                para(comparison.get("caveat", ""), "note"),
            )
        )
    parts.append(section("run", "Run details", sections.run_details(summary)))
    return page(
        f"dbsim baseline: {bundle.name}",
        "".join(str(p) for p in parts),
        f"From {bundle.resolve()}. Figures in the table come from fio's JSON report, parsed, "
        "never recomputed.",
    )


def write_baseline_report(bundle: Path) -> Path:
    path = Path(bundle) / REPORT_NAME
    atomic_write(path, render_html(Path(bundle)))
    return path
