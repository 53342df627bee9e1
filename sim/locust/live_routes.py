"""The live page's routes: ``/dbsim/live`` (the page, with the guard's token),
``/dbsim/live/data`` (everything it shows: the run, the bundle's view, the Run rows, and the
strip of latency beside the limiting device with the SLOs and the cache check) and
``/dbsim/live/now`` (the strip alone, for the bar on Locust's own page: no charts, no
analysis). All read only, behind the web UI's login when it has one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Response, jsonify

from sim.bundle.summary import status_text
from sim.live.now import live_extras
from sim.live.phase import phase_of
from sim.locust.guard import PageGuard
from sim.locust.live import LiveCache, NowCache
from sim.locust.roles import Controller

STATIC = Path(__file__).with_name("static")


def read_ops(controller: Controller) -> frozenset[str]:
    """The running workload's reading operations (a local run's; none for a master's)."""
    prepared = getattr(getattr(controller, "host", None), "prepared", None)
    workload = getattr(prepared, "workload", None)
    try:
        return frozenset(workload.read_operations()) if workload is not None else frozenset()
    except Exception:  # a workload mid-teardown: no cache check this poll
        return frozenset()


def add_live_routes(
    app: Any,
    protect: Any,
    controller: Controller,
    guard: PageGuard,
    figures: Any,
    run_rows: Callable[[dict[str, Any]], list[dict[str, Any]]],
    clock: Any,
) -> None:
    """The three routes; ``figures``: the web UI's statistics cache (the measured window's
    HDR percentiles), ``run_rows``: the Run tab's rows, ``clock``: the samples' age."""
    live, light = LiveCache(), NowCache()

    @app.route("/dbsim/live")
    @protect
    def dbsim_live() -> Response:
        page = guard.with_token((STATIC / "live.html").read_text(encoding="utf-8"))
        return Response(page, mimetype="text/html", headers={"Cache-Control": "no-store"})

    @app.route("/dbsim/live/data")
    @protect
    def dbsim_live_data() -> Response:
        snapshot = controller.snapshot()
        running = snapshot.get("status") == "running"
        samples = controller.samples()
        phase = str(phase_of(snapshot).get("phase") or "")
        view = live.get(snapshot.get("bundle"), running, phase)
        figures.apply([])  # the measured window's HDR percentiles, refreshed off the hub
        return jsonify(
            run={**snapshot, "status_text": status_text(snapshot)},
            view=view,
            rows=run_rows(snapshot),
            sample_age_s=round(clock.age_s(samples), 1) if samples else None,
            **live_extras(view, figures.figures, running=running, read_ops=read_ops(controller)),
        )

    @app.route("/dbsim/live/now")
    @protect
    def dbsim_live_now() -> Response:
        snapshot = controller.snapshot()
        running = snapshot.get("status") == "running"
        phase = str(phase_of(snapshot).get("phase") or "")
        view = light.get(snapshot.get("bundle"), running, phase)
        figures.apply([])
        return jsonify(live_extras(view, figures.figures, running=running))
