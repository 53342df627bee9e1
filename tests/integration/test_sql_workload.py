"""The sql workload on real servers (issue #31): pgbench's tpcb-like transaction rolled back
on pgbench's own tables (checksums unchanged while PostgreSQL's statistics show the writes),
pgbench's select-only statement, the database's read-only transaction enforcing what the
tokenizer could not tell, and the refusals that need the database — on a scratch PostgreSQL
database of the module's own (pgbench -i), a MariaDB table of its own, a SQLite file.

Session runners (tests/support/session_runners.py): the native loops take only statements run
alone in autocommit (storage/targets/pgloop_session.shape_problem), so the plain reads on
PostgreSQL run once per runner; a transaction, a read-only transaction, and every MariaDB
statement of this workload (its reads end with a rollback) run on the Python driver only, and
those tests check that the run says so — were the native loop to take them, they would need
both runners.

The commands run through ``sim.cli.entry.main`` in the test process (tests/e2e/conftest.py's
``InProcessDbsim``: a directory of the test's own, the child's environment and logging), as their subject
is what the command does, not the process boundary; three stay on the real binary
(``python -m sim.cli``), one of each kind — a run whose ``--json`` document is read from the
process's stdout, a refusal of the hostile set, and a refusal of ``dbsim load`` — which proves
that the process reports what ``main`` returns."""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim, clean_environment
from tests.support.session_runners import AskedRunner, session_runner

# The fixture this module's runs through the engine take: each session runner in turn.
__all__ = ["session_runner"]
PG = ["-h", "127.0.0.1", "-U", "postgres"]
TPCB = [
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid",
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid",
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid",
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
    "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP)",
]
TPCB_PARAMS = {"aid": {"uniform": [1, 100000]}, "bid": {"uniform": [1, 1]},
               "tid": {"uniform": [1, 10]}, "delta": {"uniform": [-5000, 5000]}}  # fmt: skip


