"""``dbsim sql-from-stats`` on PostgreSQL after a real pgbench run (issue #31).

A throwaway cluster preloads pg_stat_statements (the local server on 5432 does not);
pgbench initialises its tables and runs its built-in scripts with a fixed number of
transactions, so every statement's calls are known from pgbench's own arguments: ``-S``
runs ``SELECT abalance FROM pgbench_accounts WHERE aid = :aid`` once per transaction, and
``tpcb-like`` runs that SELECT, three UPDATEs and an INSERT once each. The skeleton's
statements and weights are checked against both the view and those counts (within 1 %), then
filled in, validated and run (rolled back: pgbench_history keeps its row count).

The commands run through ``sim.cli.entry.main`` in the test process (tests/e2e/conftest.py's
``InProcessDbsim``: the test's own directory, the child's environment and logging), as their subject is what
the command reads, writes and refuses; one — a skeleton from a scenario file, whose stderr is
checked line by line — runs as the real binary (``python -m sim.cli``), which proves that the
process reports what ``main`` returns.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim, clean_environment
from tests.integration.sqlstats_servers import PgServer, pg_with_statements

pytestmark = [pytest.mark.integration, pytest.mark.root]

DB = "bench"
CLIENTS = 2
SELECT_ONLY_TX = 1500  # per client
TPCB_TX = 400  # per client
PASSWORD_VAR = "DBSIM_SQLSTATS_PG_PASSWORD"
SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = :p1"
#: pgbench's tpcb-like script, as pg_stat_statements normalizes it, and its calls per
#: transaction; the SELECT also runs once per select-only transaction.
EXPECTED = {
    SELECT: CLIENTS * (SELECT_ONLY_TX + TPCB_TX),
    "UPDATE pgbench_accounts SET abalance = abalance + :p1 WHERE aid = :p2": CLIENTS * TPCB_TX,
    "UPDATE pgbench_tellers SET tbalance = tbalance + :p1 WHERE tid = :p2": CLIENTS * TPCB_TX,
    "UPDATE pgbench_branches SET bbalance = bbalance + :p1 WHERE bid = :p2": CLIENTS * TPCB_TX,
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:p1, :p2, :p3, :p4, "
    "CURRENT_TIMESTAMP)": CLIENTS * TPCB_TX,
}


def _pgbench(server: PgServer, *args: str) -> str:
    out = subprocess.run(
        ["pgbench", *args, DB],
        env={**os.environ, **server.env()},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return out.stdout


@pytest.fixture(scope="module")
def pgbenched() -> Iterator[PgServer]:
    with pg_with_statements() as server:
        server.psql(f"CREATE DATABASE {DB}")
        server.psql("CREATE EXTENSION pg_stat_statements", DB)
        _pgbench(server, "-i", "-s", "1", "-q")
        server.psql("SELECT pg_stat_statements_reset()", DB)
        for script in (["-S", "-t", str(SELECT_ONLY_TX)], ["-t", str(TPCB_TX)]):
            out = _pgbench(server, "-n", "-c", str(CLIENTS), *script)
            assert "number of failed transactions: 0" in out, out
        yield server


def dbsim(
    cwd: Path, *args: str, env: dict[str, str] | None = None, real: bool = False
) -> CliResult:
    """``dbsim ARGS`` in ``cwd`` with the child's environment plus ``env``: in this process,
    or (``real``) as ``python -m sim.cli``."""
    child_tmp = cwd / "child-tmp"
    child_tmp.mkdir(exist_ok=True)
    child_env = clean_environment(child_tmp)
    runner = Dbsim(cwd, child_env) if real else InProcessDbsim(cwd, child_env, child_logging=True)
    return runner(*args, env=env, timeout=300)


def _args(server: PgServer, *more: str) -> list[str]:
    return ["sql-from-stats", "--target-kind", "postgres", "--host", "127.0.0.1", "--port",
            str(server.port), "--database", DB, "--user", "postgres", "--password-env",
            PASSWORD_VAR, *more]  # fmt: skip


def _skeleton(server: PgServer, path: Path, *more: str) -> dict[str, Any]:
    done = dbsim(path.parent, *_args(server, "-o", str(path), *more),
                 env={PASSWORD_VAR: server.password})  # fmt: skip
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def _view_calls(server: PgServer) -> dict[str, int]:
    """pg_stat_statements' calls per normalized text ($n as :pn), read with psql."""
    out = server.psql(
        "SELECT sum(calls), replace(min(query), E'\\n', ' ') FROM pg_stat_statements s JOIN pg_database d "
        f"ON d.oid = s.dbid WHERE d.datname = '{DB}' GROUP BY queryid",
        DB,
    )
    calls: dict[str, int] = {}
    for line in out.splitlines():
        count, _, text = line.partition("|")
        calls[re.sub(r"\$(\d+)", r":p\1", text)] = int(count)
    return calls


