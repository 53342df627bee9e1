"""Does the target answer, as whom, and may dbsim do there what it will do: the probe behind
``dbsim validate --connect`` and the first step of ``dbsim check``.

The API (for ``dbsim check`` and anything else that needs first contact)::

    report = connect_check(target)      # opens the target, probes, closes it (blocking)
    report = await probe(target)        # the same on a target the caller has opened
    report.missing                      # required privileges not held (each with its GRANT)
    report.lines()                      # one line per check, for a terminal

``probe`` takes one connection, sends the round trip (``SELECT 1 FROM DUAL`` on Oracle,
``SELECT 1`` elsewhere) and checks the answer is 1, reads who the server says the login is
and the server's version, then asks the server whether the user holds each privilege dbsim
needs (its own privilege functions and catalogue views: nothing is created, nothing written)
and rolls back. A target that cannot be reached raises :class:`ConnectFailed` (exit 2) naming
the kind, host and port and the driver's own message; passwords never appear (the targets
redact their own, and :func:`sim.secrets.redact_known` every one this process read).

The checks are per SQL dialect, so ``kind: odbc`` with ``dialect: postgres`` is checked as
PostgreSQL is. A file tree is opened and one connection made (its round trip); SQLite needs no
privileges. What was checked against a real server and what was not: docs/databases.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from sim.core.loops import run_opened
from sim.errors import EXIT_BAD_INPUT, SimError, TargetError
from sim.protocols import SqlConnection, Target
from sim.secrets import redact_known
from sim.sql import Statement, sqlalchemy_dialect

#: The statement whose answer (1) proves a round trip, per dialect.
ROUND_TRIP = {"oracle": "SELECT 1 FROM DUAL"}
ROUND_TRIP_DEFAULT = "SELECT 1"


class ConnectFailed(TargetError):
    """The target did not answer (or answered wrongly) the round trip: exit 2, since what is
    wrong is the scenario's address, credentials or driver, or the server's state."""

    exit_code = EXIT_BAD_INPUT


@dataclass(frozen=True)
class PrivilegeCheck:
    """One thing dbsim needs on a dialect. ``sql`` answers 1 (or more) when it is held and
    0 or an error when not; ``grant`` fixes it, with ``{user}`` (the grantee in the database),
    ``{login}`` (the server login) and ``{scope}`` (schema, database or tablespace) filled in
    from what the server said, quoted as the dialect needs."""

    name: str
    purpose: str
    sql: str
    grant: str
    required: bool = True
    #: Whether the query failing means the privilege is not held (reading a view the user
    #: may not read); otherwise a failure leaves the answer unknown.
    refused_means_missing: bool = False


@dataclass(frozen=True)
class Privilege:
    """A :class:`PrivilegeCheck`'s answer. ``held`` is None when the server could not say."""

    name: str
    purpose: str
    required: bool
    held: bool | None
    grant: str
    detail: str = ""


@dataclass(frozen=True)
class ProbeReport:
    """What the probe found; ``round_trip`` is the statement the server answered."""

    kind: str
    address: str
    round_trip: str
    user: str | None = None
    server_version: str | None = None
    privileges: tuple[Privilege, ...] = field(default_factory=tuple)

    @property
    def missing(self) -> list[Privilege]:
        """Required privileges the server says the user does not hold."""
        return [p for p in self.privileges if p.required and p.held is False]

    @property
    def advisory(self) -> list[Privilege]:
        """Optional privileges not held (dbsim runs without them, and says what it loses)."""
        return [p for p in self.privileges if not p.required and p.held is not True]

    def lines(self) -> list[str]:
        """One line per check: ✓ held, ✗ a required one not held, ! an optional one not held,
        ? the server could not say (the query failed); each not held with its GRANT."""
        who = f" as {self.user}" if self.user else ""
        version = f", server {self.server_version}" if self.server_version else ""
        sql = self.round_trip.upper().startswith("SELECT")
        trip = f"{self.round_trip} answered" if sql else self.round_trip
        out = [f"✓ {self.kind} at {self.address}{who}: {trip}{version}"]
        for p in self.privileges:
            if p.held:
                out.append(f"✓ {p.name} ({p.purpose})")
                continue
            mark = "?" if p.held is None else "✗" if p.required else "!"
            state = "not held" if p.held is False else "unknown"
            why = f": {p.detail}" if p.detail else ""
            out.append(f"{mark} {p.name} ({p.purpose}) {state}{why}; fix: {p.grant}")
        return out


