"""make test's parallel work units (tests/support/xdist_scopes.py): a module is one unit,
the docs blocks one unit per page, in the page's order."""

from __future__ import annotations

from tests.support.xdist_scopes import scope_of


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