def test_top_statements_and_weights_match_the_view_and_pgbench(
    pgbenched: PgServer, tmp_path: Path
) -> None:
    skeleton = _skeleton(pgbenched, tmp_path / "skeleton.yaml", "--top", "5")
    view = _view_calls(pgbenched)
    statements = skeleton["workload"]["parameters"]["statements"]
    got = {s["sql"]: s["weight"] for s in statements}
    assert set(got) == set(EXPECTED), got
    for sql, weight in got.items():
        # 1 %: the bound; the counts are exact (pgbench ran a fixed number of
        # transactions, none failed, and the view was read after it ended).
        assert abs(weight - view[sql]) <= 0.01 * view[sql], (sql, weight, view[sql])
        assert abs(weight - EXPECTED[sql]) <= 0.01 * EXPECTED[sql], (sql, weight)
    assert statements[0]["sql"] == SELECT  # most called first
    assert statements[0]["read_only"] is True
    assert all(s["read_only"] is False for s in statements[1:])
    # The SELECT's parameter compares with pgbench_accounts.aid: a sample is proposed.
    assert statements[0]["params"]["p1"] == {
        "sample": {"table": "pgbench_accounts", "column": "aid", "rows": 10000}
    }
    text = (tmp_path / "skeleton.yaml").read_text()
    assert f"{EXPECTED[SELECT]:,} calls" in text
    assert "since pg_stat_statements_info.stats_reset" in text


def _fill(data: dict[str, Any]) -> int:
    """Every fill_in placeholder made a uniform generator over pgbench's first 10 keys (tid
    and aid exist there; a delta of 1 to 10 is any delta). Returns how many were filled."""
    filled = 0
    for statement in data["workload"]["parameters"]["statements"]:
        for name, generator in statement.get("params", {}).items():
            if "fill_in" in generator:
                statement["params"][name] = {"uniform": [1, 10]}
                filled += 1
    return filled


