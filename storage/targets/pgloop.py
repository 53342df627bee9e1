"""The native PostgreSQL loop (``storage/targets/native/pgloop.c``, over libpq), when built.

The extension is optional (``setup.py`` builds it with ``optional=True``; it needs libpq's
headers, Debian's libpq-dev): without it PostgreSQL sessions run on asyncpg, and the run's
summary says why (:func:`unavailable`). This module also holds what the loop needs from the
target: libpq's connection keywords for the target's settings (the same server settings the
asyncpg pool gives every session), and errors classed and worded as the asyncpg path does.
"""

from __future__ import annotations

import os
from typing import Any

from asyncpg.exceptions._base import PostgresMessageMeta

from sim.secrets import redact
from storage.targets.settings import PostgresSettings

try:
    from storage.targets import _pgloop  # type: ignore[attr-defined]
except ImportError as exc:  # not built here (no libpq headers): asyncpg carries the load
    _pgloop = None
    _WHY_NOT = f"libpq extension not built ({exc})"
else:
    _WHY_NOT = ""

KIND_INT = 0
KIND_TEXT = 1
KIND_NULL = 2
MAX_PARAMS = 64
#: The class of an operation that lost its connection without a SQLSTATE (the socket closed):
#: asyncpg's name for the same event, so both runners count outages alike.
LOST_CLASS = "ConnectionDoesNotExistError"
#: Backend-gone SQLSTATEs (admin/crash shutdown, cannot connect now) and class 08.
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
#: What the asyncpg pool sets on every connection (storage/targets/postgres.py).
APPLICATION_NAME = "dbsim"


#: ``DBSIM_PGLOOP=0`` keeps PostgreSQL sessions on asyncpg (the suite runs the database
#: tests both ways; also a way out should the native loop misbehave somewhere).
SWITCH = "DBSIM_PGLOOP"


def unavailable() -> str:
    """Why the native loop cannot run here ('' when it can)."""
    if os.environ.get(SWITCH) == "0":
        return f"disabled by {SWITCH}=0"
    return _WHY_NOT


def _option_value(text: str) -> str:
    """A value inside libpq's ``options`` (backslash escapes spaces and backslashes)."""
    return text.replace("\\", "\\\\").replace(" ", "\\ ")


def connection_params(settings: PostgresSettings, password: str | None) -> list[tuple[str, str]]:
    """libpq keywords for a session of this target (its search_path and session settings,
    as server options at connect: nothing is SET afterwards)."""
    settings_at_connect = {"search_path": f'"{settings.schema_name}"', **settings.session_settings}
    options = [f"-c {name}={_option_value(value)}" for name, value in settings_at_connect.items()]
    params = [
        ("host", settings.host),
        ("port", str(settings.port)),
        ("dbname", settings.database),
        ("user", settings.user),
        ("application_name", APPLICATION_NAME),
        # libpq takes whole seconds, at least 2 (a smaller value is raised to 2 by libpq).
        ("connect_timeout", str(max(2, round(settings.connect_timeout_s)))),
        ("options", " ".join(options)),
        # asyncpg's default: TLS when the server offers it.
        ("sslmode", "prefer"),
    ]
    if password:
        params.append(("password", password))
    return params


def new_loop(params: list[tuple[str, str]], statements: list[tuple[str, int]]) -> Any:
    """One session's native loop, not yet connected (see pgloop.c ``Loop_init``)."""
    if _pgloop is None:
        raise RuntimeError(_WHY_NOT)
    return _pgloop.Loop(params, statements)


def run_group(
    entries: list[tuple[Any, ...]], generation: Any, seen: int, deadline_ns: int
) -> list[tuple[int, int]]:
    """Several sessions' batches on this thread (see pggroup.c ``pgloop_run_group``)."""
    if _pgloop is None:
        raise RuntimeError(_WHY_NOT)
    return list(_pgloop.run_group(entries, generation, seen, deadline_ns))


def loop_for(settings: PostgresSettings, password: str | None) -> Any:
    """One session's native loop for this target's settings, not yet connected."""
    return new_loop(connection_params(settings, password), [])


def native_sql(sql: str) -> str:
    """The target's statement text ($n binds) is what libpq prepares."""
    return sql


# The failure tuples pgloop.c keeps: (sqlstate, message, lost).


def failure_key(failure: tuple[Any, ...]) -> Any:
    return (failure[0], bool(failure[2]))


def failure_lost(failure: tuple[Any, ...]) -> bool:
    return is_lost(failure[0], bool(failure[2]))


def failure_class(failure: tuple[Any, ...]) -> str:
    return error_class(failure[0], bool(failure[2]))


def failure_message(what: str, failure: tuple[Any, ...], secrets: list[str]) -> str:
    return error_message(what, failure[0], failure[1], bool(failure[2]), secrets)


def error_class(sqlstate: str, lost: bool) -> str:
    """The class asyncpg raises for this SQLSTATE (UndefinedTableError …); a connection lost
    without one is asyncpg's ConnectionDoesNotExistError."""
    if not sqlstate:
        return LOST_CLASS if lost else "InterfaceError"
    return str(PostgresMessageMeta.get_message_class_for_sqlstate(sqlstate).__name__)


def is_lost(sqlstate: str, lost: bool) -> bool:
    """The connection is gone, as PostgresTarget.is_disconnect judges an asyncpg error."""
    return lost or sqlstate.startswith("08") or sqlstate in LOST_STATES


def error_message(what: str, sqlstate: str, message: str, lost: bool, secrets: list[str]) -> str:
    """``postgres: <what>: <Class>: <message>`` as the asyncpg path words it, masked."""
    text = " ".join(message.split())
    return redact(f"postgres: {what}: {error_class(sqlstate, lost)}: {text}", secrets)


__all__ = [
    "KIND_INT",
    "KIND_NULL",
    "KIND_TEXT",
    "LOST_CLASS",
    "MAX_PARAMS",
    "SWITCH",
    "connection_params",
    "error_class",
    "error_message",
    "failure_class",
    "failure_key",
    "failure_lost",
    "failure_message",
    "is_lost",
    "loop_for",
    "native_sql",
    "new_loop",
    "run_group",
    "unavailable",
]