def _pg(privilege_sql: str) -> str:
    return f"SELECT CASE WHEN {privilege_sql} THEN 1 ELSE 0 END"


#: The grantee as MariaDB/MySQL list it in information_schema: 'user'@'host'.
_MYSQL_ME = (
    "CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER()) - "
    "CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), '''@''', "
    "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
)


def _mysql(privilege: str) -> PrivilegeCheck:
    sql = (
        "SELECT COUNT(*) FROM ("
        " SELECT privilege_type FROM information_schema.USER_PRIVILEGES"
        f" WHERE grantee = {_MYSQL_ME}"
        " UNION ALL"
        " SELECT privilege_type FROM information_schema.SCHEMA_PRIVILEGES"
        f" WHERE grantee = {_MYSQL_ME} AND DATABASE() LIKE table_schema"
        f") AS p WHERE p.privilege_type = '{privilege}'"
    )
    return PrivilegeCheck(
        privilege,
        f"{privilege} on the database",
        sql,
        f"GRANT {privilege} ON {{scope}}.* TO {{user}}",
    )


#: What each dialect's user must hold. The SQL asks the server's own privilege functions or
#: catalogue; nothing is created.
CHECKS: dict[str, tuple[PrivilegeCheck, ...]] = {
    "sqlite": (),
    "postgres": (
        PrivilegeCheck(
            "CREATE on the schema",
            "the load creates tables and indexes there",
            _pg("has_schema_privilege(current_schema(), 'CREATE')"),
            "GRANT CREATE ON SCHEMA {scope} TO {user}",
        ),
        PrivilegeCheck(
            "reading server settings",
            "data_directory, so the block collector finds a local server's storage",
            _pg(
                "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
                " OR pg_has_role(current_user, 'pg_read_all_settings', 'USAGE')"
            ),
            "GRANT pg_read_all_settings TO {user}",
            required=False,
        ),
    ),
    "mysql": tuple(
        _mysql(p) for p in ("CREATE", "DROP", "ALTER", "INDEX", "SELECT", "INSERT", "UPDATE")
    ),
    "oracle": (
        PrivilegeCheck(
            "CREATE TABLE",
            "the load creates tables and indexes",
            "SELECT COUNT(*) FROM session_privs WHERE privilege IN "
            "('CREATE TABLE', 'CREATE ANY TABLE')",
            "GRANT CREATE TABLE TO {user}",
        ),
        PrivilegeCheck(
            "a quota on the tablespace",
            "the tables' segments are stored there",
            "SELECT COUNT(*) FROM dual WHERE EXISTS (SELECT 1 FROM session_privs"
            " WHERE privilege = 'UNLIMITED TABLESPACE') OR EXISTS (SELECT 1 FROM user_ts_quotas"
            " WHERE tablespace_name = {scope_literal} AND (max_bytes = -1 OR max_bytes > bytes))",
            "ALTER USER {user} QUOTA UNLIMITED ON {scope}",
        ),
        PrivilegeCheck(
            "the v$ views",
            "v$sga_dynamic_components for the cache guard; v$sysstat, v$system_event, "
            "v$event_histogram for the database statistics",
            "SELECT (SELECT COUNT(*) FROM v$sga_dynamic_components WHERE ROWNUM = 1)"
            " + (SELECT COUNT(*) FROM v$sysstat WHERE ROWNUM = 1)"
            " + (SELECT COUNT(*) FROM v$system_event WHERE ROWNUM = 1)"
            " + (SELECT COUNT(*) FROM v$event_histogram WHERE ROWNUM = 1) FROM dual",
            "GRANT SELECT ANY DICTIONARY TO {user}",
            required=False,
            refused_means_missing=True,
        ),
        PrivilegeCheck(
            "EXECUTE on DBMS_LOCK",
            "the load lock that keeps two loaders apart",
            "SELECT COUNT(*) FROM all_objects WHERE owner = 'SYS'"
            " AND object_name = 'DBMS_LOCK' AND object_type = 'PACKAGE'",
            "GRANT EXECUTE ON SYS.DBMS_LOCK TO {user}",
            required=False,
        ),
    ),
    "sqlserver": (
        PrivilegeCheck(
            "CREATE TABLE",
            "the load creates tables in the database",
            "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'CREATE TABLE')",
            "GRANT CREATE TABLE TO {user}",
        ),
        PrivilegeCheck(
            "ALTER on the schema",
            "creating a table in a schema needs it as well",
            "SELECT HAS_PERMS_BY_NAME(SCHEMA_NAME(), 'SCHEMA', 'ALTER')",
            "GRANT ALTER ON SCHEMA::{scope} TO {user}",
        ),
        PrivilegeCheck(
            "VIEW DATABASE STATE",
            "the verification counts the table's pages (sys.dm_db_database_page_allocations)",
            "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'VIEW DATABASE STATE')",
            "GRANT VIEW DATABASE STATE TO {user}",
        ),
        PrivilegeCheck(
            "VIEW SERVER STATE",
            "sys.dm_os_sys_info for the cache guard; sys.dm_io_virtual_file_stats and "
            "sys.dm_os_wait_stats for the database statistics",
            "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE')",
            "GRANT VIEW SERVER STATE TO {login}",
            required=False,
        ),
    ),
}

