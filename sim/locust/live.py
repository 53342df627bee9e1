"""The web UI's live charts (``/dbsim/live``): the run's bundle, as it is being written, drawn
with report.html's own SVG code (:mod:`sim.report.svg`, :func:`sim.report.charts.curve_figure`)
so the live page and the report always agree.

Every chart shares one wall-clock time axis from the start of the run's sessions (warm-up
shaded, then the measurement): per operation ops/s, p50/p99 and max latency, errors/s; per
storage collector that wrote a time series, each figure its registry entry declares for the
web UI (:class:`sim.registry.Display` ``ui`` then ``live``), one line per entity — block
devices' r/s, w/s, IOPS, MB/s, await, %util and aqu-sz, NFS, ONTAP, database figures when
those collectors run, no collector named here. Then the latency-versus-IOPS scatter with the
knee, and the verdict as honest as the run's phase (:func:`sim.live.wording.verdict`: waiting
before the measured window, "so far" from the analysis of the bundle while the run goes,
"final" from the bundle's ``analysis.json`` once it has ended), with the window so far and the
run's SLOs for the strip of latency beside the device (:mod:`sim.live.now`). Every latest
value carries its unit. Built off the hub (gevent's native thread pool), at most every
``LIVE_REFRESH_S``; the page polls it. :class:`NowCache` builds only the strip's part, for
Locust's own page.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import gevent

from sim import registry
from sim.bundle.reader import read_rows_if_readable
from sim.bundle.summary import status_text
from sim.live.wording import value_text, verdict
from sim.report.charts import curve_figure
from sim.report.collector_charts import collector_panels, columns, number
from sim.report.data import load_analysis_file, series_from_bundle
from sim.report.draw import PALETTE
from sim.report.scales import fmt_us
from sim.report.svg import Panel, Series, time_panels

LIVE_REFRESH_S = 3.0
#: How long a request waits for the view being rebuilt (LiveCache).
FRESH_WAIT_S = 5.0
APP_SOURCE = "ops"
ROW_KEYS = ("t", "interval", "phase", "entity", "step", "op")


def _epoch(iso: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _times(*tables: Sequence[Mapping[str, str]]) -> list[float]:
    found = {number(row.get("t")) for rows in tables for row in rows}
    return sorted(v for v in found if v is not None)


def _errors_s(rows: Sequence[Mapping[str, str]], t: Sequence[float]) -> dict[str, list[Any]]:
    """Failed operations per second: each interval's errors over its length."""
    counts = columns(rows, t, "op", "errors")
    lengths = [b - a for a, b in itertools.pairwise([0.0, *t])]
    return {
        op: [None if n is None or dt <= 0 else n / dt for n, dt in zip(col, lengths, strict=True)]
        for op, col in counts.items()
    }


def application_panels(rows: Sequence[Mapping[str, str]], t: Sequence[float]) -> list[Panel]:
    """Per operation: ops/s, p50 and p99, max, errors/s."""
    ops = sorted({row.get("op") or "?" for row in rows})
    color = {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(ops)}
    ops_s = columns(rows, t, "op", "ops_s")
    p50, p99 = columns(rows, t, "op", "p50_us"), columns(rows, t, "op", "p99_us")
    peak, errors = columns(rows, t, "op", "max_us"), _errors_s(rows, t)
    latency = [
        Series(f"{op} {name}", column.get(op, []), color[op], dashed=name == "p50")
        for op in ops
        for name, column in (("p99", p99), ("p50", p50))
    ]
    return [
        Panel("Throughput (ops/s)", [Series(op, ops_s.get(op, []), color[op]) for op in ops]),
        Panel("Latency: p99 solid, p50 dashed (log)", latency, y_format=fmt_us, log_y=True),
        Panel(
            "Latency: max per interval (log)",
            [Series(f"{op} max", peak.get(op, []), color[op]) for op in ops],
            y_format=fmt_us,
            log_y=True,
        ),
        Panel(
            "Errors (failed operations/s)",
            [Series(op, errors.get(op, []), color[op]) for op in ops],
        ),
    ]


def _chart(
    key: str, title: str, t: Sequence[float], panels: list[Panel], axis: dict[str, Any]
) -> dict[str, Any]:
    """A chart for the page: its SVG, how many intervals it holds, and the latest values."""
    svg = time_panels(t, panels, label=title, clock=axis["clock"], bands=axis["bands"])
    latest = []
    for panel in panels:
        for series in panel.series:
            value = series.ys[-1] if series.ys else None
            latest.append({"panel": panel.title, "line": series.label, "value": value,
                           "text": value_text(panel, value)})  # fmt: skip
    return {"key": key, "title": title, "svg": svg, "points": len(t), "t": t[-1] if t else None,
            "latest": latest}  # fmt: skip


