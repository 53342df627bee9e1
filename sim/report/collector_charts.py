"""Time-series panels of any storage collector, from the figures its registry entry declares.

One code path for the web UI's live charts (:mod:`sim.locust.live`) and report.html: a
collector that declares web UI figures (:class:`sim.registry.Display` ``ui``, then ``live``)
is drawn without either page learning its name — an array's volume and LUN latency beside the
host's device await, NFS calls, the database's physical reads, I/O pressure. The live page
gives each figure a panel of its own (its latest values are read per panel); the report groups
a collector's figures into latency, throughput and rate panels, so three layers — application
p99, host device await, array latency — sit on one page-high time axis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim import registry
from sim.bundle.reader import read_rows_if_readable
from sim.report.draw import PALETTE
from sim.report.scales import fmt_ms, fmt_number, fmt_pct
from sim.report.svg import Panel, Series

#: Lines per panel: more entities than this are left out (as the device panels do) …
MAX_ENTITIES = 4
#: … and a grouped panel keeps its first lines (figures in declaration order, the web UI's
#: first: what the collector calls its main figure), so its legend stays readable.
MAX_GROUPED_LINES = 6
MEASURED_PHASE = "measure"
#: Sources the report draws with panels of their own (the block devices, the host's CPU).
OWN_PANELS = frozenset({registry.ROLE_DEVICE, registry.ROLE_HOST_CPU})


def number(text: Any) -> float | None:
    """A finite float from a CSV cell, else None."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def columns(
    rows: Sequence[Mapping[str, str]], t: Sequence[float], by: str, key: str, scale: float = 1.0
) -> dict[str, list[float | None]]:
    """Per ``by`` (entity or op), ``key``'s value at every ``t`` (None where missing)."""
    index = {value: i for i, value in enumerate(t)}
    out: dict[str, list[float | None]] = {}
    for row in rows:
        i = index.get(number(row.get("t")) or -1.0)
        value = number(row.get(key))
        if i is None:
            continue
        column = out.setdefault(row.get(by) or "?", [None] * len(t))
        column[i] = None if value is None else value * scale
    return out


def declared_figures(display: registry.Display) -> list[tuple[str, str, float]]:
    """(sample key, title, scale) of a collector's web UI figures, then its live ones."""
    out = [(f.key, f.title, f.scale) for f in display.ui]
    known = {key for key, _, _ in out}
    unit = {f.key: f" ({f.unit})" if f.unit else "" for f in display.live}
    out += [(f.key, f.label + unit[f.key], 1.0) for f in display.live if f.key not in known]
    return out


def _kind(key: str, title: str) -> str:
    """Which of the report's panels a figure goes to: latency, throughput, shares or rates."""
    if "_ms" in key or "latency" in key or "(ms)" in title:
        return "latency"
    if "MB/s" in title:
        return "throughput"
    if key.endswith("_pct") or title.endswith("%"):
        return "shares"
    return "rates"


def _short(title: str) -> str:
    """A figure's title without the unit its grouped panel already states."""
    for unit in (" (ms)", " MB/s", " %"):
        title = title.removesuffix(unit)
    return title


KIND_TITLES = {
    "rates": "I/O rates",
    "throughput": "throughput (MB/s)",
    "shares": "% of time",
    "latency": "latency (log)",
}
KIND_FORMATS = {"latency": fmt_ms, "shares": fmt_pct}


def collector_panels(
    display: registry.Display,
    rows: Sequence[Mapping[str, str]],
    t: Sequence[float],
    *,
    grouped: bool = False,
) -> list[Panel]:
    """Panels of the declared figures the time series holds, one line per entity (and per
    figure when ``grouped``: a panel per kind of figure, titled with the collector's name)."""
    entities = sorted({row.get("entity") or "?" for row in rows})[:MAX_ENTITIES]
    color = {e: PALETTE[(i + 2) % len(PALETTE)] for i, e in enumerate(entities)}
    held = set(rows[0]) if rows else set()
    figures = [f for f in declared_figures(display) if f[0] in held]
    if not grouped:
        panels = []
        for key, title, scale in figures:
            values = columns(rows, t, "entity", key, scale)
            lines = [Series(e, values.get(e, []), color[e]) for e in entities]
            fmt = KIND_FORMATS.get(_kind(key, title), fmt_number)
            panels.append(Panel(title, lines, y_format=fmt))
        return panels
    by_kind: dict[str, list[Series]] = {}
    for n, (key, title, scale) in enumerate(figures):
        values = columns(rows, t, "entity", key, scale)
        kind = _kind(key, title)
        short = _short(title)
        by_kind.setdefault(kind, []).extend(
            Series(short if len(entities) == 1 else f"{e} {short}", values.get(e, []),
                   PALETTE[(n + 2 * i) % len(PALETTE)], dashed=i > 0)
            for i, e in enumerate(entities)
        )  # fmt: skip
    return [
        Panel(
            f"{display.title}: {KIND_TITLES[kind]}",
            lines[:MAX_GROUPED_LINES],
            y_format=KIND_FORMATS.get(kind, fmt_number),
            log_y=kind == "latency",
            y_max=100 if kind == "shares" else None,
        )
        for kind, lines in sorted(
            by_kind.items(), key=lambda item: list(KIND_TITLES).index(item[0])
        )
        if any(v is not None for line in lines for v in line.ys)
    ]


def bundle_collector_panels(bundle: Any, t: Sequence[float]) -> list[Panel]:
    """The report's panels of every collector with a time series in ``bundle`` other than the
    block devices and the host's CPU (drawn by the report's own panels), measured phase only,
    on the report's time axis ``t``."""
    panels: list[Panel] = []
    for source, entry in registry.collectors().items():
        if entry.display is None or entry.role in OWN_PANELS:
            continue
        path = bundle / "timeseries" / f"{source}.csv"
        if not path.is_file():
            continue
        rows = [r for r in read_rows_if_readable(path) if r.get("phase") == MEASURED_PHASE]
        panels.extend(collector_panels(entry.display, rows, t, grouped=True))
    return panels