def psql(database: str, sql: str) -> str:
    done = subprocess.run(["psql", *PG, "-d", database, "-Atc", sql], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.fixture(scope="module")
def pgbench_db() -> Iterator[str]:
    """A database of the module's own, filled by pgbench -i -s 1 (dbsim owns none of it)."""
    name = f"sqlw_{secrets.token_hex(4)}"
    psql("test", f"CREATE DATABASE {name}")
    try:
        subprocess.run(["pgbench", *PG, "-i", "-s", "1", "-q", name], capture_output=True,
                       check=True)  # fmt: skip
        psql(name, "CREATE SEQUENCE sqlw_seq")
        yield name
    finally:
        psql("test", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def cli(tmp_path: Path, real: bool = False) -> Dbsim:
    """``dbsim`` in ``tmp_path`` with the child's environment: in this process, or (``real``)
    as ``python -m sim.cli``."""
    child_tmp = tmp_path / "tmp"
    child_tmp.mkdir(exist_ok=True)
    child_env = clean_environment(child_tmp)
    return (
        Dbsim(tmp_path, child_env)
        if real
        else InProcessDbsim(tmp_path, child_env, child_logging=True)
    )


#: Transactions per session of a run: a fixed count, not a duration (the checks ask for counts
#: and a mix, never a rate; 2 s of two unpaced sessions were thousands of transactions, each
#: costing this process, or the child, and the server CPU).
LOOPS = 60


def run(tmp_path: Path, target: dict[str, Any], parameters: dict[str, Any],
        *extra: str, runner: str = "auto", real: bool = False,
        loops: int = LOOPS) -> CliResult:  # fmt: skip
    load = {"loops_per_session": loops, "sessions": 2, "session_runner": runner}
    scenario = {"name": "sqlw", "target": target, "load": load,
                "workload": {"name": "sql", "parameters": parameters}}  # fmt: skip
    path = tmp_path / f"s{secrets.token_hex(3)}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return cli(tmp_path, real)("run", path, "-o", tmp_path / "runs", *extra, timeout=120)


def summary(done: CliResult) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    return json.loads(done.stdout)


def ops(result: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(result["operations"][name])


def python_only(result: dict[str, Any]) -> None:
    """The run chose the Python driver (the native loop takes no statement of this shape)."""
    assert result["session_runner"]["runner"] == "event loop", result["session_runner"]


def pg_checksums(database: str) -> list[str]:
    return [
        psql(database, f"SELECT count(*) || ' ' || coalesce(md5(string_agg(x::text, ',' "
                       f"ORDER BY {key})), '-') FROM pgbench_{table} x")
        for table, key in (("accounts", "aid"), ("tellers", "tid"), ("branches", "bid"),
                           ("history", "mtime, aid"))
    ]  # fmt: skip


def pg_counters(database: str) -> dict[str, int]:
    row = psql(database, "SELECT xact_rollback, tup_updated, tup_inserted FROM "
                         f"pg_stat_database WHERE datname = '{database}'")  # fmt: skip
    rollback, updated, inserted = (int(v) for v in row.split("|"))
    wal = int(psql(database, "SELECT wal_bytes FROM pg_stat_wal"))
    return {"rollback": rollback, "updated": updated, "inserted": inserted, "wal": wal}


def counters_after(database: str, before: dict[str, int], rollbacks: int) -> dict[str, int]:
    """The statistics once the sessions' last reports arrived (a backend reports at exit)."""
    deadline = time.monotonic() + 10
    while True:
        now = pg_counters(database)
        if now["rollback"] - before["rollback"] >= rollbacks or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def test_tpcb_like_rolled_back_leaves_the_tables_as_they_were(
    pgbench_db: str, tmp_path: Path
) -> None:
    target = {"kind": "postgres", "database": pgbench_db}
    before_sums, before = pg_checksums(pgbench_db), pg_counters(pgbench_db)
    params = {"statements": [{"name": "tpcb_like", "weight": 1, "transaction": TPCB,
                              "params": TPCB_PARAMS}]}  # fmt: skip
    result = summary(run(tmp_path, target, params, "--json", real=True))
    python_only(result)
    done = ops(result, "tpcb_like")
    assert done["count"] == 2 * LOOPS and done["errors"] == 0, done  # every loop measured
    after = counters_after(pgbench_db, before, done["count"])
    assert pg_checksums(pgbench_db) == before_sums
    # The work happened: every transaction rolled back, three updates and an insert each
    # (the warm-up and the stop's last ones too, so at least the measured count).
    assert after["rollback"] - before["rollback"] >= done["count"]
    assert after["updated"] - before["updated"] >= 3 * done["count"]
    assert after["inserted"] - before["inserted"] >= done["count"]
    assert after["wal"] > before["wal"]


def test_select_only_runs_the_mix_without_error(
    pgbench_db: str, tmp_path: Path, session_runner: AskedRunner
) -> None:
    target = {"kind": "postgres", "database": pgbench_db}
    params = {"statements": [
        {"name": "select_only", "weight": 3, "read_only": True,
         "sql": "SELECT abalance FROM pgbench_accounts WHERE aid = :aid",
         "params": {"aid": {"zipfian": [1, 100000], "s": 1.1}}},
        {"name": "by_sample", "weight": 1, "read_only": True,
         "sql": "SELECT count(*) FROM pgbench_tellers WHERE bid = :bid",
         "params": {"bid": {"sample": {"table": "pgbench_branches", "column": "bid"}}}},
    ]}  # fmt: skip
    runner = session_runner.on("postgres")
    # 1,000 draws: the share's standard deviation is 0.014, the bounds 7 of them away.
    result = summary(run(tmp_path, target, params, "--json", runner=runner, loops=500))
    session_runner.ran_summary(result)
    one, two = ops(result, "select_only"), ops(result, "by_sample")
    assert one["errors"] == two["errors"] == 0
    assert one["count"] + two["count"] == 2 * 500  # every loop measured, none lost
    share = one["count"] / (one["count"] + two["count"])
    assert 0.65 < share < 0.85, share  # 3 : 1 asked


def test_read_only_transaction_enforces_what_the_tokenizer_cannot_see(
    pgbench_db: str, tmp_path: Path
) -> None:
    """nextval() looks like a query; declared read_only, the database refuses its write."""
    target = {"kind": "postgres", "database": pgbench_db}
    before = psql(pgbench_db, "SELECT last_value || is_called::text FROM sqlw_seq")
    params = {"statements": [{"name": "sneaky", "weight": 1, "read_only": True,
                              "sql": "SELECT nextval('sqlw_seq')"}]}  # fmt: skip
    done = run(tmp_path, target, params, "--json", "--set", "load.max_error_pct=100")
    result = json.loads(done.stdout)
    python_only(result)
    row = ops(result, "sneaky")
    assert row["count"] == 0 and row["errors"] > 0, row
    assert "ReadOnlySQLTransactionError" in row["errors_by_class"], row
    assert psql(pgbench_db, "SELECT last_value || is_called::text FROM sqlw_seq") == before


def test_a_sample_of_a_missing_column_is_refused_before_any_session(
    pgbench_db: str, tmp_path: Path
) -> None:
    target = {"kind": "postgres", "database": pgbench_db}
    params = {"statements": [{"name": "s1", "weight": 1, "read_only": True,
              "sql": "SELECT 1 FROM pgbench_accounts WHERE aid = :a",
              "params": {"a": {"sample": {"table": "pgbench_accounts", "column": "nope"}}}}]}  # fmt: skip
    done = run(tmp_path, target, params)
    assert done.returncode == 2
    assert "statement s1: params.a.sample: pgbench_accounts.nope cannot be read" in done.stderr
    assert "connecting" not in done.stderr  # no session was opened


@pytest.fixture
def maria_table() -> Iterator[str]:
    name = f"sqlw_{secrets.token_hex(4)}"
    conn = pymysql.connect(host="127.0.0.1", user="root", database="test", autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, k INT, c CHAR(120))")
        cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s)",
                        [(i, i % 97, f"c{i:0>100}") for i in range(1, 2001)])  # fmt: skip
    try:
        yield name
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {name}")
        conn.close()


def maria_checksum(table: str) -> Any:
    conn = pymysql.connect(host="127.0.0.1", user="root", database="test")
    try:
        with conn.cursor() as cur:
            cur.execute(f"CHECKSUM TABLE {table}")
            return cur.fetchone()
    finally:
        conn.close()


def test_mariadb_reads_and_a_rolled_back_update(maria_table: str, tmp_path: Path) -> None:
    target = {"kind": "mysql", "database": "test"}
    before = maria_checksum(maria_table)
    params = {"statements": [
        {"name": "point_select", "weight": 2, "read_only": True,
         "sql": f"SELECT c FROM {maria_table} WHERE id = :id",
         "params": {"id": {"uniform": [1, 2000]}}},
        {"name": "range_sum", "weight": 1, "read_only": True,
         "transaction": [f"SELECT SUM(k) FROM {maria_table} WHERE id BETWEEN :r AND :r + 99",
                         f"SELECT c FROM {maria_table} WHERE id = :r"],
         "params": {"r": {"uniform": [1, 1901]}}},
        {"name": "update_k", "weight": 1,
         "sql": f"UPDATE {maria_table} SET k = k + 1 WHERE id = :id",
         "params": {"id": {"gaussian": [1, 2000], "stddevs": 3}}},
    ]}  # fmt: skip
    result = summary(run(tmp_path, target, params, "--json"))
    python_only(result)
    for name in ("point_select", "range_sum", "update_k"):
        row = ops(result, name)
        assert row["count"] > 0 and row["errors"] == 0, row
    assert maria_checksum(maria_table) == before


def test_sqlite_file_of_the_user_sample_and_rollback(tmp_path: Path) -> None:
    path = tmp_path / "users.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INT)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)",
                         [(i, f"n{i}", i % 7) for i in range(1, 501)])  # fmt: skip
    total = sum(i % 7 for i in range(1, 501))
    target = {"kind": "sqlite", "path": str(path), "keep": True}
    params = {"statements": [
        {"name": "by_name", "weight": 3, "read_only": True,
         "sql": "SELECT qty FROM items WHERE name = :n",
         "params": {"n": {"sample": {"table": "items", "column": "name", "rows": 50}}}},
        {"name": "bump", "weight": 1, "sql": "UPDATE items SET qty = qty + 1 WHERE id = :id",
         "params": {"id": {"exponential": [1, 500], "parameter": 5}}},
        {"name": "maybe", "weight": 1, "read_only": True, "sql": "SELECT abs(random()) % :m",
         "params": {"m": {"list": [7, 11]}}},
    ]}  # fmt: skip
    result = summary(run(tmp_path, target, params, "--json"))
    for name in ("by_name", "bump", "maybe"):
        row = ops(result, name)
        assert row["count"] > 0 and row["errors"] == 0, row
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT SUM(qty), COUNT(*) FROM items").fetchone() == (total, 500)
    # dbsim load and drop refuse: nothing of dbsim's is there
    scenario = tmp_path / "again.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {"name": "x", "target": target, "workload": {"name": "sql", "parameters": params}}
        )
    )
    for command in ("load", "drop"):
        done = cli(tmp_path, real=command == "load")(command, scenario)
        assert done.returncode == 2 and f"nothing to {command}" in done.stderr, done.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM items").fetchone() == (500,)


