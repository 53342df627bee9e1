"""``/metrics`` on the web UI's port: the run's figures for Prometheus (docs/prometheus.md).

The same :class:`sim.exporter.RunExporter` as ``dbsim run --metrics-port``, attached to each
engine this process builds (a LocalRunner's); on a master, fed the merged intervals of each
run (sim.locust.merge), whose host-local storage gauges carry a ``host`` label. With ``--web-login`` the route wants the login: a browser's session, or the
same user and password as HTTP Basic authentication, which is what Prometheus'
``basic_auth`` scrape option sends (it cannot fill a login form).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Response, request
from flask_login import current_user

from sim.config.scenario import ScenarioBase
from sim.locust.master import MasterController
from sim.locust.merge import RunMerger
from sim.locust.roles import Controller, LocalController

METRICS_PATH = "/metrics"


def add_metrics_route(app: Any, controller: Controller, login: tuple[str, str] | None) -> Any:
    """Register ``/metrics`` on the UI's Flask ``app``; returns the exporter."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from sim.exporter import RunExporter, basic_auth_ok, run_info

    exporter = RunExporter()
    if isinstance(controller, LocalController):

        def attach(engine: Any, scenario: ScenarioBase, bundle: Path | None) -> None:
            exporter.attach(engine, run_info(scenario, bundle))

        controller.host.engine_listeners.append(attach)
    elif isinstance(controller, MasterController):
        # A distributed run: the merged intervals, each host's storage labelled with its host.
        def begin(merger: RunMerger) -> None:
            sessions = sum(w.sessions for w in merger.workers.values())
            exporter.start(run_info(merger.spec, merger.bundle), sessions)
            merger.interval_listeners.append(exporter.on_interval)
            merger.state_listeners.append(exporter.on_state)

        controller.run_listeners.append(begin)

    @app.route(METRICS_PATH)
    def dbsim_metrics() -> Response:
        if login is not None and not (
            current_user.is_authenticated
            or basic_auth_ok(request.headers.get("Authorization"), login)
        ):
            return Response("login required\n", 401, {"WWW-Authenticate": 'Basic realm="dbsim"'})
        return Response(generate_latest(exporter.registry), mimetype=CONTENT_TYPE_LATEST)

    return exporter
