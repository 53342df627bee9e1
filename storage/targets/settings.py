"""Connection settings for every target kind, validated from the scenario's ``target:``.

Passwords are references (``password_env`` / ``password_file``), see ``sim.secrets``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sim.secrets import ENV_NAME, LITERAL_SECRET_KEYS, SecretRef

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
    wal_limit_bytes: int = Field(
        default=64 * 2**20,
        ge=0,
        description="Bound on the write-ahead log (journal_mode wal): past it, the committing "
        "session runs wal_checkpoint(RESTART). 0: SQLite's own behaviour, under which readers "
        "that never pause let the log grow without end.",
    )
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


def _env_name(value: str | None) -> str | None:
    if value is not None and not ENV_NAME.match(value):
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits and _, not starting "
            "with a digit); the value is not shown, in case it is the password"
        )
    return value


class OracleSettings(SecretRef, _Settings):
    """Oracle through python-oracledb: thin mode (no client libraries) unless ``driver_mode:
    thick``. The address is ``host``/``port`` with ``service_name`` or ``sid``, or a ``dsn``
    (an Easy Connect Plus string, or a TNS alias looked up in ``config_dir``'s tnsnames.ora)."""

    kind: Literal["oracle"] = "oracle"
    sql_dialect_of_kind: ClassVar[str | None] = "oracle"
    dsn: str | None = Field(
        default=None,
        min_length=1,
        description="Easy Connect Plus string (tcps://host:2484/service?wallet_location=...) "
        "or a TNS alias from config_dir's tnsnames.ora; replaces host, port, service_name, "
        "sid and protocol.",
    )
    config_dir: Path | None = Field(
        default=None,
        description="Directory of tnsnames.ora (and sqlnet.ora in thick mode) for a dsn alias.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=1521, ge=1, le=65535)
    protocol: Literal["tcp", "tcps"] = Field(
        default="tcp", description="tcps: TLS to the listener (usually port 2484)."
    )
    service_name: str = "FREEPDB1"
    sid: str | None = Field(
        default=None, description="The instance's SID, for a database with no service name."
    )
    user: str = "dbsim"
    wallet_location: Path | None = Field(
        default=None,
        description="Directory of the wallet (ewallet.pem in thin mode, cwallet.sso in thick) "
        "holding the certificates for tcps.",
    )
    wallet_password_env: str | None = Field(
        default=None,
        description="NAME of the environment variable holding the wallet's password (thin "
        "mode's ewallet.pem is encrypted with it).",
    )
    driver_mode: Literal["thin", "thick"] = Field(
        default="thin",
        description="thick: load the Oracle Client libraries (Native Network Encryption, "
        "features thin mode lacks); sessions then run in threads, not on the event loop.",
    )
    lib_dir: Path | None = Field(
        default=None,
        description="Directory of the Oracle Client libraries (Instant Client) for thick mode; "
        "unset: the system's library search path.",
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="How long to wait for the listener (TCP connect)."
    )
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

    @field_validator("wallet_password_env")
    @classmethod
    def _wallet_env(cls, value: str | None) -> str | None:
        return _env_name(value)

    @model_validator(mode="after")
    def _one_address(self) -> OracleSettings:
        given = self.model_fields_set
        if self.dsn is not None:
            clash = sorted(given & {"host", "port", "service_name", "sid", "protocol"})
            if clash:
                raise ValueError(f"dsn replaces {', '.join(clash)}: set one or the other")
        elif "sid" in given and "service_name" in given:
            raise ValueError("sid and service_name name the database twice: set one")
        if self.lib_dir is not None and self.driver_mode != "thick":
            raise ValueError(
                "lib_dir loads the Oracle Client libraries: it needs driver_mode: thick"
            )
        if self.driver_mode == "thick" and self.wallet_location is not None:
            raise ValueError(
                "thick mode reads its wallet from sqlnet.ora (WALLET_LOCATION) in config_dir; "
                "wallet_location is thin mode's"
            )
        if self.wallet_password_env is not None and self.wallet_location is None:
            raise ValueError("wallet_password_env needs wallet_location (the wallet it opens)")
        return self

    def sql_identifiers(self) -> dict[str, list[str]]:
        return {"tablespace": [self.tablespace]} if self.tablespace else {}


#: Connection-string keywords kind: sqlserver writes itself from its fields.
SQLSERVER_OWN_KEYWORDS = frozenset(
    {
        "DRIVER",
        "SERVER",
        "ADDRESS",
        "ADDR",
        "DATABASE",
        "UID",
        "APP",
        "ENCRYPT",
        "TRUSTSERVERCERTIFICATE",
        "HOSTNAMEINCERTIFICATE",
        "SERVERCERTIFICATE",
        "AUTHENTICATION",
        "TRUSTED_CONNECTION",
        "DSN",
        "FILEDSN",
        "SAVEFILE",
    }
)


def _check_extra(extra: dict[str, str], own: frozenset[str]) -> dict[str, str]:
    # A key with ';' or '=' would add keywords of its own, a PWD key would be a literal
    # password in the scenario (and in the run bundle), and a keyword dbsim sets from a field
    # would be sent twice with two meanings.
    bad = sorted(k for k in extra if not ODBC_KEYWORD.fullmatch(k))
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))}: not ODBC keywords (letters, digits, _ and spaces)"
        )
    secret = sorted(
        k
        for k in extra
        if k.strip().upper() in ODBC_SECRET_KEYWORDS
        or any(word in k.strip().lower() for word in ("password", "secret", "token"))
    )
    if secret:
        raise ValueError(
            f"a literal {', '.join(secret)} is not accepted; name an environment variable "
            "with password_env or a file with password_file"
        )
    taken = sorted(k for k in extra if k.strip().upper().replace(" ", "") in own)
    if taken:
        raise ValueError(f"{', '.join(taken)}: set by dbsim from its own fields; use those")
    return extra