#: Who the server says we are and where the grants apply, per dialect: user (the grantee in
#: the database), login, scope (schema, database or tablespace) and the server's version.
IDENTITY: dict[str, dict[str, str]] = {
    "sqlite": {"version": "SELECT sqlite_version()"},
    "postgres": {
        "user": "SELECT current_user",
        "scope": "SELECT current_schema()",
        "version": "SELECT current_setting('server_version')",
    },
    "mysql": {
        "user": "SELECT CURRENT_USER()",
        "scope": "SELECT DATABASE()",
        "version": "SELECT VERSION()",
    },
    "oracle": {
        "user": "SELECT USER FROM dual",
        "scope": "SELECT default_tablespace FROM user_users",
        "version": "SELECT version FROM product_component_version"
        " WHERE product LIKE 'Oracle%' AND ROWNUM = 1",
    },
    "sqlserver": {
        "user": "SELECT USER_NAME()",
        "login": "SELECT SUSER_SNAME()",
        "scope": "SELECT SCHEMA_NAME()",
        "version": "SELECT CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128))",
    },
}


def address_of(target: Target) -> str:
    """host:port (or the path) of a target, from its description."""
    facts = target.describe()
    if facts.get("address"):
        return str(facts["address"])
    if facts.get("host") is not None:
        where = f"{facts['host']}:{facts.get('port')}"
        for key in ("service_name", "sid", "database"):
            if facts.get(key):
                return f"{where}/{facts[key]}"
        return where
    if facts.get("dsn"):
        return str(facts["dsn"])
    return str(facts.get("path") or facts.get("kind"))


def _failed(target: Target, exc: BaseException) -> ConnectFailed:
    """The target's own error, with kind, host and port in front when it does not name them."""
    text = redact_known(" ".join(str(exc).split()))
    facts = target.describe()
    named = [address_of(target)]
    if facts.get("host"):
        named.append(f"{facts['host']}:{facts.get('port')}")
    if not any(name in text for name in named):
        text = f"{target.kind} at {address_of(target)}: {text}"
    return ConnectFailed(text)


