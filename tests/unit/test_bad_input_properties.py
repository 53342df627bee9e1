"""Bad input, generated (issue #8): malformed scenarios, YAML files and command lines.

Every case goes through the CLI's own entry point, ``sim.cli.main(argv)``, in this process
(the function ``python -m sim.cli`` runs; it maps every exception to an exit code and error
lines), and must give: exit code 2, no traceback, nothing on stdout, and only ``error: `` lines,
each naming the offending field (its dotted path), option, file or argument. A small sample
also runs as a real ``python -m sim.cli`` child and must print exactly what the in-process
call printed, which is what makes the in-process cases stand for the real CLI.

Nothing here can start a run, build a target or import Locust: ``_execute``, the target
factories and ``sim.locust`` are replaced by stand-ins that fail the case if a generated input
ever gets that far (a case that validates is a bug in its strategy, not a pass).

Strategies mutate valid base scenarios (examples/quickstart.yaml; PostgreSQL + SLOB; PostgreSQL
+ SSB; file tree + EDA): wrong types, out-of-range numbers (negative, zero, NaN, ±inf, huge),
unknown keys at every level, unknown workload and target names, malformed nested parameters,
literal passwords, hostile SQL identifiers, workloads on targets they do not run on; plus bad
YAML text (syntax, non-mapping top levels, non-UTF-8, deep nesting, alias cycles, non-text
keys) and bad argument sets (``--set`` without '=', unknown fields, bad values, unknown flags,
bad option values, missing values, bad environment overrides, other commands' bad options).

A second part proves that scenario values reaching SQL are validated and quoted: the identifier
rules per dialect, a source scan for SQL built by interpolation, and the statements each SQL
workload sends, with hostile and keyword identifiers.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import io
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import typer.main
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim import registry
from sim.cli.entry import register_commands
from sim.config.resolve import json_schema, shape_problems, validate
from sim.dialects import dialects
from sim.errors import ScenarioError, WorkloadError
from sim.secrets import LITERAL_SECRET_KEYS
from sim.sql import identifier_problem, quote_identifier, sqlalchemy_dialect
from tests.support import forked_dbsim

REPO = Path(__file__).resolve().parents[2]
EXIT_BAD_INPUT = 2
#: What the stand-in for ``_execute`` returns: the input validated and a run would start.
RAN = 97

SETTINGS = {
    "deadline": None,
    "derandomize": True,  # the same examples on every machine and every CI run
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

# --------------------------------------------------------------------------- base scenarios

QUICKSTART = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text(encoding="utf-8"))
BASES: dict[str, dict[str, Any]] = {
    "quickstart": QUICKSTART,
    "postgres-slob": {
        "name": "pg-slob",
        "target": {
            "kind": "postgres",
            "host": "127.0.0.1",
            "schema_name": "public",
            "password_env": "PGPASSWORD",
        },
        "workload": {"name": "slob", "parameters": {"table_prefix": "slob", "scale": "80M"}},
        "load": {"duration_s": 10, "sessions": 2},
    },
    "postgres-ssb": {
        "name": "pg-ssb",
        "target": {"kind": "postgres", "schema_name": "bench", "password_env": "PGPASSWORD"},
        "workload": {
            "name": "ssb",
            "parameters": {"table_prefix": "user_", "tables": 2, "database_size": "16M"},
        },
        "load": {"duration_s": 10},
    },
    "filetree-eda": {
        "name": "eda-tree",
        "target": {"kind": "filetree", "path": "/tmp/dbsim-eda-tree"},
        "workload": {"name": "eda", "parameters": {"job_sets": 1}},
        "load": {"duration_s": 10},
    },
}
WORKLOAD_OF = {name: base["workload"]["name"] for name, base in BASES.items()}
TARGET_OF = {name: base["target"]["kind"] for name, base in BASES.items()}


def _property_names(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set(node["properties"]) if isinstance(node.get("properties"), dict) else set()
        return found | {n for value in node.values() for n in _property_names(value)}
    if isinstance(node, list):
        return {n for value in node for n in _property_names(value)}
    return set()


#: Every field name anywhere in the scenario schema: an "unknown key" is none of these.
KNOWN_FIELDS = _property_names(json_schema())

# --------------------------------------------------------------------------- a case


@dataclass
class Case:
    """One generated input: a scenario (data, or raw file text/bytes) and/or arguments."""

    what: str  # the strategy that made it (for the per-strategy counts and failure messages)
    names: tuple[str, ...]  # each error line must name one of these
    data: dict[str, Any] | None = None
    raw: bytes | None = None
    args: list[str] = field(default_factory=list)
    command: str = "validate"
    env: dict[str, str] = field(default_factory=dict)
    secret: str | None = None  # must never be printed
    no_file: bool = False  # arguments only: no scenario file

    def argv(self, directory: Path, serial: int) -> list[str]:
        if self.no_file or (self.data is None and self.raw is None):
            return [self.command, *self.args] if self.command else list(self.args)
        path = directory / f"case-{serial}.yaml"
        if self.raw is not None:
            path.write_bytes(self.raw)
        else:
            path.write_text(yaml.safe_dump(self.data, sort_keys=False), encoding="utf-8")
        return [self.command, str(path), *self.args]


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def _delete(data: dict[str, Any], path: str) -> None:
    keys = path.split(".")
    node = data
    for key in keys[:-1]:
        node = node[key]
    node.pop(keys[-1], None)


# --------------------------------------------------------------------------- value strategies

WORDS = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
BOOL_WORDS = {"y", "n", "t", "f", "yes", "no", "on", "off", "true", "false"}
NOT_A_NUMBER_TEXT = WORDS.filter(lambda w: w not in {"inf", "nan", "infinity"}) | st.sampled_from(
    ["1,5", "12 sessions", "0x", "--", "1e", "one"]
)
NAN_INF = st.sampled_from([math.nan, math.inf, -math.inf])
HUGE = st.integers(min_value=10**12, max_value=10**40)


def wrong_types(kind: str) -> st.SearchStrategy[Any]:
    """Values of the wrong type for a field of ``kind``."""
    containers = st.sampled_from([[1, 2], {"x": 1}, [], {}])
    if kind == "int":
        return containers | NOT_A_NUMBER_TEXT | st.sampled_from([1.5, -0.25, 3.75])
    if kind == "float":
        return containers | NOT_A_NUMBER_TEXT
    if kind in ("str", "path"):
        return containers | st.integers(min_value=-5, max_value=5)
    if kind == "bool":
        return (
            containers | st.sampled_from([2, -1, 0.5]) | WORDS.filter(lambda w: w not in BOOL_WORDS)
        )
    if kind == "list":
        return st.sampled_from([{"x": 1}, 5]) | WORDS
    raise AssertionError(kind)


def literal_wrong(choices: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from([[1], {"x": 1}, 12345, 1.5]) | WORDS.filter(lambda w: w not in choices)


def below(low: float, integer: bool = True) -> st.SearchStrategy[Any]:
    """Strictly below ``low`` (never -0.0, which a ``ge=0`` field takes), or NaN / ±inf."""
    if integer:
        return st.integers(max_value=int(low) - 1, min_value=-(10**30)) | NAN_INF
    top = math.nextafter(low, -math.inf)
    return st.floats(max_value=top, allow_nan=False, allow_infinity=False) | NAN_INF


def above(high: float, integer: bool = True) -> st.SearchStrategy[Any]:
    """Strictly above ``high``, huge, or NaN / ±inf."""
    if integer:
        return st.integers(min_value=int(high) + 1, max_value=10**40) | HUGE
    bottom = math.nextafter(high, math.inf)
    return st.floats(min_value=bottom, allow_nan=False, allow_infinity=False) | NAN_INF


@dataclass(frozen=True)
class Leaf:
    """A field of the bases, the kind of value it takes and values out of its range."""

    path: str
    kind: str
    bases: tuple[str, ...]
    out_of_range: st.SearchStrategy[Any] | None = None


ALL = tuple(BASES)
SLOB = ("quickstart", "postgres-slob")
SSB = ("postgres-ssb",)
EDA = ("filetree-eda",)
PG = ("postgres-slob", "postgres-ssb")
SQLITE = ("quickstart",)
P = "workload.parameters."
LEAVES = [
    Leaf("load.sessions", "int", ALL, below(1) | above(4096)),
    Leaf("load.duration_s", "float", ALL, below(0, False) | st.just(0) | st.just(10**400)),
    Leaf("load.warmup_s", "float", ALL, below(0, False)),
    Leaf("load.loops_per_session", "int", ALL, below(1)),
    Leaf("load.seed", "int", ALL, NAN_INF),
    Leaf("load.mode", "literal:closed,open", ALL),
    Leaf("collectors.interval_s", "float", ALL, below(0.1, False) | above(60, False)),
    Leaf("collectors.timeout_s", "float", ALL, below(0, False) | st.just(0.0)),
    Leaf("collectors.nfs.mounts", "list", ALL),
    Leaf("collectors.block.devices", "list", ALL),
    Leaf("output.flush_interval_s", "float", ALL, below(0.5, False) | above(60, False)),
    Leaf("output.directory", "path", ALL),
    Leaf("description", "str", ALL),
    Leaf("target.cache_size_kib", "int", SQLITE, below(64)),
    Leaf("target.page_size_bytes", "literal:4096,8192,16384,32768", SQLITE),
    Leaf("target.journal_mode", "literal:wal,delete,truncate", SQLITE),
    Leaf("target.synchronous", "literal:off,normal,full", SQLITE),
    Leaf("target.busy_timeout_ms", "int", SQLITE, below(0)),
    Leaf("target.keep", "bool", SQLITE),
    Leaf("target.port", "int", PG, below(1) | above(65535)),
    Leaf("target.connect_timeout_s", "float", PG, below(0, False) | st.just(0.0)),
    Leaf("target.host", "str", PG),
    Leaf("target.password_env", "str", PG),
    Leaf("target.path", "path", EDA),
    Leaf(P + "update_pct", "int", SLOB, st.integers(51, 99) | below(0) | above(100)),
    Leaf(P + "scan_pct", "int", SLOB, st.integers(51, 99) | below(0) | above(100)),
    Leaf(P + "append_pct", "int", SLOB, below(0) | above(100)),
    Leaf(P + "work_unit", "int", SLOB, below(3) | above(1024)),
    Leaf(P + "schemas", "int", SLOB, below(1) | above(4096)),
    Leaf(P + "threads_per_schema", "int", SLOB, below(1) | above(1024)),
    Leaf(P + "hot_schema_frequency", "int", SLOB, below(0)),
    Leaf(P + "block_size_bytes", "int", SLOB, st.sampled_from([0, 512, 1000, 8191, 65536])),
    Leaf(P + "redo_stress", "literal:LITE,HEAVY", SLOB),
    Leaf(P + "do_hotspot", "bool", SLOB),
    Leaf(P + "load_batch_rows", "int", SLOB + SSB, below(1) | above(100_000)),
    Leaf(P + "load_seed", "int", SLOB + SSB, below(0)),
    Leaf(P + "tables", "int", SSB, below(1) | above(4096)),
    Leaf(P + "read_pct", "int", SSB, st.sampled_from([5, 15, 85, 99, 110, -10, 1000])),
    Leaf(P + "rows_select", "int", SSB, below(0)),
    Leaf(P + "rows_update", "int", SSB, below(0)),
    Leaf(P + "component", "literal:EDA_FRONTEND,EDA_BACKEND,EDA_BLENDED", EDA),
    Leaf(P + "job_sets", "int", EDA, below(1) | above(10_000)),
    Leaf(P + "block_size_bytes", "int", EDA, below(512)),
    Leaf(P + "transfer_size_bytes", "int", EDA, below(512)),
    Leaf(P + "fsync", "literal:none,close,each", EDA),
    Leaf(P + "seed", "int", EDA, below(0)),
    Leaf(P + "load_parallelism", "int", EDA, below(1) | above(64)),
    Leaf(P + "direct_io", "bool", EDA),
    Leaf(P + "frontend.process_rate_ops_s", "float", EDA, below(0, False) | st.just(0.0)),
    Leaf(P + "frontend.dirs", "int", EDA, below(1) | above(100_000)),
    Leaf(P + "backend.files_per_dir", "int", EDA, below(1) | above(100_000)),
]


def bad_value(leaf: Leaf) -> st.SearchStrategy[Any]:
    if leaf.kind.startswith("literal:"):
        choices = tuple(leaf.kind.split(":", 1)[1].split(","))
        choices += tuple(int(c) for c in choices if c.isdigit())
        return literal_wrong(choices)
    wrong = wrong_types(leaf.kind)
    return wrong if leaf.out_of_range is None else wrong | leaf.out_of_range


# --------------------------------------------------------------------------- hostile identifiers

FORBIDDEN_CHARS = [*"\"';` -.$#@/\\()*=,\n\t", "é", "ß", "名", "Ω", "\u200b", "🙂", "\x00"]
SQL_INJECTIONS = [
    'x"; DROP TABLE dbsim_registry; --',
    "slob' OR '1'='1",
    "t1; DELETE FROM dbsim_registry",
    "a/*comment*/b",
    "x]; DROP TABLE y; --",
    "select * from",
    "drop table",
    "user name",
    "slob\n",
    " slob",
]
IDENTIFIER_CORE = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True)


@st.composite
def hostile_identifier(draw: st.DrawFn, longest: int = 16) -> str:
    """Text that must never become a SQL name: odd characters, leading digits, too long."""
    kind = draw(st.sampled_from(["char", "digit", "long", "injection", "empty", "text"]))
    if kind == "char":
        core = draw(IDENTIFIER_CORE)
        at = draw(st.integers(0, len(core)))
        return core[:at] + draw(st.sampled_from(FORBIDDEN_CHARS)) + core[at:]
    if kind == "digit":
        return draw(st.sampled_from("0123456789")) + draw(IDENTIFIER_CORE)
    if kind == "long":
        return draw(st.from_regex(rf"[A-Za-z][A-Za-z0-9_]{{{longest},200}}", fullmatch=True))
    if kind == "injection":
        return draw(st.sampled_from(SQL_INJECTIONS))
    if kind == "empty":
        return ""
    return draw(st.text(min_size=1, max_size=20).filter(lambda t: not re.fullmatch(r"\w+", t)))


# --------------------------------------------------------------------------- scenario mutations


@dataclass
class Mutation:
    paths: tuple[str, ...]  # what it touches (two mutations of one field are not combined)
    names: tuple[str, ...]  # fields an error line may name
    apply: Callable[[dict[str, Any]], None]
    secret: str | None = None


def _setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: _set(data, path, value)


@st.composite
def wrong_value(draw: st.DrawFn, base: str) -> Mutation:
    leaf = draw(st.sampled_from([leaf for leaf in LEAVES if base in leaf.bases]))
    value = draw(bad_value(leaf))
    return Mutation((leaf.path,), (leaf.path,), _setter(leaf.path, value))


@st.composite
def non_finite(draw: st.DrawFn, base: str) -> Mutation:
    """NaN or ±inf in a float field (YAML .nan / .inf): never a setting. +inf is drawn most
    often: it passes every ``gt``/``ge`` bound, so only the finite check refuses it."""
    leaf = draw(st.sampled_from([x for x in LEAVES if base in x.bases and x.kind == "float"]))
    value = draw(st.sampled_from([math.inf, math.inf, math.nan, -math.inf]))
    return Mutation((leaf.path,), (leaf.path,), _setter(leaf.path, value))


NODES = {
    "": ALL,
    "load": ALL,
    "load.think": ALL,
    "target": ALL,
    "workload": ALL,
    "workload.parameters": ALL,
    "collectors": ALL,
    "output": ALL,
    "workload.parameters.frontend": EDA,
    "workload.parameters.backend": EDA,
}


@st.composite
def unknown_key(draw: st.DrawFn, base: str) -> Mutation:
    node = draw(st.sampled_from([n for n, bases in NODES.items() if base in bases]))
    key = draw(WORDS.filter(lambda w: w not in KNOWN_FIELDS))
    path = f"{node}.{key}" if node else key
    return Mutation((path,), (path,), _setter(path, draw(st.integers() | WORDS)))


@st.composite
def unknown_name(draw: st.DrawFn, base: str) -> Mutation:
    section = draw(st.sampled_from(["workload.name", "target.kind"]))
    known = registry.workloads() if section == "workload.name" else registry.targets()
    value = draw(
        st.text(max_size=12).filter(lambda t: t not in known)
        | st.sampled_from([None, 7, [1], {"a": 1}, "SLOB", "Postgres"])
    )
    return Mutation((section,), (section,), _setter(section, value))


@st.composite
def missing_section(draw: st.DrawFn, base: str) -> Mutation:
    path = draw(st.sampled_from(["workload", "workload.name", "target.kind"]))
    return Mutation((path,), (path,), lambda data: _delete(data, path))


@st.composite
def malformed_nested(draw: st.DrawFn, base: str) -> Mutation:
    choices: list[tuple[str, st.SearchStrategy[Any]]] = [
        ("workload.parameters", st.sampled_from([[1, 2], "fast", 3, True])),
        ("load.think", st.sampled_from([{"min_ms": 5, "max_ms": 1}, {"every_n_loops": 0}, [1]])),
        (
            "load.steps",
            st.lists(
                st.sampled_from(
                    [{"duration_s": 0}, {"sessions": 1}, {"duration_s": 5, "sessions": 0}, 7]
                ),
                min_size=1,
                max_size=3,
            )
            | st.sampled_from(["all", {"a": 1}]),
        ),
        (
            "load.sweep",
            st.sampled_from(
                [
                    {"vary": "sessions", "start": 1, "max": 8, "step_duration_s": 5},
                    {"vary": "sessions", "start": 9, "max": 8, "factor": 2, "step_duration_s": 5},
                    {"vary": "sessions", "start": 1, "max": 10**6, "step": 1, "step_duration_s": 5},
                    {
                        "vary": "sessions",
                        "start": 1,
                        "max": math.inf,
                        "factor": 2,
                        "step_duration_s": 5,
                    },
                    {"vary": "threads", "start": 1, "max": 8, "factor": 2, "step_duration_s": 5},
                    {"vary": "sessions", "start": 1.5, "max": 8, "factor": 2, "step_duration_s": 5},
                ]
            ),
        ),
        (
            "slos",
            st.sampled_from(
                [
                    [{}],
                    [{"p99_us_max": -1}],
                    [{"op": "read", "iops_min": 5}],
                    "fast",
                    [{"p50_us_max": math.inf}],
                ]
            ),
        ),
        ("collectors.enabled", st.sampled_from(["sometimes", 5, [1, 2], {"db": True}])),
    ]
    if WORKLOAD_OF[base] == "slob":
        bad_size = st.from_regex(r"[0-9]{0,3}[A-Za-z]{1,3}", fullmatch=True).filter(
            lambda t: not re.fullmatch(r"\d+[KMGTkmgt]", t)
        )
        choices += [
            (P + "scale", bad_size | st.sampled_from(["80 MB", "-5M", "1.5G"])),
            (P + "scan_table_size", bad_size),
        ]
    if WORKLOAD_OF[base] == "ssb":
        choices += [(P + "database_size", st.sampled_from(["lots", "-1G", 0, "1.5G", "10Q"]))]
    if WORKLOAD_OF[base] == "eda":
        mixes = st.sampled_from(
            [{"stat": -1}, {"stat": 0}, {"teleport": 5}, {"stat": 20_000}, "mixed", [1]]
        )
        choices += [(P + "frontend.mix", mixes), (P + "backend.mix", mixes)]
    path, values = draw(st.sampled_from(choices))
    return Mutation((path,), (path,), _setter(path, draw(values)))


@st.composite
def literal_password(draw: st.DrawFn, base: str) -> Mutation:
    secret = "S3cret-" + draw(st.from_regex(r"[A-Za-z0-9]{8,16}", fullmatch=True))
    if draw(st.booleans()):
        key = draw(st.sampled_from(LITERAL_SECRET_KEYS))
        return Mutation(
            (f"target.{key}",), (f"target.{key}",), _setter(f"target.{key}", secret), secret
        )

    def odbc(data: dict[str, Any]) -> None:
        data["target"] = {"kind": "odbc", "driver": "PostgreSQL Unicode", "extra": {"PWD": secret}}

    return Mutation(("target",), ("target.extra",), odbc, secret)


@st.composite
def bad_identifier(draw: st.DrawFn, base: str) -> Mutation:
    fields = []
    if WORKLOAD_OF[base] in ("slob", "ssb"):
        fields.append((P + "table_prefix", 16))
    if TARGET_OF[base] == "postgres":
        fields.append(("target.schema_name", 63))
    path, longest = draw(st.sampled_from(fields))
    return Mutation((path,), (path,), _setter(path, draw(hostile_identifier(longest))))


@st.composite
def too_long_for_dialect(draw: st.DrawFn, base: str) -> Mutation:
    """A table prefix the pattern takes (16 characters) whose index name for schema 1000 and
    up, ``<prefix><n>_cf1_custid``, has 31: too long for Oracle, fine for PostgreSQL."""
    prefix = draw(st.from_regex(r"[a-z][a-z0-9_]{15}", fullmatch=True))
    count = draw(st.integers(1000, 4096))
    path = P + "table_prefix"

    def apply(data: dict[str, Any]) -> None:
        data["target"] = {"kind": "oracle", "password_env": "ORACLE_PASSWORD"}
        _set(data, path, prefix)
        _set(data, P + "schemas", count)

    return Mutation(("target", path), (path,), apply)


@st.composite
def wrong_target_kind(draw: st.DrawFn, base: str) -> Mutation:
    """Sections valid on their own, not together: a SQL workload on a file tree and back."""
    if WORKLOAD_OF[base] == "eda":
        target = draw(st.sampled_from([{"kind": "sqlite"}, {"kind": "postgres"}]))
    else:
        target = {"kind": "filetree", "path": "/tmp/dbsim-tree"}
    return Mutation(("target",), ("workload.name",), _setter("target", target))


MUTATIONS = {
    "wrong type / out of range": wrong_value,
    "non-finite number": non_finite,
    "unknown key": unknown_key,
    "unknown name": unknown_name,
    "missing section": missing_section,
    "malformed nested": malformed_nested,
    "literal password": literal_password,
    "bad identifier": bad_identifier,
}
SQL_BASES = ("quickstart", "postgres-slob", "postgres-ssb")


@st.composite
def bad_scenario(draw: st.DrawFn) -> Case:
    """A base scenario with one to three mistakes in different fields."""
    base = draw(st.sampled_from(ALL))
    data = copy.deepcopy(BASES[base])
    kinds = dict(MUTATIONS)
    if base not in SQL_BASES:
        del kinds["bad identifier"]
    count = draw(st.integers(1, 3))
    applied: list[Mutation] = []
    for _ in range(count):
        mutation = draw(kinds[draw(st.sampled_from(sorted(kinds)))](base))
        clash = any(
            p == q or p.startswith(q + ".") or q.startswith(p + ".")
            for m in applied
            for p in mutation.paths
            for q in m.paths
        )
        if not clash:
            mutation.apply(data)
            applied.append(mutation)
    names = tuple(n for m in applied for n in m.names)
    secrets = [m.secret for m in applied if m.secret]
    command = draw(st.sampled_from(["validate", "run", "load", "drop"]))
    return Case(
        "scenario mutation", names, data=data, command=command, secret=next(iter(secrets), None)
    )


@st.composite
def combination_scenario(draw: st.DrawFn) -> Case:
    """One mistake only the combination shows (validated after the sections)."""
    if draw(st.booleans()):
        base, maker = draw(st.sampled_from(SLOB)), too_long_for_dialect
    else:
        base, maker = draw(st.sampled_from(ALL)), wrong_target_kind
    data = copy.deepcopy(BASES[base])
    mutation = draw(maker(base))
    mutation.apply(data)
    return Case(
        "combination", mutation.names, data=data, command=draw(st.sampled_from(["validate", "run"]))
    )


# --------------------------------------------------------------------------- bad YAML text


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


@st.composite
def bad_yaml_file(draw: st.DrawFn) -> Case:
    """Files that are not a scenario at all; the error names the file (or the bad node)."""
    base = _yaml(BASES[draw(st.sampled_from(ALL))])
    kind = draw(
        st.sampled_from(
            [
                *("syntax", "top level", "not utf-8", "deep", "cycle", "key", "control"),
                *("empty-ish", "aliases"),
            ]
        )
    )
    command = draw(st.sampled_from(["validate", "run"]))
    if kind == "syntax":
        broken = draw(
            st.sampled_from(
                [
                    "load: [1,\n",
                    "  x: : y\n",
                    "\tload: 1\n",
                    'name: "open\n',
                    "load: {a: 1\n",
                    "- item\n",
                    "load:\n  - a\n  b: c\n",
                    "? [a\n",
                    "name: @x\n",
                    "*missing\n",
                ]
            )
        )
        lines = base.splitlines(keepends=True)
        at = draw(st.integers(0, len(lines)))
        text = "".join(lines[:at]) + broken + "".join(lines[at:])
        return Case("bad yaml", ("case-",), raw=text.encode(), command=command)
    if kind == "top level":
        value = draw(
            st.lists(st.integers() | WORDS, min_size=1, max_size=4)
            | st.integers()
            | st.floats(allow_nan=False)
            | WORDS
            | st.booleans()
        )
        return Case("bad yaml", ("case-",), raw=_yaml(value).encode(), command=command)
    if kind == "not utf-8":
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\x80abc", b"\xfe\xfe"]))
        data = base.encode()
        at = draw(st.integers(0, len(data)))
        return Case("bad yaml", ("case-",), raw=data[:at] + bad + data[at:], command=command)
    if kind == "deep":
        depth = draw(st.integers(40, 5000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        text = (
            base + "collectors:\n  ontap:\n    x: " + opener * depth + "1" + closer * depth + "\n"
        )
        return Case("bad yaml", ("case-", "collectors.ontap"), raw=text.encode(), command=command)
    if kind == "cycle":  # an alias inside its own anchor: the data refers to itself
        section, snippet = draw(
            st.sampled_from(
                [
                    ("collectors.ontap", "collectors:\n  ontap: &a {x: *a}\n"),
                    ("load.steps", "load: &a {steps: [*a]}\n"),
                    ("description", "description: &a [*a]\n"),
                    ("workload.parameters", "workload: {name: slob, parameters: &a {x: [*a]}}\n"),
                ]
            )
        )
        top = section.split(".")[0]
        rest = {k: v for k, v in yaml.safe_load(base).items() if k != top}
        return Case("bad yaml", (section,), raw=(_yaml(rest) + snippet).encode(), command=command)
    if kind == "aliases":  # aliases of aliases: a few lines that expand to millions of values
        fan, levels = draw(st.integers(8, 12)), draw(st.integers(6, 9))
        lines = [f"a0: &a0 [{', '.join(['1'] * fan)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
        text = base + "collectors:\n  ontap:\n" + "".join(f"    {line}\n" for line in lines)
        assert fan**levels > 100_000  # sim.config.scenario.MAX_VALUES
        # Refused while the file is read (sim.safeio bounds the expansion), naming the key.
        names = ("(scenario): more than", "collectors.ontap.a")
        return Case("bad yaml", names, raw=text.encode(), command=command)
    if kind == "key":
        key = draw(
            st.sampled_from(["1", "yes", "~", "1.5", "2020-01-01", "[1, 2]", "null", "0x1f"])
        )
        node = draw(st.sampled_from(["", "load", "workload", "target"]))
        data = yaml.safe_load(base)
        if node:
            text = _yaml({k: v for k, v in data.items() if k != node}) + f"{node}:\n  {key}: 1\n"
        else:
            text = base + f"{key}: 1\n"
        names = (f"{node}: key" if node else "(scenario): key", "case-")
        if key == "2020-01-01":  # text since issue #20 (no timestamps): an unknown field
            names = (node or key,)
        return Case("bad yaml", names, raw=text.encode(), command=command)
    if kind == "control":
        char = draw(st.sampled_from(["\x07", "\x1b", "\x7f", "\ufffe", "\x00"]))
        return Case(
            "bad yaml",
            ("case-",),
            raw=(base + f"description: a{char}b\n").encode(),
            command=command,
        )
    # Scalar text with a colon-free first line and nothing else: not a mapping.
    text = draw(st.sampled_from(["just text\n", "---\n- a\n", "--- 5\n", "!!binary aGk=\n"]))
    return Case("bad yaml", ("case-",), raw=text.encode(), command=command)


# --------------------------------------------------------------------------- bad argument sets

RUN_OPTIONS = {
    "--set",
    "-s",
    "--duration",
    "--sessions",
    "--warmup",
    "--output",
    "-o",
    "--skip-load",
    "--quiet",
    "-q",
    "--json",
    "--workers",
    "--help",
    "--debug",
}
# --set values that are wrong for their field, as typed on a command line.
SET_VALUES = {
    "load.sessions": [
        "0",
        "-3",
        "4097",
        "abc",
        ".inf",
        ".nan",
        "[1]",
        "1.5",
        "99999999999999999999",
    ],
    "load.duration_s": ["0", "-1", ".inf", "-.inf", ".nan", "abc", "{}", "1e999"],
    "load.warmup_s": ["-0.5", ".nan", "x"],
    "load.mode": ["half-open", "1", "[closed]"],
    "target.kind": ["nope", "''", "1", "[sqlite]", "SQLITE"],
    "workload.name": ["nope", "SLOB", "0", "{}"],
    "workload.parameters.update_pct": ["60", "-1", "101", "ten"],
    "workload.parameters.table_prefix": [
        '"x;y"',
        "'1abc'",
        '"a b"',
        "'select *'",
        "'é'",
        "'" + "a" * 40 + "'",
    ],
    "output.name": ["../x", "'a/b'", "''", "' x'"],
    "output.flush_interval_s": ["0", "61", ".inf"],
    "collectors.interval_s": ["0", "100", ".nan"],
    "name": ["../up", "'x y'", "[1]"],
    "load.steps": ["[" * 3000, "[" * 40 + "]" * 40, "{a: " * 50 + "1" + "}" * 50, "&a [*a]"],
    "collectors.ontap": ["&a {x: *a}", "{x: " + "[" * 40 + "]" * 40 + "}"],
}


@st.composite
def bad_arguments(draw: st.DrawFn) -> Case:
    """One to three bad parts on a command line, each about a different field or option."""
    command = draw(st.sampled_from(["run", "validate", "load", "drop"]))
    parts: list[
        tuple[str, list[str], tuple[str, ...], dict[str, str]]
    ] = []  # key, args, names, env
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["set no =", "set unknown", "set bad value", "set bad path", "set deep value"]
                + ["flag", "env"]
                + (["option", "workers"] if command == "run" else [])
            )
        )
        if kind == "set no =":
            item = draw(st.from_regex(r"[a-z][a-z_.]{0,20}", fullmatch=True))
            parts.append((f"set:{item}", ["--set", item], (f"--set {item}",), {}))
        elif kind == "set unknown":
            section = draw(st.sampled_from(["", "load.", "target.", "output.", "collectors.", P]))
            key = section + draw(WORDS.filter(lambda w: w not in KNOWN_FIELDS))
            parts.append((key, ["--set", f"{key}={draw(st.integers(0, 9))}"], (key,), {}))
        elif kind == "set bad value":
            key = draw(st.sampled_from(sorted(SET_VALUES)))
            parts.append(
                (key, ["--set", f"{key}={draw(st.sampled_from(SET_VALUES[key]))}"], (key,), {})
            )
        elif kind == "set deep value":  # nesting past the stack as YAML on the command line
            key = draw(st.sampled_from(["load.steps", "collectors.ontap", "load", P.rstrip(".")]))
            opener = draw(st.sampled_from(["[", "{a: ", "- "]))
            text = opener * draw(st.integers(33, 5000))
            parts.append((key, ["--set", f"{key}={text}"], (key,), {}))
        elif kind == "set bad path":
            path = draw(st.sampled_from(["load..sessions", ".load", "load.", "=", "a...b", " . "]))
            parts.append((f"path:{path}", ["--set", f"{path}=1"], ("--set",), {}))
        elif kind == "flag":
            flag = "--" + draw(st.from_regex(r"[a-z][a-z-]{0,14}", fullmatch=True))
            if flag in RUN_OPTIONS:
                continue
            parts.append((f"flag:{flag}", [flag], (flag,), {}))
        elif kind == "env":
            key = draw(
                st.sampled_from(["load.sessions", "load.duration_s", "target.kind", "load.mode"])
            )
            value = draw(st.sampled_from(["0", "abc", "-5", ".inf", "[1]"]))
            if key == "load.mode":
                value = "sideways"
            variable = "DBSIM_" + key.upper().replace(".", "__")
            parts.append((key, [], (key,), {variable: value}))
        elif kind == "option":
            option, key, values = draw(
                st.sampled_from(
                    [
                        (
                            "--sessions",
                            "load.sessions",
                            ["-3", "0", "4097", "abc", "1.5", "", "10**3"],
                        ),
                        (
                            "--duration",
                            "load.duration_s",
                            ["abc", "0", "-2", "inf", "nan", "-inf", "", "1,5"],
                        ),
                        ("--warmup", "load.warmup_s", ["-1", "nan", "inf", "soon"]),
                    ]
                )
            )
            parts.append((key, [option, draw(st.sampled_from(values))], (option, key), {}))
        else:
            value = draw(st.sampled_from(["-1", "-100", "abc", "1.5", ""]))
            parts.append(("workers", ["--workers", value], ("--workers",), {}))
    if not parts:
        parts.append(("set:x", ["--set", "x"], ("--set x",), {}))
    seen: set[str] = set()
    args: list[str] = []
    names: list[str] = []
    env: dict[str, str] = {}
    for key, part_args, part_names, part_env in parts:
        if key in seen:
            continue
        seen.add(key)
        args += part_args
        names += part_names
        env.update(part_env)
    if draw(st.booleans()):  # a value-taking option left without its value, at the end
        option = draw(
            st.sampled_from(
                ["--set", "-s"]
                + (["--sessions", "--duration", "--workers"] if command == "run" else [])
            )
        )
        args.append(option)
        names.append(option)
    return Case("cli arguments", tuple(names), args=args, command=command, env=env, no_file=True)


OTHER_COMMANDS = [
    (["size", "--read-iops", "abc"], ("--read-iops",)),
    (["size", "--envelope", "no-such-envelope"], ("no-such-envelope",)),
    (["ui", "--port", "eighty"], ("--port",)),
    (["ui", "--workers", "-2"], ("--workers",)),
    (["worker", "--master", "no-port"], ("--master",)),
    (["lab", "set", "--read-iops", "-1"], ("--read-iops",)),
    (["lab", "nosuch"], ("nosuch",)),
    (["report", "/nonexistent/run"], ("/nonexistent/run",)),
    (["runs", "/nonexistent/runs"], ("/nonexistent/runs",)),
    (["compare", "/nonexistent/a", "/nonexistent/b"], ("/nonexistent/a",)),
    (
        ["compare", "/nonexistent/a", "/nonexistent/b", "--max-p99-regression-pct", "-5"],
        ("--max-p99-regression-pct",),
    ),
    (["compare"], ("'baseline'",)),
    (["validate", "a", "b"], ("b",)),
    (["schema", "--bogus"], ("--bogus",)),
]


@st.composite
def other_command(draw: st.DrawFn) -> Case:
    if draw(st.integers(0, 3)) == 0:
        name = draw(WORDS.filter(lambda w: w not in _command_names()))
        return Case("cli arguments", (name,), args=[name], command="", no_file=True)
    args, names = draw(st.sampled_from(OTHER_COMMANDS))
    return Case("cli arguments", names, args=list(args), command="", no_file=True)


@functools.cache
def _command_names() -> frozenset[str]:
    register_commands()  # every command on the app
    from sim.cli.app import app

    return frozenset(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- running a case


class InProcessCli:
    """``sim.cli.main`` with the world outside validation replaced by stand-ins."""

    def __init__(self, directory: Path, mp: pytest.MonkeyPatch) -> None:
        import sim.cli
        import sim.cli.run
        import sim.run.runner

        self.directory = directory
        self.serial = itertools.count()
        self.reached: list[str] = []
        self.counts: dict[str, int] = {}
        self._main = sim.cli.main

        def stand_in(name: str, value: Any = RAN) -> Callable[..., Any]:
            def called(*args: Any, **kwargs: Any) -> Any:
                self.reached.append(name)
                return value

            return called

        mp.setattr(sim.cli.run, "_execute", stand_in("_execute"))
        # Typer rebuilds the whole click command tree from the signatures on every call (~90 %
        # of an in-process call); build it once and reuse it: the same objects parse the same
        # way (click makes a fresh context per call).
        # Every command registered first: the tree is built once, with all of them.
        register_commands()
        build = typer.main.get_command
        built: dict[int, Any] = {}

        def get_command(instance: Any) -> Any:
            if id(instance) not in built:
                built[id(instance)] = build(instance)
            return built[id(instance)]

        mp.setattr(typer.main, "get_command", get_command)
        mp.setattr(sim.run.runner, "build_target", self._refuse("build_target"))
        for kind, entry in list(registry.targets().items()):
            if entry.factory is not None:
                refuse = self._refuse(f"target {kind}")
                mp.setitem(registry._targets, kind, dataclasses.replace(entry, factory=refuse))
        # None in sys.modules: any import of the Locust integration fails at once (it would
        # monkey-patch this process with gevent).
        for module in ("sim.locust", "sim.locust.distributed", "sim.locust.app"):
            mp.setitem(sys.modules, module, None)
        for name in list(os.environ):
            if name.upper().startswith("DBSIM_"):
                mp.delenv(name)
        mp.chdir(directory)

    def _refuse(self, what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.reached.append(what)
            raise RuntimeError(f"bad input reached {what}")

        return refuse

    def __call__(self, case: Case) -> tuple[list[str], Result]:
        self.counts[case.what] = self.counts.get(case.what, 0) + 1
        argv = case.argv(self.directory, next(self.serial))
        return argv, self.run(argv, case.env)

    def run(self, argv: list[str], env: dict[str, str]) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = self._main(argv)
                except SystemExit as exc:  # main never raises; if it did, the CLI would too
                    code = exc.code if isinstance(exc.code, int) else 1
        return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCli]:
    with pytest.MonkeyPatch.context() as mp:
        runner = InProcessCli(tmp_path_factory.mktemp("bad-input"), mp)
        yield runner
    # The per-strategy counts (shown with -s; the numbers are asserted in each test).
    sys.stdout.write(f"\ngenerated bad inputs per strategy: {json.dumps(runner.counts)}\n")


SEE_HELP = re.compile(r"\(see [^()]*--help\)")


def error_lines(result: Result) -> list[str]:
    return [SEE_HELP.sub("(see --help)", line) for line in result.stderr.splitlines()]


def assert_bad_input(case: Case, argv: list[str], result: Result, cli: InProcessCli) -> None:
    """Exit 2, no traceback, nothing on stdout, only ``error:`` lines naming the culprit."""
    where = (
        f"{case.what}: {argv!r} env={case.env}\nexit {result.code}\n{result.stderr}{result.stdout}"
    )
    assert result.code == EXIT_BAD_INPUT, where
    assert cli.reached == [], f"bad input reached {cli.reached}: {where}"
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "run with --debug for the traceback" not in text, where
    assert result.stdout == "", where
    lines = result.stderr.splitlines()
    assert lines, where
    for line in lines:
        assert line.startswith("error: "), where
        assert names_one_of(line, case.names), f"names none of {case.names}: {where}"
    if case.secret is not None:
        assert case.secret not in text, f"the literal secret was printed: {where}"


def names_one_of(line: str, names: tuple[str, ...]) -> bool:
    """The line names one of ``names``: it contains it, or (a model check's message) it is
    about the parent section and mentions the field: ``error: a.b: … c …`` names ``a.b.c``."""
    for name in names:
        parent, _, leaf = name.rpartition(".")
        if name in line or (
            parent and line.startswith(f"error: {parent}: ") and re.search(rf"\b{leaf}\b", line)
        ):
            return True
    return False


def check(case: Case, cli: InProcessCli) -> None:
    cli.reached.clear()
    argv, result = cli(case)
    assert_bad_input(case, argv, result, cli)


# --------------------------------------------------------------------------- the properties

N_SCENARIOS = 200
N_COMBINATIONS = 30
N_YAML = 60
N_ARGUMENTS = 150
N_OTHER = 30


def test_the_bases_are_valid() -> None:
    """The mutations start from scenarios that validate (else a mutation proves nothing)."""
    for name, data in BASES.items():
        validate(copy.deepcopy(data))
        assert not shape_problems(data), name


@settings(max_examples=N_SCENARIOS, **SETTINGS)
@given(case=bad_scenario())
def test_malformed_scenarios_exit_2_naming_the_field(case: Case, cli: InProcessCli) -> None:
    check(case, cli)


@settings(max_examples=N_COMBINATIONS, **SETTINGS)
@given(case=combination_scenario())
def test_sections_wrong_together_exit_2_naming_the_field(case: Case, cli: InProcessCli) -> None:
    check(case, cli)


@settings(max_examples=N_YAML, **SETTINGS)
@given(case=bad_yaml_file())
def test_bad_yaml_files_exit_2_naming_the_file(case: Case, cli: InProcessCli) -> None:
    check(case, cli)


@settings(max_examples=N_ARGUMENTS, **SETTINGS)
@given(case=bad_arguments())
def test_bad_argument_sets_exit_2_naming_the_option(case: Case, cli: InProcessCli) -> None:
    check(case, cli)


@settings(max_examples=N_OTHER, **SETTINGS)
@given(case=other_command())
def test_other_commands_bad_arguments_exit_2(case: Case, cli: InProcessCli) -> None:
    check(case, cli)


def test_missing_and_unreadable_scenario_files(cli: InProcessCli, tmp_path: Path) -> None:
    for case in [
        Case("files", ("no-such.yaml",), args=[str(tmp_path / "no-such.yaml")], no_file=True),
        Case("files", (str(tmp_path),), args=[str(tmp_path)], no_file=True),
        Case("files", ("'scenario'",), args=["a\x00b.yaml"], no_file=True),
    ]:
        check(case, cli)


def _with(base: str, path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASES[base])
    _set(data, path, value)
    return data


#: What the generated cases found, kept as fixed examples (each gave a traceback-free but
#: wrong answer: accepted, exit 3 "unexpected …", or a line that did not name the field).
REGRESSIONS = [
    # accepted, a run would never end: allow_inf_nan=False in the scenario models
    Case("regression", ("load.duration_s",), data=_with("quickstart", "load.duration_s", math.inf)),
    Case(
        "regression",
        ("--duration", "load.duration_s"),
        args=["--duration", "inf"],
        command="run",
        no_file=True,
    ),
    Case(
        "regression",
        ("slos[0].p99_us_max",),
        data=_with("quickstart", "slos", [{"p99_us_max": math.inf}]),
    ),
    Case(
        "regression",
        ("workload.parameters.frontend.process_rate_ops_s",),
        data=_with("filetree-eda", P + "frontend.process_rate_ops_s", math.inf),
    ),
    # exit 3, OverflowError: int(inf) in Sweep's check
    Case(
        "regression",
        ("load.sweep.max",),
        data=_with(
            "quickstart",
            "load.sweep",
            {"vary": "sessions", "start": 1, "max": math.inf, "factor": 2, "step_duration_s": 5},
        ),
    ),
    # exit 3, UnicodeDecodeError / RecursionError while reading the file
    Case("regression", ("case-",), raw=b"workload: {name: \xff}\n"),
    Case("regression", ("case-",), raw=b"load: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
    Case("regression", ("load.steps",), args=["--set", "load.steps=" + "[" * 5000], no_file=True),
    # exit 3 writing the bundle (or printing): a cycle / deep nesting in collectors.ontap
    Case(
        "regression",
        ("collectors.ontap", "case-"),  # now refused while reading, with its line and column
        raw=b"workload: {name: slob}\ncollectors: {ontap: &a {x: *a}}\n",
    ),
    Case(
        "regression",
        ("collectors.ontap", "case-"),
        data=_with(
            "quickstart",
            "collectors.ontap",
            functools.reduce(lambda inner, _: {"a": inner}, range(300), 1),
        ),
    ),
    # accepted; failed later at mkdir / open with "embedded null byte"
    Case(
        "regression",
        ("output.directory",),
        data=_with("quickstart", "output.directory", "runs\x00x"),
    ),
    # a path like load[1] for the key `yes:`
    Case("regression", ("load: key",), raw=b"workload: {name: slob}\nload: {yes: 1}\n"),
    # accepted, failed mid-load in numpy (negative seed) or beyond a 32-bit key
    Case("regression", (P + "load_seed",), data=_with("quickstart", P + "load_seed", -5)),
    Case("regression", (P + "scale",), data=_with("quickstart", P + "scale", "100T")),
    Case(
        "regression", (P + "database_size",), data=_with("postgres-ssb", P + "database_size", 2**60)
    ),
    # "workload.parameters: 'abc' is neither …": the field was not named
    Case("regression", (P + "scale",), data=_with("quickstart", P + "scale", "abc")),
    # accepted by validate (refused only when the target was built) / a literal password
    Case(
        "regression",
        ("target.extra",),
        data=_with(
            "quickstart", "target", {"kind": "odbc", "driver": "x", "extra": {"a;PWD": "y"}}
        ),
    ),
    Case(
        "regression",
        ("target.extra",),
        data=_with(
            "postgres-ssb",
            "target",
            {"kind": "odbc", "driver": "x", "extra": {"Pwd": "S3cret-odbc"}},
        ),
        secret="S3cret-odbc",
    ),
    # accepted by validate; refused only once the target was built
    Case(
        "regression",
        ("workload.name",),
        data=_with("quickstart", "target", {"kind": "filetree", "path": "/tmp"}),
    ),
    # issue #20: exit 3 "unexpected ValueError" without the field (YAML tags on text, numbers
    # of 5,000 digits in the file, in --set and in DBSIM_*), recursion through !!pairs/!!omap
    Case("regression", ("case-",), raw=b"workload: {name: slob}\nload: {sessions: !!int abc}\n"),
    Case("regression", ("case-",), raw=b"workload: {name: slob}\nload: {warmup_s: !!float x}\n"),
    Case(
        "regression",
        ("case-",),
        raw=b"workload: {name: slob}\nload: {seed: " + b"9" * 5000 + b"}\n",
    ),
    Case(
        "regression", ("--set load.seed",), args=["--set", "load.seed=" + "9" * 5000], no_file=True
    ),
    Case(
        "regression",
        ("environment DBSIM_LOAD__SEED",),
        env={"DBSIM_LOAD__SEED": "9" * 5000},
        no_file=True,
    ),
    Case(
        "regression",
        ("case-",),
        raw=b"workload: {name: slob}\ncollectors: {ontap: &a !!pairs [[x, *a]]}\n",
    ),
    Case(
        "regression",
        ("case-",),
        raw=b"workload: {name: slob}\ncollectors: {ontap: &a !!omap [{x: *a}]}\n",
    ),
    Case("regression", ("case-",), raw=b"workload: {name: slob}\ndescription: !!binary aGk=\n"),
    # accepted silently, the last key winning: a second table_prefix retargeted the run
    Case(
        "regression",
        ("case-",),
        raw=b"workload:\n  name: slob\n  parameters:\n    table_prefix: a\n    table_prefix: b\n",
    ),
    # accepted by validate and printed: a literal secret in the (then free-form) ontap section
    Case(
        "regression",
        ("collectors.ontap.password",),
        data=_with(
            "quickstart",
            "collectors.ontap",
            {"cluster": "https://c", "username_env": "U", "password_env": "P", "svm": "s"}
            | {"password": "S3cret-ontap"},
        ),
        secret="S3cret-ontap",
    ),
    # accepted; the bundle could not be written (UnicodeEncodeError): a non-UTF-8 byte
    Case(
        "regression",
        ("target.path",),
        args=["--set", "target.path=/tmp/x\udcff.db"],
        no_file=True,
    ),
    # accepted; Oracle (before 12.2) refuses the 31-character index name when it is created
    Case(
        "regression",
        (P + "table_prefix",),
        data={
            "target": {"kind": "oracle"},
            "workload": {"name": "slob", "parameters": {"table_prefix": "p" * 16, "schemas": 1000}},
        },
    ),
]


@pytest.mark.parametrize("case", REGRESSIONS, ids=lambda c: c.names[0])
def test_regressions(case: Case, cli: InProcessCli) -> None:
    for command in ("validate", "run") if not case.no_file else (case.command,):
        check(dataclasses.replace(case, command=command), cli)


# --------------------------------------------------------------------------- the real CLI agrees

N_SUBPROCESS = 10


def test_a_sample_through_the_real_cli_matches_in_process(
    cli: InProcessCli, tmp_path: Path
) -> None:
    """The same argv through ``python -m sim.cli``: same exit code, same lines, same stdout."""
    started: list[tuple[Case, list[str], Result, subprocess.Popen[str]]] = []
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DBSIM_")}
    env["TMPDIR"] = str(tmp_path)
    env.pop("COLUMNS", None)

    @settings(max_examples=N_SUBPROCESS, **SETTINGS)
    @given(case=st.one_of(bad_scenario(), bad_yaml_file(), bad_arguments(), combination_scenario()))
    def start(case: Case) -> None:
        if case.command not in ("validate", "run"):  # a real child never loads or drops
            case = dataclasses.replace(case, command="validate")
        cli.reached.clear()
        argv, result = cli(case)
        assert_bad_input(case, argv, result, cli)
        proc = forked_dbsim.popen(
            [sys.executable, "-m", "sim.cli", *argv],
            cwd=cli.directory,
            env={**env, **case.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append((case, argv, result, proc))

    try:
        start()
        assert len(started) >= N_SUBPROCESS
        for case, argv, result, proc in started:
            out, err = proc.communicate(timeout=120)
            real = Result(proc.returncode, out, err)
            where = f"{argv!r} env={case.env}\nin-process:\n{result}\nreal:\n{real}"
            assert real.code == result.code == EXIT_BAD_INPUT, where
            assert error_lines(real) == error_lines(result), where
            assert real.stdout == result.stdout == "", where
    finally:
        for *_, proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


# --------------------------------------------------------------------------- SQL identifiers

#: Each registered dialect's identifier limit, from its record.
MAX_IDENTIFIER_CHARS = {name: record.max_identifier_chars for name, record in dialects().items()}

#: A target kind that speaks each registered dialect (its registry entry carries the record).
DIALECT_TARGET = {
    entry.dialect.name: kind
    for kind, entry in sorted(registry.targets().items())
    if entry.dialect is not None
}


@settings(max_examples=60, **SETTINGS)
@given(name=hostile_identifier(), dialect=st.sampled_from(sorted(MAX_IDENTIFIER_CHARS)))
def test_hostile_identifiers_never_render(name: str, dialect: str) -> None:
    """The last line of defence, at render time: a name the rules refuse is never quoted in."""
    if len(name) <= MAX_IDENTIFIER_CHARS[dialect] and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return  # a "long" draw within this dialect's limit: a fine name here
    assert identifier_problem(dialect, name) is not None
    with pytest.raises(WorkloadError):
        quote_identifier(dialect, name)


@settings(max_examples=60, **SETTINGS)
@given(
    field_and_longest=st.sampled_from([(P + "table_prefix", 16), ("target.schema_name", 63)]),
    data=st.data(),
    command=st.sampled_from(["run", "load", "drop", "validate"]),
)
def test_hostile_identifiers_are_refused_before_any_connection(
    field_and_longest: tuple[str, int], data: st.DataObject, command: str, cli: InProcessCli
) -> None:
    path, longest = field_and_longest
    name = data.draw(hostile_identifier(longest))
    base = "postgres-slob" if data.draw(st.booleans()) else "postgres-ssb"
    scenario = copy.deepcopy(BASES[base])
    _set(scenario, path, name)
    # check() asserts no target factory, no build_target and no _execute was reached.
    check(Case("hostile identifier", (path,), data=scenario, command=command), cli)


SQL_KEYWORDS = [
    "select",
    "table",
    "user",
    "order",
    "group",
    "from",
    "where",
    "drop",
    "SELECT",
    "Table",
]


def _paramstyle(kind: str) -> str:
    entry = registry.target(kind)
    assert entry.factory is not None
    return entry.factory(entry.settings_model()).paramstyle


#: The bind style of each dialect's native target.
PARAMSTYLE = {dialect: _paramstyle(kind) for dialect, kind in DIALECT_TARGET.items()}


class FakeSqlTarget:
    """What a workload reads of its target to build statements (no driver, no connection)."""

    def __init__(self, dialect: str) -> None:
        self.kind = DIALECT_TARGET[dialect]
        self.dialect = dialect
        self.paramstyle = PARAMSTYLE[dialect]


@settings(max_examples=40, **SETTINGS)
@given(
    # Lower case only: table_prefix refuses upper case (workloads.naming: catalogues that fold
    # case would make SLOB and slob name the same tables).
    prefix=st.sampled_from([k.lower() for k in SQL_KEYWORDS])
    | st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True),
    workload_name=st.sampled_from(["slob", "ssb"]),
    dialect=st.sampled_from(sorted(DIALECT_TARGET)),
    count=st.integers(1, 999),
)
def test_accepted_identifiers_reach_sql_only_quoted(
    prefix: str, workload_name: str, dialect: str, count: int
) -> None:
    """Every name a scenario makes passes the rules and appears in SQL only as the dialect's
    preparer quotes it (keywords included); and the statements still parse."""
    entry = registry.workload(workload_name)
    target: Any = FakeSqlTarget(dialect)
    counts = (
        {"schemas": count} if workload_name == "slob" else {"tables": count, "database_size": "64G"}
    )
    parameters = entry.workload_class.parameters_model(table_prefix=prefix, **counts)
    made = parameters.sql_identifiers()  # type: ignore[attr-defined]
    assert set(made) == {"table_prefix"}
    for name in made["table_prefix"]:
        assert identifier_problem(dialect, name) is None, name
    workload = entry.workload_class(parameters, target)
    # The names workload.py builds for the highest number are the ones the scenario checked.
    if workload_name == "slob":
        built = [workload.table_name(count), workload.scan_table_name(count)]  # type: ignore[attr-defined]
    else:
        built = [workload.table_name(count)]  # type: ignore[attr-defined]
    assert set(built) <= set(made["table_prefix"])
    # The statements are built for table (schema) 1: its names, longest first.
    one = {"schemas": 1} if workload_name == "slob" else {"tables": 1}
    first = entry.workload_class.parameters_model(table_prefix=prefix, **one).sql_identifiers()  # type: ignore[attr-defined]
    names = sorted(first["table_prefix"], key=len, reverse=True)
    preparer = sqlalchemy_dialect(dialect).identifier_preparer
    statements = workload.statement_inventory()
    assert any(names[-1] in s.sql or preparer.quote(names[-1]) in s.sql for s in statements)
    for statement in statements:
        sql = statement.sql
        for name in names:
            sql = sql.replace(preparer.quote(name), " ")
        for name in names:
            unquoted = re.search(rf"(?<![\w\"\[]){re.escape(name)}(?![\w\"\]])", sql)
            assert unquoted is None, f"{name} unquoted in {statement.name}: {statement.sql}"
        text = statement.sql
        if PARAMSTYLE[dialect] == "format":  # sqlglot reads the portable ? for %s
            text = text.replace("%s", "?").replace("%%", "%")
        sqlglot.parse_one(text, read=dialects()[dialect].sqlglot)


def test_every_identifier_source_is_checked_by_the_scenario() -> None:
    """The scenario fields that become SQL names are exactly those ``sql_identifiers()``
    reports, for every SQL target kind and SQL workload; the rest of a scenario reaches SQL
    only as bind values (the database collector's table_prefix is ``$1``)."""
    expected = {
        "postgres": {"schema_name"},
        "sqlite": set(),
        "oracle": set(),
        "sqlserver": set(),
        "mysql": set(),
        "odbc": set(),
        "filetree": set(),
    }
    for kind, entry in registry.targets().items():
        settings_model = entry.settings_model
        sample = {"odbc": {"driver": "x"}, "filetree": {"path": "/tmp"}}.get(kind, {})
        made = settings_model(**sample).sql_identifiers()  # type: ignore[attr-defined]
        assert set(made) == expected[kind], kind
    for name, entry in registry.workloads().items():
        params = entry.workload_class.parameters_model()
        has_prefix = "table_prefix" in type(params).model_fields
        made = params.sql_identifiers() if hasattr(params, "sql_identifiers") else {}
        assert set(made) == ({"table_prefix"} if has_prefix else set()), name
    # ... and the scenario runs them through the rules: a hostile value is named.
    with pytest.raises(ScenarioError) as info:
        validate(
            {
                **copy.deepcopy(BASES["postgres-slob"]),
                "target": {"kind": "postgres", "schema_name": 'a"b'},
            }
        )
    assert info.value.problems[0].startswith("target.schema_name: ")


# Interpolation into SQL text that is fine, with why. Anything else found by the scan fails.
SQL_INTERPOLATION_ALLOWED = {
    (
        "storage/targets/sqlite.py",
        "self.settings.synchronous.upper()",
    ): "a Literal of off/normal/full",
    (
        "storage/targets/sqlite.py",
        "self.settings.journal_mode.upper()",
    ): "a Literal of wal/delete/truncate",
    (
        "storage/collectors/database.py",
        "', '.join((f'COALESCE(SUM({c}), 0)::float8 AS io_{c}' for c in _PG_IO_COLUMNS))",
    ): "module constants",
    ("storage/collectors/database.py", "',\\n       '.join(columns)"): "module constants",
    ("storage/collectors/database.py", "',\\n       '.join(sources)"): "module constants",
    ("workloads/identity.py", "MARKER_PREFIX"): "a module constant",
    ("workloads/identity.py", "token"): "checked to be 32 hex digits just before",
    (
        "storage/collectors/innodb.py",
        "', '.join((f\"'{name.upper()}'\" for name in INNODB_COUNTERS))",
    ): "the module's own constant counter names (letters and underscores), upper-cased and quoted",
    ("workloads/tablespace.py", "location_literal(placement.location)"): "refused unless an "
    "absolute path free of quotes, backslashes and line breaks, then single-quoted",
    ("sim/connect_check.py", "privilege_sql"): "the CHECKS table's own literal predicates",
    ("sim/connect_check.py", "_MYSQL_ME"): "a module constant (CURRENT_USER() as 'user'@'host')",
    ("sim/connect_check.py", "privilege"): "one of the module's constant privilege names",
    ("sim/check/probe.py", "quoted"): "quote_identifier(dialect, REGISTRY_TABLE) just above",
    ("sim/check/probe.py", "REGISTRY_TABLE"): "a module constant (dbsim_registry)",
    ("storage/targets/first_contact.py", "privilege"): (
        "a privilege name its callers in the module pass as a literal (USAGE, DELETE)"
    ),
    ("storage/targets/first_contact.py", "_MY_GRANTEE"): (
        "a module constant (CURRENT_USER() as 'user'@'host')"
    ),
    ("storage/targets/first_contact.py", "view"): (
        "a v$ view name its callers in the module pass as a literal"
    ),
    ("sim/sqlstats/postgres.py", "grantee"): (
        "quote_identifier('postgres', role) just above, or a fixed phrase (a refusal's text)"
    ),
    ("storage/targets/first_contact.py", "view.replace('v$', 'v_$')"): (
        "the same literal view name, as GRANT spells it"
    ),
}
SQL_WORD = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|TRUNCATE|GRANT|EXEC|MERGE|FROM|WHERE|TABLE|INDEX|SCHEMA)\b|search_path"
)
SAFE_CALLS = {"quote_identifier", "int", "float"}


