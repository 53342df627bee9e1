"""The body of ``POST /dbsim/start`` as the start form's values, or one line saying why not.

Two encodings are read, the ones the page and a script send: a JSON object of field names to
text, numbers, booleans or null, and a URL-encoded form. A JSON number is kept as the text it
was written as, so it is read as ``--set`` reads it (and a 5,000-digit number is refused at
its field, not by ``int()``). Whatever else arrives — malformed JSON, an array, a value that is
a list or an object, a field twice, a value longer than a path can be — is refused; nothing is
ever read as an empty form (which would start the scenario's defaults).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from sim.field_errors import short_value
from sim.live.start_form import FormErrors

MAX_FIELDS = 100
#: The longest value taken: a path can be 4,095 bytes (PATH_MAX), nothing else comes close.
MAX_VALUE_CHARS = 4096
MAX_NAME_CHARS = 200
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"


class BodyError(ValueError):
    """The body is not a form at all: one line, about the request rather than a field."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise BodyError(f"body: field {short_value(key)} given twice")
        seen[key] = value
    return seen


def _json_pairs(text: str) -> dict[str, Any]:
    try:
        data = json.loads(
            text,
            parse_int=str,
            parse_float=str,
            parse_constant=str,
            object_pairs_hook=_no_duplicates,
        )
    except RecursionError:
        raise BodyError("body: JSON nested too deep; the form is one object of values") from None
    except ValueError as exc:  # json.JSONDecodeError, and BodyError passes through as is
        if isinstance(exc, BodyError):
            raise
        raise BodyError(f"body: not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(data, dict):
        kind = "an array" if isinstance(data, list) else "a single value"
        raise BodyError(f"body: {kind}; the form is one JSON object of field: value")
    return data


def _form_pairs(text: str) -> dict[str, Any]:
    try:
        pairs = urllib.parse.parse_qsl(
            text, keep_blank_values=True, errors="strict", max_num_fields=MAX_FIELDS
        )
    except UnicodeDecodeError:
        raise BodyError("body: a %-escape that is not UTF-8 text") from None
    except ValueError:
        raise BodyError(f"body: more than {MAX_FIELDS} fields") from None
    return _no_duplicates(pairs)


def form_values(mimetype: str, data: bytes) -> dict[str, str]:
    """The submitted fields as text. :class:`BodyError` when the body is no form;
    :class:`FormErrors` (lines under their fields) when a value cannot be one."""
    if not data.strip():
        raise BodyError("body: empty; send the form's fields (an empty JSON object {} starts "
                        "the scenario as it is)")  # fmt: skip
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"body: not UTF-8 text (byte {exc.start})") from None
    if mimetype == JSON_TYPE:
        raw = _json_pairs(text)
    elif mimetype == FORM_TYPE:
        raw = _form_pairs(text)
    else:
        raise BodyError(f"Content-Type {mimetype[:60] or 'none'}: send {JSON_TYPE} or a form")
    if len(raw) > MAX_FIELDS:
        raise BodyError(f"body: {len(raw)} fields; the form has fewer than {MAX_FIELDS}")
    long_names = [name for name in raw if len(name) > MAX_NAME_CHARS]
    if long_names:
        raise BodyError(f"body: a field name of {len(long_names[0])} characters")
    values: dict[str, str] = {}
    lines: list[str] = []
    for name, value in raw.items():
        if isinstance(value, dict | list):
            kind = "an object" if isinstance(value, dict) else "a list"
            lines.append(f"{name}: {kind}; a form value is text or a number")
        elif value is None:
            values[name] = ""
        elif isinstance(value, bool):
            values[name] = "true" if value else "false"
        elif len(str(value)) > MAX_VALUE_CHARS:
            lines.append(
                f"{name}: {len(str(value))} characters; a form value is at most {MAX_VALUE_CHARS}"
            )
        else:
            values[name] = str(value)
    if lines:
        raise FormErrors(lines, list(raw))
    return values
