"""Scenario files: YAML validated once into a frozen, typed model.

Precedence, resolved once here and nowhere else: CLI overrides > ``DBSIM_*`` environment
(``DBSIM_LOAD__SESSIONS=8`` sets ``load.sessions``) > the scenario file > defaults. The result
is a frozen :class:`Scenario` passed down explicitly; there is no global config getter.

Every invalid field becomes one line ``path: what is wrong``; the CLI prints them all and exits
with code 2.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    model_validator,
)

from sim import registry, safeio, safeyaml
from sim.errors import ConfigError, ScenarioError
from sim.judge.slo import Slo
from sim.judge.sweep import Sweep
from sim.secrets import LITERAL_SECRET_KEYS

ENV_PREFIX = "DBSIM_"
DEFAULT_DURATION_S = 30.0
DEFAULT_OUTPUT_DIR = Path("runs")
#: Most sessions one process runs. Measured at 4,096 (docs/safety.md, "Input"): on SQLite a
#: thread, two file descriptors and up to target.cache_size_kib of page cache per session
#: (2.6 GiB RSS, 8,213 descriptors after 5 s; SQLite's one writer then makes 10 % of updates
#: time out: an invalid run, said so); PostgreSQL refuses at connect time the sessions beyond
#: the server's max_connections, with the figures.
MAX_SESSIONS = 4096
#: Most load.steps (a sweep's included).
MAX_STEPS = 10_000
#: load.max_error_pct's default: more failed operations than this and the figures describe
#: the errors, not the storage.
DEFAULT_MAX_ERROR_PCT = 1.0
#: Deepest nesting a scenario may have (its own sections go ~6 deep; collectors.ontap is free
#: form). Deeper input is a mistake or an attack and would exhaust Python's recursion limit.
MAX_DEPTH = 32
#: Most values (mappings, lists, scalars) a scenario may hold: YAML aliases nested in aliases
#: expand exponentially ("billion laughs") and would keep validation busy for hours.
MAX_VALUES = 100_000


class _Model(BaseModel):
    # allow_inf_nan=False: ``duration_s: .inf`` (or ``--duration inf``) would run forever and
    # ``.nan`` compares false with every bound; both are refused with the field named.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ThinkTime(_Model):
    """Closed-loop think time: every ``every_n_loops``-th loop a session waits a uniform
    random time in [min_ms, max_ms] (SLOB's THINK_TM_FREQUENCY / _MIN / _MAX)."""

    every_n_loops: int = Field(
        default=1, ge=1, description="Think every n-th loop (SLOB THINK_TM_FREQUENCY)."
    )
    min_ms: float = Field(default=0.0, ge=0, description="Shortest think time, ms.")
    max_ms: float = Field(default=0.0, ge=0, description="Longest think time, ms (≥ min_ms).")

    @model_validator(mode="after")
    def _ordered(self) -> ThinkTime:
        if self.max_ms < self.min_ms:
            raise ValueError("max_ms must be >= min_ms")
        return self


class LabCeilings(_Model):
    """Storage ceilings of the lab device (``dbsim lab``) for one step; 0 means unlimited and
    an omitted one keeps its value."""

    read_iops: int | None = Field(default=None, ge=0, description="Read IOPS ceiling.")
    write_iops: int | None = Field(default=None, ge=0, description="Write IOPS ceiling.")
    read_bps: int | None = Field(default=None, ge=0, description="Read bytes/s ceiling.")
    write_bps: int | None = Field(default=None, ge=0, description="Write bytes/s ceiling.")


class Step(_Model):
    """One load point of a stepped run: its length and what changes."""

    duration_s: float = Field(gt=0, description="Measured time of this step.")
    sessions: int | None = Field(
        default=None, ge=1, le=MAX_SESSIONS, description="Sessions of this step (else load's)."
    )
    rate_ops_s: float | None = Field(
        default=None, gt=0, description="Open-loop rate of this step, all sessions."
    )
    lab: LabCeilings | None = Field(
        default=None,
        description="Set the lab device's ceilings when this step starts (root, lab up).",
    )


class Load(_Model):
    """How the load is applied: sessions, duration, warm-up, pacing, steps."""

    sessions: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SESSIONS,
        description=f"Concurrent sessions (workload default if unset; at most {MAX_SESSIONS:,}). "
        "Each SQLite session holds its own page cache (target.cache_size_kib) and two file "
        "descriptors; on PostgreSQL, sessions beyond the server's max_connections (less the "
        "connections in use) are refused when they connect.",
    )
    duration_s: float = Field(
        default=DEFAULT_DURATION_S, gt=0, description="Measured time after warm-up."
    )
    warmup_s: float = Field(
        default=0.0, ge=0, description="Run before measuring; excluded from results."
    )
    loops_per_session: int | None = Field(
        default=None,
        ge=1,
        description="Fixed transactions per session instead of a duration (SLOB WORK_LOOP).",
    )
    mode: Literal["closed", "open"] = Field(
        default="closed",
        description="closed: each session starts its next op when the last ends (plus think time); "
        "open: ops are scheduled at rate_ops_s and latency counts from the intended start.",
    )
    rate_ops_s: float | None = Field(
        default=None, gt=0, description="Target rate for open loop, all sessions."
    )
    think: ThinkTime | None = Field(
        default=None, description="Closed-loop think time between transactions (SLOB THINK_TM)."
    )
    steps: list[Step] = Field(
        default_factory=list,
        max_length=MAX_STEPS,
        description=f"Load points run one after another (at most {MAX_STEPS:,}: every step is "
        "a stage of summary.json's stage log and of the analysis; 10,000 steps cost dbsim "
        "about 40 s of its own time).",
    )
    seed: int | None = Field(default=None, description="Seed for reproducible random choices.")
    session_runner: Literal["auto", "native", "threads", "loop"] = Field(
        default="auto",
        description="How sessions run: auto (file-tree sessions in the native C loop when it "
        "is built, else each session on its own OS thread when the workload's sessions make "
        "blocking calls — file trees, SQLite, ODBC — else coroutines on the event loop), "
        "native, threads, or loop (always coroutines; blocking calls through a pool). "
        "The summary names the one used and why (session_runner).",
    )
    max_error_pct: float = Field(
        default=DEFAULT_MAX_ERROR_PCT,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="Error budget: a run in which any operation's errors (or all operations' "
        "together) pass this share of what was issued in the measured window ends failed "
        "(exit 3); an SLO with error_pct_max judges the share instead (exit 1). An operation "
        "with no success at all always fails the run (docs/bundle.md).",
    )
    sweep: Sweep | None = Field(
        default=None,
        description="Raise sessions or rate step by step until an SLO breaks (docs/validation.md); "
        "becomes load.steps.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _sweep_steps(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Load:
        # The sweep is expanded here, so the engine runs a sweep as ordinary steps. A resolved
        # scenario (a bundle's scenario.yaml) holds both: accepted when the steps are the sweep's.
        load = handler(data)
        if load.sweep is None or not isinstance(data, dict):
            return load
        if load.sweep.vary == "rate_ops_s" and load.mode != "open":
            raise ValueError("sweep.vary rate_ops_s needs mode: open")
        expanded = handler({**data, "steps": load.sweep.steps()})
        if load.steps and load.steps != expanded.steps:
            raise ValueError("steps and sweep cannot be combined (the sweep makes the steps)")
        return expanded

    @model_validator(mode="after")
    def _consistent(self) -> Load:
        if (
            self.mode == "open"
            and self.rate_ops_s is None
            and not any(s.rate_ops_s for s in self.steps)
        ):
            raise ValueError("open-loop mode needs rate_ops_s (or a rate_ops_s in every step)")
        if self.mode == "closed" and (
            self.rate_ops_s is not None or any(s.rate_ops_s for s in self.steps)
        ):
            raise ValueError("rate_ops_s applies to mode: open only")
        if self.mode == "open" and self.think is not None:
            raise ValueError("think time applies to mode: closed only")
        if self.steps and self.loops_per_session is not None:
            raise ValueError("steps and loops_per_session cannot be combined")
        return self


class CollectorSettings(_Model):
    """Which storage collectors sample during the run; each collector's own options are the
    field named after it."""

    enabled: Literal["auto", "none"] | list[str] = Field(
        default="auto", description="'auto': every collector that applies to the target."
    )
    interval_s: float = Field(
        default=1.0,
        ge=0.1,
        le=60,
        description="Sampling interval: latencies and storage figures are grouped by it.",
    )
    timeout_s: float = Field(
        default=2.0, gt=0, description="A sample taking longer is dropped and counted."
    )

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
        "CollectorSettings", __base__=CollectorSettings, __doc__=CollectorSettings.__doc__, **fields
    )


