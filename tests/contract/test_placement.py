"""Data placed where the scenario says (issue #19): with ``target.tablespace`` every table and
index a workload creates names that tablespace, for each dialect that has one, and the SQL
parses as that dialect (Oracle has no server here: this is where its clause is proven)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from sim import registry
from sim.protocols import Target
from storage.targets.oracle import OracleTarget
from storage.targets.postgres import PostgresTarget
from storage.targets.postgres_tablespace import TablespacePlacement
from storage.targets.settings import OracleSettings, PostgresSettings
from workloads.tablespace import create_statements

TABLESPACE = "dbsim_data"


def placed_target(dialect: str) -> Target:
    if dialect == "oracle":
        return OracleTarget(OracleSettings(tablespace=TABLESPACE))
    settings = {"name": TABLESPACE, "location": "/srv/new-volume/pg", "create": True}
    return PostgresTarget(PostgresSettings(tablespace=settings))


@pytest.mark.parametrize("workload_name", ["slob", "ssb"])
@pytest.mark.parametrize("dialect", ["postgres", "oracle"])
def test_every_table_and_index_goes_to_the_tablespace(workload_name: str, dialect: str) -> None:
    entry = registry.workload(workload_name)
    target = placed_target(dialect)
    workload = entry.workload_class(entry.workload_class.parameters_model(), target)
    creates = [
        s for s in workload.statement_inventory() if s.name in ("CreateTable", "CreateIndex")
    ]
    workload_creates = [s for s in creates if "dbsim_registry" not in s.sql]
    assert {s.name for s in workload_creates} == {"CreateTable", "CreateIndex"}
    for statement in workload_creates:
        assert f"TABLESPACE {TABLESPACE}" in statement.sql, statement.sql
        sqlglot.parse_one(statement.sql, read=dialect)
    # The registry stays where the schema is: it is dbsim's bookkeeping, not the data.
    assert all("TABLESPACE" not in s.sql for s in creates if "dbsim_registry" in s.sql)


def test_the_tablespace_ddl_parses_as_postgres() -> None:
    placement = TablespacePlacement(TABLESPACE, Path("/srv/pg"), exists=False, create=True)
    create, comment = create_statements(placement, "0" * 32)
    assert create.sql == f"CREATE TABLESPACE {TABLESPACE} LOCATION '/srv/pg'"
    assert comment.sql == f"COMMENT ON TABLESPACE {TABLESPACE} IS 'dbsim:{'0' * 32}'"
    for statement in (create, comment):
        sqlglot.parse_one(statement.sql, read="postgres")
