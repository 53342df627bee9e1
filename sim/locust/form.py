"""The start form: the workload's main parameters as Locust custom arguments, and back.

Locust shows custom arguments (added on ``init_command_line_parser`` with
``include_in_web_ui=True``) under "Custom parameters" in its start form, pre-filled with their
defaults, and writes what the user typed back into ``environment.parsed_options``. Sessions
are Locust's own "Number of users"; this module adds the rest — measured duration, warm-up,
target rate (0: closed loop), target kind, and the workload's main knobs (read/update/scan
percentages, work unit, rows per operation) when the workload has them — with the scenario's
values as defaults. :func:`scenario_from_options` turns the submitted form into the scenario
that runs, validated like any scenario (a bad value becomes the usual one-line error).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import locust

from sim import registry
from sim.config.resolve import resolved_dict, validate
from sim.config.scenario import ScenarioBase
from sim.errors import ConfigError
from sim.live.start_form import MAIN_PARAMETERS


@dataclass(frozen=True)
class FormField:
    """One custom argument: its name in the form and where it lands in the scenario."""

    dest: str
    help: str
    type: Callable[[str], Any]
    default: Any
    choices: tuple[str, ...] | None = None


def form_fields(scenario: ScenarioBase) -> list[FormField]:
    """The form's fields for ``scenario``, with its values as defaults."""
    data = resolved_dict(scenario)
    load = data["load"]
    kinds = tuple(sorted(k for k, e in registry.targets().items() if e.factory is not None))
    fields = [
        FormField("duration_s", "measured seconds after warm-up", float, load["duration_s"]),
        FormField("warmup_s", "seconds run before measuring", float, load["warmup_s"]),
        FormField(
            "rate_ops_s",
            "open-loop target ops/s over all sessions; 0: closed loop",
            float,
            float(load["rate_ops_s"] or 0.0),
        ),
        FormField("target_kind", "system under test", str, data["target"]["kind"], kinds),
    ]
    parameters = data["workload"].get("parameters", {})
    for name in MAIN_PARAMETERS:
        if name in parameters and isinstance(parameters[name], int | float):
            kind = type(parameters[name])
            fields.append(
                FormField(name, f"workload {data['workload']['name']}", kind, parameters[name])
            )
    return fields


def add_form_arguments(parser: argparse.ArgumentParser, scenario: ScenarioBase) -> None:
    """Add the form's fields to a Locust parser (the ``init_command_line_parser`` listener)."""
    for field in form_fields(scenario):
        # On the parser itself: only LocustArgumentParser.add_argument (not a group's)
        # understands include_in_web_ui.
        parser.add_argument(
            f"--{field.dest.replace('_', '-')}",
            dest=field.dest,
            type=field.type,
            default=field.default,
            choices=field.choices,
            help=field.help,
            include_in_web_ui=True,  # LocustArgumentParser's extension
        )


_registered: list[Callable[..., None]] = []


def register_form(scenario_source: Callable[[], ScenarioBase]) -> None:
    """Register the form on Locust's global parser hook, replacing an earlier registration
    (the hook is process-wide). ``scenario_source`` gives the scenario whose values are the
    defaults (the web UI re-reads them on every page load)."""

    def on_parser(parser: argparse.ArgumentParser, **_: Any) -> None:
        add_form_arguments(parser, scenario_source())

    hook = locust.events.init_command_line_parser
    while _registered:
        hook.remove_listener(_registered.pop())
    hook.add_listener(on_parser)
    _registered.append(on_parser)


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    *parents, last = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value


def scenario_from_options(base: ScenarioBase, options: Any, users: int) -> ScenarioBase:
    """The scenario to run: ``base`` with the submitted form applied and ``users`` sessions.
    Raises :class:`~sim.errors.ScenarioError` (one line per bad field) like any scenario."""
    data = resolved_dict(base)
    values = vars(options) if options is not None else {}
    for field in form_fields(base):
        if field.dest not in values or values[field.dest] is None:
            continue
        value = field.type(values[field.dest])
        if field.dest == "target_kind":
            if value != data["target"]["kind"]:
                data["target"] = {"kind": value}  # another kind: its defaults
        elif field.dest == "rate_ops_s":
            if value > 0:
                _set(data, "load.mode", "open")
                _set(data, "load.rate_ops_s", value)
                _set(data, "load.think", None)
            else:
                _set(data, "load.mode", "closed")
                _set(data, "load.rate_ops_s", None)
        elif field.dest in ("duration_s", "warmup_s"):
            _set(data, f"load.{field.dest}", value)
        else:
            _set(data, f"workload.parameters.{field.dest}", value)
    _set(data, "load.sessions", users)
    return validate(data)


def check_locust_scenario(scenario: ScenarioBase) -> None:
    """Refuse what a Locust-driven run cannot honour: a sweep (its steps change the load and
    stop at the first breach, judged step by step on one engine's intervals) and per-step
    session counts (Locust decides how many sessions run, and where)."""
    if scenario.load.sweep is not None:
        raise ConfigError(
            "load.sweep: sweeps do not run under Locust (dbsim run --workers, dbsim ui); "
            "run the sweep with dbsim run without --workers"
        )
    for index, step in enumerate(scenario.load.steps):
        if step.sessions is not None:
            raise ConfigError(
                f"load.steps[{index}].sessions: with Locust the session count is Locust's user "
                "count; remove per-step sessions (steps may still change rate_ops_s and lab)"
            )


def share_scenario(data: dict[str, Any], sessions: int, share: float) -> dict[str, Any]:
    """A worker's part of a run: ``sessions`` sessions and ``share`` of every target rate."""
    out = {**data, "load": dict(data["load"])}
    load = out["load"]
    load["sessions"] = sessions
    if load.get("rate_ops_s"):
        load["rate_ops_s"] = load["rate_ops_s"] * share
    load["steps"] = [
        {**step, "rate_ops_s": step["rate_ops_s"] * share} if step.get("rate_ops_s") else step
        for step in load.get("steps") or []
    ]
    return out
