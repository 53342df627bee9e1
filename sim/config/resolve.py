"""Resolving a scenario: the file read safely, ``DBSIM_*`` environment and CLI overrides applied
in that precedence, the whole validated once against the model built from the registry
(:func:`scenario_model`), and every invalid field reported as one ``path: what is wrong`` line.
The models themselves are :mod:`sim.config.scenario`, a leaf that imports nothing of dbsim.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationError, create_model, model_validator

from sim import registry, safeio, safeyaml
from sim.config.scenario import (
    ENV_PREFIX,
    MAX_DEPTH,
    MAX_VALUES,
    CollectorSettings,
    ScenarioBase,
    Slo,
    StrictModel,
)
from sim.errors import ConfigError, ScenarioError
from sim.field_errors import error_lines, short_value
from sim.pathcheck import path_problems
from sim.secrets import LITERAL_SECRET_KEYS


class RegisteredCollectorSettings(CollectorSettings):
    """CollectorSettings that also read a collector's earlier keys (registry entries'
    ``legacy_keys``, e.g. ``collectors.block_devices``) into that collector's section."""

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        """Earlier keys (``collectors.block_devices``) into their collector's section."""
        if not isinstance(data, dict):
            return data
        moved = dict(data)
        for entry in registry.collectors().values():
            for old, option in entry.legacy_keys.items():
                section = moved.get(entry.source) or {}
                # Given both ways, the old key stays and is refused as unknown.
                if old in moved and isinstance(section, dict) and option not in section:
                    moved[entry.source] = {**section, option: moved.pop(old)}
        return moved


@cache
def collector_settings_model() -> type[CollectorSettings]:
    """CollectorSettings with one field per registered collector that has options: its
    options model, defaulted; optional (``null``) when the model has required fields."""
    fields: dict[str, Any] = {}
    for entry in registry.collectors().values():
        model = entry.options_model
        if model is None:
            continue
        if any(f.is_required() for f in model.model_fields.values()):
            fields[entry.source] = (model | None, Field(default=None, description=entry.summary))
        else:
            fields[entry.source] = (model, Field(default_factory=model, description=entry.summary))
    return create_model(
        "CollectorSettings",
        __base__=RegisteredCollectorSettings,
        __doc__=CollectorSettings.__doc__,
        **fields,
    )


@cache
def scenario_model() -> type[ScenarioBase]:
    """The Scenario model, with target and workload unions built from the registry."""
    target_models = tuple(entry.settings_model for entry in registry.targets().values())
    workload_models = []
    for entry in registry.workloads().values():
        spec = create_model(
            f"{entry.class_name}Spec",
            __base__=StrictModel,
            __doc__=entry.summary,
            name=(Literal[entry.name], ...),  # type: ignore[arg-type]
            parameters=(
                entry.parameters_model,
                Field(default_factory=entry.parameters_model),
            ),
        )
        workload_models.append(spec)
    target_union = Annotated[Union[target_models], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007
    if len(workload_models) == 1:
        workload_type: Any = workload_models[0]
    else:
        workload_type = Annotated[Union[tuple(workload_models)], Field(discriminator="name")]  # noqa: UP007
    default_target = registry.targets()["sqlite"].settings_model
    model = create_model(
        "Scenario",
        __base__=ScenarioBase,
        target=(
            target_union,
            Field(
                default_factory=default_target,
                description="The system under test; `kind` picks the driver (default: sqlite).",
            ),
        ),
        workload=(
            workload_type,
            Field(description="What load is applied; `name` picks the workload."),
        ),
        collectors=(
            collector_settings_model(),
            Field(
                default_factory=collector_settings_model(),
                description="Storage collectors sampled during the run.",
            ),
        ),
    )
    return model


def json_schema() -> dict[str, Any]:
    schema = scenario_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "dbsim scenario"
    return schema


# --------------------------------------------------------------------------- error lines


# --------------------------------------------------------------------------- loading


def load_yaml(text: str, what: str = "(text)", *, marks: bool = True) -> Any:
    """YAML text as plain data by :func:`sim.safeyaml.load_yaml` (core tags only, duplicate keys
    refused, nesting, expansion and numbers bounded)."""
    return safeyaml.load_yaml(
        text, what=what, max_depth=MAX_DEPTH, max_values=MAX_VALUES, marks=marks
    )


#: A top-level key that looks like one of these is a scenario section (or a typo of one);
#: a file none of whose keys does is not a scenario, and its keys are not printed back.
_SECTION_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,40}$")


