"""tests/support/cpu_profile.py: the per-test CPU records sum per module (a docs page per
page), the worker's CPU outside its tests is its own line, and the servers' CPU is read."""

from __future__ import annotations

import resource
from pathlib import Path

from tests.support.cpu_profile import CpuProfile, server_cpu, summary, unit_of


def test_units_are_modules_and_docs_pages() -> None:
    assert unit_of("tests/e2e/test_cli_run.py::test_x[a]") == "tests/e2e/test_cli_run.py"
    assert unit_of("tests/unit/test_a.py::TestB::test_c") == "tests/unit/test_a.py"
    docs = "tests/docs/test_docs.py::test_shell_block[docs/validation.md:106]"
    assert unit_of(docs) == "tests/docs/test_docs.py::docs/validation.md"


def test_records_sum_per_unit_highest_first(tmp_path: Path) -> None:
    # two workers' files as the plugin writes them: nodeid, wall, own, children
    (tmp_path / "gw0.tsv").write_text(
        "tests/e2e/test_a.py::test_1\t4.0\t0.5\t2.0\n"
        "tests/docs/test_docs.py::test_shell_block[docs/x.md:3]\t9.0\t0.1\t1.0\n",
        encoding="utf-8",
    )
    (tmp_path / "gw1.tsv").write_text(
        "tests/e2e/test_a.py::test_2\t1.0\t0.25\t0.25\n"
        "tests/docs/test_docs.py::test_shell_block[docs/x.md:9]\t2.0\t0.0\t0.4\n",
        encoding="utf-8",
    )
    lines = summary(tmp_path).splitlines()
    assert lines[0] == "total 4.5 CPU-s over 4 tests, 2 units"
    assert lines[2].split() == ["3.0", "0.8", "5.0", "2", "tests/e2e/test_a.py"]
    assert lines[3].split() == ["1.5", "0.1", "11.0", "2", "tests/docs/test_docs.py::docs/x.md"]


def test_the_worker_outside_its_tests_is_its_own_line(tmp_path: Path) -> None:
    profile = CpuProfile(tmp_path, "gw3")
    profile.pytest_sessionfinish()  # no test ran: xdist's controller writes nothing
    assert not (tmp_path / "gw3.tsv").exists()
    profile._write("tests/unit/test_a.py::test_1", 0.1, 0.0, 0.0)
    profile.pytest_sessionfinish()
    last = (tmp_path / "gw3.tsv").read_text(encoding="utf-8").splitlines()[-1].split("\t")
    assert last[0] == CpuProfile.OUTSIDE
    own = resource.getrusage(resource.RUSAGE_SELF)
    assert 0.0 < float(last[2]) <= own.ru_utime + own.ru_stime + 0.001


def test_the_servers_cpu_is_read_from_proc() -> None:
    # PostgreSQL and MariaDB run on this machine (tests/README.md): their postmaster and
    # mariadbd have used CPU since they started
    assert server_cpu() > 0.0
