"""dbsim's own start form (the web UI's, on ``/dbsim/live``): what to run, validated like
``dbsim validate``. Outside :mod:`sim.locust` (whose import patches sockets with gevent), so
it can be used and tested without Locust; the routes are :mod:`sim.locust.start`.

``GET /dbsim/form?target.kind=…&workload.name=…`` describes the form for that target kind and
workload: the target (kind, then host, port, database, user, password *variable*, or path —
whichever the kind has), the workload and its main parameters and data size, and the load
(sessions, warm-up, duration, open-loop rate), each pre-filled with the scenario's value (or
the kind's or workload's default when another one is picked) and its help text.

``POST /dbsim/start`` takes the filled form. Each non-empty value is read as ``--set`` reads
its value (:func:`sim.config.resolve.parse_value`) and put at its scenario path; the scenario is
then validated by :func:`sim.config.resolve.validate` and checked by
:func:`sim.run.runner.check_before_run`, as ``dbsim validate`` does, so a bad value gets the
CLI's own one-line message (:mod:`sim.field_errors`), shown under the field it names. A valid
form starts Locust with ``sessions`` users — the same ``runner.start`` Locust's own form calls —
and the controller runs exactly the submitted scenario (``Controller.next_scenario``).

No password is ever taken: the form names the environment variable holding it
(``password_env``), as scenario files do; nothing submitted is logged or echoed back but the
validation lines, which never carry a secret (sim.field_errors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from sim import registry
from sim.config.resolve import parse_value, resolved_dict, validate
from sim.config.scenario import ScenarioBase
from sim.errors import ConfigError, ScenarioError

if TYPE_CHECKING:
    from sim.live.allowance import Allowance

#: Workload parameters shown in the forms when the workload has them, in this order.
MAIN_PARAMETERS = ("read_pct", "update_pct", "scan_pct", "work_unit", "rows_select", "rows_update")
#: The target settings the form shows, when the kind has them, in this order.
TARGET_FIELDS = ("host", "port", "database", "path", "user", "password_env")
#: The parameter that says how much data a workload loads (the first one it has).
DATA_SIZE = ("scale", "database_size", "job_sets")
LOAD_FIELDS = (
    ("sessions", "sessions (= Locust users); empty: the workload's default"),
    ("warmup_s", "seconds run before measuring"),
    ("duration_s", "measured seconds after warm-up"),
    ("rate_ops_s", "open-loop target ops/s over all sessions; empty or 0: closed loop"),
)
TARGET_HELP = {
    "path": "empty: a temporary database (sqlite), deleted after the run",
    "password_env": "the NAME of an environment variable holding the password (never the "
    "password itself)",
}
GENERAL = "(scenario)"
#: The SLO fields: (form name, label, help, the Slo field it fills, its scale from the form's
#: unit). One latency objective for an operation (``slo.op``, ``*``: each) and one storage
#: objective for the busiest device; empty: no such objective.
SLO_FIELDS = (
    ("slo.op", "SLO operation", "the operation the p99 target applies to; * (default): each"),
    ("slo.p99_ms", "SLO p99 ≤ (ms)", "99th percentile latency target, ms; empty: none"),
    ("slo.await_ms", "SLO device await ≤ (ms)", "the busiest device's mean await, ms"),
    ("slo.iops_min", "SLO device IOPS ≥", "the busiest device's mean IOPS"),
)
SLO_LIMITS = {"slo.p99_ms": ("p99_us_max", 1000.0), "slo.await_ms": ("await_ms_max", 1.0),
              "slo.iops_min": ("iops_min", 1.0)}  # fmt: skip


@dataclass(frozen=True)
class Field:
    """One input of the form: its scenario path, label, current value and choices."""

    name: str
    label: str
    value: str
    help: str = ""
    choices: tuple[str, ...] = ()
    group: str = "load"


class FormErrors(Exception):
    """The submitted form is not a valid scenario: ``lines`` as ``dbsim validate`` prints them
    (without ``error: ``), ``by_field`` the same lines under the form field each names."""

    def __init__(self, lines: list[str], fields: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.by_field: dict[str, list[str]] = {}
        for line in lines:
            self.by_field.setdefault(field_of(line, fields), []).append(line)


def field_of(line: str, fields: list[str]) -> str:
    """The form field a ``path: message`` line is about (the longest that is its path or a
    parent of it), or ``(scenario)`` when the form has none."""
    path = line.split(": ", 1)[0]
    best = ""
    for name in fields:
        if (path == name or path.startswith(name + ".")) and len(name) > len(best):
            best = name
    return best or GENERAL


def _text(value: Any) -> str:
    if value is None or value is PydanticUndefined:
        return ""
    return str(value)


def _model_defaults(model: type[BaseModel]) -> dict[str, Any]:
    return {
        n: f.default for n, f in model.model_fields.items() if f.default is not PydanticUndefined
    }


def _help(model: type[BaseModel], name: str) -> str:
    field = model.model_fields.get(name)
    return TARGET_HELP.get(name) or (field.description if field and field.description else "")


def form_fields(
    base: ScenarioBase, kind: str | None = None, workload: str | None = None
) -> list[Field]:
    """The form for ``base`` with target ``kind`` and ``workload`` (default: the scenario's)."""
    data = resolved_dict(base)
    kind = kind or data["target"]["kind"]
    workload = workload or data["workload"]["name"]
    kinds = tuple(sorted(k for k, e in registry.targets().items() if e.factory is not None))
    entry = registry.targets().get(kind)
    fields = [Field("target.kind", "target kind", kind, "system under test", kinds, "target")]
    if entry is not None:
        values = (
            data["target"]
            if kind == data["target"]["kind"]
            else _model_defaults(entry.settings_model)
        )
        model = entry.settings_model
        fields += [
            Field(f"target.{n}", n, _text(values.get(n)), _help(model, n), group="target")
            for n in TARGET_FIELDS
            if n in model.model_fields
        ]
    names = tuple(sorted(registry.workloads()))
    fields.append(Field("workload.name", "workload", workload, "", names, "workload"))
    wl = registry.workloads().get(workload)
    if wl is not None:
        model = wl.workload_class.parameters_model
        same = workload == data["workload"]["name"]
        params = data["workload"].get("parameters", {}) if same else _model_defaults(model)
        size = next((n for n in DATA_SIZE if n in model.model_fields), None)
        shown = [n for n in MAIN_PARAMETERS if n in model.model_fields] + ([size] if size else [])
        fields += [
            Field(
                f"workload.parameters.{n}",
                n,
                _text(params.get(n)),
                _help(model, n),
                group="workload",
            )
            for n in shown
        ]
    load = data["load"]
    fields += [Field(f"load.{n}", n, _text(load.get(n)), h) for n, h in LOAD_FIELDS]
    slo_values = _slo_values(data.get("slos") or [])
    fields += [Field(n, label, slo_values.get(n, ""), h, group="slo") for n, label, h in SLO_FIELDS]
    return fields


def _slo_values(slos: list[Any]) -> dict[str, str]:
    """The SLO fields pre-filled from the scenario's first latency and storage objectives."""
    out: dict[str, str] = {}
    for slo in slos:
        if not isinstance(slo, dict):
            continue
        if slo.get("p99_us_max") is not None and "slo.p99_ms" not in out:
            out["slo.p99_ms"] = f"{float(slo['p99_us_max']) / 1000:g}"
            out["slo.op"] = str(slo.get("op") or "*")
        for name, (key, _) in SLO_LIMITS.items():
            if key != "p99_us_max" and slo.get(key) is not None and name not in out:
                out[name] = f"{float(slo[key]):g}"
    return out


#: An SLO the form's fields can show in full (these keys only): the fields replace it.
SHOWN_SLO_KEYS = frozenset({"name", "op", "device", "p99_us_max", "await_ms_max", "iops_min"})


def _shown(slo: Any) -> bool:
    """Whether the form's fields show ``slo`` in full (its set keys are all theirs)."""
    return isinstance(slo, dict) and {k for k, v in slo.items() if v is not None} <= SHOWN_SLO_KEYS


def _apply_slos(data: dict[str, Any], values: Mapping[str, str]) -> list[str]:
    """The SLO fields as the scenario's ``slos``: they replace the objectives the form shows
    (pre-filled from them), so emptying them removes those; others (p95, errors, device
    percentiles) stay. A body without any SLO field (a script's) leaves the SLOs as they are.
    Problems are named by field."""
    if not any(n in values for n, _, _ in SLO_FIELDS):
        return []
    filled = {n: str(values.get(n, "")).strip() for n, _, _ in SLO_FIELDS}
    problems: list[str] = []
    limits: dict[str, float] = {}
    for name, (key, scale) in SLO_LIMITS.items():
        if not filled[name]:
            continue
        try:
            number = float(filled[name])
        except ValueError:
            number = -1.0
        if not (number > 0 and number < 1e12):
            problems.append(f"{name}: a number above 0, got {filled[name][:40]!r}")
            continue
        limits[key] = number * scale
    latency = {k: v for k, v in limits.items() if k == "p99_us_max"}
    storage = {k: v for k, v in limits.items() if k != "p99_us_max"}
    slos = [s for s in data.get("slos") or [] if not _shown(s)]
    if latency:
        slos.append({"name": "form", "op": filled["slo.op"] or "*", **latency})
    if storage:
        slos.append({"name": "form", **storage})
    data["slos"] = slos
    return problems


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    *parents, last = dotted.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[last] = value


def scenario_data(
    base: ScenarioBase, values: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """The scenario's data with the submitted ``values`` applied, and the form's field names.
    :class:`FormErrors` for a name that is no field of the form and for a value no field can
    take (a number of 5,000 digits, a YAML tag, deep nesting), each under its field."""
    data = resolved_dict(base)
    kind = str(values.get("target.kind") or data["target"]["kind"])
    workload = str(values.get("workload.name") or data["workload"]["name"])
    fields = [f.name for f in form_fields(base, kind, workload)]
    unknown = [name for name in values if name not in fields]
    problems = [
        f"{name}: not a field of this form (target kind {kind}, workload {workload}; "
        "GET /dbsim/form lists them)"
        for name in unknown
    ]
    if kind != data["target"]["kind"]:
        data["target"] = {"kind": kind}  # another kind: its defaults
    if workload != data["workload"]["name"]:
        data["workload"] = {"name": workload}
    problems += _apply_slos(data, values)
    for name in fields:
        text = str(values.get(name, "")).strip()
        if name in ("target.kind", "workload.name") or name.startswith("slo."):
            continue
        if not text:
            if name.startswith("target."):
                data["target"].pop(name.split(".", 1)[1], None)  # its default
            elif name == "load.sessions":
                data["load"]["sessions"] = None
            continue
        try:
            _put(data, name, parse_value(text, name))
        except ConfigError as exc:  # a bound parse_value enforces; the line names the field
            problems.append(str(exc))
    if problems:
        raise FormErrors(problems, fields + unknown)
    rate = data["load"].get("rate_ops_s")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
        data["load"].update(mode="open", think=None)
    elif rate in (0, 0.0, None) and data["load"].get("rate_iops") is None:
        data["load"].update(mode="closed", rate_ops_s=None)
    return data, fields


def scenario_from_form(
    base: ScenarioBase,
    values: Mapping[str, str],
    extra_check: Callable[[ScenarioBase], None] | None = None,
    allowance: Allowance | None = None,
) -> tuple[ScenarioBase, int]:
    """The scenario the form asks for and its session count; :class:`FormErrors` when
    ``dbsim validate`` would refuse it (the same lines), or ``extra_check`` does (what the
    caller cannot run, as a ConfigError), or it uses a host or password variable beyond
    ``allowance`` (checked before any variable is read; None: no limit, as for a scenario
    file)."""
    from sim.run.runner import build_target, build_workload, check_before_run

    data, fields = scenario_data(base, values)
    beyond = allowance.problems(data["target"]) if allowance is not None else []
    try:
        scenario = validate(data)
        if beyond:
            raise FormErrors(beyond, fields)
        check_before_run(scenario)
        if extra_check is not None:
            extra_check(scenario)
    except ScenarioError as exc:
        raise FormErrors(beyond + exc.problems, fields) from None
    except ConfigError as exc:
        raise FormErrors(str(exc).splitlines(), fields) from None
    sessions = scenario.load.sessions
    if not sessions:
        sessions = build_workload(scenario, build_target(scenario)).default_sessions()
    return scenario, sessions
