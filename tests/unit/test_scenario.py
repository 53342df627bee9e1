"""Scenario validation: one line per invalid field, precedence CLI > env > file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.resolve import json_schema, resolve, resolved_dict, validate
from sim.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]


def problems(data: dict) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        validate(data)
    return info.value.problems


def test_defaults_are_the_embedded_sqlite_slob_scenario() -> None:
    scenario = resolve(None, environ={})
    assert scenario.target.kind == "sqlite"  # type: ignore[attr-defined]
    assert scenario.workload.name == "slob"  # type: ignore[attr-defined]
    assert scenario.load.duration_s == 30


def test_quickstart_example_is_the_embedded_default() -> None:
    from_file = resolve(REPO / "examples" / "quickstart.yaml", environ={})
    assert resolved_dict(from_file) == resolved_dict(resolve(None, environ={}))


def test_three_mistakes_give_three_lines_naming_the_fields() -> None:
    lines = problems(
        {
            "workload": {"name": "slob", "parameters": {"update_pct": 60}},
            "load": {"sessions": 0, "bogus": 1},
        }
    )
    assert len(lines) == 3, lines
    assert any(line.startswith("load.sessions: ") for line in lines)
    assert any(
        line.startswith("workload.parameters.update_pct: ") and "0-50 or 100" in line
        for line in lines
    )
    assert any(line.startswith("load.bogus: ") for line in lines)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"workload": {"name": "slob"}, "target": {"kind": "nope"}},
            "target.kind: unknown kind 'nope'",
        ),
        (
            {"workload": {"name": "slob", "parameters": {"work_unit": 2}}},
            "workload.parameters.work_unit:",
        ),
        (
            {"workload": {"name": "slob", "parameters": {"scale": 500}}},
            "below the minimum of 10000",
        ),
        (
            {"workload": {"name": "slob"}, "load": {"mode": "open"}},
            "open-loop mode needs rate_ops_s",
        ),
        (
            {"workload": {"name": "slob"}, "load": {"rate_ops_s": 5}},
            "rate_ops_s applies to mode: open",
        ),
        (
            {"workload": {"name": "slob"}, "target": {"kind": "postgres", "password": "hunter2"}},
            "target.password: a literal password is not accepted",
        ),
        ({"workload": {"name": "slob"}, "output": {"name": "../x"}}, "output.name:"),
    ],
)
def test_each_mistake_is_named(data: dict, expected: str) -> None:
    lines = problems(data)
    assert any(expected in line for line in lines), lines
    assert all("hunter2" not in line for line in lines)


def test_scale_in_bytes_is_divided_by_the_block_size() -> None:
    scenario = validate({"workload": {"name": "slob", "parameters": {"scale": "1G"}}})
    assert scenario.workload.parameters.scale_rows == 131072  # type: ignore[attr-defined]


def test_precedence_cli_over_environment_over_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("workload: {name: slob}\nload: {sessions: 2, duration_s: 10}\n")
    env = {"DBSIM_LOAD__SESSIONS": "3", "DBSIM_LOAD__DURATION_S": "20", "DBSIM_UNRELATED": "x"}
    scenario = resolve(path, [("load.sessions", 4)], environ=env)
    assert scenario.load.sessions == 4  # CLI wins
    assert scenario.load.duration_s == 20  # environment over file
    assert resolve(path, environ={}).load.sessions == 2


def test_yaml_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("load:\n  sessions: [1,\n")
    with pytest.raises(ScenarioError) as info:
        resolve(path, environ={})
    assert str(info.value).startswith(f"{path}:3:")


def test_json_schema_lists_every_section_and_target_kind() -> None:
    schema = json_schema()
    assert {"target", "workload", "load", "collectors", "output"} <= set(schema["properties"])
    text = str(schema)
    for kind in ("sqlite", "postgres", "oracle", "sqlserver", "filetree"):
        assert f"'{kind}'" in text
