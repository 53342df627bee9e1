"""make test's parallel work units (tests/support/xdist_scopes.py): a module is one unit,
the docs blocks one unit per page, in the page's order; in the timing phase the ground-truth
truths one unit, the lab's short device modules another, the longest device modules a unit
each, the longest handed out first."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from tests.support.xdist_scopes import (
    DEVICE_MODULES,
    DEVICE_UNITS,
    GROUND_TRUTH_UNIT,
    LONGEST_FIRST,
    LOOP_UNIT,
    longest_first,
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
    # Every device unit is handed out first.
    assert set(LONGEST_FIRST) == set(DEVICE_UNITS.values())


def test_the_timing_phase_hands_out_the_longest_units_first() -> None:
    queue: OrderedDict[str, dict[str, bool]] = OrderedDict(
        (scope, {}) for scope in ["tests/a.py", "tests/b.py", *LONGEST_FIRST]
    )
    longest_first(queue)
    assert list(queue) == [*LONGEST_FIRST, "tests/a.py", "tests/b.py"]
    queue.popitem(last=False)  # the first handed out; the rest keep their order
    longest_first(queue)
    assert list(queue) == [*LONGEST_FIRST[1:], "tests/a.py", "tests/b.py"]


def test_every_device_module_exists_and_holds_timing_tests() -> None:
    root = Path(__file__).resolve().parents[2]
    for module in sorted(DEVICE_MODULES):
        path = root / module
        assert path.is_file(), module
        assert "mark.timing" in path.read_text(), f"{module}: no timing test"
