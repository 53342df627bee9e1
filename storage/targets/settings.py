"""Connection settings for every target kind, validated from the scenario's ``target:``.

Passwords are references (``password_env`` / ``password_file``), see ``sim.secrets``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


#: A tablespace name that needs no quoting anywhere (lower case, so PostgreSQL and the catalogue
#: agree on it); ``pg_`` names are reserved by the server (refused by the model).
TABLESPACE_NAME = r"^[a-z_][a-z0-9_]{0,62}$"


class TablespaceSettings(BaseModel):
    """Where a PostgreSQL target's workload tables and indexes live (docs/databases.md).

    With ``create``, dbsim runs CREATE TABLESPACE at ``location`` (an existing, empty directory
    owned by the server's OS user), records it as its own and ``dbsim drop`` removes it once no
    object is left in it; without, the tablespace must exist and is only used."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TABLESPACE_NAME, description="The tablespace's name.")
    location: Path | None = Field(
        default=None,
        description="Its directory on the server's host (required with create; else read "
        "from the server).",
    )
    create: bool = Field(
        default=False, description="Create it (and own it) when it does not exist yet."
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name.startswith("pg_"):
            raise ValueError(f"{name}: names starting pg_ are reserved by PostgreSQL")
        return name

    @field_validator("location")
    @classmethod
    def _absolute(cls, location: Path | None) -> Path | None:
        if location is None:
            return None
        if not location.is_absolute():
            raise ValueError(f"{location} is not an absolute path (the server needs one)")
        # It goes into CREATE TABLESPACE as a string literal: no quote or escape can end it.
        if any(ch in str(location) for ch in "'\\\n\r\0"):
            raise ValueError(f"{str(location)!r}: quotes, backslashes and line breaks are refused")
        return location

    @model_validator(mode="after")
    def _create_needs_location(self) -> TablespaceSettings:
        if self.create and self.location is None:
            raise ValueError("create: true needs a location (the directory to create it in)")
        return self


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
    tablespace: TablespaceSettings | None = Field(
        default=None,
        description="Put the workload's tables and indexes in this tablespace; the collectors "
        "then watch the storage under its location.",
    )
    connect_timeout_s: float = Field(default=10.0, gt=0)
    session_settings: dict[str, str] = Field(
        default_factory=dict,
        description="Server settings for every session's connection (e.g. lock_timeout: "
        "50ms, statement_timeout: 2s, work_mem: 64MB), as with SET; the server rejects "
        "an unknown one when the run connects.",
    )

    @field_validator("schema_name")
    @classmethod
    def _not_a_system_schema(cls, value: str) -> str:
        # PostgreSQL keeps pg_* (pg_catalog, pg_toast, pg_temp_N …) and information_schema for
        # itself: a load there failed mid-way (pg_toast: permission denied, exit 3) or, in
        # information_schema, succeeded among the catalogue's own views.
        if value.startswith("pg_") or value == "information_schema":
            raise ValueError(
                f"{value} is a PostgreSQL system schema; dbsim puts its tables only in a "
                "schema of your own (public, or one made with CREATE SCHEMA)"
            )
        return value

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
        names = {"schema_name": [self.schema_name]}
        if self.tablespace is not None:
            names["tablespace"] = [self.tablespace.name]
        return names


class OracleSettings(SecretRef, _Settings):
    """Oracle through python-oracledb's thin mode (no client libraries)."""

    kind: Literal["oracle"] = "oracle"
    sql_dialect_of_kind: ClassVar[str | None] = "oracle"
    host: str = "127.0.0.1"
    port: int = Field(default=1521, ge=1, le=65535)
    service_name: str = "FREEPDB1"
    user: str = "dbsim"
    data_directory: Path | None = Field(
        default=None,
        description="Directory of the datafiles on this machine (of target.tablespace when "
        "set), for the block collector.",
    )
    tablespace: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z][A-Za-z0-9_]{0,29}$",
        description="An existing tablespace (the user needs a quota on it) for the workload's "
        "tables and indexes; dbsim does not create Oracle tablespaces.",
    )

    def sql_identifiers(self) -> dict[str, list[str]]:
        return {"tablespace": [self.tablespace]} if self.tablespace else {}


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
