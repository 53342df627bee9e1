"""The stricter SQL check (tests/contract/sql_rules.py) on Oracle's and SQL Server's SQL: each
rule catches its known-bad statement (which sqlglot alone reads without complaint), leaves
the right form of the same thing alone, and finds nothing in any statement dbsim sends to
those servers: every workload's inventory (the table registry's statements included), the
dialect's cache-size query, validate --connect's probes and the statistics collectors'
queries."""

from __future__ import annotations

import pytest

from sim import connect_check
from sim.dialects import dialects
from storage.collectors import oracle_stats, sqlserver_stats
from tests.contract.sql_rules import (
    ORACLE,
    RULES,
    SQLSERVER,
    Finding,
    Rule,
    check,
    mixed_case_names,
    read,
)
from tests.contract.test_dialects import CASES, inventory

STRICT = (ORACLE, SQLSERVER)
BAD = [(rule, dialect) for rule in RULES for dialect in rule.dialects]


@pytest.mark.parametrize(("rule", "dialect"), BAD, ids=[f"{r.name}-{d}" for r, d in BAD])
def test_each_rule_catches_its_known_bad_statement(rule: Rule, dialect: str) -> None:
    sql = rule.bad[dialect]
    # sqlglot alone takes it: the rule is what refuses it.
    assert not isinstance(read(sql, dialect), Finding), f"sqlglot refuses {sql!r} already"
    found = check(sql, dialect)
    assert [f for f in found if f.rule == rule.name], f"{rule.name} missed {sql!r}: {found}"


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_each_rule_cites_the_vendors_reference(rule: Rule) -> None:
    assert rule.cite and all(c.startswith("https://") for c in rule.cite)
    assert rule.what and set(rule.dialects) <= set(STRICT)


GOOD = [
    (ORACLE, "SELECT x.custid FROM slob_1_cf1 x WHERE x.custid = :lo"),
    (ORACLE, "SELECT custid FROM slob_1_cf1 ORDER BY custid OFFSET 5 ROWS FETCH NEXT 5 ROWS ONLY"),
    (ORACLE, "SELECT custid AS k FROM (SELECT custid FROM slob_1_cf1) s"),
    (ORACLE, "SELECT c2 FROM slob_1_cf1 AS OF TIMESTAMP SYSTIMESTAMP - INTERVAL '1' MINUTE"),
    (
        ORACLE,
        "SELECT CAST(custid AS VARCHAR2(10)) FROM slob_1_cf1 JOIN t2 ON CAST(a AS INTEGER) = b",
    ),
    (ORACLE, "SELECT COUNT(*) FROM slob_1_cf1 GROUP BY DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)"),
    (ORACLE, 'SELECT COUNT(*) FROM "SLOB_1_CF1" WHERE USER IS NOT NULL'),
    (ORACLE, "SELECT COUNT(*) FROM slob_1_cf1_" + "x" * 19),
    (SQLSERVER, "SELECT TOP 10 custid FROM slob_1_cf1 AS x ORDER BY custid"),
    (SQLSERVER, "SELECT custid FROM slob_1_cf1 ORDER BY custid OFFSET 5 ROWS"),
    (SQLSERVER, "DROP TABLE IF EXISTS user_1"),
    (SQLSERVER, "SELECT COUNT(*) FROM sys.indexes WHERE is_unique = 1 AND name LIKE ?"),
    (SQLSERVER, "SELECT CONVERT(VARCHAR(23), create_date, 126), CURRENT_USER FROM sys.objects"),
    (SQLSERVER, "SELECT [file] FROM user_1 WHERE custid = ?"),
]


@pytest.mark.parametrize(("dialect", "sql"), GOOD)
def test_the_right_forms_pass(dialect: str, sql: str) -> None:
    assert check(sql, dialect) == []


def test_strings_and_comments_are_not_read_as_sql() -> None:
    sql = "SELECT name FROM dbsim_registry WHERE name = 'LIMIT 1 ILIKE TRUE' -- AS x LIMIT\n"
    assert check(sql, SQLSERVER) == []


def test_a_statement_sqlglot_cannot_read_is_refused_by_the_parser() -> None:
    [finding] = check("SELECT FROM WHERE", ORACLE)
    assert finding.rule == "parse"


def sent(dialect: str) -> list[tuple[str, str]]:
    """(where, SQL) of every statement dbsim sends to a ``dialect`` server."""
    out = [
        (f"{workload}/{statement.name}", statement.sql)
        for workload, case_dialect in CASES
        if case_dialect == dialect
        for statement in inventory(workload, dialect)
    ]
    cache = dialects()[dialect].cache
    if cache is not None:
        out.append(("cache", cache.query))
    # validate --connect's round trip, identity and privilege probes (sim.connect_check).
    out.append(("connect/round_trip", connect_check.ROUND_TRIP.get(dialect, "SELECT 1")))
    out += [(f"connect/{k}", sql) for k, sql in connect_check.IDENTITY[dialect].items()]
    fill = {"user": "dbsim", "login": "dbsim", "scope": "users", "scope_literal": "'USERS'"}
    out += [(f"connect/{c.name}", c.sql.format(**fill)) for c in connect_check.CHECKS[dialect]]
    module = oracle_stats if dialect == ORACLE else sqlserver_stats
    out += [
        (f"collector/{name}", value)
        for name, value in vars(module).items()
        if name.endswith("_SQL") and isinstance(value, str)
    ]
    return out


@pytest.mark.parametrize("dialect", STRICT)
def test_every_statement_dbsim_sends_passes(dialect: str) -> None:
    statements = sent(dialect)
    assert {where.split("/")[0] for where, _ in statements} >= {
        "slob",
        "ssb",
        "cache",
        "connect",
        "collector",
    }
    failures = [f"{where}: {finding}\n  {sql}" for where, sql in statements
                for finding in check(sql, dialect)]  # fmt: skip
    assert not failures, "\n".join(failures)
    assert mixed_case_names([sql for _, sql in statements], dialect) == []


def test_a_name_spelt_in_two_cases_across_statements_is_found() -> None:
    statements = ["SELECT custid FROM user_1", "SELECT CUSTID FROM user_1 WHERE custid = ?"]
    assert mixed_case_names(statements, SQLSERVER) == ["CUSTID / custid"]