def test_placeholders_refuse_validation_until_filled_then_it_runs_rolled_back(
    pgbenched: PgServer, tmp_path: Path
) -> None:
    path = tmp_path / "skeleton.yaml"
    data = _skeleton(pgbenched, path, "--top", "5")
    env = {PASSWORD_VAR: pgbenched.password}
    refused = dbsim(tmp_path, "validate", str(path), env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "fill_in" in refused.stderr
    assert _fill(data) == 7  # 2 per UPDATE (its delta), 4 of the INSERT … minus the aids
    filled = tmp_path / "filled.yaml"
    filled.write_text(yaml.safe_dump(data, sort_keys=False))
    valid = dbsim(tmp_path, "validate", str(filled), env=env)
    assert valid.returncode == 0, valid.stderr
    history = pgbenched.psql("SELECT count(*) FROM pgbench_history", DB)
    # The replay runs as a role of its own whose statements are then removed from the view,
    # so the other tests of this module read pgbench's counts alone whatever their order.
    password = secrets.token_hex(16)
    pgbenched.psql(f"CREATE ROLE replayer LOGIN PASSWORD '{password}'")
    pgbenched.psql("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO replayer", DB)
    try:
        # A fixed count of transactions, not 2 s of closed loop: the check is that the
        # replay runs and leaves no row behind, not how many it runs.
        ran = dbsim(tmp_path, "run", str(filled), "--set", "load.loops_per_session=50",
                    "--output", str(tmp_path), "--set", "target.user=replayer",
                    env={PASSWORD_VAR: password})  # fmt: skip
    finally:
        pgbenched.psql(
            "SELECT pg_stat_statements_reset((SELECT oid FROM pg_roles "
            "WHERE rolname = 'replayer'))",
            DB,
        )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert pgbenched.psql("SELECT count(*) FROM pgbench_history", DB) == history


def test_a_scenario_files_target_is_read_and_written_into_the_skeleton(
    pgbenched: PgServer, tmp_path: Path
) -> None:
    scenario = tmp_path / "production.yaml"
    target = {"kind": "postgres", "host": "127.0.0.1", "port": pgbenched.port,
              "database": DB, "password_env": PASSWORD_VAR}  # fmt: skip
    scenario.write_text(yaml.safe_dump({"name": "prod", "target": target}))
    out = tmp_path / "skeleton.yaml"
    done = dbsim(tmp_path, "sql-from-stats", str(scenario), "--top", "1", "-o", str(out),
                 env={PASSWORD_VAR: pgbenched.password}, real=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"sql-from-stats: 1 statement to {out}",
        "  weights = the calls the source counted; 0 parameters to fill in",
    ]
    data = yaml.safe_load(out.read_text())
    assert data["target"] == target  # the password by its variable's name only
    assert pgbenched.password not in out.read_text()
    [statement] = data["workload"]["parameters"]["statements"]
    assert (statement["sql"], statement["weight"]) == (SELECT, EXPECTED[SELECT])


def test_hidden_statements_and_a_revoked_view_are_refused_naming_the_grant(
    pgbenched: PgServer, tmp_path: Path
) -> None:
    password = secrets.token_hex(16)  # not a part of any name: messages mask the password
    pgbenched.psql(f"CREATE ROLE peeker LOGIN PASSWORD '{password}'")
    env = {PASSWORD_VAR: password}
    args = _args(pgbenched, "--user", "peeker")
    hidden = dbsim(tmp_path, *args, env=env)
    assert hidden.returncode == 2
    assert hidden.stderr.strip().splitlines() == [
        f"error: postgres at 127.0.0.1:{pgbenched.port}, database {DB}: pg_stat_statements "
        "hides other users' statements from peeker: GRANT pg_read_all_stats TO peeker"
    ]
    pgbenched.psql("REVOKE SELECT ON pg_stat_statements FROM PUBLIC", DB)
    try:
        revoked = dbsim(tmp_path, *args, env=env)
    finally:
        pgbenched.psql("GRANT SELECT ON pg_stat_statements TO PUBLIC", DB)
    assert revoked.returncode == 2
    assert len(revoked.stderr.strip().splitlines()) == 1, revoked.stderr
    assert "GRANT SELECT ON pg_stat_statements TO peeker" in revoked.stderr


def test_an_existing_file_or_a_link_is_never_written(pgbenched: PgServer, tmp_path: Path) -> None:
    env = {PASSWORD_VAR: pgbenched.password}
    mine = tmp_path / "mine.yaml"
    mine.write_text("my own\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(mine)
    for path in (mine, link):
        done = dbsim(tmp_path, *_args(pgbenched, "-o", str(path)), env=env)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert mine.read_text() == "my own\n"
    assert link.is_symlink()


def test_an_extension_created_but_not_preloaded_is_refused(tmp_path: Path) -> None:
    with pg_with_statements({"shared_preload_libraries": "''"}) as server:
        server.psql("CREATE EXTENSION pg_stat_statements")
        done = dbsim(
            tmp_path, "sql-from-stats", "--target-kind", "postgres", "--port", str(server.port),
            "--password-env", PASSWORD_VAR, env={PASSWORD_VAR: server.password},
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: postgres at 127.0.0.1:{server.port}, database postgres: pg_stat_statements "
        "is created but not loaded: it needs shared_preload_libraries = "
        "'pg_stat_statements' and a restart"
    ]