def test_odbc_tpcb_like_rolled_back(pgbench_db: str, tmp_path: Path) -> None:
    """The same transaction through ``kind: odbc`` (psqlODBC, pyodbc, autocommit off)."""
    target = {"kind": "odbc", "driver": "PostgreSQL Unicode", "dialect": "postgres",
              "database": pgbench_db}  # fmt: skip
    before_sums, before = pg_checksums(pgbench_db), pg_counters(pgbench_db)
    params = {"statements": [
        {"name": "tpcb_like", "weight": 1, "transaction": TPCB, "params": TPCB_PARAMS},
        {"name": "select_only", "weight": 1, "read_only": True,
         "sql": "SELECT abalance FROM pgbench_accounts WHERE aid = :aid",
         "params": {"aid": {"uniform": [1, 100000]}}},
    ]}  # fmt: skip
    result = summary(run(tmp_path, target, params, "--json"))
    done = ops(result, "tpcb_like")
    assert done["count"] > 20 and done["errors"] == 0, done
    assert ops(result, "select_only")["errors"] == 0
    after = counters_after(pgbench_db, before, done["count"])
    assert pg_checksums(pgbench_db) == before_sums
    assert after["updated"] - before["updated"] >= 3 * done["count"]


HOSTILE = [
    ({"sql": "CREATE TABLE t2 (a INT)"}, "statement bad: sql: DDL (CREATE)"),
    ({"sql": "SELECT 1 FROM items; DELETE FROM items"}, "statement bad: sql: more than one"),
    ({"sql": "UPDATE items SET qty = 0", "read_only": True},
     "statement bad: sql: declared read_only but it writes"),
    ({"sql": "SELECT qty FROM items WHERE id = :id", "params": {"id": {"uniform": [9, 1]}}},
     "statement bad: params.id: impossible range [9, 1]"),
    ({"sql": "SELECT qty FROM items WHERE name = :n",
      "params": {"n": {"sample": {"table": "items", "column": "nope"}}}},
     "statement bad: params.n.sample: items.nope cannot be read"),
]  # fmt: skip


def test_the_hostile_set_is_refused_before_any_session(tmp_path: Path) -> None:
    """dbsim run: exit 2, the statement and the field named, no session connected, the
    user's table as it was."""
    path = tmp_path / "users.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INT)")
        conn.execute("INSERT INTO items VALUES (1, 'a', 3)")
    target = {"kind": "sqlite", "path": str(path), "keep": True}
    for number, (fields, expected) in enumerate(HOSTILE):
        statement = {"name": "bad", "weight": 1, **fields}
        done = run(tmp_path, target, {"statements": [statement]}, real=number == 0)
        assert done.returncode == 2, (fields, done.stderr[-800:])
        assert expected in done.stderr, (expected, done.stderr[-800:])
        assert "connecting" not in done.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM items").fetchall() == [(1, "a", 3)]
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        assert tables == [("items",)]
