"""The scenario reference in Markdown, rendered from the scenario's JSON Schema.

``dbsim schema --markdown`` prints it; ``docs/reference/scenario.md`` is that output checked
in (``tests/docs/test_docs_build.py`` fails when the two differ). One section per object of
the schema — the scenario itself, then every ``$defs`` entry in the order a reader meets it —
with a table of field, type, default, constraints and description. ``$ref`` becomes a link to
the object's section, ``anyOf`` with ``null`` an optional value, a discriminated ``oneOf`` a
list of the objects it chooses between. The output depends only on the schema: no dates, no
paths, no dict order other than the schema's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sim.config.resolve import json_schema

Schema = dict[str, Any]

OUTPUT_PATH = "docs/reference/scenario.md"
REGENERATE = f".venv/bin/dbsim schema --markdown > {OUTPUT_PATH}"
ROOT = "Scenario"
#: Where the guide explains an object at length (links relative to docs/reference/).
SEE_ALSO: dict[str, str] = {
    "Load": "[Scenarios](../scenarios.md)",
    "Sweep": "[DBA validation walkthrough](../validation.md)",
    "Slo": "[DBA validation walkthrough](../validation.md)",
    "LabCeilings": "[The storage lab](../lab.md)",
    "CollectorSettings": "[Storage telemetry](../telemetry.md)",
    "Output": "[The run bundle](../bundle.md)",
    "SlobParameters": "[SLOB-like](../workloads/slob.md)",
    "SsbParameters": "[SSB-like](../workloads/ssb.md)",
    "EdaParameters": "[EDA-like](../workloads/eda.md)",
    "OracleSettings": "[Databases](../databases.md)",
    "SqlServerSettings": "[Databases](../databases.md)",
    "OdbcSettings": "[Databases](../databases.md)",
}
_CONSTRAINTS: tuple[tuple[str, str], ...] = (
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("multipleOf", "multiple of {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "items ≥ {}"),
    ("maxItems", "items ≤ {}"),
    ("pattern", "pattern `{}`"),
    ("format", "format {}"),
)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def anchor(name: str) -> str:
    """The heading id Python-Markdown's toc extension gives ``## name``."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", name).strip().lower())


def _link(name: str) -> str:
    return f"[{name}](#{anchor(name)})"


