"""sim.sqlstats.skeleton: the YAML it writes, read back, and checked by the sql workload's own
parameter model (workloads/sql/parameters.py); and the Query Store rows' conversion.

The statements here are written in the test (the arithmetic and the format are what is
checked); the real servers' views are in tests/integration/test_sql_from_stats_*.py."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import yaml
from pydantic import ValidationError

from sim.sqlstats.captured import Captured, CapturedStatement
from sim.sqlstats.mssql import captured as query_store
from sim.sqlstats.mssql import strip_declaration
from sim.sqlstats.skeleton import FILL_IN, SAMPLE_ROWS, build
from workloads.sql.parameters import SqlParameters


def _captured(*statements: CapturedStatement, window_s: float | None = 100.0) -> Captured:
    return Captured(
        source="a test",
        statements=list(statements),
        style="dollar",
        reads_what="blocks read",
        window_s=window_s,
        window_what="given by the test",
    )


SELECT = CapturedStatement("1", "SELECT b FROM acc WHERE aid = $1", 3000, 0.25, 30.0)
UPDATE = CapturedStatement("2", "UPDATE acc SET b = b + $1 WHERE aid = $2", 1000, 1.5, None)
BEGIN = CapturedStatement("3", "BEGIN", 4000, 0.01, 0.0)
FOLDED = CapturedStatement("4", "INSERT INTO h VALUES (...)", 900, 1.0, 0.0)
CATALOG = CapturedStatement("5", "SELECT * FROM pg_class WHERE oid = $1", 800, 1.0, 0.0)


def test_top_statements_weights_params_and_comments() -> None:
    skeleton = build(_captured(BEGIN, SELECT, UPDATE, FOLDED, CATALOG), None, 5, name="t")
    data = yaml.safe_load(skeleton.text)
    statements = data["workload"]["parameters"]["statements"]
    assert [s["name"] for s in statements] == ["select_acc", "update_acc"]
    assert [s["weight"] for s in statements] == [3000, 1000]
    assert [s["read_only"] for s in statements] == [True, False]
    assert statements[0]["params"] == {
        "p1": {"sample": {"table": "acc", "column": "aid", "rows": SAMPLE_ROWS}}
    }
    assert statements[1]["params"]["p1"] == {"fill_in": FILL_IN}
    assert skeleton.placeholders == 1
    assert data["workload"]["parameters"]["commit"] is False
    assert "target" not in data
    # calls/s = 3,000 calls / 100 s; reads per call = 30 / 3,000.
    assert "#   3,000 calls, 30 calls/s, mean 0.25 ms, 0.01 reads/call" in skeleton.text
    assert "#   1,000 calls, 10 calls/s, mean 1.5 ms, reads/call not counted" in skeleton.text
    for why in (
        "Left out: 1 not a query or DML (transaction control, SET, DDL, utility).",
        "Left out: 1 text cut or folded by the source ('...').",
        "Left out: 1 on the server's own catalogues.",
    ):
        assert why in skeleton.text


def test_the_workload_refuses_the_placeholder_and_accepts_it_filled() -> None:
    data = yaml.safe_load(build(_captured(SELECT, UPDATE), None, 5, name="t").text)
    parameters = data["workload"]["parameters"]
    with pytest.raises(ValidationError, match="fill_in"):
        SqlParameters.model_validate(parameters)
    parameters["statements"][1]["params"]["p1"] = {"uniform": [-5000, 5000]}
    model = SqlParameters.model_validate(parameters)
    assert [s.weight for s in model.statements] == [3000, 1000]


def test_top_n_names_unique_and_weights_past_the_cap_scaled() -> None:
    many = [
        CapturedStatement(str(i), f"SELECT x FROM acc WHERE k{i} = $1", 3_000_000_000 - i)
        for i in range(4)
    ]
    skeleton = build(_captured(*many, window_s=None), None, 3, name="t")
    statements = yaml.safe_load(skeleton.text)["workload"]["parameters"]["statements"]
    assert [s["name"] for s in statements] == ["select_acc", "select_acc_2", "select_acc_3"]
    # 2,999,999,999 calls over the workload's 1e9 cap: divided by 10, and said.
    assert statements[1]["weight"] == pytest.approx(299_999_999.9)
    assert "(divided by 10: the workload's weights stop at 1e9)" in skeleton.text
    assert "Left out: 1 below the top 3." in skeleton.text
    assert "calls/s unknown" in skeleton.text


def test_a_target_is_written_with_its_secret_by_reference_only() -> None:
    target = {"kind": "postgres", "port": 5433, "password_env": "PGPASS"}
    data = yaml.safe_load(build(_captured(SELECT), target, 5, name="t").text)
    assert data["target"] == target


def test_statement_text_cannot_break_the_yaml() -> None:
    hostile = CapturedStatement("9", "SELECT 'a\"\n# b: {c}' FROM acc WHERE aid = $1", 5)
    data = yaml.safe_load(build(_captured(hostile), None, 5, name="t").text)
    assert data["workload"]["parameters"]["statements"][0]["sql"] == (
        "SELECT 'a\"\n# b: {c}' FROM acc WHERE aid = :p1"
    )


def test_query_store_rows_lose_their_declaration_and_keep_their_figures() -> None:
    assert strip_declaration("(@1 int,@2 varchar(8000))SELECT 1") == "SELECT 1"
    assert strip_declaration("SELECT (@1)") == "SELECT (@1)"
    start = datetime(2026, 1, 5, 10, 0, 0)
    rows = [
        {"key": "7", "text": "(@P1 int)SELECT c FROM t WHERE id = @P1", "calls": 600,
         "mean_ms": 0.5, "reads": 120.0, "first_seen": start,
         "last_seen": start + timedelta(seconds=60)},
    ]  # fmt: skip
    captured = query_store(rows, "sqlserver at h:1433, database d")
    assert captured.window_s == 60.0
    statement = captured.statements[0]
    assert statement.text == "SELECT c FROM t WHERE id = @P1"
    assert statement.reads_per_call == pytest.approx(0.2)
    data = yaml.safe_load(build(captured, None, 5, name="t").text)
    assert data["workload"]["parameters"]["statements"][0]["sql"] == (
        "SELECT c FROM t WHERE id = :p1"
    )
