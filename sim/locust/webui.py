"""dbsim's part of Locust's web UI: the Storage, Correlation and Run tabs, downloads, login.

The tabs are Locust's own extension points: ``extended_tabs`` and ``extended_tables`` in the
web UI's template arguments declare them, and each ``/stats/requests`` answer (which the page
polls every two seconds while a test runs) carries their rows in ``extended_stats``. So the
tabs fill live, with no JavaScript of ours.

* **Storage** — the latest interval's storage samples, each in the columns its collector
  declares (:class:`sim.registry.Display`): per block device IOPS (read/write), MB/s, await
  and %util; per NFS mount and operation ops/s and time per op; ONTAP volumes and LUNs when
  configured; host CPU. In a distributed run, merged as the bundle merges them.
* **Correlation** — the analysis (:func:`sim.analysis.analyze_bundle`) of the run's bundle so
  far: verdict, correlation of latency with IOPS and await, I/Os per operation, lag, knee,
  Little's law. Computed in a native thread at most every ``CORRELATION_REFRESH_S``.
* **Run** — the bundle's location, state (``completed (stopped early)`` after Stop),
  sessions, workers, and the downloads of the latest run (:mod:`sim.locust.downloads`):
  ``/dbsim/run/report.html``, ``summary.json``, ``timeseries.zip`` and ``bundle.zip``, links
  there (``static/links.js``, added to Locust's page, makes them clickable) and under
  "Download Data".

The Storage rows say whether they are live or the last sample of a stopped run, and how old
that sample is.

Every route is protected by ``--web-login`` when it is on. Credentials are compared in
constant time and never logged.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gevent
from flask import Response, jsonify, redirect, request, send_from_directory, session, url_for
from flask_login import UserMixin, login_user
from locust.env import Environment
from werkzeug.wrappers import Response as WerkzeugResponse

from sim.bundle.summary import status_text
from sim.core.metrics import OpStats, mean_value, percentile_values
from sim.live.phase import phase_of
from sim.live.storage_table import storage_columns, storage_rows
from sim.locust.downloads import DOWNLOADS, download
from sim.locust.guard import PageGuard
from sim.locust.live_routes import add_live_routes
from sim.locust.roles import Controller
from sim.protocols import Sample
from sim.report.findings import layer_rows

log = logging.getLogger(__name__)

CORRELATION_REFRESH_S = 5.0
STATS_PATH = "/stats/requests"
FIGURE_COLUMNS = (("figure", "Figure"), ("value", "Value"), ("meaning", "Meaning"))
TABS = (("storage", "Storage"), ("correlation", "Correlation"), ("run", "Run"))
STATIC = Path(__file__).with_name("static")
#: Added to Locust's page: makes the Run tab's download paths links.
PAGE_SCRIPT = '<script src="./dbsim/static/links.js" defer></script>'


def _num(value: Any, digits: int = 2) -> Any:
    return "" if value is None else round(float(value), digits)


class SampleClock:
    """When the latest samples arrived (the controller replaces its list on each interval)."""

    def __init__(self) -> None:
        self._seen: list[Sample] | None = None
        self._at = 0.0

    def age_s(self, samples: list[Sample]) -> float:
        if samples is not self._seen:
            self._seen, self._at = samples, time.time()
        return time.time() - self._at


IO_PER_OP_LABELS = {
    "device_ios_per_op": "device I/Os per operation",
    "device_read_ios_per_read": "device reads per read",
    "db_blocks_read_per_read": "database blocks read per read",
    "cache_hit_pct": "cache hit %",
}


def _row(figure: str, value: Any, meaning: Any) -> dict[str, Any]:
    return {"figure": figure, "value": value, "meaning": meaning}


def correlation_rows(analysis: dict[str, Any] | None, problem: str | None) -> list[dict[str, Any]]:
    """The analysis so far as figure/value/meaning rows."""
    if analysis is None:
        return [_row("analysis", "not yet", problem or "waiting for data")]
    verdict = analysis.get("verdict") or {}
    op, device = analysis.get("primary_op"), analysis.get("primary_device")
    rows = [
        _row("verdict so far", verdict.get("call", ""), verdict.get("summary", "")),
        _row("intervals analysed", analysis.get("intervals"), f"operation {op}, device {device}"),
    ]
    io = analysis.get("io_per_op") or {}
    rows.extend(
        _row(label, io[key], "measured window so far")
        for key, label in IO_PER_OP_LABELS.items()
        if io.get(key) is not None
    )
    rows.extend(
        _row(label, value, "measured window so far") for label, value in layer_rows(io).items()
    )
    rows.extend(_device_correlation_rows(analysis, op))
    rows.extend(
        _row(f"r({op} latency, {c['title']})", c["r"], f"{c['what']} over {c['n']} intervals")
        for c in analysis.get("collector_coupling") or []
        if c.get("r") is not None
    )
    lag = ((analysis.get("lag") or {}).get(op) or {}) if op else {}
    if lag and lag.get("best_lag_s") is not None:
        meaning = f"{lag.get('leader')} (r {lag.get('r')} with {lag.get('metric')})"
        rows.append(_row("lag", lag.get("best_lag_s"), meaning))
    knee = (analysis.get("curve") or {}).get("knee")
    knee_text = json.dumps(knee) if knee else "none yet"
    rows.append(_row("knee", knee_text, "latency-versus-IOPS knee"))
    law = analysis.get("littles_law") or {}
    if law:
        rows.append(_row("Little's law", law.get("ratio"), law.get("note", "")))
    return rows


def _device_correlation_rows(analysis: dict[str, Any], op: str | None) -> list[dict[str, Any]]:
    correlations = ((analysis.get("correlation") or {}).get(op) or {}) if op else {}
    rows = []
    for latency in ("p50_us", "p99_us"):
        for metric in ("iops", "await_ms", "util_pct"):
            pair = (correlations.get(latency) or {}).get(metric)
            if pair and pair.get("pearson") is not None:
                rows.append(
                    _row(
                        f"r({op} {latency[:-3]}, {metric})",
                        pair["pearson"],
                        f"Pearson over {pair.get('n')} intervals; Spearman {pair.get('spearman')}",
                    )
                )
    return rows


class CorrelationCache:
    """The bundle's analysis, refreshed in a native thread, never on the hub."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = correlation_rows(None, None)
        self._path: str | None = None
        self._at = 0.0
        self._busy = False

    def get(self, bundle: str | None) -> list[dict[str, Any]]:
        now = time.monotonic()
        if (
            bundle
            and not self._busy
            and (bundle != self._path or now - self._at > CORRELATION_REFRESH_S)
        ):
            self._busy = True
            self._path, self._at = bundle, now
            gevent.spawn(self._refresh, bundle)
        return self.rows

    def _refresh(self, bundle: str) -> None:
        try:
            analysis, problem = gevent.get_hub().threadpool.apply(_analyze, (bundle,))
            self.rows = correlation_rows(analysis, problem)
        finally:
            self._busy = False


