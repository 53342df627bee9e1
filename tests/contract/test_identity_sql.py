"""The registry's identity statements per dialect (workloads/registry_sql/): Oracle and SQL
Server cannot run here, so this is where it is shown that their ``object_identity`` parses as
a query of their dialect and looks at every kind of object (views, materialized views and
synonyms named like a dbsim table must be seen, so they can be refused), not only tables."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from sim.sql import dialect_names
from tests.contract.test_dialects import SQLGLOT_DIALECT, parseable, target_for
from workloads.ownership import STATEMENTS, TableRegistry

#: The paramstyle of the target kind that speaks each dialect.
PARAMSTYLE = {dialect: target_for(dialect).paramstyle for dialect in dialect_names()}
#: How dbsim writes its token onto a table after the CREATE, where sqlglot keeps the statement
#: as an unparsed command.
MARK_STATEMENTS = {"CommentOnTable"}
#: Where each dialect lists every schema object by name, whatever its kind.
EVERY_OBJECT = {
    "sqlite": "sqlite_master",
    "postgres": "pg_class",
    "oracle": "user_objects",
    "sqlserver": "objects",  # sys.objects: tables, views, synonyms, constraints …
    "mysql": "tables",  # information_schema.TABLES: base tables, views, sequences …
}
#: Columns whose filter would limit the lookup to one kind of object.
KIND_COLUMNS = {"type", "relkind", "object_type", "table_type"}


@pytest.mark.parametrize("dialect", dialect_names())
def test_object_identity_is_a_query_over_every_kind_of_object(dialect: str) -> None:
    registry = TableRegistry("slob", dialect, PARAMSTYLE[dialect])
    [statement] = [s for s in registry.inventory() if s.name == "object_identity"]
    tree = sqlglot.parse_one(
        parseable(statement, PARAMSTYLE[dialect]), read=SQLGLOT_DIALECT[dialect]
    )
    assert isinstance(tree, exp.Select), f"{dialect}: not parsed as a query: {statement.sql}"
    tables = {t.name.lower() for t in tree.find_all(exp.Table)}
    assert EVERY_OBJECT[dialect] in tables, tables
    where = tree.args["where"]
    filtered = {c.name.lower() for c in where.find_all(exp.Column)}
    assert not filtered & KIND_COLUMNS, (
        f"{dialect}: the lookup filters on {filtered & KIND_COLUMNS}"
    )
    assert statement.param_names == ("tname",)


@pytest.mark.parametrize("dialect", dialect_names())
def test_every_registry_statement_parses_for_its_dialect(dialect: str) -> None:
    registry = TableRegistry("ssb", dialect, PARAMSTYLE[dialect])
    names = {s.name for s in registry.inventory()}
    assert names >= STATEMENTS
    for statement in registry.inventory():
        text = parseable(statement, PARAMSTYLE[dialect])
        tree = sqlglot.parse_one(text, read=SQLGLOT_DIALECT[dialect])
        assert not isinstance(tree, exp.Command) or statement.name in MARK_STATEMENTS, (
            f"{dialect}/{statement.name} fell back to an unparsed command: {statement.sql}"
        )
