"""Contract tests, workload × dialect: every statement a workload can send is rendered for each
dialect without a server, parsed by sqlglot for that dialect, and compared with the expected
text checked in under tests/contract/expected/<workload>/<dialect>.sql.

Oracle and SQL Server cannot run here, so this is where their SQL is proven: it must parse
as that dialect, and any change to it shows as a diff of the expected files. After a deliberate
change, regenerate with ``pytest tests/contract --regen-contracts`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from sim import registry
from sim.dialects import dialects, runs_on
from sim.protocols import Target
from sim.sql import Statement

EXPECTED = Path(__file__).parent / "expected"
#: Every registered SQL dialect record (sim.dialects): a new one is picked up from the registry.
RECORDS = dialects()
SQLGLOT_DIALECT = {name: record.sqlglot for name, record in RECORDS.items()}
#: A target kind that speaks each dialect natively (its registry entry carries the record).
TARGET_FOR_DIALECT = {
    entry.dialect.name: kind
    for kind, entry in sorted(registry.targets().items())
    if entry.dialect is not None
}
# Statements a parser for the dialect cannot read although the server does (kept short, with why).
PARSER_GAPS: dict[tuple[str, str, str], str] = {}


def parseable(statement: Statement, paramstyle: str) -> str:
    """The statement's text as sqlglot reads it: ``format`` placeholders (``%s``, and ``%%``
    for a literal percent sign, which the driver formats away) in the portable ``?`` form."""
    if paramstyle != "format":
        return statement.sql
    return statement.sql.replace("%s", "?").replace("%%", "%")


def target_for(dialect: str) -> Target:
    entry = registry.target(TARGET_FOR_DIALECT[dialect])
    assert entry.factory is not None, f"no driver for {dialect}"
    return entry.factory(entry.settings_model())


def inventory(workload_name: str, dialect: str) -> list[Statement]:
    entry = registry.workload(workload_name)
    target = target_for(dialect)
    workload = entry.workload_class(entry.workload_class.parameters_model(), target)
    return workload.statement_inventory()


def render(statements: list[Statement]) -> str:
    blocks = [f"-- {s.name} binds={','.join(s.param_names) or '-'}\n{s.sql};\n" for s in statements]
    return "\n".join(blocks)


# Every SQL workload × every dialect it can run on (EDA runs on file trees: no SQL).
CASES = [
    (name, dialect)
    for name, entry in sorted(registry.workloads().items())
    for dialect in sorted(RECORDS)
    if runs_on(entry.workload_class.needs, TARGET_FOR_DIALECT[dialect], dialect)
]


@pytest.mark.parametrize(("workload_name", "dialect"), CASES)
def test_statements_parse_for_their_dialect(workload_name: str, dialect: str) -> None:
    paramstyle = target_for(dialect).paramstyle
    for statement in inventory(workload_name, dialect):
        if (workload_name, dialect, statement.name) in PARSER_GAPS:
            continue
        try:
            sqlglot.parse_one(parseable(statement, paramstyle), read=SQLGLOT_DIALECT[dialect])
        except sqlglot.errors.ParseError as exc:
            pytest.fail(
                f"{workload_name}/{dialect}/{statement.name} does not parse: {exc}\n{statement.sql}"
            )


@pytest.mark.parametrize(("workload_name", "dialect"), CASES)
def test_statements_match_the_expected_text(
    workload_name: str, dialect: str, request: pytest.FixtureRequest
) -> None:
    path = EXPECTED / workload_name / f"{dialect}.sql"
    text = render(inventory(workload_name, dialect))
    if request.config.getoption("--regen-contracts"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run pytest tests/contract --regen-contracts"
    assert text == path.read_text(), f"{path} differs: review, then --regen-contracts"


@pytest.mark.parametrize("dialect", sorted(RECORDS))
def test_the_cache_size_query_parses_and_the_cache_is_named(dialect: str) -> None:
    """Each dialect names the cache that hides its storage; a server cache has a query that
    sqlglot reads as one SELECT (sim.core.cache runs it before the load)."""
    record = RECORDS[dialect]
    if record.cache is not None:
        assert record.cache.name
        parsed = sqlglot.parse_one(record.cache.query, read=SQLGLOT_DIALECT[dialect])
        assert isinstance(parsed, sqlglot.exp.Select)
        assert len(parsed.expressions) == 1