def _interpolations(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp):
        return [*_interpolations_side(node.left), *_interpolations_side(node.right)]
    return []


def _interpolations_side(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.Constant):
        return []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _interpolations(node)
    if isinstance(node, ast.JoinedStr):
        return _interpolations(node)
    return [node]


def test_no_scenario_value_is_interpolated_into_sql_unquoted() -> None:
    """Source scan of sim/, storage/, workloads/: SQL text built with f-strings, + or % may
    interpolate only quote_identifier(...) / int(...) or an entry of the allow-list above;
    Catalogue.render fills ``{identifier}`` fields only with quote_identifier output."""
    found = []
    for folder in ("sim", "storage", "workloads"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):
                    text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
                    text = " ".join(
                        n.value
                        for n in ast.walk(node)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    )
                else:
                    continue
                if not SQL_WORD.search(text) or _is_message(node, tree):
                    continue
                for value in _interpolations(node):
                    if (
                        isinstance(value, ast.Call)
                        and getattr(value.func, "id", None) in SAFE_CALLS
                    ):
                        continue
                    if (rel, ast.unparse(value)) in SQL_INTERPOLATION_ALLOWED:
                        continue
                    found.append(
                        f"{rel}:{node.lineno}: {ast.unparse(value)} in {ast.unparse(node)[:100]}"
                    )
    assert not found, "SQL built from unchecked values:\n" + "\n".join(found)
    from sim.sql import Catalogue

    render = ast.unparse(ast.parse(_source(Catalogue.render).strip()))
    assert "quote_identifier(self.dialect, value)" in render
    assert ".format(**quoted)" in render