def build_charts(bundle: Path, summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The application chart, then one chart per storage collector with a time series."""
    folder = bundle / "timeseries"
    ops = read_rows_if_readable(folder / f"{APP_SOURCE}.csv")
    tables = {
        source: read_rows_if_readable(folder / f"{source}.csv")
        for source, entry in registry.collectors().items()
        if entry.display is not None and (folder / f"{source}.csv").is_file()
    }
    t = _times(ops, *tables.values())
    timing = summary.get("timing") or {}
    warmup = number(timing.get("warmup_s")) or 0.0
    axis = {
        "clock": _epoch(timing.get("sessions_started_at") or summary.get("started_at")),
        "bands": [(0.0, warmup, "warm-up")] if warmup > 0 else [],
    }
    charts = [_chart("application", "Operations", t, application_panels(ops, t), axis)]
    for source, rows in tables.items():
        display = registry.collectors()[source].display
        assert display is not None
        panels = collector_panels(display, rows, t)
        if panels:
            charts.append(_chart(source, display.title, t, panels, axis))
    return charts


def _slos(bundle: Path) -> list[dict[str, Any]]:
    """The run's SLOs as its scenario.yaml declares them (each checked as the run checked it;
    one that no longer validates is left out)."""
    from sim.config.resolve import read_scenario_file
    from sim.config.scenario import Slo

    try:
        found = read_scenario_file(bundle / "scenario.yaml").get("slos") or []
    except Exception:  # not written yet, or unreadable: no SLOs shown
        return []
    out = []
    for raw in found if isinstance(found, list) else []:
        try:
            out.append(Slo.model_validate(raw).model_dump(exclude_none=True))
        except Exception:
            continue
    return out


def live_view(bundle_path: str | None, running: bool, phase: str = "measuring") -> dict[str, Any]:
    """Everything the live page shows of the bundle (a native thread: reads files)."""
    from sim.analysis import analyze_bundle
    from sim.bundle.reader import read_summary
    from sim.live.now import csv_window

    if not bundle_path:
        return {"charts": [], "verdict": verdict(None, False, "ready"), "curve": "",
                "window": {}, "slos": []}  # fmt: skip
    bundle = Path(bundle_path).absolute()
    try:
        summary = read_summary(bundle)
    except Exception:  # not written yet
        summary = {}
    final = not running and (bundle / "analysis.json").is_file()
    try:
        analysis = load_analysis_file(bundle) if final else analyze_bundle(bundle)
    except Exception:  # too early: no measured interval yet
        analysis = None
    series = series_from_bundle(bundle)
    curve = ""
    if analysis and series.get("t"):
        curve = str(curve_figure(series, analysis, analysis.get("primary_op"),
                                 analysis.get("primary_device")))  # fmt: skip
    return {
        "charts": build_charts(bundle, summary),
        "verdict": verdict(analysis, final, phase, running),
        "curve": curve,
        "window": csv_window(bundle),
        "slos": _slos(bundle),
        "primary_op": (analysis or {}).get("primary_op"),
        "primary_device": (analysis or {}).get("primary_device"),
        "status_text": status_text(summary) if summary else "",
        "built_at": time.time(),
    }


class LiveCache:
    """The live view, rebuilt in gevent's thread pool at most every LIVE_REFRESH_S.

    A request that finds the view being rebuilt (by itself or another) waits for it, up to
    FRESH_WAIT_S, in its own greenlet (the hub serves the others meanwhile): it gets the view as
    of its request, not the one before. Served at once, the old view showed "No run yet" to a
    page opened on a running run, and the last "so far" verdict after the end, until the
    page's next poll (2 s); the charts moved one poll late."""

    def __init__(self) -> None:
        self.view: dict[str, Any] = live_view(None, False)
        self._key: tuple[str | None, bool, str] | None = None
        self._at = 0.0
        self._pending: gevent.Greenlet | None = None  # the rebuild under way, if any

    def get(self, bundle: str | None, running: bool, phase: str = "measuring") -> dict[str, Any]:
        key = (bundle, running, phase)
        stale = key != self._key or (running and time.monotonic() - self._at > LIVE_REFRESH_S)
        pending = self._pending if self._pending is not None and not self._pending.ready() else None
        if bundle and stale and pending is None:
            self._key, self._at = key, time.monotonic()
            pending = self._pending = gevent.spawn(self._refresh, bundle, running, phase)
        if bundle and pending is not None:
            pending.join(timeout=FRESH_WAIT_S)
        return self.view

    def _refresh(self, bundle: str, running: bool, phase: str) -> None:
        try:
            self.view = gevent.get_hub().threadpool.apply(self._build, (bundle, running, phase))
        except Exception as exc:  # a bundle being rewritten: keep the last view, say why
            self.view = {**self.view, "problem": f"{type(exc).__name__}: {exc}"}

    def _build(self, bundle: str, running: bool, phase: str) -> dict[str, Any]:
        return live_view(bundle, running, phase)


def now_view(bundle_path: str) -> dict[str, Any]:
    """The little the "now" strip needs of the bundle (a native thread: reads two CSVs and
    the scenario): its window so far and its SLOs, without charts or analysis."""
    from sim.live.now import csv_window

    bundle = Path(bundle_path).absolute()
    return {"window": csv_window(bundle), "slos": _slos(bundle)}


class NowCache(LiveCache):
    """:func:`now_view`, rebuilt in gevent's thread pool at most every LIVE_REFRESH_S: what
    Locust's own page polls, far lighter than the live page's whole view."""

    def __init__(self) -> None:
        super().__init__()
        self.view = {"window": {}, "slos": []}

    def _build(self, bundle: str, running: bool, phase: str) -> dict[str, Any]:
        return now_view(bundle)