def _analyze(bundle: str) -> tuple[dict[str, Any] | None, str | None]:
    from sim.analysis import analyze_bundle

    try:
        return analyze_bundle(Path(bundle)), None
    except Exception as exc:  # too early (no interval yet), or a bundle being written
        return None, str(exc)


def run_rows(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    phase = phase_of(snapshot)
    rows = [
        {"figure": "phase", "value": phase["phase"], "meaning": phase.get("text", "")},
        {"figure": "bundle", "value": snapshot.get("bundle") or "", "meaning": "run directory"},
        {
            "figure": "status",
            "value": status_text(snapshot) if snapshot.get("status") else "",
            "meaning": f"engine state {snapshot.get('state', '')}",
        },
        {
            "figure": "run",
            "value": snapshot.get("run_id") or "",
            "meaning": snapshot.get("role", ""),
        },
        {
            "figure": "sessions",
            "value": snapshot.get("sessions") or "",
            "meaning": "engine sessions (= Locust users)",
        },
        {
            "figure": "intervals",
            "value": snapshot.get("intervals") or 0,
            "meaning": "written to the bundle",
        },
    ]
    rows.append({"figure": "live charts", "value": "/dbsim/live", "meaning": "the live page"})
    for name, what in DOWNLOADS.items():
        rows.append({"figure": name, "value": f"/dbsim/run/{name}", "meaning": f"download: {what}"})
    for worker in snapshot.get("workers") or []:
        rows.append(
            {
                "figure": f"worker {worker['index']}",
                "value": worker["state"],
                "meaning": f"{worker['host']}: {worker['sessions']} sessions, {worker['intervals']} intervals",
            }
        )
    if snapshot.get("error"):
        rows.append({"figure": "error", "value": snapshot["error"], "meaning": ""})
    rows.extend(
        {"figure": "note", "value": note, "meaning": ""} for note in snapshot.get("notes") or []
    )
    return rows


def _unround_min_max(environment: Environment, rows: list[dict[str, Any]]) -> None:
    """Locust's table rounds min and max to whole milliseconds (a 56 µs minimum reads 0);
    put back the µs-bucketed values the entries hold."""
    runner = environment.runner
    if runner is None:
        return
    for row in rows:
        if row.get("name") == "Aggregated" and not row.get("method"):
            entry = runner.stats.total
        elif (row.get("name"), row.get("method")) in runner.stats.entries:
            entry = runner.stats.entries[(row["name"], row["method"])]
        else:
            continue
        if entry.min_response_time is not None:
            row["min_response_time"] = entry.min_response_time
        row["max_response_time"] = entry.max_response_time


PERCENTILE_KEY = "response_time_percentile_"
#: The percentiles Locust's table and charts read (``locust.stats.PERCENTILES_TO_REPORT``).
LOCUST_PERCENTILES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999, 0.9999, 1.0)


