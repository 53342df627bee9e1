"""The sql workload's examples as each dialect's driver takes them (Oracle and SQL Server are
proven only here and by refusal: no such server runs in this suite): every statement of
examples/ rendered in the target's paramstyle parses with sqlglot for that dialect, and a
read_only statement the tokenizer cannot vouch for is refused where the dialect has no
read-only transaction (SQL Server), before anything connects."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from sim.config.resolve import read_scenario_file
from sim.errors import ScenarioError
from tests.contract.test_dialects import SQLGLOT_DIALECT, parseable, target_for
from workloads.sql.parameters import SqlParameters
from workloads.sql.workload import SqlUserWorkload

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*bench-*.yaml"))
DIALECTS = ("postgres", "mysql", "sqlite", "oracle", "sqlserver")
#: The bind as each dialect's driver takes it, for the first parameter.
FIRST_BIND = {"postgres": "$1", "mysql": "%s", "sqlite": "?", "oracle": ":", "sqlserver": "?"}


def parameters(path: Path) -> dict[str, Any]:
    return dict(read_scenario_file(path)["workload"]["parameters"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_statement_parses_for_the_dialect(example: Path, dialect: str) -> None:
    target = target_for(dialect)
    workload = SqlUserWorkload(SqlParameters.model_validate(parameters(example)), target)
    statements = [step.statement for plan in workload.plans for step in plan.steps]
    assert statements
    for statement in statements:
        if statement.param_names:
            assert FIRST_BIND[dialect] in statement.sql, statement.sql
        sql = parseable(statement, target.paramstyle)
        sqlglot.parse_one(sql, read=SQLGLOT_DIALECT[dialect])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_read_only_statement_nobody_can_vouch_for(dialect: str) -> None:
    params = SqlParameters.model_validate({"statements": [
        {"name": "sneaky", "weight": 1, "read_only": True, "sql": "SELECT my_fn(1)"}]})  # fmt: skip
    workload = SqlUserWorkload(params, target_for(dialect))
    if dialect == "sqlserver":
        with pytest.raises(ScenarioError, match="statement sneaky: read_only: sqlserver has no"):
            asyncio.run(workload.prepare_values())
    else:
        report = asyncio.run(workload.prepare_values())  # no sample: nothing connects
        assert report["built"] is False and workload.plans[0].mode == "read_only"
        assert workload.read_only_begin


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_plain_query_ends_its_transaction_where_the_driver_opens_one(dialect: str) -> None:
    """MariaDB (autocommit off) and pyodbc open a transaction at a SELECT: rolled back after
    each query there, so no session holds a snapshot of the user's database all run long."""
    params = SqlParameters.model_validate({"statements": [
        {"name": "q", "weight": 1, "read_only": True, "sql": "SELECT a FROM t WHERE k = :k",
         "params": {"k": {"uniform": [1, 9]}}}]})  # fmt: skip
    target = target_for(dialect)
    workload = SqlUserWorkload(params, target)
    ends = target.kind in {"mysql", "odbc", "sqlserver"}
    assert workload.plans[0].mode == ("read_then_rollback" if ends else "plain")
    assert workload.read_operations() == {"q"}
