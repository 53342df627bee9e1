"""The start form's input, without a server: the body (sim.live.form_body), the hosts and
password variables it may use (sim.live.allowance), and its path field, refused at the field
as ``dbsim validate`` refuses it (the same check_paths)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sim.config.resolve import resolve
from sim.config.scenario import ScenarioBase
from sim.live.allowance import Allowance
from sim.live.form_body import MAX_VALUE_CHARS, BodyError, form_values
from sim.live.start_form import FormErrors, scenario_from_form

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def sqlite_base() -> ScenarioBase:
    return resolve(None, environ={})


@pytest.fixture(scope="module")
def postgres_base() -> ScenarioBase:
    sets = [
        ("target.kind", "postgres"),
        ("target.host", "DB1.example"),
        ("target.password_env", "DBSIM_TEST_PG_PASSWORD"),
    ]
    return resolve(None, sets, environ={})


@pytest.mark.parametrize(
    ("mimetype", "body", "says"),
    [
        (JSON, b"", "body: empty"),
        (JSON, b"  \n", "body: empty"),
        (JSON, b'{"load.duration_s": ', "not valid JSON"),
        (JSON, b'["load.duration_s", 5]', "an array"),
        (JSON, b"5", "a single value"),
        (JSON, b"[" * 100_000, "nested too deep"),
        (JSON, b'{"a": {"b": ' * 5_000 + b"1" + b"}}" * 5_000, "nested too deep"),
        (JSON, b'{"load.sessions": 1, "load.sessions": 2}', "given twice"),
        (JSON, b'{"load.sessions": "\xff"}', "not UTF-8"),
        (FORM, b"load.sessions=1&load.sessions=2", "given twice"),
        (FORM, b"load.sessions=%ff", "not UTF-8 text"),
        (FORM, b"&".join(b"f%d=1" % i for i in range(101)), "more than 100 fields"),
        ("text/plain", b'{"load.sessions": "1"}', "Content-Type text/plain"),
        ("multipart/form-data", b"--x\r\n", "Content-Type multipart/form-data"),
        ("", b"load.sessions=1", "Content-Type none"),
    ],
)
def test_a_body_that_is_no_form_is_refused_never_read_as_an_empty_one(
    mimetype: str, body: bytes, says: str
) -> None:
    with pytest.raises(BodyError) as caught:
        form_values(mimetype, body)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_values_are_text_as_set_reads_them_and_bad_ones_are_named() -> None:
    body = json.dumps({"load.sessions": 2, "load.rate_ops_s": None, "x": True, "y": 1.5})
    values = form_values(JSON, body.encode())
    assert values == {"load.sessions": "2", "load.rate_ops_s": "", "x": "true", "y": "1.5"}
    huge = b'{"load.duration_s": ' + b"9" * 5_000 + b"}"  # kept as text: no int() guard hit
    with pytest.raises(FormErrors) as caught:
        form_values(JSON, huge)
    assert caught.value.by_field == {
        "load.duration_s": [
            f"load.duration_s: 5000 characters; a form value is at most {MAX_VALUE_CHARS}"
        ]
    }
    with pytest.raises(FormErrors) as caught:
        form_values(JSON, b'{"load.sessions": [1], "load.warmup_s": {"a": 1}}')
    assert sorted(caught.value.by_field) == ["load.sessions", "load.warmup_s"]
    assert form_values(FORM, b"load.sessions=3&target.path=") == {
        "load.sessions": "3",
        "target.path": "",
    }


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("9" * 200, "a number of 200"),
        ("!!binary aGk=", "tag !!binary"),
        ("!!python/object/apply:os.system ['id']", "tag"),
        ("[" * 2_000, "nested more than"),
    ],
)
def test_a_value_no_field_can_take_is_refused_at_its_field(
    sqlite_base: ScenarioBase, value: str, says: str
) -> None:
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(sqlite_base, {"load.duration_s": value, "load.sessions": "1"})
    assert list(caught.value.by_field) == ["load.duration_s"]
    assert says in caught.value.lines[0], caught.value.lines


def _path_line(base: ScenarioBase, path: Path | str) -> str:
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(base, {"target.path": str(path)})
    assert list(caught.value.by_field) == ["target.path"], caught.value.lines
    return caught.value.lines[0]


def test_the_path_field_refuses_what_validate_refuses(
    sqlite_base: ScenarioBase, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert "fifo" in _path_line(sqlite_base, tmp_path / "fifo").lower()
    assert "character device" in _path_line(sqlite_base, "/dev/zero")
    assert "directory" in _path_line(sqlite_base, tmp_path)
    if os.geteuid() == 0:  # a file of another user: only root can make one
        theirs = tmp_path / "theirs.sqlite"
        theirs.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
        os.chown(theirs, 65534, 65534)
        assert "belongs to nobody" in _path_line(sqlite_base, theirs)
    scenario, _ = scenario_from_form(sqlite_base, {"target.path": str(tmp_path / "new.db")})
    assert scenario.target.path == tmp_path / "new.db"  # type: ignore[attr-defined]
    assert not (tmp_path / "new.db").exists()  # looked at, nothing created


def test_only_the_allowed_hosts_and_variables(postgres_base: ScenarioBase) -> None:
    allowance = Allowance.of(postgres_base, ["DBSIM_TEST_OTHER"], ["127.0.0.2"])
    assert allowance.env_names == {"DBSIM_TEST_PG_PASSWORD", "DBSIM_TEST_OTHER"}
    assert allowance.hosts == {"db1.example", "127.0.0.2"}

    def lines(values: dict[str, str]) -> dict[str, list[str]]:
        with pytest.raises(FormErrors) as caught:
            scenario_from_form(postgres_base, values, allowance=allowance)
        return caught.value.by_field

    # Not allowed, and not set either: refused as not allowed, so it was never read.
    refused = lines({"target.password_env": "DBSIM_WEB_LOGIN", "target.host": "evil.example"})
    assert list(refused) == ["target.host", "target.password_env"]
    assert refused["target.password_env"] == [
        "target.password_env: DBSIM_WEB_LOGIN is not a variable this web UI may read (allowed: "
        "DBSIM_TEST_OTHER, DBSIM_TEST_PG_PASSWORD; dbsim ui --allow-env NAME adds one)"
    ]
    assert "'evil.example' is not a host this web UI may connect to" in refused["target.host"][0]
    # Another kind starts from its defaults: 127.0.0.1 is not among the allowed hosts here.
    assert list(lines({"target.kind": "mysql"})) == ["target.host"]
    # A pasted password is refused by the name check, and no line repeats it.
    pasted = lines({"target.password_env": "hunter2 is my password"})
    assert "hunter2" not in json.dumps(pasted)
    # Allowed (host compared without case): only the unset variable is left to say.
    allowed = lines({"target.host": "DB1.EXAMPLE", "target.password_env": "DBSIM_TEST_OTHER"})
    assert allowed == {
        "target.password_env": [
            "target.password_env: environment variable DBSIM_TEST_OTHER is not set"
        ]
    }
