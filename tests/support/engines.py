"""The SQL engines the engine-parametrised tests run on (issue #28), one description each.

* ``sqlite``: a database file in the test's own directory.
* ``postgres``, ``mysql``: the servers every machine of this project runs (PostgreSQL on
  127.0.0.1:5432, user ``postgres``, database ``test``, trust auth; MariaDB on 127.0.0.1:3306,
  ``root`` without a password, database ``test``).
* ``oracle``, ``sqlserver``: wherever a server is configured through the environment
  (:data:`ORACLE_VARIABLES`, :data:`SQLSERVER_VARIABLES`), as ``make test-servers`` does for
  the Oracle Database Free and SQL Server 2022 services of docker/compose.yaml (docs/databases.md,
  "Oracle and SQL Server in the test suite"). The password is never a value of these variables:
  ``..._PASSWORD_ENV`` names the variable that holds it, as dbsim's own ``password_env`` does.

``sql_engine`` (a fixture; import it into the module that uses it) is parametrised over all
five. For an engine that is not there it skips with one loud line, ``!!! NOT RUN: …``, saying
what to set; pytest's summary folds an engine's skips into one line. A server that is
configured but cannot be used (a password variable that is empty, a missing ODBC driver) fails
instead: whoever configured it meant the tests to run.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# The variable the child ``dbsim`` reads the password from (the scenario's ``password_env``).
# tests/e2e/conftest.py gives children an environment without any DBSIM_* variable of the
# developer's, so the test passes this one to each command explicitly (``SqlEngine.env``).
CHILD_PASSWORD_ENV = "DBSIM_TEST_ENGINE_PASSWORD"

ORACLE_DSN = "DBSIM_TEST_ORACLE_DSN"
ORACLE_USER = "DBSIM_TEST_ORACLE_USER"
ORACLE_PASSWORD_ENV = "DBSIM_TEST_ORACLE_PASSWORD_ENV"
ORACLE_VARIABLES = (ORACLE_DSN, ORACLE_USER, ORACLE_PASSWORD_ENV)

SQLSERVER_HOST = "DBSIM_TEST_SQLSERVER_HOST"
SQLSERVER_PORT = "DBSIM_TEST_SQLSERVER_PORT"
SQLSERVER_DATABASE = "DBSIM_TEST_SQLSERVER_DATABASE"
SQLSERVER_USER = "DBSIM_TEST_SQLSERVER_USER"
SQLSERVER_PASSWORD_ENV = "DBSIM_TEST_SQLSERVER_PASSWORD_ENV"
SQLSERVER_DRIVER = "DBSIM_TEST_SQLSERVER_DRIVER"
SQLSERVER_VARIABLES = (
    SQLSERVER_HOST,
    SQLSERVER_PORT,
    SQLSERVER_DATABASE,
    SQLSERVER_USER,
    SQLSERVER_PASSWORD_ENV,
    SQLSERVER_DRIVER,
)

#: Every environment variable this module reads (make test-servers sets each one).
VARIABLES = ORACLE_VARIABLES + SQLSERVER_VARIABLES

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
SQLSERVER_DEFAULT_DRIVER = "ODBC Driver 18 for SQL Server"


@dataclass(frozen=True)
class SqlEngine:
    """One engine, ready for a scenario: its ``target:`` section, the environment a ``dbsim``
    child needs beside it (the password, if any), and raw SQL as someone other than dbsim."""

    name: str
    title: str
    target: dict[str, Any]
    #: The most rows dbsim's verify may find in one block for SLOB-like (InnoDB keeps two).
    rows_per_block: int
    sql: Callable[[str], list[tuple[Any, ...]]] = field(repr=False)
    #: Lists the engine's table names (lower case) that start with a prefix.
    list_tables: Callable[[str], set[str]] = field(repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def tables(self, prefix: str) -> set[str]:
        return {name.lower() for name in self.list_tables(prefix)}


def not_run(why: str) -> str:
    """The one loud line of an engine that is not there."""
    return f"!!! NOT RUN: {why}"


# --------------------------------------------------------------------------- the five


def _sqlite(path: Path) -> SqlEngine:
    def sql(statement: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            return conn.execute(statement).fetchall()

    def tables(prefix: str) -> set[str]:
        rows = sql(f"SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '{prefix}%'")
        return {str(r[0]) for r in rows}

    target = {"kind": "sqlite", "path": str(path)}
    return SqlEngine("sqlite", "SQLite", target, 1, sql, tables)


def _postgres() -> SqlEngine:
    import asyncpg

    def sql(statement: str) -> list[tuple[Any, ...]]:
        async def run() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(**PG)
            try:
                return [tuple(r) for r in await conn.fetch(statement)]
            finally:
                await conn.close()

        return asyncio.run(run())

    try:
        sql("SELECT 1")
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        pytest.skip(not_run(f"PostgreSQL on 127.0.0.1:5432 is not reachable: {exc}"))

    def tables(prefix: str) -> set[str]:
        rows = sql(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            f"AND tablename LIKE '{prefix}%'"
        )
        return {str(r[0]) for r in rows}

    return SqlEngine("postgres", "PostgreSQL", {"kind": "postgres", **PG}, 1, sql, tables)


def _mysql() -> SqlEngine:
    try:
        import pymysql
    except ImportError:
        pytest.skip(not_run("PyMySQL is not installed (pip install -e '.[dev]')"))

    def sql(statement: str) -> list[tuple[Any, ...]]:
        conn = pymysql.connect(**MARIADB, autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement)
                return list(cursor.fetchall())
        finally:
            conn.close()

    try:
        sql("SELECT 1")
    except pymysql.MySQLError as exc:
        pytest.skip(not_run(f"MariaDB on 127.0.0.1:3306 is not reachable: {exc}"))

    def tables(prefix: str) -> set[str]:
        rows = sql(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
            f"AND TABLE_NAME LIKE '{prefix}%'"
        )
        return {str(r[0]) for r in rows}

    return SqlEngine("mysql", "MariaDB", {"kind": "mysql", **MARIADB}, 2, sql, tables)


def _password(title: str, variable: str, default: str) -> tuple[str, str]:
    """The name of the variable holding the password and its value; fails when it is empty."""
    name = os.environ.get(variable) or default
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(
            f"{title} is configured but {name} (named by {variable}) holds no password",
            pytrace=False,
        )
    return name, value


def _oracle() -> SqlEngine:
    dsn = os.environ.get(ORACLE_DSN)
    if not dsn:
        pytest.skip(
            not_run(
                f"no Oracle server (set {ORACLE_DSN}, {ORACLE_USER}, {ORACLE_PASSWORD_ENV}; "
                "make test-servers)",
            )
        )
    import oracledb

    user = os.environ.get(ORACLE_USER) or "dbsim"
    _, password = _password("Oracle", ORACLE_PASSWORD_ENV, "DBSIM_ORACLE_PASSWORD")

    def sql(statement: str) -> list[tuple[Any, ...]]:
        with oracledb.connect(user=user, password=password, dsn=dsn) as conn:
            cursor = conn.cursor()
            cursor.execute(statement)
            rows = list(cursor.fetchall()) if cursor.description else []
            conn.commit()
            return rows

    def tables(prefix: str) -> set[str]:
        rows = sql(f"SELECT table_name FROM user_tables WHERE table_name LIKE '{prefix.upper()}%'")
        return {str(r[0]) for r in rows}

    target = {"kind": "oracle", "dsn": dsn, "user": user, "password_env": CHILD_PASSWORD_ENV}
    return SqlEngine("oracle", "Oracle", target, 1, sql, tables, {CHILD_PASSWORD_ENV: password})


def _sqlserver() -> SqlEngine:
    host = os.environ.get(SQLSERVER_HOST)
    if not host:
        pytest.skip(
            not_run(
                f"no SQL Server (set {SQLSERVER_HOST}, {SQLSERVER_PASSWORD_ENV} and the other "
                f"{SQLSERVER_HOST.rsplit('_', 1)[0]}_* variables; make test-servers)",
            )
        )
    import pyodbc

    driver = os.environ.get(SQLSERVER_DRIVER) or SQLSERVER_DEFAULT_DRIVER
    if driver not in pyodbc.drivers():
        pytest.fail(
            f"SQL Server is configured but the ODBC driver {driver!r} is not installed "
            f"(installed: {', '.join(pyodbc.drivers()) or 'none'}; docs/databases.md)",
            pytrace=False,
        )
    port = int(os.environ.get(SQLSERVER_PORT) or 1433)
    database = os.environ.get(SQLSERVER_DATABASE) or "dbsim"
    user = os.environ.get(SQLSERVER_USER) or "sa"
    _, password = _password("SQL Server", SQLSERVER_PASSWORD_ENV, "DBSIM_MSSQL_PASSWORD")
    # The compose container's stock certificate is self-signed: trusted unchecked, as in
    # docker/scenarios/sqlserver-slob.yaml.
    quoted = password.replace("}", "}}")  # ODBC's escape inside braces
    connection = (
        f"DRIVER={{{driver}}};SERVER={host},{port};DATABASE={database};UID={user};"
        "Encrypt=yes;TrustServerCertificate=yes"
    )

    def sql(statement: str) -> list[tuple[Any, ...]]:
        conn = pyodbc.connect(f"{connection};PWD={{{quoted}}}", autocommit=True)
        try:
            cursor = conn.cursor()
            cursor.execute(statement)
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        finally:
            conn.close()

    def tables(prefix: str) -> set[str]:
        return {str(r[0]) for r in sql(f"SELECT name FROM sys.tables WHERE name LIKE '{prefix}%'")}

    target = {
        "kind": "sqlserver",
        "driver": driver,
        "host": host,
        "port": port,
        "database": database,
        "user": user,
        "password_env": CHILD_PASSWORD_ENV,
        "encrypt": "mandatory",
        "trust_server_certificate": True,
    }
    env = {CHILD_PASSWORD_ENV: password}
    return SqlEngine("sqlserver", "SQL Server", target, 1, sql, tables, env)


ENGINES = ("sqlite", "postgres", "mysql", "oracle", "sqlserver")


def engine(name: str, tmp_path: Path) -> SqlEngine:
    """The engine ``name``, or a skip (one loud line) where it is not there."""
    if name == "sqlite":
        return _sqlite(tmp_path / "engine.sqlite")
    builders: dict[str, Callable[[], SqlEngine]] = {
        "postgres": _postgres,
        "mysql": _mysql,
        "oracle": _oracle,
        "sqlserver": _sqlserver,
    }
    return builders[name]()


@pytest.fixture(params=ENGINES)
def sql_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlEngine]:
    """Each SQL engine in turn (tests/support/engines.py); skipped loudly where absent."""
    yield engine(request.param, tmp_path)