class Output(_Model):
    """Where the run bundle goes."""

    directory: Path = Field(
        default=DEFAULT_OUTPUT_DIR, description="Where run bundles are created (one per run)."
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$",
        description="Bundle directory name after its timestamp (default: the scenario's name).",
    )
    flush_interval_s: float = Field(
        default=2.0,
        ge=0.5,
        le=60,
        description="How often the bundle is flushed and summary.json rewritten.",
    )


class ScenarioBase(_Model):
    name: str = Field(
        default="scenario",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$",
        description="Names the run and its bundle directory.",
    )
    description: str = Field(default="", description="Free text, kept in the bundle.")
    load: Load = Field(
        default_factory=Load, description="Sessions, duration, warm-up, pacing and steps."
    )
    slos: list[Slo] = Field(
        default_factory=list,
        description="Service-level objectives; a missed one makes `dbsim run` exit 1 "
        "(docs/validation.md).",
    )
    collectors: CollectorSettings = Field(
        default_factory=CollectorSettings, description="Storage collectors sampled during the run."
    )
    output: Output = Field(default_factory=Output, description="Where the run bundle goes.")


@cache
def scenario_model() -> type[ScenarioBase]:
    """The Scenario model, with target and workload unions built from the registry."""
    target_models = tuple(entry.settings_model for entry in registry.targets().values())
    workload_models = []
    for entry in registry.workloads().values():
        spec = create_model(
            f"{entry.workload_class.__name__}Spec",
            __base__=_Model,
            __doc__=entry.summary,
            name=(Literal[entry.name], ...),  # type: ignore[arg-type]
            parameters=(
                entry.workload_class.parameters_model,
                Field(default_factory=entry.workload_class.parameters_model),
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


def _path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        # Discriminated unions put the tag in the location: target.sqlite.path -> target.path
        if (
            i == 1
            and loc[0] in ("target", "workload")
            and isinstance(item, str)
            and (item in registry.targets() or item in registry.workloads())
        ):
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith(("function-", "literal[")) or item in (
            "list[str]",
            "str",
            "int",
            "float",
        ):
            continue
        else:
            parts.append(("." if parts else "") + item)
    return "".join(parts) or "(scenario)"


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_BLAMED_FIELD = re.compile(r"([a-z_][a-z0-9_]*): (.+)", re.DOTALL)


def error_lines(exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        kind = err["type"]
        message = err["msg"]
        if kind == "union_tag_invalid":
            field = "kind" if loc and loc[-1] == "target" else "name"
            ctx = err.get("ctx", {})
            lines.append(
                f"{_path(loc)}.{field}: unknown {field} {_short(ctx.get('tag'))} "
                f"(known: {ctx.get('expected_tags', '')})"
            )
            continue
        if kind == "union_tag_not_found":
            field = "kind" if loc and loc[-1] == "target" else "name"
            lines.append(f"{_path(loc)}.{field}: missing")
            continue
        if kind == "extra_forbidden" and loc and loc[-1] in LITERAL_SECRET_KEYS:
            message = (
                f"a literal {loc[-1]} is not accepted; name an environment variable with "
                "password_env or a file with password_file"
            )
        elif message.startswith("Value error, "):
            message = message[len("Value error, ") :]
            # A model check that blames one of its fields starts its message with the field
            # ("scale: 500 rows is below …"): put it in the path, so the line names the field.
            blamed = _BLAMED_FIELD.match(message)
            if blamed and loc and blamed.group(1) != loc[-1]:
                loc, message = (*loc, blamed.group(1)), blamed.group(2)
        elif kind not in ("missing", "extra_forbidden") and not isinstance(
            err.get("input"), dict | list
        ):
            message += f" (got {_short(err.get('input'))})"
        line = f"{_path(loc)}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


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
    for dotted, value in env_overrides(os.environ if environ is None else environ):
        _set_path(
            data, dotted, value, f"environment {ENV_PREFIX}{dotted.upper().replace('.', '__')}"
        )
    for dotted, value in overrides or []:
        _set_path(data, dotted, value, f"--set {dotted}")
    return validate(data)


def validate(data: dict[str, Any]) -> ScenarioBase:
    shape = shape_problems(data)
    if shape:
        # Checked before the model: a cyclic alias or very deep nesting in a free-form section
        # (collectors.ontap) passed validation and crashed writing the bundle, non-text keys
        # gave paths like ``load[1]`` for ``yes:``, a NUL in a path failed only at mkdir.
        raise ScenarioError(shape)
    secrets, data = literal_secrets(data)
    try:
        scenario = scenario_model().model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(secrets + error_lines(exc)) from None
    if secrets:
        raise ScenarioError(secrets)
    problems = combination_problems(scenario)
    if problems:
        raise ScenarioError(problems)
    return scenario


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
                    f"{where}: key {_short(key)} is not a field name (YAML read it as "
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
    needs = registry.workloads()[workload.name].workload_class.needs
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