def _source(fn: Any) -> str:
    import inspect
    import textwrap

    return textwrap.dedent(inspect.getsource(fn))


def _is_message(node: ast.AST, tree: ast.AST) -> bool:
    """Strings that are error or log messages (raise X(...), log.x(...)), not SQL."""
    for parent in ast.walk(tree):
        if (
            isinstance(parent, ast.Raise)
            and parent.exc is not None
            and node in list(ast.walk(parent.exc))
        ):
            return True
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Attribute)
            and parent.func.attr in {"debug", "info", "warning", "error", "exception", "append"}
            and any(node in list(ast.walk(arg)) for arg in parent.args)
        ):
            return True
        if (  # an error built to be returned or raised later: `return SomeError(f"...")`
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id.endswith("Error")
            and any(node in list(ast.walk(arg)) for arg in parent.args)
        ):
            return True
    return False


def test_identifier_rules_per_dialect() -> None:
    documented = {"sqlite": 128, "postgres": 63, "oracle": 30, "sqlserver": 128}
    assert {d: MAX_IDENTIFIER_CHARS[d] for d in documented} == documented
    for dialect, limit in MAX_IDENTIFIER_CHARS.items():
        assert identifier_problem(dialect, "a" * limit) is None
        assert "at most" in (identifier_problem(dialect, "a" * (limit + 1)) or "")
        for bad in ["1abc", "a b", 'a"b', "a;b", "é", "", "abc\n", "a-b"]:
            assert identifier_problem(dialect, bad) is not None, (dialect, bad)
    # A reserved word is a fine name: it is quoted wherever it goes.
    assert quote_identifier("postgres", "select") == '"select"'
    assert quote_identifier("sqlserver", "table") == "[table]"
