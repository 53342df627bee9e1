"""dbsim issue #24, item 5: hostile bodies posted to the start form of a real ``dbsim ui``.

Before, a malformed JSON body, a JSON array, a multipart or ``text/plain`` body was read as an
empty form and started the scenario's defaults; a 5,000-digit number, a 10 MB value, a YAML tag
or JSON 100,000 arrays deep gave HTTP 500 with a traceback on the UI's stderr; a FIFO,
``/dev/zero``, a directory or another user's file as ``target.path`` failed later, in loading.

Here Hypothesis draws bodies from those families (and mixes them: wrong content types with
any bytes, any JSON that is not an object, hostile values in any field of the form, JSON or
URL-encoded, unknown fields, paths, password variables and hosts not allowed, bodies over the
limit) and posts each with the page's own Origin and token, so that it reaches the form: every
one is refused — HTTP 400 naming the field it is about (or ``(request)`` for a body that is no
form), 413 beyond the body limit — and, over the whole set, no run starts, no bundle is
written and the UI's stderr holds no traceback and no HTTP 500.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import bundle_dirs, clean_environment
from tests.support.ui_child import UiChild

pytestmark = [pytest.mark.e2e]

REQUEST = "(request)"
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_BODY_BYTES = 64 << 10
SECRET_VAR = "DBSIM_TEST_SECRET"
#: Fields of the default scenario's form (SLOB-like on SQLite) a hostile value goes into.
VALUE_FIELDS = (
    "load.duration_s",
    "load.warmup_s",
    "load.sessions",
    "load.rate_ops_s",
    "workload.parameters.work_unit",
    "workload.parameters.scale",
    "workload.parameters.update_pct",
)
#: Values no field takes: bounds of the YAML reader, tags, nesting, length, range.
HOSTILE_VALUES = st.one_of(
    st.integers(101, 5_000).map(lambda n: "9" * n),
    st.sampled_from(
        [
            "!!binary aGk=",
            "!!python/object/apply:os.system ['id']",
            "!!set {a: null}",
            "!!omap [a: 1]",
            "!!timestamp 2001-12-14",
            "!dbsim bad",
            "&a [*a]",
            "-5",
        ]
    ),
    st.integers(40, 3_000).map(lambda n: "[" * n),
    st.integers(4_097, 20_000).map(lambda n: "x" * n),
)


class Target:
    """The UI under test and the paths no form may name."""

    def __init__(self, ui: UiChild, paths: dict[str, Path]) -> None:
        self.ui, self.paths = ui, paths
        self.headers = ui.token_headers()
        self.posted: Counter[str] = Counter()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    base = tmp_path_factory.mktemp("hostile")
    os.mkfifo(base / "fifo")
    (base / "dir").mkdir()
    paths = {"fifo": base / "fifo", "zero": Path("/dev/zero"), "dir": base / "dir"}
    if os.geteuid() == 0:
        theirs = base / "theirs.sqlite"
        theirs.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
        os.chown(theirs, 65534, 65534)
        paths["foreign"] = theirs
    env = clean_environment(base)
    env[SECRET_VAR] = "never-to-be-sent"
    ui = UiChild(base, env)
    try:
        yield Target(ui, paths)
    finally:
        ui.stop()


def _not_a_json_object(data: bytes) -> bool:
    try:
        return not isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return True


FAMILIES = ("type", "json", "value", "path", "secret", "nested", "big")
Case = tuple[str, str, bytes, set[str]]


@st.composite
def hostile(draw: st.DrawFn, paths: dict[str, Path]) -> Case:
    """(family, content type, body, the keys one of which the refusal must name)."""
    family = draw(st.sampled_from(FAMILIES))
    if family == "type":
        kind = draw(
            st.sampled_from(["text/plain", "multipart/form-data; boundary=x", "text/html", ""])
        )
        return family, kind, draw(st.binary(min_size=1, max_size=300)), {REQUEST}
    if family == "json":
        body = draw(
            st.one_of(
                st.binary(min_size=1, max_size=300),
                st.recursive(st.integers() | st.text(max_size=5), st.lists).map(
                    lambda v: json.dumps(v).encode()
                ),
                st.integers(1_000, 30_000).map(lambda n: b"[" * n + b"]" * n),
            ).filter(_not_a_json_object)
        )
        return family, JSON_TYPE, body, {REQUEST}
    values: dict[str, Any] = {}
    if family == "value":
        values[draw(st.sampled_from(VALUE_FIELDS))] = draw(HOSTILE_VALUES)
    elif family == "path":
        values["target.path"] = str(paths[draw(st.sampled_from(sorted(paths)))])
    elif family == "secret":  # neither the variable nor postgres' default host is allowed
        values.update({"target.kind": "postgres", "target.password_env": SECRET_VAR})
    elif family == "nested":
        values[draw(st.sampled_from(VALUE_FIELDS))] = draw(st.sampled_from([[1], {"a": 1}, []]))
    else:
        values["load.duration_s"] = "1" * (MAX_BODY_BYTES + 1)
    expected = {"target.host", "target.password_env"} if family == "secret" else set(values)
    names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=20)
    extra = draw(st.dictionaries(names, st.text(max_size=20), max_size=3))
    extra = {name: value for name, value in extra.items() if name not in values}
    values.update(extra)
    expected |= set(extra)  # no field of the form: refused too
    if family != "nested" and draw(st.booleans()):
        return family, FORM_TYPE, urllib.parse.urlencode(values).encode(), expected
    return family, JSON_TYPE, json.dumps(values).encode(), expected


def test_hostile_bodies_are_refused_at_their_field_and_start_nothing(target: Target) -> None:
    ui = target.ui

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(hostile(target.paths))
    def refused(case: Case) -> None:
        family, kind, body, expected = case
        headers = {**target.headers, **({"Content-Type": kind} if kind else {})}
        status, answer = ui.request("POST", "/dbsim/start", body, headers)
        target.posted[family] += 1
        if len(body) > MAX_BODY_BYTES:
            assert status == 413, (status, answer)
            return
        assert status == 400, (status, answer, body[:200])
        assert answer["ok"] is False and set(answer["errors"]) & expected, (answer, expected)

    refused()
    # The limit holds without a Content-Length too (a chunked upload of 10 MB).
    chunks = (b'{"load.duration_s": "' if i == 0 else b"x" * 65_536 for i in range(160))
    status, answer = ui.request(
        "POST", "/dbsim/start", chunks, {**target.headers, "Content-Type": JSON_TYPE}
    )
    assert status == 413, answer
    # Locust's own JSON route parses with json.loads: these were a RecursionError and a
    # ValueError there, HTTP 500s.
    for body in (b"[" * 30_000 + b"]" * 30_000, b'{"user_class_name": ', b"9" * 5_000):
        json_type = {**target.headers, "Content-Type": JSON_TYPE}
        status, answer = ui.request("POST", "/user", body, json_type)
        assert status == 400 and REQUEST in answer["errors"], answer
    assert sum(target.posted.values()) >= 100 and set(target.posted) == set(FAMILIES)
    assert ui.run_status() == "idle"
    assert bundle_dirs(ui.out) == []
    stderr = ui.stop()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "resulted in a 500" not in stderr and "Internal Server Error" not in stderr
    assert "never-to-be-sent" not in stderr
