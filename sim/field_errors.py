"""A pydantic ``ValidationError`` as one ``path: what is wrong`` line per problem, the form in
which every invalid field of a scenario (and of a plugin's own settings, such as
``collectors.ontap``) reaches the user."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from sim import registry
from sim.secrets import LITERAL_SECRET_KEYS


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


def short_value(value: Any) -> str:
    """A value as a line quotes it: JSON (strings repr-quoted), cut to 40 characters."""
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
            # pydantic lists the tags in the union's order, which is the plugins' import order
            # (a process that imported SSB's modules first said 'ssb', 'slob'): sorted, as the
            # registry's own "known:" lists are.
            known = ", ".join(sorted(str(ctx.get("expected_tags", "")).split(", ")))
            lines.append(
                f"{_path(loc)}.{field}: unknown {field} {short_value(ctx.get('tag'))} "
                f"(known: {known})"
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
            message += f" (got {short_value(err.get('input'))})"
        line = f"{_path(loc)}: {message}"
        if line not in lines:
            lines.append(line)
    return lines