def hdr_figures(totals: Mapping[str, OpStats]) -> dict[str, dict[str, float]]:
    """Per operation, and ``Aggregated`` over all, the figures Locust's table shows (ms),
    from dbsim's HDR histograms of the measured window (a native thread: HDR walks are
    slow). Locust's own response-time buckets round a 77.7 ms p99 up to 79.2 ms."""
    merged = OpStats()
    out: dict[str, dict[str, float]] = {}
    for name, live in list(totals.items()):
        stats = live.snapshot()  # the engine's thread merges into ``live`` meanwhile
        merged.merge(stats)
        out[name] = _hdr_row(stats)
    out["Aggregated"] = _hdr_row(merged)
    return {name: row for name, row in out.items() if row}


def _hdr_row(stats: OpStats) -> dict[str, float]:
    hist = stats.histogram
    if stats.count == 0:
        return {}
    # One numpy walk of the counts for all the percentiles (hdrh's own walk is pure Python and
    # holds the GIL: twelve walks on the pool thread starved the hub past gevent's monitor
    # threshold on a busy host); the same values as get_value_at_percentile, one by one.
    values = percentile_values(hist, [p * 100 for p in LOCUST_PERCENTILES])
    row = {f"{PERCENTILE_KEY}{p}": values[p * 100] / 1000 for p in LOCUST_PERCENTILES}
    row["median_response_time"] = values[50.0] / 1000
    row["avg_response_time"] = mean_value(hist) / 1000
    row["min_response_time"] = hist.get_min_value() / 1000
    row["max_response_time"] = hist.get_max_value() / 1000
    return row


class StatsCache:
    """:func:`hdr_figures` of the controller's totals, recomputed in gevent's thread pool
    whenever another interval has been counted (and once more when the run has ended)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.figures: dict[str, dict[str, float]] = {}
        self._key: tuple[Any, ...] | None = None
        self._busy = False

    def apply(self, rows: list[dict[str, Any]]) -> None:
        snapshot = self.controller.snapshot()
        key = (snapshot.get("run_id"), snapshot.get("intervals"), snapshot.get("status"))
        if key != self._key and not self._busy:
            self._busy, self._key = True, key
            gevent.spawn(self._refresh)
        for row in rows:
            total = row.get("name") == "Aggregated" and not row.get("method")
            figures = self.figures.get("Aggregated" if total else str(row.get("name")))
            if figures:
                row.update({k: v for k, v in figures.items() if k in row})

    def _refresh(self) -> None:
        try:
            totals = self.controller.totals()
            self.figures = gevent.get_hub().threadpool.apply(hdr_figures, (totals,))
        finally:
            self._busy = False


def extend_web_ui(
    environment: Environment,
    controller: Controller,
    guard: PageGuard,
    login: tuple[str, str] | None = None,
) -> None:
    """Add the tabs, routes and (with ``login``) the login check to ``environment.web_ui``;
    ``guard``'s token goes into the pages."""
    web_ui = environment.web_ui
    assert web_ui is not None and web_ui.app is not None
    app = web_ui.app
    correlation = CorrelationCache()
    figures = StatsCache(controller)
    clock = SampleClock()
    web_ui.template_args.update(_template_args())

    def storage() -> list[dict[str, Any]]:
        samples = controller.samples()
        live = controller.snapshot().get("status") == "running"
        return storage_rows(samples, live=live, age_s=clock.age_s(samples))

    def extended() -> list[dict[str, Any]]:
        snapshot = controller.snapshot()
        return [
            {"key": "storage", "data": storage()},
            {"key": "correlation", "data": correlation.get(snapshot.get("bundle"))},
            {"key": "run", "data": run_rows(snapshot)},
        ]

    @app.after_request
    def add_extended_stats(response: Response) -> Response:
        if request.path.endswith(STATS_PATH) and response.status_code == 200 and response.is_json:
            body = response.get_json()
            body["extended_stats"] = extended()
            _unround_min_max(environment, body.get("stats") or [])
            figures.apply(body.get("stats") or [])
            response.set_data(json.dumps(body))
        elif (
            request.path == "/" and response.status_code == 200 and response.mimetype == "text/html"
        ):
            page = guard.with_token(response.get_data(as_text=True))
            response.set_data(page.replace("</body>", f"{PAGE_SCRIPT}\n</body>", 1))
            response.headers["Cache-Control"] = "no-store"  # the token is this process's
        return response

    _add_routes(
        app, web_ui.auth_required_if_enabled, controller, correlation, storage, guard, figures
    )
    from sim.locust.exposition import add_metrics_route

    add_metrics_route(app, controller, login)
    if login is not None:
        _setup_login(environment, login)


