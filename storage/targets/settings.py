"""Connection settings for every target kind, validated from the scenario's ``target:``.

Passwords are references (``password_env`` / ``password_file``), see ``sim.secrets``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sim.secrets import SecretRef

DEFAULT_SQLITE_CACHE_KIB = 2048


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SqliteSettings(_Settings):
    """The embedded default: a SQLite database file."""

    kind: Literal["sqlite"] = "sqlite"
    path: Path | None = Field(
        default=None,
        description="Database file. Unset: a fresh temporary directory, removed after the run.",
    )
    cache_size_kib: int = Field(
        default=DEFAULT_SQLITE_CACHE_KIB,
        ge=64,
        description="SQLite page cache per connection; keep it far below the data (SLOB method).",
    )
    page_size_bytes: Literal[4096, 8192, 16384, 32768] = Field(
        default=8192, description="Database page size (the block size of a SLOB-like row)."
    )
    journal_mode: Literal["wal", "delete", "truncate"] = "wal"
    synchronous: Literal["off", "normal", "full"] = "normal"
    busy_timeout_ms: int = Field(default=30_000, ge=0)
    keep: bool = Field(default=False, description="Keep a temporary database after the run.")


class PostgresSettings(SecretRef, _Settings):
    """PostgreSQL through asyncpg."""

    kind: Literal["postgres"] = "postgres"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "postgres"
    user: str = "postgres"
    schema_name: str = Field(default="public", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
    data_directory: Path | None = Field(
        default=None, description="Server data directory, for the block collector (local servers)."
    )
    connect_timeout_s: float = Field(default=10.0, gt=0)


class OracleSettings(SecretRef, _Settings):
    """Oracle through python-oracledb's thin mode (no client libraries)."""

    kind: Literal["oracle"] = "oracle"
    host: str = "127.0.0.1"
    port: int = Field(default=1521, ge=1, le=65535)
    service_name: str = "FREEPDB1"
    user: str = "dbsim"
    data_directory: Path | None = None


class SqlServerSettings(SecretRef, _Settings):
    """SQL Server through pyodbc (ODBC Driver 18 for SQL Server or FreeTDS)."""

    kind: Literal["sqlserver"] = "sqlserver"
    driver: str = "ODBC Driver 18 for SQL Server"
    host: str = "127.0.0.1"
    port: int = Field(default=1433, ge=1, le=65535)
    database: str = "dbsim"
    user: str = "sa"
    encrypt: bool = True
    trust_server_certificate: bool = False
    data_directory: Path | None = None


class OdbcSettings(SecretRef, _Settings):
    """Any database through pyodbc and an installed ODBC driver; ``dialect`` says which SQL
    to send. Used to run the pyodbc path for real against PostgreSQL (psqlODBC) here."""

    kind: Literal["odbc"] = "odbc"
    driver: str = Field(
        description="ODBC driver name as in odbcinst.ini, e.g. 'PostgreSQL Unicode'."
    )
    dialect: Literal["postgres", "sqlserver", "oracle", "sqlite"] = "postgres"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "postgres"
    user: str = "postgres"
    extra: dict[str, str] = Field(
        default_factory=dict, description="More connection-string keywords."
    )
    data_directory: Path | None = None


class FileTreeSettings(_Settings):
    """A directory tree on a local file system or an NFS mount."""

    kind: Literal["filetree"] = "filetree"
    path: Path


ALL_SETTINGS: tuple[type[BaseModel], ...] = (
    SqliteSettings,
    PostgresSettings,
    OracleSettings,
    SqlServerSettings,
    OdbcSettings,
    FileTreeSettings,
)
