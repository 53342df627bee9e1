"""The web UI's start form routes: ``GET /dbsim/form`` and ``POST /dbsim/start``
(:mod:`sim.live.start_form` describes and validates the form, :mod:`sim.live.form_body` reads
the body, :mod:`sim.live.allowance` limits its hosts and password variables; who may post at
all is :mod:`sim.locust.guard`'s)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import gevent
from flask import Response, jsonify, request
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

from sim.errors import ConfigError
from sim.live.allowance import Allowance
from sim.live.form_body import BodyError, form_values
from sim.live.start_form import GENERAL, FormErrors, form_fields, scenario_from_form
from sim.locust.form import check_locust_scenario
from sim.locust.guard import REQUEST_FIELD, read_body
from sim.locust.roles import Controller


def add_start_routes(
    app: Any,
    protect: Callable[..., Any],
    environment: Environment,
    controller: Controller,
    allowance: Allowance,
) -> None:
    """``GET /dbsim/form`` (the form's fields) and ``POST /dbsim/start`` (validate and start
    a run using only what ``allowance`` allows)."""
    base = controller.scenario

    @app.route("/dbsim/form")
    @protect
    def dbsim_form() -> Response:
        kind, workload = request.args.get("target.kind"), request.args.get("workload.name")
        try:
            fields = form_fields(base(), kind, workload)
        except ConfigError as exc:
            return jsonify(fields=[], errors={GENERAL: [str(exc)]})
        return jsonify(fields=[asdict(f) for f in fields])

    @app.route("/dbsim/start", methods=["POST"])
    @protect
    def dbsim_start() -> tuple[Response, int]:
        runner = environment.runner
        busy = runner is None or runner.state in (STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING)
        if busy or controller.snapshot().get("status") in ("running", "finishing"):
            message = "a run is going: stop it (or let it finish) before starting another"
            return jsonify(ok=False, errors={GENERAL: [message]}), 409
        try:
            values = form_values(request.mimetype, read_body())
            scenario, sessions = scenario_from_form(
                base(), values, check_locust_scenario, allowance
            )
        except BodyError as exc:
            return jsonify(ok=False, errors={REQUEST_FIELD: [str(exc)]}), 400
        except FormErrors as exc:
            return jsonify(ok=False, errors=exc.by_field), 400
        assert runner is not None
        controller.next_scenario = scenario
        if environment.parsed_options is not None:
            environment.parsed_options.num_users = sessions
        gevent.spawn(runner.start, sessions, float(sessions))  # what Locust's own form does
        return jsonify(ok=True, sessions=sessions), 200
