"""What identifies an object dbsim created in a SQL catalogue (see workloads.ownership):
the registry's table, the token dbsim writes onto its objects, and how a catalogue entry is
read and compared with the registry's record of it."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.dialects import dialect as dialect_record
from sim.errors import WorkloadError
from sim.sql import Statement, quote_identifier
from workloads.common import compile_ddl

if TYPE_CHECKING:
    from sqlalchemy import Table

#: Named anew when ownership became identity-checked: the registry of an older dbsim
#: (dbsim_objects) is never read, so it is not adopted and does not block the new one.
REGISTRY_TABLE = "dbsim_registry"
#: The workload column of the registry's own row.
REGISTRY_OWNER = "dbsim"
SQL_DIR = Path(__file__).parent / "registry_sql"
STATEMENTS = frozenset(
    {
        "object_identity",
        "registry_get",
        "registry_put",
        "registry_set",
        "registry_delete",
        "registry_names",
    }
)
STATE_LOADING = "loading"
STATE_LOADED = "loaded"
FINGERPRINT_CHARS = 2000
MARKER_PREFIX = "dbsim:"
_TOKEN = re.compile(r"[0-9a-f]{32}")
_MARKER = re.compile(re.escape(MARKER_PREFIX) + r"([0-9a-f]{32})")
#: The token the statement inventory shows (contract tests need a fixed text).
SAMPLE_TOKEN = "0" * 32
FIX_HINT = (
    "if it is dbsim's after all, drop it yourself and delete its row from "
    f"{REGISTRY_TABLE}; otherwise choose another workload.parameters.table_prefix"
)


def new_token() -> str:
    """A fresh random token (128 bits, hex)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class CatalogObject:
    """One catalogue entry of a name: its kind, its identity and the token it carries."""

    kind: str
    ident: str
    token: str | None

    @classmethod
    def parse(cls, text: Any) -> CatalogObject:
        """From ``object_identity``'s ``kind|stable|version|marker`` text."""
        kind, stable, version, marker = ([*str(text).split("|", 3), "", "", ""])[:4]
        found = _MARKER.search(marker)
        return cls(kind.strip().lower(), f"{stable}:{version}", found.group(1) if found else None)


def describe(found: Sequence[CatalogObject]) -> str:
    """``table``, ``view``, ``table and materialized view`` … for a message."""
    return " and ".join(sorted({o.kind for o in found})) or "object"


def registry_table() -> Table:
    """Objects dbsim created: the only ones it will ever write to or drop."""
    # Imported here: building a workload to check it (dbsim validate) needs no SQLAlchemy.
    from sqlalchemy import Column, MetaData, String, Table, Text

    # Oracle would make Text a CLOB (fetched as a LOB locator) and SQL Server the deprecated
    # TEXT type; a record is a short JSON object, so a bounded VARCHAR serves both.
    fingerprint = Text().with_variant(String(FINGERPRINT_CHARS), "oracle", "mssql")
    return Table(
        REGISTRY_TABLE,
        MetaData(),
        Column("name", String(128), primary_key=True),
        Column("workload", String(32), nullable=False),
        Column("fingerprint", fingerprint, nullable=False),
    )


def create_registry_statement(dialect: str) -> Statement:
    """Plain CREATE TABLE of the registry: :meth:`TableRegistry.ensure` checks first."""
    from sqlalchemy.schema import CreateTable  # here: see registry_table

    return compile_ddl(CreateTable(registry_table()), dialect)


def is_marked(dialect: str) -> bool:
    """Whether dbsim writes its token onto the objects themselves in ``dialect``."""
    return dialect_record(dialect).marker != "none"


def mark_statements(dialect: str, name: str, token: str) -> list[Statement]:
    """What writes ``token`` onto the table ``name`` after its CREATE (none where
    :func:`marked_create` puts it in the CREATE text or its options, nor where the dialect has
    no marker)."""
    if not _TOKEN.fullmatch(token):
        raise WorkloadError(f"not a dbsim token: {token!r}")
    marker = dialect_record(dialect).marker
    # A literal, not a bind: no dialect takes parameters in a comment; the token is hex.
    if marker == "comment_on_table":
        sql = f"COMMENT ON TABLE {quote_identifier(dialect, name)} IS '{MARKER_PREFIX}{token}'"
        return [Statement("CommentOnTable", sql, ())]
    return []


def marked_create(dialect: str, create: Statement, token: str) -> Statement:
    """``create`` carrying the token where the dialect keeps it with the CREATE: inside its
    parentheses where the catalogue keeps the CREATE text (SQLite's sqlite_master), as the
    table comment option on MariaDB/MySQL. There the token is born with the table: MariaDB
    commits a CREATE TABLE at once, and a load stopped between it and a later ``ALTER TABLE
    … COMMENT`` (SIGINT 85 ms into a load, the native signal sweep) left a table without the
    token that dbsim then refused as not its own."""
    marker = dialect_record(dialect).marker
    if marker not in ("create_text", "table_option"):
        return create
    if not _TOKEN.fullmatch(token):
        raise WorkloadError(f"not a dbsim token: {token!r}")
    if marker == "table_option":
        sql = f"{create.sql.rstrip()} COMMENT = '{MARKER_PREFIX}{token}'"
        return Statement(create.name, sql, ())
    head, paren, rest = create.sql.partition("(")
    if not paren:
        raise WorkloadError(f"{create.name}: no column list to mark")
    return Statement(create.name, f"{head}(/* {MARKER_PREFIX}{token} */{rest}", ())


def mismatch(
    found: Sequence[CatalogObject], record: Mapping[str, Any], owner: str, marked: bool
) -> str | None:
    """Why the existing object ``found`` is not the one ``record`` describes (None: it is)."""
    if [o.kind for o in found] != ["table"]:
        return f"dbsim's table is gone and a {describe(found)} has its name"
    obj = found[0]
    if record.get("workload") != owner:
        return f"it belongs to the dbsim workload {record.get('workload')}, not {owner}"
    token = record.get("token")
    if not isinstance(token, str):
        return "its registry row has no identity (written by hand, or copied)"
    if marked and obj.token != token:
        return "it lacks the dbsim marker recorded for it (dropped and re-created outside dbsim?)"
    ident = record.get("ident")
    if ident is None:
        # Created by dbsim (it carries the token) before the identity was recorded.
        return None if marked else "dbsim never recorded its identity"
    if ident != obj.ident:
        return (
            f"its catalogue identity is {obj.ident}, not {ident} as recorded "
            f"(dropped and re-created outside dbsim?)"
        )
    return None