def _literal(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return f"`{text}`"


def _text(value: str) -> str:
    """Schema prose for a table cell: RST ``code`` to Markdown, one line, no stray HTML."""
    value = re.sub(r"``([^`]+)``", r"`\1`", " ".join(value.split()))
    parts = value.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _members(node: Schema) -> list[Schema]:
    for key in ("anyOf", "oneOf"):
        if key in node:
            return [m for m in node[key] if isinstance(m, dict)]
    if "allOf" in node and len(node["allOf"]) == 1:
        return [node["allOf"][0]]
    return []


def type_of(node: Schema) -> str:
    """A field's type in words, with links to the objects it holds."""
    if "$ref" in node:
        return _link(_ref_name(node["$ref"]))
    if "const" in node:
        return _literal(node["const"])
    members = _members(node)
    if members:
        names = [type_of(m) for m in members if m.get("type") != "null"]
        text = " or ".join(dict.fromkeys(names))
        return f"{text} or null" if len(names) < len(members) else text
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        items = node.get("items")
        return f"list of {type_of(items)}" if isinstance(items, dict) else "list"
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"mapping of string to {type_of(extra)}"
        return "mapping"
    return str(kind) if kind else "any"


def constraints_of(node: Schema) -> str:
    """min/max, length, pattern, format and enum of a field and its ``anyOf`` members."""
    found: list[str] = []
    for part in [node, *_members(node)]:
        for key, template in _CONSTRAINTS:
            if key in part:
                value = part[key]
                found.append(template.format(value if key == "pattern" else _plain(value)))
        if "enum" in part:
            found.append("one of " + ", ".join(_literal(v) for v in part["enum"]))
    discriminator = node.get("discriminator")
    if isinstance(discriminator, dict) and "propertyName" in discriminator:
        found.append(f"chosen by `{discriminator['propertyName']}`")
    return "; ".join(dict.fromkeys(found)).replace("|", "\\|")


def _plain(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def default_of(name: str, node: Schema, required: set[str]) -> str:
    if name in required:
        return "**required**"
    if "default" in node:
        return _literal(node["default"])
    return "(computed)" if _refs(node) or node.get("type") in ("array", "object") else "—"


def _refs(node: Any) -> list[str]:
    """Every ``$ref`` under ``node``, in document order."""
    if isinstance(node, dict):
        found = [_ref_name(node["$ref"])] if isinstance(node.get("$ref"), str) else []
        for key, value in node.items():
            if key != "discriminator":
                found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


def _paths(schema: Schema) -> tuple[list[str], dict[str, list[str]]]:
    """Objects in reading order (depth first from the root: an object right after the one
    that holds it, then any left over) and the YAML paths where each one appears."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    order: list[str] = [ROOT]
    where: dict[str, list[str]] = {}

    def visit(node: Schema, prefix: str) -> None:
        for field, sub in node.get("properties", {}).items():
            arrays = [sub, *_members(sub)]
            path = prefix + field + ("[]" if any(p.get("type") == "array" for p in arrays) else "")
            for ref in dict.fromkeys(_refs(sub)):
                paths = where.setdefault(ref, [])
                if path not in paths:
                    paths.append(path)
                if ref not in order:
                    order.append(ref)
                    visit(defs.get(ref, {}), path + ".")

    visit(schema, "")
    order.extend(sorted(set(defs) - set(order)))
    return order, where


def _section(name: str, node: Schema, where: list[str]) -> list[str]:
    lines = [f"## {name}", ""]
    if node.get("description"):
        lines += [_text(str(node["description"])), ""]
    used = ", ".join(f"`{path}`" for path in where)
    if name == ROOT:
        lines += ["Where: the top level of a scenario file.", ""]
    elif used:
        lines += [f"Where: {used}.", ""]
    properties: dict[str, Schema] = node.get("properties", {})
    tags = [f"`{field}: {sub['const']}`" for field, sub in properties.items() if "const" in sub]
    if tags:
        lines += [f"Selected by {' and '.join(tags)}.", ""]
    if name in SEE_ALSO:
        lines += [f"Explained in {SEE_ALSO[name]}.", ""]
    if not properties:
        return [*lines, "No fields.", ""]
    required = set(node.get("required", []))
    lines += [
        "| field | type | default | constraints | description |",
        "|---|---|---|---|---|",
    ]
    for field, sub in properties.items():
        cells = (
            f"`{field}`",
            type_of(sub),
            default_of(field, sub, required),
            constraints_of(sub),
            _text(str(sub.get("description", ""))),
        )
        lines.append("| " + " | ".join(cells) + " |")
    if node.get("additionalProperties") is False:
        lines += ["", "Any other field is an error."]
    return [*lines, ""]


def render_markdown(schema: Schema | None = None) -> str:
    """The reference page for ``schema`` (default: the scenario's JSON Schema)."""
    schema = json_schema() if schema is None else schema
    order, where = _paths(schema)
    defs: dict[str, Schema] = schema.get("$defs", {})
    lines = [
        "<!-- Generated from the scenario's JSON Schema by sim/config/schema_doc.py: do not edit.",
        f"     Regenerate with: {REGENERATE} -->",
        "",
        "# Scenario reference",
        "",
        "Every field a scenario file may hold, generated from the JSON Schema that "
        "`dbsim schema` prints (the same model `dbsim validate` and `dbsim run` check "
        "against). A field's path is what `--set` and the `DBSIM_` environment variables "
        "name: `load.sessions` is `--set load.sessions=8` or `DBSIM_LOAD__SESSIONS=8`. "
        "Durations are seconds (`_s`), latencies microseconds (`_us`) unless the name says "
        "otherwise. A default shown as *(computed)* is built when the scenario is validated "
        "(an empty list, the defaults of an object's own fields, SQLite for `target`): "
        "`dbsim validate` prints every value as it will run. Regenerate this page with:",
        "",
        "<!-- docs-test: skip: rewrites this checked-in page; "
        "tests/docs/test_docs_build.py checks that it is current -->",
        "```sh",
        REGENERATE,
        "```",
        "",
        "Objects: " + ", ".join(_link(name) for name in order) + ".",
        "",
    ]
    for name in order:
        node = schema if name == ROOT else defs.get(name, {})
        lines += _section(name, node, where.get(name, []))
    return "\n".join(lines).rstrip("\n") + "\n"
