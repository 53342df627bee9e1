"""What the statement-statistics readers share: how a server is named in a message, whose
grant a refusal names, a statement's rows as dicts, and the server's error code behind a
target's error."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sim.errors import ConfigError
from sim.protocols import SqlConnection
from sim.sqlstats.captured import CapturedStatement


def address(settings: Any) -> str:
    """``kind at host:port, database name`` for messages (no secret)."""
    host = getattr(settings, "host", "?")
    port = getattr(settings, "port", "?")
    database = getattr(settings, "database", "?")
    return f"{settings.kind} at {host}:{port}, database {database}"


def user_of(settings: Any) -> str:
    return str(getattr(settings, "user", None) or "the user")


async def rows(conn: SqlConnection, name: str, sql: str) -> list[dict[str, Any]]:
    """A statement's rows as dicts keyed by lower-case column name."""
    from sim.protocols import Statement

    fetch = getattr(conn, "rows", None)
    if fetch is None:
        raise ConfigError(f"sql-from-stats: this target's connection cannot return rows ({name})")
    found = await fetch(Statement(f"sqlstats_{name}", sql, ()))
    return [{str(k).lower(): v for k, v in dict(row).items()} for row in found]


def driver_code(exc: BaseException) -> str:
    """The server's error code behind a target's error: PostgreSQL's SQLSTATE, MariaDB's
    number, as text; '' when there is none."""
    cause = exc.__cause__ or exc
    args = getattr(cause, "args", ())
    if args and isinstance(args[0], int):  # MariaDB's error number (1142 …)
        return str(args[0])
    return str(getattr(cause, "sqlstate", None) or "")


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def statements_of(
    found: Sequence[Mapping[str, Any]], text: Callable[[str], str] = str
) -> list[CapturedStatement]:
    """Rows with ``key``, ``text``, ``calls``, ``mean_ms`` and ``reads`` columns (as every
    reader's query names them) as captured statements; ``text`` cleans a statement's text."""
    return [
        CapturedStatement(
            key=str(row["key"]),
            text=text(str(row["text"])),
            calls=int(row["calls"]),
            mean_ms=_number(row["mean_ms"]),
            reads=_number(row["reads"]),
        )
        for row in found
    ]


def seen_window(
    found: Sequence[Mapping[str, Any]], first: str, last: str
) -> tuple[float | None, str]:
    """The seconds from the earliest ``first_seen`` to the latest ``last_seen`` of the rows
    (the source's own column names ``first`` and ``last`` said in the text), or None."""
    firsts: list[datetime] = [r["first_seen"] for r in found if r.get("first_seen") is not None]
    lasts: list[datetime] = [r["last_seen"] for r in found if r.get("last_seen") is not None]
    if not firsts or not lasts:
        return None, "no statement of the database was counted"
    seconds = (max(lasts) - min(firsts)).total_seconds()
    what = (
        f"derived: the earliest {first}, {min(firsts)}, to the latest {last}, {max(lasts)}, "
        "of the rows read (server time)"
    )
    return (seconds if seconds > 0 else None), what
