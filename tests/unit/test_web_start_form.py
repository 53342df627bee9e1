"""dbsim's start form (sim.live.start_form) and phase indicator (sim.live.phase), without a server.

The form's errors are compared with what ``dbsim validate`` refuses for the same values: the
scenario resolved with the same ``--set`` overrides (:func:`sim.config.resolve.resolve`), whose
:class:`~sim.errors.ScenarioError` lines the CLI prints after ``error: ``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sim.config.resolve import parse_value, resolve
from sim.config.scenario import ScenarioBase
from sim.core.progress import ProgressMeter
from sim.core.stages import Stage
from sim.errors import ScenarioError
from sim.live.phase import describe, phase_of
from sim.live.start_form import GENERAL, FormErrors, field_of, form_fields, scenario_from_form


@pytest.fixture(scope="module")
def base() -> ScenarioBase:
    return resolve(None, environ={})


def _cli_lines(values: dict[str, str]) -> list[str]:
    pairs = [(name, parse_value(text, name)) for name, text in values.items()]
    with pytest.raises(ScenarioError) as caught:
        resolve(None, pairs, environ={})
    return caught.value.problems


def test_the_form_shows_the_scenarios_values_and_no_password_field(base: ScenarioBase) -> None:
    fields = {f.name: f for f in form_fields(base)}
    assert fields["target.kind"].value == "sqlite" and "postgres" in fields["target.kind"].choices
    assert fields["workload.name"].value == "slob"
    assert fields["workload.parameters.work_unit"].value == "64"
    assert fields["workload.parameters.scale"].value == "80M"  # the data size
    assert fields["load.duration_s"].value == "30.0"
    postgres = [f.name for f in form_fields(base, "postgres", "ssb")]
    for name in ("target.host", "target.port", "target.database", "target.password_env"):
        assert name in postgres
    assert "workload.parameters.database_size" in postgres  # ssb's data size
    assert not [n for n in postgres if n.endswith(".password")]


@pytest.mark.parametrize(
    "values",
    [
        {"load.duration_s": "-5"},
        {"workload.parameters.work_unit": "1", "load.sessions": "abc"},
        {"workload.parameters.update_pct": "70", "load.warmup_s": "-1"},
    ],
)
def test_form_errors_are_the_clis_lines_under_their_fields(
    base: ScenarioBase, values: dict[str, str]
) -> None:
    expected = _cli_lines(values)
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(base, values)
    assert caught.value.lines == expected
    for line in expected:
        name = line.split(": ", 1)[0]
        assert line in caught.value.by_field[name]


def test_a_target_check_blames_the_password_variable(base: ScenarioBase) -> None:
    values = {"target.kind": "postgres", "target.password_env": "DBSIM_TEST_UNSET_VARIABLE"}
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(base, values)
    assert list(caught.value.by_field) == ["target.password_env"]
    assert "DBSIM_TEST_UNSET_VARIABLE is not set" in caught.value.lines[0]


def test_a_valid_form_is_the_scenario_that_runs(base: ScenarioBase) -> None:
    values = {
        "load.duration_s": "3",
        "load.sessions": "",
        "load.rate_ops_s": "250",
        "workload.parameters.scale": "20000",
    }
    scenario, sessions = scenario_from_form(base, values)
    assert scenario.load.duration_s == 3.0
    assert scenario.load.mode == "open" and scenario.load.rate_ops_s == 250.0
    assert scenario.workload.parameters.scale == 20000  # type: ignore[attr-defined]
    assert sessions == 1  # SLOB's default: one session per schema


def test_a_name_that_is_no_field_of_the_form_is_refused_not_ignored(base: ScenarioBase) -> None:
    # Ignored, a typo ran the scenario's default instead; a literal password is never read.
    values = {"load.duration_s": "3", "target.password": "never-read", "load.duraton_s": "9"}
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(base, values)
    assert sorted(caught.value.by_field) == ["load.duraton_s", "target.password"]
    assert all("not a field of this form" in line for line in caught.value.lines)
    assert "never-read" not in str(caught.value)


def test_field_of_takes_the_longest_field_the_line_is_about() -> None:
    fields = ["target.kind", "target.path", "load.duration_s"]
    assert field_of("target.path: Field required", fields) == "target.path"
    assert field_of("load.steps[0].sessions: no", fields) == GENERAL


@dataclass
class _Engine:
    stages: list[Stage]
    max_sessions: int = 4


@dataclass
class _Host:
    state: str
    engine: _Engine | None = None
    entered: dict[str, float] = field(default_factory=dict)
    meter: ProgressMeter = field(default_factory=ProgressMeter)
    final: dict[str, Any] | None = None


def test_the_phase_says_load_progress_and_measuring_time() -> None:
    clock = iter([0.0, 2.0])
    meter = ProgressMeter(clock=lambda: next(clock))
    meter.update("load slob_1_cf1", 0, 10_000)
    meter.update("load slob_1_cf1", 5_000, 10_000)
    loading = describe(_Host("loading", meter=meter))
    assert loading["phase"] == "loading" and loading["pct"] == 50.0
    assert loading["text"] == "load slob_1_cf1: 5,000/10,000 rows (50 %), 2,500 rows/s, ETA 0:00:02"
    stages = [Stage("warmup", None, 5.0, 4, None), Stage("measure", None, 60.0, 4, None)]
    host = _Host("measure", _Engine(stages), {"warmup": 100.0, "measure": 105.0})
    measuring = describe(host, now=120.0)
    assert measuring["elapsed_s"] == 15.0 and measuring["remaining_s"] == 45.0
    assert measuring["pct"] == 25.0
    assert measuring["text"] == "measuring: 0:00:15 elapsed, 0:00:45 remaining"
    assert (
        describe(_Host("warmup", _Engine(stages), {"warmup": 100.0}), now=102.0)["remaining_s"]
        == 3.0
    )
    assert describe(_Host("connecting", _Engine(stages)))["text"] == "connecting 4 sessions"
    assert describe(_Host("finished"))["phase"] == "finishing"  # the bundle is being written
    done = describe(_Host("finished", final={}), "completed (stopped early)")
    assert done["phase"] == "finished" and done["text"] == "finished: completed (stopped early)"
    assert describe(_Host("idle"))["phase"] == "ready"
    assert phase_of({"state": "measure"})["phase"] == "measuring"  # a master's snapshot
