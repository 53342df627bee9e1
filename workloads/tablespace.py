"""The PostgreSQL tablespace a target asks for (``target.tablespace``), owned like dbsim's tables.

With ``create: true`` and no tablespace of that name, the loader creates it at its location
and records it in ``dbsim_registry`` (row ``tablespace:<name>``, owner ``dbsim-tablespace``)
with a token written as the tablespace's comment and its oid, the way tables are recorded
(workloads.ownership). ``dbsim drop`` drops it after the workload's tables, and only when
the registry's record, the token and the oid all match (a tablespace dropped and re-created
outside dbsim, or someone else's, is never dropped) and nothing is left in it: an object of
this database keeps it, and so does one of another database (the server refuses with "is not
empty", and dbsim keeps it and says so). An existing tablespace is used as it is, whoever
made it.

The target checks the setting and the directory when it opens (storage.targets
.postgres_tablespace); this module runs when data is created or dropped.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from sim.errors import ConfigError, TargetError, WorkloadError
from sim.protocols import SqlConnection, Target
from sim.sql import Statement, quote_identifier, to_paramstyle
from storage.targets.postgres_tablespace import TablespacePlacement
from workloads.identity import MARKER_PREFIX, CatalogObject, new_token
from workloads.ownership import TableRegistry

log = logging.getLogger(__name__)

#: The registry's workload column for tablespaces (String(32)).
OWNER = "dbsim-tablespace"
TOKEN = re.compile(r"[0-9a-f]{32}")
#: What the server says when another database still has objects in the tablespace.
NOT_EMPTY = "is not empty"

_IDENTITY = (
    "SELECT 'tablespace|' || oid::text || '||' "
    "|| COALESCE(shobj_description(oid, 'pg_tablespace'), '') "
    "FROM pg_tablespace WHERE spcname = :name"
)
_OBJECTS_HERE = (
    "SELECT count(*) FROM pg_class WHERE reltablespace = "
    "(SELECT oid FROM pg_tablespace WHERE spcname = :name)"
)


def placement_of(target: Target) -> TablespacePlacement | None:
    """The tablespace the target's data goes to, as read when it opened (None: none set)."""
    placement = getattr(target, "placement", None)
    return placement if isinstance(placement, TablespacePlacement) else None


def record_name(tablespace: str) -> str:
    """The tablespace's row in the registry (no table can be named with a colon unquoted)."""
    return f"tablespace:{tablespace}"


def _statement(name: str, sql: str, paramstyle: str) -> Statement:
    text, order = to_paramstyle(sql, paramstyle)
    return Statement(name, text, order)


def location_literal(location: Path | None) -> str:
    """``location`` as a SQL string literal; CREATE TABLESPACE takes no bind for it. Refused
    (as TablespaceSettings refuses it) unless free of quotes, backslashes and line breaks."""
    text = str(location) if location is not None else ""
    if not text.startswith("/") or any(ch in text for ch in "'\\\n\r\0"):
        raise ConfigError(f"target.tablespace.location: {text!r} cannot be a tablespace location")
    return f"'{text}'"


def create_statements(placement: TablespacePlacement, token: str) -> list[Statement]:
    """CREATE TABLESPACE at the location, then the token as its comment."""
    if not TOKEN.fullmatch(token):
        raise WorkloadError(f"not a dbsim token: {token!r}")
    name = placement.name
    create = (
        f"CREATE TABLESPACE {quote_identifier('postgres', name)} "
        f"LOCATION {location_literal(placement.location)}"
    )
    comment = (
        f"COMMENT ON TABLESPACE {quote_identifier('postgres', name)} IS '{MARKER_PREFIX}{token}'"
    )
    return [
        Statement("CreateTablespace", create, ()),
        Statement("CommentOnTablespace", comment, ()),
    ]


async def _catalog(conn: SqlConnection, target: Target, name: str) -> CatalogObject | None:
    statement = _statement("tablespace_identity", _IDENTITY, target.paramstyle)
    text = await conn.scalar(statement, (name,))
    return None if text is None else CatalogObject.parse(text)


async def ensure_tablespace(target: Target, conn: SqlConnection, registry: TableRegistry) -> None:
    """Create the target's tablespace (``create: true``) unless it exists; record it first,
    so an interrupted creation is still known as dbsim's by its token."""
    placement = placement_of(target)
    if placement is None or not placement.create:
        return
    if await _catalog(conn, target, placement.name) is not None:
        return  # there already (dbsim's from an earlier load, or anyone's): used as it is
    key = record_name(placement.name)
    if await registry.recorded(conn, key) is not None:
        await registry.forget(conn, key)  # dbsim's, dropped since outside dbsim
    token = new_token()
    record = {"workload": OWNER, "role": "tablespace", "token": token, "ident": None}
    record["location"] = str(placement.location)
    await registry.put_record(conn, key, OWNER, record)
    for statement in create_statements(placement, token):
        await conn.execute(statement)
    found = await _catalog(conn, target, placement.name)
    if found is None or found.token != token:
        raise TargetError(f"postgres: tablespace {placement.name} changed while dbsim created it")
    await registry.set_record(conn, key, {**record, "ident": found.ident})


def _foreign(found: CatalogObject, record: dict[str, object]) -> str | None:
    """Why the tablespace ``found`` is not the one dbsim recorded (None: it is)."""
    if found.token is None or found.token != record.get("token"):
        return "it lacks the dbsim marker recorded for it"
    ident = record.get("ident")
    if ident is not None and ident != found.ident:
        return f"its oid is {found.ident}, not {ident} as recorded"
    return None


async def drop_tablespace(
    target: Target, conn: SqlConnection, registry: TableRegistry
) -> list[str]:
    """Drop the target's tablespace if dbsim created it and it is empty; ``["tablespace
    <name>"]`` when dropped, else ``[]`` (why is logged)."""
    placement = placement_of(target)
    if placement is None:
        return []
    key = record_name(placement.name)
    record = await registry.recorded(conn, key)
    if record is None or record.get("workload") != OWNER:
        return []  # not created by dbsim: never dropped
    found = await _catalog(conn, target, placement.name)
    if found is None:
        await registry.forget(conn, key)
        return []
    problem = _foreign(found, record)
    if problem:
        log.warning("tablespace %s kept: not the one dbsim created (%s)", placement.name, problem)
        return []
    here = _statement("tablespace_objects", _OBJECTS_HERE, target.paramstyle)
    left = int(await conn.scalar(here, (placement.name,)) or 0)
    if left:
        log.warning(
            "tablespace %s kept: %d object(s) of this database are in it", placement.name, left
        )
        return []
    drop = Statement(
        "DropTablespace", f"DROP TABLESPACE {quote_identifier('postgres', placement.name)}", ()
    )
    try:
        await conn.execute(drop)
    except TargetError as exc:
        if NOT_EMPTY not in str(exc):
            raise
        log.warning("tablespace %s kept: another database has objects in it", placement.name)
        return []
    await registry.forget(conn, key)
    return [f"tablespace {placement.name}"]
