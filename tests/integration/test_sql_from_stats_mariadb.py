"""``dbsim sql-from-stats`` on MariaDB after a real sysbench run (issue #31).

A throwaway MariaDB runs with performance_schema ON (the local server on 3306 runs it OFF).
sysbench prepares one table and runs ``oltp_read_write`` and ``oltp_point_select`` with one
thread and a fixed number of events, so each statement's calls are known from sysbench's own
arguments: per read-write event 10 point selects and one of each range query, update, delete
and insert; per point-select event one point select. sysbench runs with
``--db-ps-mode=disable``: MariaDB 10.11 counts no server-side prepared statement in the
digest summary (seen here: after a run in sysbench's default mode the view held none of its
statements).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.sqlstats_servers import MariaServer, dbsim, mariadb_server

pytestmark = [pytest.mark.integration, pytest.mark.root]

RW_EVENTS = 100
POINT_EVENTS = 1500
POINT = "SELECT `c` FROM `sbtest1` WHERE ID = :p1"
#: The digests' texts as the skeleton writes them, and their calls from sysbench's arguments
#: (its oltp_common.lua: 10 point selects, 1 of each range, 1 of each write per event).
EXPECTED = {
    POINT: 10 * RW_EVENTS + POINT_EVENTS,
    "SELECT `c` FROM `sbtest1` WHERE ID BETWEEN :p1 AND :p2": RW_EVENTS,
    "SELECT SUM( `k` ) FROM `sbtest1` WHERE ID BETWEEN :p1 AND :p2": RW_EVENTS,
    "SELECT `c` FROM `sbtest1` WHERE ID BETWEEN :p1 AND :p2 ORDER BY `c`": RW_EVENTS,
    "SELECT DISTINCTROW `c` FROM `sbtest1` WHERE ID BETWEEN :p1 AND :p2 ORDER BY `c`": RW_EVENTS,
    "UPDATE `sbtest1` SET `k` = `k` + :p1 WHERE ID = :p2": RW_EVENTS,
    "UPDATE `sbtest1` SET `c` = :p1 WHERE ID = :p2": RW_EVENTS,
    "DELETE FROM `sbtest1` WHERE ID = :p1": RW_EVENTS,
}


def _sysbench(server: MariaServer, test: str, command: str, *more: str) -> str:
    out = subprocess.run(
        ["sysbench", "--mysql-host=127.0.0.1", f"--mysql-port={server.port}",
         "--mysql-user=root", "--mysql-db=test", "--tables=1", "--table-size=1000",
         "--db-ps-mode=disable", "--threads=1", "--time=0", *more, test, command],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return out.stdout


@pytest.fixture(scope="module")
def sysbenched() -> Iterator[MariaServer]:
    if shutil.which("sysbench") is None:
        pytest.skip("!!! NOT RUN: sysbench is not installed (make system-packages)")
    with mariadb_server() as server:
        _sysbench(server, "oltp_read_write", "prepare")
        server.sql("TRUNCATE TABLE performance_schema.events_statements_summary_by_digest")
        out = _sysbench(server, "oltp_read_write", "run", f"--events={RW_EVENTS}")
        assert f"transactions:                        {RW_EVENTS} " in out, out
        _sysbench(server, "oltp_point_select", "run", f"--events={POINT_EVENTS}")
        yield server


def _args(server: MariaServer, *more: str) -> list[str]:
    return ["sql-from-stats", "--target-kind", "mysql", "--host", "127.0.0.1", "--port",
            str(server.port), "--database", "test", "--user", "root", *more]  # fmt: skip


def _view_calls(server: MariaServer) -> dict[str, int]:
    out = server.sql(
        "SELECT COUNT_STAR, DIGEST_TEXT FROM performance_schema."
        "events_statements_summary_by_digest WHERE SCHEMA_NAME = 'test'"
    )
    calls: dict[str, int] = {}
    for line in out.splitlines():
        count, _, text = line.partition("\t")
        calls[text.strip()] = int(count)
    return calls


def _skeleton(server: MariaServer, path: Path) -> dict[str, Any]:
    done = dbsim(*_args(server, "--top", "8", "-o", str(path)))
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_top_statements_and_weights_match_the_view_and_sysbench(
    sysbenched: MariaServer, tmp_path: Path
) -> None:
    skeleton = _skeleton(sysbenched, tmp_path / "skeleton.yaml")
    view = _view_calls(sysbenched)
    statements = skeleton["workload"]["parameters"]["statements"]
    got = {s["sql"]: s["weight"] for s in statements}
    assert set(got) == set(EXPECTED), got
    for sql, weight in got.items():
        digest = sql.replace(":p1", "?").replace(":p2", "?").replace("SUM(", "SUM (")
        # 1 %: the bound; the counts are exact (one sysbench thread, a fixed number
        # of events, the view read after sysbench ended).
        assert abs(weight - view[digest]) <= 0.01 * view[digest], (sql, weight, view[digest])
        assert abs(weight - EXPECTED[sql]) <= 0.01 * EXPECTED[sql], (sql, weight)
    assert statements[0]["sql"] == POINT
    assert statements[0]["params"]["p1"] == {
        "sample": {"table": "sbtest1", "column": "ID", "rows": 10000}
    }
    text = (tmp_path / "skeleton.yaml").read_text()
    # INSERT … VALUES (...): the digest folded the values; left out, and said.
    assert "Left out: 1 text cut or folded by the source ('...')." in text
    assert f"{EXPECTED[POINT]:,} calls" in text


def test_filled_skeleton_validates_and_runs(sysbenched: MariaServer, tmp_path: Path) -> None:
    path = tmp_path / "skeleton.yaml"
    data = _skeleton(sysbenched, path)
    refused = dbsim("validate", str(path))
    assert refused.returncode == 2 and "fill_in" in refused.stderr, refused.stderr
    for statement in data["workload"]["parameters"]["statements"]:
        for name, generator in statement.get("params", {}).items():
            if "fill_in" in generator:  # range bounds and new values over the 1,000 ids
                statement["params"][name] = {"uniform": [1, 1000]}
    filled = tmp_path / "filled.yaml"
    filled.write_text(yaml.safe_dump(data, sort_keys=False))
    valid = dbsim("validate", str(filled))
    assert valid.returncode == 0, valid.stderr
    # The replay runs on a copy in a database of its own: the view counts its statements
    # under that schema, so the other tests of this module read sysbench's counts alone
    # whatever their order.
    sysbenched.sql(
        "CREATE DATABASE replay; CREATE TABLE replay.sbtest1 LIKE test.sbtest1; "
        "INSERT INTO replay.sbtest1 SELECT * FROM test.sbtest1"
    )
    rows = sysbenched.sql("SELECT COUNT(*), SUM(k) FROM sbtest1", "replay")
    # A fixed count of transactions, not 2 s of closed loop: the check is that the replay
    # runs and leaves no row behind, not how many it runs.
    ran = dbsim("run", str(filled), "--set", "load.loops_per_session=50", "--output",
                str(tmp_path), "--set", "target.database=replay")  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert sysbenched.sql("SELECT COUNT(*), SUM(k) FROM sbtest1", "replay") == rows  # rolled back


def test_unreadable_performance_schema_is_refused_naming_the_grant(
    sysbenched: MariaServer,
) -> None:
    sysbenched.sql("CREATE USER peeker@'127.0.0.1'; GRANT SELECT ON test.* TO peeker@'127.0.0.1'")
    done = dbsim(*_args(sysbenched, "--user", "peeker"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: mysql at 127.0.0.1:{sysbenched.port}, database test: peeker may not read "
        "performance_schema: GRANT SELECT ON performance_schema.* TO peeker"
    ]


def test_the_digest_consumer_off_is_refused(sysbenched: MariaServer) -> None:
    consumer = "performance_schema.setup_consumers"
    sysbenched.sql(f"UPDATE {consumer} SET ENABLED = 'NO' WHERE NAME = 'statements_digest'")
    try:
        done = dbsim(*_args(sysbenched))
    finally:
        sysbenched.sql(f"UPDATE {consumer} SET ENABLED = 'YES' WHERE NAME = 'statements_digest'")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "statements_digest consumer is off" in done.stderr


def test_performance_schema_off_is_refused() -> None:
    """The local server (127.0.0.1:3306) runs with performance_schema OFF."""
    done = dbsim("sql-from-stats", "--target-kind", "mysql", "--database", "test")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: mysql at 127.0.0.1:3306, database test: performance_schema is OFF: it needs "
        "performance_schema = ON in the server's configuration and a restart"
    ]
