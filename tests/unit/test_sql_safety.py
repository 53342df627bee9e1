"""The sql workload's tokenizer and rules (workloads.sql.safety, .parameters): what is run,
how, and what is refused with the statement and the field named."""

from __future__ import annotations

from typing import Any

import pytest

from sim.config.resolve import validate
from sim.errors import ScenarioError
from workloads.sql.safety import READ, UNCERTAIN, WRITE, UnsafeStatement, read_statement


@pytest.mark.parametrize(
    ("sql", "kind", "params", "writes"),
    [
        ("SELECT abalance FROM pgbench_accounts WHERE aid = :aid", READ, ("aid",), ()),
        ("select c from t where id between :a and :a + 99 order by c;", READ, ("a", "a"), ()),
        ("SELECT a::int FROM t WHERE b = :b -- a comment; DROP TABLE t", READ, ("b",), ()),
        ("SELECT 'it''s' FROM t /* ; */", READ, (), ()),
        ("SELECT COUNT(*), MAX(x) FROM t", READ, (), ()),
        ("SELECT nextval('s')", UNCERTAIN, (), ()),
        ("SELECT my_function(:x) FROM t", UNCERTAIN, ("x",), ()),
        ("UPDATE pgbench_accounts SET abalance = abalance + :d WHERE aid = :a", WRITE, ("d", "a"),
         ("pgbench_accounts",)),
        ("INSERT INTO s.h (a) VALUES (:a)", WRITE, ("a",), ("s.h",)),
        ("DELETE FROM t WHERE k = 1", WRITE, (), ("t",)),
        ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", WRITE, (), ("t",)),
        ("SELECT * FROM t WHERE k = 1 FOR UPDATE", WRITE, (), ()),
    ],
)  # fmt: skip
def test_what_a_statement_does(sql: str, kind: str, params: tuple[str, ...], writes: Any) -> None:
    reading = read_statement(sql)
    assert (reading.kind, reading.params, reading.writes) == (kind, params, writes)


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("CREATE TABLE x (a int)", "DDL"),
        ("drop table pgbench_accounts", "DDL"),
        ("TRUNCATE t", "DDL"),
        ("SELECT 1 FROM t WHERE a IN (SELECT 1); ALTER TABLE t ADD b int", "more than one"),
        ("SELECT 1; SELECT 2", "more than one"),
        ("SELECT 1 FROM t WHERE x = (CREATE)", "DDL"),
        ("COMMIT", "transaction"),
        ("SET work_mem = '1GB'", "transaction"),
        ("CALL p()", "procedure"),
        ("EXEC sp_who", "procedure"),
        ("SELECT * INTO t2 FROM t", "INTO"),
        ("SELECT $$x$$", "dollar"),
        ("SELECT 'a\\'; DROP TABLE t; --'", "backslash"),
        ("SELECT ':x' FROM t", "literal"),
        ("SELECT 'unterminated", "cannot be read"),
        ("GRANT ALL ON t TO u", "DDL"),
        ("EXPLAIN ANALYZE DELETE FROM t", "not a query"),
        ("   -- only a comment", "no statement"),
    ],
)
def test_refused(sql: str, why: str) -> None:
    with pytest.raises(UnsafeStatement, match=why):
        read_statement(sql)


def scenario(**parameters: Any) -> dict[str, Any]:
    return {
        "name": "sqlsafety",
        "target": {"kind": "sqlite"},
        "workload": {"name": "sql", "parameters": parameters},
    }


def statement(**fields: Any) -> dict[str, Any]:
    return {"name": "s1", "weight": 1, "sql": "SELECT v FROM t WHERE k = :k",
            "params": {"k": {"uniform": [1, 10]}}, **fields}  # fmt: skip


def refusal(**parameters: Any) -> str:
    with pytest.raises(ScenarioError) as info:
        validate(scenario(**parameters))
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"sql": "CREATE TABLE t2 (a int)", "params": {}}, "statement s1: sql: DDL"),
        ({"sql": "SELECT 1; DELETE FROM t", "params": {}}, "statement s1: sql: more than one"),
        ({"read_only": True, "sql": "UPDATE t SET v = 1 WHERE k = :k"},
         "statement s1: sql: declared read_only but it writes"),
        ({"params": {"k": {"uniform": [10, 1]}}}, "statement s1: params.k: impossible range"),
        ({"params": {"k": {"gaussian": [1, 10], "stddevs": 1.0}}}, "params.k: stddevs 1.0"),
        ({"params": {"k": {"zipfian": [1, 10], "s": 1.0}}}, "params.k: zipfian needs s"),
        ({"params": {"k": {"exponential": [1, 10]}}}, "params.k: exponential needs parameter"),
        ({"params": {"k": {"uniform": [1, 2], "s": 2}}}, "params.k: s belongs to zipfian"),
        ({"params": {}}, "statement s1: params: no generator for :k"),
        ({"params": {"k": {"uniform": [1, 2]}, "j": {"list": [1]}}}, "params.j: not used"),
        ({"params": {"k": {"sample": {"table": "t;x", "column": "v"}}}},
         "params.k: sample.table: 't;x' is not a plain SQL name"),
        ({"transaction": ["SELECT 1", "DROP TABLE t"], "sql": None, "params": {}},
         "statement s1: transaction[1]: DDL"),
    ],
)  # fmt: skip
def test_hostile_statements_are_refused_naming_statement_and_field(
    fields: dict[str, Any], expected: str
) -> None:
    line = refusal(statements=[statement(**fields)])
    assert line.startswith("workload.parameters.statements[0]: "), line
    assert expected in line, line


def test_commit_needs_may_change_naming_every_written_table() -> None:
    writer = statement(sql="UPDATE t SET v = 1 WHERE k = :k")
    assert "may_change: commit: true needs" in refusal(commit=True, statements=[writer])
    assert "only with commit: true" in refusal(may_change=["t"], statements=[writer])
    line = refusal(commit=True, may_change=["other"], statements=[writer])
    assert "statement s1: writes t, not in may_change" in line
    resolved = validate(scenario(commit=True, may_change=["T"], statements=[writer]))
    assert resolved.workload.parameters.commit is True  # type: ignore[attr-defined]


def test_names_unique_and_slos_join_the_scenario() -> None:
    twice = [statement(), statement()]
    assert "statement s1: name: given twice" in refusal(statements=twice)
    resolved = validate(scenario(statements=[statement(slo={"p99_ms": 5, "ops_s_min": 10})]))
    (slo,) = resolved.slos  # type: ignore[attr-defined]
    assert (slo.op, slo.p99_us_max, slo.ops_s_min) == ("s1", 5000.0, 10)
    # written back from a bundle and read again: not added twice
    again = validate(resolved.model_dump(mode="json"))
    assert len(again.slos) == 1  # type: ignore[attr-defined]


def test_a_committed_run_says_so_first() -> None:
    """The sql workload's commit: true headline opens the console summary and the caveats."""
    from rich.console import Console

    from sim.cli.console import print_summary
    from sim.report.answer import caveats

    headline = "COMMITTED: this run changed your data (commit: true)"
    summary = {"status": "completed", "workload": {"name": "sql", "load": {"headline": headline}},
               "errors": {"invalid": True}}  # fmt: skip
    assert caveats(summary, "vda")[0] == headline
    out = Console(width=80, record=True)
    print_summary(out, summary)
    assert out.export_text().startswith("COMMITTED: this run changed your data")
    assert caveats({"status": "completed"}, "vda") == []
