"""``dbsim capture`` needs only read access to the database's statistics, and says which grant
is missing when it lacks one: on the local PostgreSQL a role created without pg_monitor
(``pg_read_all_stats`` missing: other roles' sessions would be invisible), a statistics view
revoked from PUBLIC in a scratch database, then the same role with pg_monitor, which is enough;
on the local MariaDB an account without PROCESS, then with it. Each refusal: exit 2, one
``error:`` line naming the grant, and no bundle. Roles and databases are made here and
dropped."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import CliResult, Dbsim, read_csv, read_summary, single_bundle

pytestmark = pytest.mark.e2e
PG = ["-h", "127.0.0.1", "-U", "postgres"]


def psql(database: str, sql: str) -> str:
    done = subprocess.run(
        ["psql", *PG, "-d", database, "-AtXqc", sql], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"!!! NOT RUN: PostgreSQL on 127.0.0.1:5432 refused: {done.stderr.strip()}")
    return done.stdout


def mariadb(sql: str) -> None:
    done = subprocess.run(["mysql", "-uroot", "-e", sql], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"!!! NOT RUN: MariaDB refused: {done.stderr.strip()}")


@pytest.fixture
def pg_role() -> Iterator[tuple[str, str]]:
    """A login role with no privilege beyond PUBLIC's, and a scratch database."""
    suffix = uuid.uuid4().hex[:8]
    role, database = f"capture_role_{suffix}", f"capture_db_{suffix}"
    psql("postgres", f"CREATE ROLE {role} LOGIN")
    psql("postgres", f"CREATE DATABASE {database}")
    try:
        yield role, database
    finally:
        psql("postgres", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        psql("postgres", f"DROP ROLE IF EXISTS {role}")


def _capture_pg(dbsim: Dbsim, out: Path, role: str, database: str) -> CliResult:
    return dbsim(
        "capture", "--target-kind", "postgres", "--host", "127.0.0.1", "--user", role,
        "--database", database, "--duration", "2", "-o", out,
    )  # fmt: skip


def test_postgres_grants_are_named_and_pg_monitor_is_enough(
    dbsim: Dbsim, out_dir: Path, pg_role: tuple[str, str]
) -> None:
    role, database = pg_role
    refused = _capture_pg(dbsim, out_dir, role, database)
    assert refused.rc == 2, refused.describe()
    assert refused.stderr.splitlines() == [
        f"error: collector db: role {role} cannot see other roles' sessions in "
        "pg_stat_activity (their state and wait events read as NULL), so active_sessions "
        f"would count nothing of the application's: GRANT pg_read_all_stats TO {role} (or "
        "pg_monitor, which includes it)"
    ]
    assert not out_dir.exists()
    psql("postgres", f"GRANT pg_monitor TO {role}")
    psql(database, "REVOKE SELECT ON pg_catalog.pg_stat_bgwriter FROM PUBLIC")
    revoked = _capture_pg(dbsim, out_dir, role, database)
    assert revoked.rc == 2, revoked.describe()
    lines = revoked.stderr.splitlines()
    assert len(lines) == 1 and "permission denied for view pg_stat_bgwriter" in lines[0]
    assert "GRANT SELECT ON pg_catalog.pg_stat_bgwriter" in lines[0]
    assert not out_dir.exists()
    psql(database, "GRANT SELECT ON pg_catalog.pg_stat_bgwriter TO PUBLIC")
    done = _capture_pg(dbsim, out_dir, role, database)
    assert done.rc == 0, done.describe()
    bundle = single_bundle(out_dir)
    _, rows = read_csv(bundle / "timeseries" / "db.csv")
    assert rows and {row["entity"] for row in rows} == {database}
    assert all(row["commits_s"] != "" and row["active_sessions"] != "" for row in rows)
    assert read_summary(bundle)["target"]["user"] == role


@pytest.fixture
def mariadb_account() -> Iterator[str]:
    user = f"capture_{uuid.uuid4().hex[:8]}"
    mariadb(f"CREATE USER '{user}'@'127.0.0.1'; GRANT SELECT ON test.* TO '{user}'@'127.0.0.1'")
    try:
        yield user
    finally:
        mariadb(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


def test_mariadb_needs_process_and_nothing_more(
    dbsim: Dbsim, out_dir: Path, mariadb_account: str
) -> None:
    user = mariadb_account
    args = ("capture", "--target-kind", "mysql", "--host", "127.0.0.1", "--user", user,
            "--database", "test", "--duration", "2", "-o", out_dir)  # fmt: skip
    refused = dbsim(*args)
    assert refused.rc == 2, refused.describe()
    assert refused.stderr.splitlines() == [
        f"error: collector db: {user} has no PROCESS privilege, so the process list shows only "
        "its own sessions and active_sessions would count nothing of the application's: "
        f"GRANT PROCESS ON *.* TO {user}"
    ]
    assert not out_dir.exists()
    mariadb(f"GRANT PROCESS ON *.* TO '{user}'@'127.0.0.1'")
    done = dbsim(*args)
    assert done.rc == 0, done.describe()
    _, rows = read_csv(single_bundle(out_dir) / "timeseries" / "db.csv")
    assert rows and all(row["phys_read_req_s"] != "" and row["commits_s"] != "" for row in rows)
