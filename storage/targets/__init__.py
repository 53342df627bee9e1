"""Targets: the systems under test. Registers every target kind's settings model and driver.

Drivers are imported lazily by their factories, so an optional driver's system library
(unixODBC for pyodbc) is needed only when that kind is used.
"""

from __future__ import annotations

from pydantic import BaseModel

from sim.protocols import Target
from sim.registry import TargetEntry, register_target
from storage.targets.settings import (
    FileTreeSettings,
    OracleSettings,
    PostgresSettings,
    SqliteSettings,
    SqlServerSettings,
)


def _sqlite(settings: BaseModel) -> Target:
    from storage.targets.sqlite import SqliteTarget

    assert isinstance(settings, SqliteSettings)
    return SqliteTarget(settings)


register_target(TargetEntry("sqlite", SqliteSettings, _sqlite, "SQLite file (embedded default)"))
register_target(TargetEntry("postgres", PostgresSettings, None, "PostgreSQL via asyncpg"))
register_target(TargetEntry("oracle", OracleSettings, None, "Oracle via python-oracledb thin"))
register_target(TargetEntry("sqlserver", SqlServerSettings, None, "SQL Server via pyodbc"))
register_target(TargetEntry("filetree", FileTreeSettings, None, "directory tree (local or NFS)"))