class SqlServerSettings(SecretRef, _Settings):
    """SQL Server through pyodbc (Microsoft ODBC Driver 18 or 17, or FreeTDS)."""

    kind: Literal["sqlserver"] = "sqlserver"
    sql_dialect_of_kind: ClassVar[str | None] = "sqlserver"
    driver: str = "ODBC Driver 18 for SQL Server"
    host: str = "127.0.0.1"
    port: int = Field(default=1433, ge=1, le=65535)
    database: str = "dbsim"
    user: str | None = Field(
        default="sa",
        description="The login (unset with trusted_connection, ActiveDirectoryMsi without a "
        "client id, or ActiveDirectoryDefault).",
    )
    encrypt: Literal["strict", "mandatory", "optional"] = Field(
        default="mandatory",
        description="TLS: strict (TDS 8.0, SQL Server 2022+), mandatory (Driver 18's default) "
        "or optional; true and false are read as mandatory and optional.",
    )
    trust_server_certificate: bool = Field(
        default=False,
        description="Accept the server's certificate unchecked (its stock self-signed one); "
        "ignored by strict.",
    )
    host_name_in_certificate: str | None = Field(
        default=None, description="The name the certificate carries, when it is not host."
    )
    server_certificate: Path | None = Field(
        default=None,
        description="The server's own certificate (PEM/DER) to pin instead of a CA chain "
        "(Driver 18.1+, with strict or mandatory).",
    )
    authentication: (
        Literal[
            "SqlPassword",
            "ActiveDirectoryPassword",
            "ActiveDirectoryInteractive",
            "ActiveDirectoryServicePrincipal",
            "ActiveDirectoryMsi",
            "ActiveDirectoryIntegrated",
            "ActiveDirectoryDefault",
        ]
        | None
    ) = Field(default=None, description="Entra ID (Azure AD) authentication; unset: SQL login.")
    trusted_connection: bool = Field(
        default=False, description="Windows integrated authentication (Kerberos on Linux)."
    )
    extra: dict[str, str] = Field(
        default_factory=dict,
        description="More Driver 18 keywords (e.g. MultiSubnetFailover: 'Yes', "
        "ApplicationIntent: ReadOnly); not the ones dbsim sets, never a password.",
    )
    data_directory: Path | None = None

    @field_validator("encrypt", mode="before")
    @classmethod
    def _encrypt_words(cls, value: object) -> object:
        # Driver 18 takes yes/no as mandatory/optional; true/false are the YAML spelling.
        words = {True: "mandatory", False: "optional", "yes": "mandatory", "no": "optional"}
        if isinstance(value, bool | str) and value in words:
            return words[value]
        return value

    @field_validator("extra")
    @classmethod
    def _extra(cls, extra: dict[str, str]) -> dict[str, str]:
        return _check_extra(extra, SQLSERVER_OWN_KEYWORDS)

    @model_validator(mode="after")
    def _one_way_in(self) -> SqlServerSettings:
        if self.trusted_connection and self.authentication is not None:
            raise ValueError("trusted_connection and authentication are two ways in: set one")
        if self.trusted_connection and (self.password_env or self.password_file):
            raise ValueError("trusted_connection sends no password: drop password_env/_file")
        return self


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
        return _check_extra(extra, frozenset({"DRIVER", "PWD", "PASSWORD"}))


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