def _template_args() -> dict[str, Any]:
    """The tabs, their tables' columns and the downloads, as Locust's template reads them."""
    figures = [{"key": k, "title": t} for k, t in FIGURE_COLUMNS]
    return {
        "extended_tabs": [{"key": key, "title": title} for key, title in TABS],
        "extended_tables": [
            {"key": "storage", "structure": [{"key": k, "title": t} for k, t in storage_columns()]},
            {"key": "correlation", "structure": figures},
            {"key": "run", "structure": figures},
        ],
        "extended_csv_files": [
            {"href": f"./dbsim/run/{name}", "title": f"dbsim {name}: {what} (latest run)"}
            for name, what in DOWNLOADS.items()
        ],
    }


def _add_routes(
    app: Any,
    protect: Any,
    controller: Controller,
    correlation: CorrelationCache,
    storage: Any,
    guard: PageGuard,
    figures: StatsCache,
) -> None:
    """``/dbsim/status`` (the three tabs as JSON), the live page's routes
    (:func:`~sim.locust.live_routes.add_live_routes`), ``/dbsim/run/<name>`` (downloads) and
    ``/dbsim/static/<name>`` (the page's own script and style, served from this package)."""

    @app.route("/dbsim/status")
    @protect
    def dbsim_status() -> Response:
        snapshot = controller.snapshot()
        return jsonify(
            run={**snapshot, "status_text": status_text(snapshot)},
            storage=storage(),
            correlation=correlation.get(snapshot.get("bundle")),
        )

    add_live_routes(app, protect, controller, guard, figures, run_rows, SampleClock())

    @app.route("/dbsim/run/<name>")
    @protect
    def dbsim_download(name: str) -> Response:
        return download(controller.snapshot().get("bundle"), name)

    @app.route("/dbsim/static/<path:name>")
    @protect
    def dbsim_static(name: str) -> Response:
        return send_from_directory(STATIC, name)


class _WebUser(UserMixin):
    def __init__(self, name: str) -> None:
        self.id = name


def _setup_login(environment: Environment, login: tuple[str, str]) -> None:
    web_ui = environment.web_ui
    assert web_ui is not None and web_ui.app is not None
    app = web_ui.app
    user, password = login
    # A fresh key per process: a restart logs everyone out, and no secret is stored anywhere.
    app.config["SECRET_KEY"] = secrets.token_hex(32)
    web_ui.login_manager.user_loader(lambda name: _WebUser(name) if name == user else None)
    web_ui.auth_args = {"username_password_callback": "./dbsim/login"}

    @app.route("/dbsim/login", methods=["POST"])
    def dbsim_login() -> WerkzeugResponse:
        given_user = request.form.get("username", "")
        given_password = request.form.get("password", "")
        user_ok = hmac.compare_digest(given_user.encode(), user.encode())
        password_ok = hmac.compare_digest(given_password.encode(), password.encode())
        if user_ok and password_ok:
            login_user(_WebUser(user))
            return redirect(url_for("locust.index"))
        log.warning("web UI: failed login from %s", request.remote_addr)
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))