async def _ask(conn: SqlConnection, name: str, sql: str) -> tuple[Any, str | None]:
    """The statement's scalar, or (None, the error on one line) after a rollback."""
    try:
        return await conn.scalar(Statement(name, sql, ())), None
    except SimError as exc:
        with contextlib.suppress(SimError):
            await conn.rollback()  # PostgreSQL refuses everything after an error until then
        return None, redact_known(" ".join(str(exc).split()))


def _quote(dialect: str, name: str) -> str:
    if dialect == "mysql" and "@" in name:
        user, host = name.rsplit("@", 1)
        return f"'{user}'@'{host}'"
    preparer = sqlalchemy_dialect(dialect).identifier_preparer
    quoted: str = preparer.quote(name)
    return quoted


async def _identity(conn: SqlConnection, dialect: str, target: Target) -> dict[str, str]:
    facts: dict[str, str] = {}
    for key, sql in IDENTITY.get(dialect, {}).items():
        value, _ = await _ask(conn, f"probe_{key}", sql)
        if value is not None:
            facts[key] = str(value)
    tablespace = getattr(target, "tablespace", None)
    if dialect == "oracle" and isinstance(tablespace, str):
        facts["scope"] = tablespace.upper()  # the one the scenario names, not the default
    return facts


async def _privileges(
    conn: SqlConnection, dialect: str, facts: dict[str, str]
) -> tuple[Privilege, ...]:
    user = facts.get("user", "")
    fill = {
        "user": _quote(dialect, user) if user else "<user>",
        "login": _quote(dialect, facts.get("login", user)) if user else "<login>",
        "scope": _quote(dialect, facts["scope"]) if facts.get("scope") else "<schema>",
        "scope_literal": "'" + facts.get("scope", "").replace("'", "''") + "'",
    }
    found = []
    for check in CHECKS.get(dialect, ()):
        answer, error = await _ask(conn, "probe_privilege", check.sql.format(**fill))
        held = None if answer is None and error is None else bool(answer and int(answer) > 0)
        found.append(
            Privilege(
                check.name,
                check.purpose,
                check.required,
                (False if check.refused_means_missing else None) if error is not None else held,
                check.grant.format(**fill),
                detail=error or "",
            )
        )
    return tuple(found)


async def probe(target: Target) -> ProbeReport:
    """The round trip, the login and the privileges, on one connection of an opened target."""
    dialect = getattr(target, "dialect", "")
    try:
        conn = await target.connect()
    except SimError as exc:
        raise _failed(target, exc) from exc
    try:
        if not isinstance(conn, SqlConnection):
            return ProbeReport(target.kind, address_of(target), "a session opened and closed")
        sql = ROUND_TRIP.get(dialect, ROUND_TRIP_DEFAULT)
        try:
            answer = await conn.scalar(Statement("round_trip", sql, ()))
        except SimError as exc:
            raise _failed(target, exc) from exc
        if answer is None or str(answer).strip() != "1":
            raise ConnectFailed(f"{target.kind} at {address_of(target)}: {sql} answered {answer!r}")
        facts = await _identity(conn, dialect, target)
        privileges = await _privileges(conn, dialect, facts)
        await conn.rollback()
        return ProbeReport(
            target.kind,
            address_of(target),
            sql,
            user=facts.get("login") or facts.get("user"),
            server_version=facts.get("version"),
            privileges=privileges,
        )
    finally:
        await conn.close()


def connect_check(target: Target) -> ProbeReport:
    """Open ``target``, :func:`probe` it and close it (on a loop of its own; blocking)."""
    try:
        return run_opened(target, lambda: probe(target), threads=2, thread_name="dbsim-probe")
    except ConnectFailed:
        raise
    except TargetError as exc:  # open() itself failed: the pool, the first connection
        raise _failed(target, exc) from exc
