"""The baseline report's sections for points measured in several runs — the iodepth searches
and the iorate curves (a latency-versus-IOPS chart per point) — and for what the scaling read:
the working sets and the mount options beside the seed's."""

from __future__ import annotations

from typing import Any

from sim.report.draw import AXIS, GRID, PALETTE, legend, line, polyline, svg_open, text
from sim.report.markup import Safe, num, para, section, table
from sim.report.scales import Scale, nice_ticks

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 520.0, 260.0, 60.0, 16.0, 30.0, 40.0


def _ms(value: object) -> str:
    return "–" if not isinstance(value, int | float) else f"{value / 1000:,.3f}"


def _direction(step: dict[str, Any]) -> str:
    return "read" if step.get("read_p99_us") is not None else "write"


def curve_chart(point: dict[str, Any]) -> str:
    """p50 and p99 completion latency (ms) against the IOPS each curve step achieved."""
    steps = [s for s in point["curve"]["steps"] if s.get("iops")]
    if not steps:
        return ""
    d = _direction(steps[0])
    xs = [float(s["iops"]) for s in steps]
    p50 = [(s.get(f"{d}_p50_us") or 0.0) / 1000 for s in steps]
    p99 = [(s.get(f"{d}_p99_us") or 0.0) / 1000 for s in steps]
    xt, yt = nice_ticks(0.0, max(xs)), nice_ticks(0.0, max(p99 + p50) or 1.0)
    x = Scale(xt[0], xt[-1], LEFT, WIDTH - RIGHT)
    y = Scale(yt[0], yt[-1], HEIGHT - BOTTOM, TOP)
    parts = [svg_open(WIDTH, HEIGHT, f"{point['id']}: latency against IOPS")]
    parts.append(
        text(LEFT, 16, f"{point['id']}: {d} latency (ms) against IOPS", font_weight="bold")
    )
    for tick in yt:
        parts.append(line(LEFT, y(tick), WIDTH - RIGHT, y(tick), GRID))
        parts.append(text(LEFT - 6, y(tick) + 4, f"{tick:g}", anchor="end", fill=AXIS))
    for tick in xt:
        parts.append(
            text(x(tick), HEIGHT - BOTTOM + 14, f"{tick:,.0f}", anchor="middle", fill=AXIS)
        )
    parts.append(polyline([x(v) for v in xs], [y(v) for v in p50], PALETTE[0]))
    parts.append(polyline([x(v) for v in xs], [y(v) for v in p99], PALETTE[1]))
    parts.append(
        legend([("p50", PALETTE[0], "line"), ("p99", PALETTE[1], "line")], WIDTH - RIGHT, 16)
    )
    parts.append("</svg>")
    return "".join(parts)


def curve_section(points: list[dict[str, Any]]) -> Safe | None:
    curved = [p for p in points if p.get("curve")]
    if not curved:
        return None
    parts: list[str] = [
        para(
            "After the uncapped run, each step asks fio for a share of its IOPS (rate_iops per "
            "job, Poisson arrivals as vdbench's exponential ones); above 100 % fio runs as fast "
            "as it can. Files: fio/<point>.iorate<pct>.*"
        )
    ]
    for p in curved:
        steps = p["curve"]["steps"]
        parts.append(Safe(curve_chart(p)))
        rows = [
            [s["pct"], num(s["target_iops"], 0), num(s.get("iops"), 0),
             _ms(s.get(f"{_direction(s)}_p50_us")), _ms(s.get(f"{_direction(s)}_p99_us")),
             s.get("status")]
            for s in steps
        ]  # fmt: skip
        parts.append(
            table(
                ["% of uncapped", "asked IOPS", "measured IOPS", "p50 ms", "p99 ms", "status"],
                rows,
                left={5},
                caption=f"{p['id']}: uncapped {p['curve']['max_iops']:,.0f} IOPS",
            )
        )
    return section("curve", "iorate curves (latency against IOPS)", *parts)


def search_section(points: list[dict[str, Any]]) -> Safe | None:
    searched = [p for p in points if p.get("search")]
    if not searched:
        return None
    rows = [
        [p["id"], s["seed_iodepth"], s["iodepth"], num(s.get("iops"), 0),
         num(s.get("mib_s"), 1), "settled" if s["iodepth"] == p["search"]["settled_iodepth"] else ""]
        for p in searched
        for s in p["search"]["steps"]
    ]  # fmt: skip
    why = [para(f"{p['id']}: {p['search']['why']}") for p in searched]
    return section(
        "search",
        "iodepth searches",
        para(searched[0]["search"]["rule"]),
        table(["point", "seed iodepth", "iodepth here", "IOPS", "MiB/s", ""], rows, left={0, 5}),
        *why,
    )


def scaling_section(
    points: list[dict[str, Any]], mount: dict[str, Any] | None, advice: list[str] | None = None
) -> Safe | None:
    """Each seed table's load here and working set, and the mount options beside the page's."""
    seen: dict[str, list[str]] = {}
    for p in points:
        work = (p.get("working_set") or {}).get("rule", "")
        seen.setdefault(p.get("seed_table") or p["id"], [p.get("seed_load", ""), work])
    rows = [[table_, load, work] for table_, (load, work) in seen.items()]
    parts: list[str] = [
        table(["seed table", "the seed's load", "working set here"], rows, left={0, 1, 2})
    ]
    for entry in (mount or {}).get("tables", []):
        parts += [para(said, "note") for said in entry["said"]]
    parts += [para(said, "note") for said in advice or []]
    return section("scaling", "Seed load, working set and mount", *parts)
