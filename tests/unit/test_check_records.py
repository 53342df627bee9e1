"""``dbsim check``'s per-engine records and arithmetic, without a server: every placeholder a
privilege line or GRANT names is one the record asks the server for, every query of the five
records parses in its own dialect (the Oracle and SQL Server ones cannot run here, so this is
their only proof besides docs/databases.md's review), the window means multiply back to the
counters' changes, and /proc/self/io is read as the read calls it counts."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import sqlglot

from sim import connect_check
from sim.check.probe import CheckLine
from sim.check.reads import process_read_calls, window_means
from sim.dialects import dialect, dialects
from sim.protocols import Sample, gap_sample
from tests.contract.sql_rules import ORACLE, SQLSERVER, check

FIELDS = string.Formatter()
#: Every dialect's first-contact record, as dbsim check finds it (its dialect record).
RECORDS = {name: d.first_contact for name, d in dialects().items() if d.first_contact}


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in FIELDS.parse(text) if name}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_placeholder_is_asked_for(name: str) -> None:
    record = RECORDS[name]
    assert "user" in record.names
    for privilege in record.privileges:
        assert placeholders(privilege.what) | placeholders(privilege.grant) <= set(record.names)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_query_parses_in_its_dialect(name: str) -> None:
    record = RECORDS[name]
    read = dialect(name).sqlglot
    queries = [*record.names.values(), *(p.held for p in record.privileges)]
    for sql in queries:
        assert sqlglot.parse_one(sql, read=read) is not None, sql
    for privilege in record.privileges:
        assert privilege.grant.lstrip().upper().startswith(("GRANT ", "ALTER USER ")), privilege


def test_the_check_asks_only_what_validate_does_not() -> None:
    """validate --connect's privileges (sim.connect_check) come first in the check; the
    records add the page-count proof's and the registry's, never one of the same name."""
    for name, record in RECORDS.items():
        theirs = {c.name for c in connect_check.CHECKS.get(name, ())}
        assert not theirs & {p.what for p in record.privileges}, name
    assert {p.what for p in RECORDS["oracle"].privileges} >= {"EXECUTE on DBMS_ROWID"}
    assert "SELECT on mysql.innodb_index_stats" in {p.what for p in RECORDS["mysql"].privileges}


@pytest.mark.parametrize("name", [ORACLE, SQLSERVER])
def test_the_unrunnable_records_pass_the_stricter_rules(name: str) -> None:
    record = RECORDS[name]
    for sql in [*record.names.values(), *(p.held for p in record.privileges)]:
        assert check(sql, name) == [], sql


def test_window_means_multiply_back_to_the_change() -> None:
    samples = [
        Sample("db", "t", {"blks_read_s": 10.0, "interval_s": 1.0}),
        Sample("db", "t", {"blks_read_s": 40.0, "interval_s": 2.5}),
        gap_sample("db", "t", "reset", "went down"),
        Sample("db", "u", {"blks_read_s": 3.0, "interval_s": 1.0}),
    ]
    means = window_means(samples)
    assert means["t"]["blks_read_s"] * 3.5 == pytest.approx(10.0 + 100.0)
    assert means["u"] == {"blks_read_s": 3.0, "interval_s": 1.0}


def test_process_read_calls(tmp_path: Path) -> None:
    io = tmp_path / "io"
    io.write_text("rchar: 5\nwchar: 6\nsyscr: 1234\nsyscw: 7\nread_bytes: 0\n")
    assert process_read_calls(io) == 1234
    assert process_read_calls(tmp_path / "absent") is None
    io.write_text("syscr: many\n")
    assert process_read_calls(io) is None
    assert isinstance(process_read_calls(), int)  # this process's own, on Linux


def test_a_line_is_one_line_with_its_fix() -> None:
    assert CheckLine("load", True, "10 rows").render() == "\u2713 load: 10 rows"
    line = CheckLine("privilege X", False, "missing", "GRANT X TO u;").render()
    assert line == "\u2717 privilege X: missing \u2014 fix: GRANT X TO u;"
