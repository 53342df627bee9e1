"""Connection settings for every target kind, validated from the scenario's ``target:``.

Passwords are references (``password_env`` / ``password_file``), see ``sim.secrets``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sim.secrets import LITERAL_SECRET_KEYS, SecretRef

DEFAULT_SQLITE_CACHE_KIB = 2048
# Keywords of an ODBC connection string; anything else could smuggle in another keyword.
ODBC_KEYWORD = re.compile(r"[A-Za-z][A-Za-z0-9_ ]*")
# Connection-string keywords that carry a password: a literal one is refused like
# ``target.password`` is (the password comes from password_env / password_file).
ODBC_SECRET_KEYWORDS = frozenset({"PWD", "PASSWORD", *(k.upper() for k in LITERAL_SECRET_KEYS)})


class _Settings(BaseModel):
    # allow_inf_nan=False: a timeout of .inf or .nan is a typo, not a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    #: The SQL dialect of the kind (None: not a SQL target).
    sql_dialect_of_kind: ClassVar[str | None] = None

    def sql_dialect(self) -> str | None:
        """The dialect whose SQL this target is sent (its identifier rules apply)."""
        return self.sql_dialect_of_kind

    def sql_identifiers(self) -> dict[str, list[str]]:
        """Names taken from these settings that reach SQL, by field (checked by the scenario
        against the dialect's identifier rules before anything connects)."""
        return {}


class SqliteSettings(_Settings):
    """The embedded default: a SQLite database file."""

    kind: Literal["sqlite"] = "sqlite"
    sql_dialect_of_kind: ClassVar[str | None] = "sqlite"
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


#: A PostgreSQL run-time parameter name (``lock_timeout``, ``auto_explain.log_min_duration``).
SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
#: Settings dbsim sets on every connection, with the field that controls them.
RESERVED_SETTINGS = {
    "search_path": "target.schema_name",
    "application_name": "dbsim's own, so its sessions can be told apart",
}


class PostgresSettings(SecretRef, _Settings):
    """PostgreSQL through asyncpg."""

    kind: Literal["postgres"] = "postgres"
    sql_dialect_of_kind: ClassVar[str | None] = "postgres"
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "postgres"
    user: str = "postgres"
    schema_name: str = Field(default="public", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
    data_directory: Path | None = Field(
        default=None, description="Server data directory, for the block collector (local servers)."
    )
    connect_timeout_s: float = Field(default=10.0, gt=0)
    session_settings: dict[str, str] = Field(
        default_factory=dict,
        description="Server settings for every session's connection (e.g. lock_timeout: "
        "50ms, statement_timeout: 2s, work_mem: 64MB), as with SET; the server rejects "
        "an unknown one when the run connects.",
    )

    @field_validator("session_settings")
    @classmethod
    def _setting_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not SETTING_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a PostgreSQL setting name")
            if name.lower() in RESERVED_SETTINGS:
                raise ValueError(
                    f"{name} is set by dbsim itself ({RESERVED_SETTINGS[name.lower()]})"
                )
        return value

    def sql_identifiers(self) -> dict[str, list[str]]:
        # The schema goes into search_path (quoted) and asyncpg's COPY (quoted by asyncpg).
        return {"schema_name": [self.schema_name]}


class OracleSettings(SecretRef, _Settings):
    """Oracle through python-oracledb's thin mode (no client libraries)."""

    kind: Literal["oracle"] = "oracle"
    sql_dialect_of_kind: ClassVar[str | None] = "oracle"
    host: str = "127.0.0.1"
    port: int = Field(default=1521, ge=1, le=65535)
    service_name: str = "FREEPDB1"
    user: str = "dbsim"
    data_directory: Path | None = None


class SqlServerSettings(SecretRef, _Settings):
    """SQL Server through pyodbc (ODBC Driver 18 for SQL Server or FreeTDS)."""

    kind: Literal["sqlserver"] = "sqlserver"
    sql_dialect_of_kind: ClassVar[str | None] = "sqlserver"
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
    dialect: str = Field(
        default="postgres", description="The SQL to send: a registered dialect (sim.dialects)."
    )
    host: str = "127.0.0.1"
    port: int = Field(default=5432, ge=1, le=65535)
    database: str = "postgres"
    user: str = "postgres"
    extra: dict[str, str] = Field(
        default_factory=dict, description="More connection-string keywords."
    )
    data_directory: Path | None = None

    def sql_dialect(self) -> str | None:
        return self.dialect

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, dialect: str) -> str:
        from sim.dialects import dialects

        known = dialects()
        if dialect not in known:
            raise ValueError(
                f"{dialect!r} is not a SQL dialect (known: {', '.join(sorted(known))})"
            )
        return dialect

    @field_validator("extra")
    @classmethod
    def _keywords(cls, extra: dict[str, str]) -> dict[str, str]:
        # Checked here rather than when the target is built, so `dbsim validate` refuses it too
        # and the field is named: a key with ';' or '=' would add keywords of its own, and a
        # PWD key would be a literal password in the scenario (and in the run bundle).
        bad = sorted(k for k in extra if not ODBC_KEYWORD.fullmatch(k))
        if bad:
            raise ValueError(
                f"{', '.join(map(repr, bad))}: not ODBC keywords (letters, digits, _ and spaces)"
            )
        secret = sorted(k for k in extra if k.strip().upper() in ODBC_SECRET_KEYWORDS)
        if secret:
            raise ValueError(
                f"a literal {', '.join(secret)} is not accepted; name an environment variable "
                "with password_env or a file with password_file"
            )
        return extra


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
