"""Targets: the systems under test. Registers every target kind's settings model and driver.

Each SQL kind registers its dialect record (sim.dialects) from its own module. pyodbc is
imported lazily by the ODBC targets, so its system library (unixODBC) is needed only when such
a kind is used.

| kind      | module                     | driver                                   |
|-----------|----------------------------|------------------------------------------|
| sqlite    | storage.targets.sqlite     | sqlite3 (standard library), a thread per |
|           |                            | session (sim.core.session_threads)       |
| postgres  | storage.targets.postgres   | asyncpg, on the engine loop              |
| oracle    | storage.targets.oracle     | python-oracledb async thin mode          |
| sqlserver | storage.targets.odbc       | pyodbc, a thread per session             |
| odbc      | storage.targets.odbc       | pyodbc with any ODBC driver and dialect  |
| mysql     | storage.targets.mysql      | asyncmy, on the engine loop (registered  |
|           |                            | by storage.targets.mysql_record)         |
| filetree  | storage.targets.filetree   | the native file loop (fileloop.c) on a   |
|           |                            | thread per session, else os calls there  |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from pydantic import BaseModel

from sim.errors import ConfigError
from sim.protocols import Target
from sim.registry import TargetEntry, register_target
from storage.targets.oracle_record import ORACLE_DIALECT
from storage.targets.postgres_record import POSTGRES_DIALECT
from storage.targets.settings import (
    FileTreeSettings,
    OdbcSettings,
    OracleSettings,
    PostgresSettings,
    SqliteSettings,
    SqlServerSettings,
)
from storage.targets.sqlite import SQLITE_DIALECT
from storage.targets.sqlserver import SQLSERVER_DIALECT


def _lazy(module: str, class_name: str, needs: str) -> Callable[[BaseModel], Target]:
    """A factory that imports the driver module only when the kind is used."""

    def factory(settings: BaseModel) -> Target:
        try:
            target_class = getattr(importlib.import_module(module), class_name)
        except ImportError as exc:
            raise ConfigError(f"target.kind: {settings.kind} needs {needs}: {exc}") from exc  # type: ignore[attr-defined]
        target: Target = target_class(settings)
        return target

    return factory


register_target(
    TargetEntry(
        "sqlite",
        SqliteSettings,
        _lazy("storage.targets.sqlite", "SqliteTarget", "sqlite3"),
        "SQLite file (embedded default)",
        SQLITE_DIALECT,
    )
)
register_target(
    TargetEntry(
        "postgres",
        PostgresSettings,
        _lazy("storage.targets.postgres", "PostgresTarget", "asyncpg"),
        "PostgreSQL via asyncpg",
        POSTGRES_DIALECT,
    )
)
register_target(
    TargetEntry(
        "oracle",
        OracleSettings,
        _lazy("storage.targets.oracle", "OracleTarget", "python-oracledb"),
        "Oracle via python-oracledb thin",
        ORACLE_DIALECT,
    )
)
register_target(
    TargetEntry(
        "sqlserver",
        SqlServerSettings,
        _lazy(
            "storage.targets.odbc",
            "SqlServerTarget",
            "pyodbc and unixODBC (apt-get install unixodbc)",
        ),
        "SQL Server via pyodbc",
        SQLSERVER_DIALECT,
    )
)
register_target(
    TargetEntry(
        "odbc",
        OdbcSettings,
        _lazy(
            "storage.targets.odbc", "OdbcTarget", "pyodbc and unixODBC (apt-get install unixodbc)"
        ),
        "any ODBC driver via pyodbc",
    )
)
register_target(
    TargetEntry(
        "filetree",
        FileTreeSettings,
        _lazy("storage.targets.filetree", "FileTreeTarget", "the standard library"),
        "directory tree (local or NFS)",
    )
)
