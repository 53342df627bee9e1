"""make test's parallel work units (tests/support/xdist_scopes.py): a module is one unit,
the docs blocks one unit per page, in the page's order; in the timing phase the ground-truth
truths one unit, the lab's short device modules another, the longest device modules a unit
each, and the units planned over the workers, longest first."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from tests.support.xdist_scopes import (
    DEVICE_MODULES,
    DEVICE_UNITS,
    GROUND_TRUTH_UNIT,
    LOOP_UNIT,
    TIMING_SECONDS,
    UNLISTED_S,
    is_timing_phase,
    next_unit,
    plan_units,
    scope_of,
)


def test_a_docs_block_goes_with_its_page_and_other_tests_with_their_module() -> None:
    docs = "tests/docs/test_docs.py"
    assert scope_of(f"{docs}::test_shell_block[docs/quickstart.md:170]") == (
        f"{docs}::docs/quickstart.md"
    )
    assert scope_of(f"{docs}::test_yaml_block[docs/quickstart.md:12]") == (
        f"{docs}::docs/quickstart.md"
    )
    assert scope_of(f"{docs}::test_shell_block[README.md:29]") == f"{docs}::README.md"
    assert scope_of(f"{docs}::test_example_file[examples/quickstart.yaml]") == docs
    assert scope_of("tests/e2e/test_cli_run.py::test_summary_header") == "tests/e2e/test_cli_run.py"
    assert (
        scope_of("tests/unit/test_x.py::TestGroup::test_y[1]") == "tests/unit/test_x.py::TestGroup"
    )


def test_in_the_timing_phase_the_device_modules_are_in_their_units() -> None:
    truth, iops = "tests/integration/test_ground_truth.py", "tests/integration/test_lab_iops.py"
    array = "tests/integration/test_ground_truth_array.py"
    # The two ground truths' T3 steps fell short when they ran at the same moment.
    assert scope_of(f"{truth}::test_x", timing_phase=True) == GROUND_TRUTH_UNIT
    assert scope_of(f"{array}::test_t3", timing_phase=True) == GROUND_TRUTH_UNIT
    assert scope_of(f"{iops}::test_y[1]", timing_phase=True) == iops
    lab, cache = "tests/integration/test_lab.py", "tests/e2e/test_cache_cli.py"
    assert scope_of(f"{lab}::test_x", timing_phase=True) == LOOP_UNIT
    assert scope_of(f"{cache}::test_y[1]", timing_phase=True) == LOOP_UNIT
    pacing = "tests/integration/test_engine_pacing.py"
    assert scope_of(f"{pacing}::test_z", timing_phase=True) == pacing
    # The parallel phase keeps every module its own unit (the device modules' other tests).
    assert scope_of(f"{truth}::test_x") == truth
    # Every device unit has its measured length (they are the longest: planned first).
    assert set(DEVICE_UNITS.values()) <= set(TIMING_SECONDS)


def test_the_timing_units_are_planned_longest_first_on_the_least_loaded_worker() -> None:
    queue = ["tests/unlisted_a.py", *TIMING_SECONDS, "tests/unlisted_b.py"]
    plans = plan_units(queue, 4)
    assert sorted(s for plan in plans for s in plan) == sorted(queue)  # each planned once
    first_four = sorted(TIMING_SECONDS.values(), reverse=True)[:4]
    assert sorted((TIMING_SECONDS[plan[0]] for plan in plans), reverse=True) == first_four
    loads = [sum(TIMING_SECONDS.get(s, UNLISTED_S) for s in plan) for plan in plans]
    total, longest = sum(loads), max(TIMING_SECONDS.values())
    # LPT's bound: no worker ends more than one unit's length past the even share.
    assert max(loads) <= total / 4 + longest
    # The measured units fit in 4 workers within 1 % of an even share (311 s of 1,243 s).
    assert max(loads) <= 1.01 * total / 4, loads


def test_a_worker_takes_its_own_plan_then_the_longest_unit_left() -> None:
    queue: OrderedDict[str, dict[str, bool]] = OrderedDict(
        (scope, {}) for scope in ["tests/a.py", LOOP_UNIT, GROUND_TRUTH_UNIT, "tests/b.py"]
    )
    plan = ["tests/gone.py", "tests/b.py"]  # its first unit already taken by another worker
    assert next_unit(plan, queue) == "tests/b.py" and plan == []
    assert next_unit(plan, queue) == GROUND_TRUTH_UNIT


def test_every_device_module_exists_and_holds_timing_tests() -> None:
    root = Path(__file__).resolve().parents[2]
    for module in sorted(DEVICE_MODULES):
        path = root / module
        assert path.is_file(), module
        assert "mark.timing" in path.read_text(), f"{module}: no timing test"


def test_the_timing_phase_is_known_by_its_mark_expression() -> None:
    assert is_timing_phase("timing") and is_timing_phase("timing and not long")
    assert not is_timing_phase("not timing and not long") and not is_timing_phase("not timing")
    assert not is_timing_phase("") and not is_timing_phase(None) and not is_timing_phase("long")