def read_scenario_file(path: Path) -> dict[str, Any]:
    """The scenario file's mapping. Only a regular UTF-8 file below
    :data:`sim.safeio.MAX_SCENARIO_BYTES` is read (a FIFO or ``/dev/zero`` is refused before
    a byte is read); a file that is not a mapping of sections is refused without showing its
    content (``dbsim validate /etc/shadow`` printed the file's lines as unknown keys)."""
    try:
        text = safeio.read_text_file(
            path, what="scenario file", max_bytes=safeio.MAX_SCENARIO_BYTES
        )
        data = load_yaml(text, what=str(path))
    except ScenarioError:
        raise
    except ConfigError as exc:  # one type for every scenario problem, as callers expect
        raise ScenarioError(str(exc).splitlines()) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScenarioError(
            [f"{path}: a scenario is a mapping of sections, got {type(data).__name__}"]
        )
    sections = set(ScenarioBase.model_fields) | {"target", "workload"}
    if data and not any(isinstance(k, str) and k in sections for k in data):
        strange = sum(1 for k in data if not (isinstance(k, str) and _SECTION_LIKE.match(k)))
        if strange:
            raise ScenarioError(
                [
                    f"{path}: not a scenario: none of its {len(data)} top-level keys is a "
                    f"section ({', '.join(sorted(sections))}); its content is not shown"
                ]
            )
    return data


def _set_path(data: dict[str, Any], dotted: str, value: Any, origin: str) -> None:
    keys = dotted.split(".")
    if any(not k for k in keys):
        raise ScenarioError([f"{origin}: {dotted!r} is not a dotted field path"])
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ScenarioError([f"{origin}: {'.'.join(keys[:-1])} is not a section"])
        node = child
    node[keys[-1]] = value


def parse_value(text: str, origin: str = "value") -> Any:
    """A ``--set`` or ``DBSIM_*`` value: YAML, or the text itself when it is not YAML (which
    the field then refuses). A bound it exceeds (a number of 5,000 digits, deep nesting, a
    duplicate key, a tag) is refused here, naming ``origin``."""
    try:
        return load_yaml(text, what=origin, marks=False)
    except safeio.InputLimitError:
        raise
    except ConfigError:
        return text


def env_overrides(environ: Mapping[str, str]) -> list[tuple[str, Any]]:
    """``DBSIM_SECTION__FIELD=value`` pairs that name scenario fields."""
    sections = set(ScenarioBase.model_fields) | {"target", "workload"}
    found = []
    for key, raw in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        dotted = key[len(ENV_PREFIX) :].lower().replace("__", ".")
        if dotted.split(".")[0] in sections:
            found.append((dotted, parse_value(raw, f"environment {key}")))
    return found


DURATION_FIELD = "load.duration_s"


def default_scenario_data() -> dict[str, Any]:
    """The embedded default: SLOB-like on a fresh SQLite database (examples/quickstart.yaml)."""
    return {"name": "quickstart", "target": {"kind": "sqlite"}, "workload": {"name": "slob"}}


