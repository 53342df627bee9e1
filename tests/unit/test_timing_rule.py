"""The timing marker's rule (tests/support/timing_rule.py): every test that measures time or
rates carries ``@pytest.mark.timing``, so make test runs it in the serial phase, alone.

The first test reads the whole suite and lists every offender at once (tests/conftest.py also
fails each one when it runs); the others hold the rule itself on small modules written here.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support import timing_rule
from tests.support.timing_rule import REPO, timing_reasons, unmarked_timing_tests


def test_every_test_that_measures_time_or_rates_is_marked_timing() -> None:
    offenders = unmarked_timing_tests(sorted((REPO / "tests").rglob("test_*.py")))
    listing = "\n".join(f"{test}: {'; '.join(why)}" for test, why in sorted(offenders.items()))
    assert not offenders, f"mark these @pytest.mark.timing (or fix the rule's lists):\n{listing}"


def test_the_exemptions_exist_and_say_why() -> None:
    for exempt, reason in timing_rule.EXEMPT.items():
        module, _, qualname = exempt.partition("::")
        assert (REPO / module).is_file(), exempt
        if qualname:
            assert qualname in timing_rule.module_index(REPO / module).marked, exempt
        assert len(reason.split()) >= 4, (exempt, reason)


def _module(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    timing_rule.module_index.cache_clear()
    return path


SAMPLE = '''
    import pytest

    def _delivered(summary):
        """Reads delivered_iops (a docstring does not count)."""
        return summary["stages"][0]["delivered_iops"]

    @pytest.fixture
    def lab():
        return {"stages": [{"delivered_iops": 150.0}]}

    def test_via_a_helper():
        assert _delivered({"stages": [{"delivered_iops": 1}]}) == 1

    def test_via_a_fixture(lab):
        assert lab

    def test_only_a_docstring():
        """Says rate_iops and achieved in prose only."""
        assert True  # rate_iops in a comment

    @pytest.mark.timing
    def test_marked():
        assert _delivered({"stages": [{"delivered_iops": 1}]}) == 1

    class TestGroup:
        def test_method(self):
            assert "load.rate_iops" != "x"
'''


def test_the_rule_follows_helpers_and_fixtures_and_ignores_prose(tmp_path: Path) -> None:
    path = _module(tmp_path, SAMPLE)
    why = "delivered_iops: the device IOPS a run delivered"
    assert timing_reasons(path, "test_via_a_helper") == [why]
    assert timing_reasons(path, "test_via_a_fixture") == [why]
    assert timing_reasons(path, "test_only_a_docstring") == []
    assert timing_reasons(path, "TestGroup.test_method")[0].startswith("rate_iops: ")


def test_only_unmarked_timing_tests_are_offenders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing_rule, "REPO", tmp_path)
    path = _module(tmp_path, SAMPLE)
    offenders = unmarked_timing_tests([path])
    assert sorted(offenders) == [
        "test_sample.py::TestGroup.test_method",
        "test_sample.py::test_via_a_fixture",
        "test_sample.py::test_via_a_helper",
    ]


def test_a_module_marker_covers_its_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing_rule, "REPO", tmp_path)
    path = _module(
        tmp_path, "import pytest\npytestmark = [pytest.mark.timing]\n" + textwrap.dedent(SAMPLE)
    )
    assert unmarked_timing_tests([path]) == {}


def test_helpers_imported_from_other_test_modules_are_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing_rule, "REPO", tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helpers.py").write_text(
        "def measure(summary):\n    return summary['achieved']\n", encoding="utf-8"
    )
    path = _module(
        tmp_path, "from tests.helpers import measure\n\ndef test_x():\n    measure({})\n"
    )
    assert timing_reasons(path, "test_x") == ["achieved: an achieved rate against the one asked"]
