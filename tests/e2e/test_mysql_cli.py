"""``dbsim load``, ``run`` and ``drop`` against the live MariaDB as a user runs them: the run
reports physical reads per read from InnoDB's buffer pool counters, and ``drop`` removes
dbsim's tables and leaves a foreign table of the same prefix, with its row, alone."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Dbsim, read_summary, single_bundle

pymysql = pytest.importorskip("pymysql", reason="!!! PyMySQL missing: MariaDB CLI NOT TESTED")

pytestmark = pytest.mark.e2e
DSN = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}


def sql(query: str) -> list[tuple[object, ...]]:
    try:
        conn = pymysql.connect(**DSN, autocommit=True)
    except pymysql.MySQLError as exc:
        pytest.skip(f"!!! MariaDB on {DSN['host']}:{DSN['port']} is not reachable: {exc}")
    try:
        with conn.cursor() as cursor:
            cursor.execute(query)
            return list(cursor.fetchall())
    finally:
        conn.close()


def test_load_run_drop_on_mariadb_leaves_a_foreign_table_alone(dbsim: Dbsim, out_dir: Path) -> None:
    prefix = f"e{uuid.uuid4().hex[:8]}"
    foreign = f"{prefix}_9_cf1"
    data = {
        "name": "mariadb",
        "target": {"kind": "mysql"},
        "workload": {
            "name": "slob",
            "parameters": {"table_prefix": prefix, "scale": 10_000, "update_pct": 0},
        },
        "load": {"loops_per_session": 25, "sessions": 2},
    }
    path = dbsim.cwd / "mariadb.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    sql(f"CREATE TABLE `{foreign}` (precious VARCHAR(20))")
    try:
        sql(f"INSERT INTO `{foreign}` VALUES ('keep me')")
        loaded = dbsim("load", path)
        assert loaded.rc == 0, loaded.describe()
        ran = dbsim("run", "--skip-load", path, "-o", out_dir, "--quiet")
        assert ran.rc == 0, ran.describe()
        summary = read_summary(single_bundle(out_dir))
        assert summary["operations"]["read"]["count"] == 50
        findings = summary["findings"]["db"]
        # Buffer pool reads over the measured window, per read statement.
        expected = findings["tables_blocks_read"] / 50
        assert findings["physical_reads_per_read"] == pytest.approx(expected, abs=0.01)
        assert 0 <= findings["tables_cache_hit_pct"] <= 100
        dropped = dbsim("drop", path)
        assert dropped.rc == 0, dropped.describe()
        assert f"{prefix}_1_cf1" in dropped.stdout + dropped.stderr
        assert sql(f"SELECT precious FROM `{foreign}`") == [("keep me",)]
        left = sql(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
            f"AND TABLE_NAME LIKE '{prefix}%'"
        )
        assert left == [(foreign,)]
    finally:
        sql(f"DROP TABLE IF EXISTS `{foreign}`")
        dbsim("drop", path)