def resolve(
    path: Path | None,
    overrides: list[tuple[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ScenarioBase:
    """Read, merge (CLI > env > file > defaults) and validate a scenario."""
    data = read_scenario_file(path) if path is not None else default_scenario_data()
    duration_from: list[str] = []
    for dotted, value in env_overrides(os.environ if environ is None else environ):
        origin = f"environment {ENV_PREFIX}{dotted.upper().replace('.', '__')}"
        _set_path(data, dotted, value, origin)
        if dotted == DURATION_FIELD:
            duration_from.append(origin)
    for dotted, value in overrides or []:
        _set_path(data, dotted, value, f"--set {dotted}")
        if dotted == DURATION_FIELD:
            duration_from.append(f"--duration/--set {dotted}")
    scenario = validate(data)
    if duration_from and scenario.load.steps:
        # A stepped run takes each step's own duration_s; an override that would be ignored
        # is refused, so the run that happens is the one that was asked for.
        raise ScenarioError(
            [
                f"{DURATION_FIELD}: {duration_from[-1]} cannot be used with load.steps (each "
                "step has its own duration_s, a sweep its step_duration_s): drop one of the two"
            ]
        )
    return scenario


def validate(data: dict[str, Any]) -> ScenarioBase:
    shape = shape_problems(data)
    if shape:
        # Checked before the model, which does not look inside free-form sections
        # (collectors.ontap): a cyclic alias or very deep nesting there cannot be written to
        # the bundle, a non-text key (``yes:``) has no field name, a NUL fits no path.
        raise ScenarioError(shape)
    secrets, data = literal_secrets(data)
    try:
        scenario = scenario_model().model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(secrets + error_lines(exc)) from None
    if secrets:
        raise ScenarioError(secrets)
    problems = combination_problems(scenario) + path_problems(scenario)
    if problems:
        raise ScenarioError(problems)
    return _with_workload_slos(scenario)


def _with_workload_slos(scenario: ScenarioBase) -> ScenarioBase:
    """The scenario's SLOs plus those its workload's parameters declare (the ``sql``
    workload's per-statement ``slo:``), judged like any other."""
    declared = getattr(scenario.workload.parameters, "declared_slos", None)  # type: ignore[attr-defined]
    if declared is None or not declared():
        return scenario
    try:
        extra = [Slo.model_validate(slo) for slo in declared()]
    except ValidationError as exc:
        raise ScenarioError(error_lines(exc)) from None
    # A scenario written back from a bundle holds them already: added once.
    have = {(slo.name, slo.op) for slo in scenario.slos}
    extra = [slo for slo in extra if (slo.name, slo.op) not in have]
    return scenario.model_copy(update={"slos": [*scenario.slos, *extra]})


def _is_secret_key(key: str) -> bool:
    name = key.lower()
    return name in LITERAL_SECRET_KEYS or name.endswith(tuple(f"_{k}" for k in LITERAL_SECRET_KEYS))


def literal_secrets(data: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Literal secrets anywhere in the scenario (``collectors.ontap.password`` is free form and
    passed ``validate``, which printed it): one line per key, never its value, and the data
    without them, so the rest is still validated and reported."""
    lines: list[str] = []

    def strip(node: Any, path: str) -> Any:
        if isinstance(node, dict):
            kept = {}
            for key, value in node.items():
                if isinstance(key, str) and _is_secret_key(key):
                    lines.append(
                        f"{_child(path, key)}: a literal {key} is not accepted; name an "
                        "environment variable with password_env or a file with password_file"
                    )
                    continue
                kept[key] = strip(value, _child(path, key))
            return kept
        if isinstance(node, list):
            return [strip(value, _child(path, i)) for i, value in enumerate(node)]
        return node

    # Recursive, but only after shape_problems bounded the depth to MAX_DEPTH.
    stripped = strip(data, "")
    return lines, stripped if lines else data


_SURROGATE = re.compile("[\ud800-\udfff]")


def _child(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key


def shape_problems(data: Any) -> list[str]:
    """Input no field could take, whatever the model: keys that are not text, a YAML alias
    inside its own anchor (a cycle), nesting deeper than :data:`MAX_DEPTH`, more than
    :data:`MAX_VALUES` values, NUL characters. Iterative, so hostile input cannot exhaust the
    stack here either."""
    problems: list[str] = []
    # (node, path, depth, ids of the containers above it)
    stack: list[tuple[Any, str, int, frozenset[int]]] = [(data, "", 0, frozenset())]
    seen = 0
    while stack:
        node, path, depth, above = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            problems.append(f"(scenario): more than {MAX_VALUES} values (YAML aliases of aliases?)")
            break
        where = path or "(scenario)"
        if isinstance(node, str):
            if "\x00" in node:
                problems.append(f"{where}: contains a NUL character")
            if _SURROGATE.search(node):
                # A non-UTF-8 byte of a command-line argument or an environment variable
                # (Python keeps it as a surrogate): it cannot be written into the bundle.
                problems.append(f"{where}: contains a byte that is not UTF-8 text")
            continue
        if not isinstance(node, dict | list):
            continue
        if id(node) in above:
            problems.append(f"{where}: refers to itself (a YAML alias inside its own anchor)")
            continue
        if depth >= MAX_DEPTH:
            problems.append(f"{where}: nested more than {MAX_DEPTH} levels deep")
            continue
        inner = above | {id(node)}
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(node, dict) and not isinstance(key, str):
                problems.append(
                    f"{where}: key {short_value(key)} is not a field name (YAML read it as "
                    f"{type(key).__name__}; quote it)"
                )
                continue
            if isinstance(key, str) and "\x00" in key:
                problems.append(f"{where}: a key contains a NUL character")
                continue
            stack.append((value, _child(path, key), depth + 1, inner))
    return sorted(set(problems))


def combination_problems(scenario: ScenarioBase) -> list[str]:
    """What the sections allow on their own but not together: a workload on a target kind it
    does not run on, and SQL names (table prefix, schema) the target's dialect does not take.
    Found here, before anything connects, with the field named."""
    from sim.dialects import needs_text, runs_on
    from sim.sql import identifier_problem

    target, workload = scenario.target, scenario.workload  # type: ignore[attr-defined]
    problems = []
    needs = registry.workloads()[workload.name].needs
    dialect = target.sql_dialect() if hasattr(target, "sql_dialect") else None
    if not runs_on(needs, target.kind, dialect):
        problems.append(
            f"workload.name: {workload.name} does not run on a {target.kind} target "
            f"(it needs {needs_text(needs)})"
        )
    if dialect is None:
        return problems
    # Every name a scenario puts into SQL comes through sql_identifiers() and is checked here;
    # the statements quote them as well (sim.sql.quote_identifier, SQLAlchemy's DDL compiler).
    for section, model in (("target", target), ("workload.parameters", workload.parameters)):
        made = model.sql_identifiers() if hasattr(model, "sql_identifiers") else {}
        for field, names in made.items():
            found = next((p for n in names if (p := identifier_problem(dialect, n))), None)
            if found:
                problems.append(f"{section}.{field}: {found}")
    return problems


def resolved_dict(scenario: ScenarioBase) -> dict[str, Any]:
    """The scenario as it will run, for the bundle. Holds secret references, never secrets."""
    return scenario.model_dump(mode="json")
