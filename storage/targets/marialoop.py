"""The native MariaDB/MySQL loop (``storage/targets/native/marialoop.c``, over MariaDB
Connector/C), when built.

The extension is optional (``setup.py`` builds it with ``optional=True``; it needs Connector/C's
headers, Debian's libmariadb-dev): without it MariaDB/MySQL sessions run on asyncmy and the
run's summary says why (:func:`unavailable`). Errors are classed and worded as the asyncmy path
words them (storage/targets/mysql.py: ``mysql: <what>: <Class>: (<errno>, '<message>')``, the
class asyncmy raises for that error number), secrets masked.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from sim.secrets import redact

try:
    from storage.targets import _marialoop  # type: ignore[attr-defined]
except ImportError as exc:  # not built here (no Connector/C headers): asyncmy carries the load
    _marialoop = None
    _WHY_NOT = f"MariaDB Connector/C extension not built ({exc})"
else:
    _WHY_NOT = ""

MAX_PARAMS = 64
#: ``DBSIM_MARIALOOP=0`` keeps MariaDB/MySQL sessions on asyncmy (the suite's fallback pass).
SWITCH = "DBSIM_MARIALOOP"
#: Error numbers of a connection that is gone (storage/targets/mysql.py's DISCONNECT_CODES).
LOST_CODES = frozenset({2002, 2003, 2006, 2013, 2055, 1927, 1053})

#: asyncmy's classes by server error number (asyncmy/errors.pyx's table, by the ER_ names it
#: exports); any other number is OperationalError (InternalError below 1000).
_CLASSES_BY_NAME = {
    "ProgrammingError": (
        "DB_CREATE_EXISTS SYNTAX_ERROR PARSE_ERROR NO_SUCH_TABLE WRONG_DB_NAME WRONG_TABLE_NAME "
        "FIELD_SPECIFIED_TWICE INVALID_GROUP_FUNC_USE UNSUPPORTED_EXTENSION "
        "TABLE_MUST_HAVE_COLUMNS CANT_DO_THIS_DURING_AN_TRANSACTION WRONG_COLUMN_NAME"
    ),
    "DataError": (
        "WARN_DATA_TRUNCATED WARN_NULL_TO_NOTNULL WARN_DATA_OUT_OF_RANGE NO_DEFAULT "
        "PRIMARY_CANT_HAVE_NULL DATA_TOO_LONG DATETIME_FUNCTION_OVERFLOW "
        "TRUNCATED_WRONG_VALUE_FOR_FIELD ILLEGAL_VALUE_FOR_TYPE"
    ),
    "IntegrityError": (
        "DUP_ENTRY NO_REFERENCED_ROW NO_REFERENCED_ROW_2 ROW_IS_REFERENCED ROW_IS_REFERENCED_2 "
        "CANNOT_ADD_FOREIGN BAD_NULL_ERROR"
    ),
    "NotSupportedError": (
        "WARNING_NOT_COMPLETE_ROLLBACK NOT_SUPPORTED_YET FEATURE_DISABLED UNKNOWN_STORAGE_ENGINE"
    ),
    "OperationalError": (
        "DBACCESS_DENIED_ERROR ACCESS_DENIED_ERROR CON_COUNT_ERROR TABLEACCESS_DENIED_ERROR "
        "COLUMNACCESS_DENIED_ERROR CONSTRAINT_FAILED LOCK_DEADLOCK"
    ),
}


@functools.cache
def _class_table() -> dict[int, str]:
    """asyncmy's class per error number, read from asyncmy on the first error classed: a
    PostgreSQL run imports this module too (pgloop_session) and needs no asyncmy."""
    try:
        from asyncmy import errors
    except ImportError:
        return {}
    table: dict[int, str] = {}
    for cls, names in _CLASSES_BY_NAME.items():
        for name in names.split():
            number = getattr(errors, name, None)
            if isinstance(number, int):
                table[number] = cls
    return table


def unavailable() -> str:
    """Why the native loop cannot run here ('' when it can)."""
    if os.environ.get(SWITCH) == "0":
        return f"disabled by {SWITCH}=0"
    return _WHY_NOT


def loop_for(settings: Any, password: str | None) -> Any:
    """One session's native loop for this target's settings, not yet connected."""
    if _marialoop is None:
        raise RuntimeError(_WHY_NOT)
    timeout = max(1, round(settings.connect_timeout_s))
    return _marialoop.Loop(
        settings.host, settings.port, settings.user, password, settings.database, timeout
    )


_FORMAT = re.compile(r"%(%|s)")


def native_sql(sql: str) -> str:
    """The target's statement text (paramstyle ``format``: ``%s`` binds, ``%%`` a literal
    percent sign) with the ``?`` markers of a prepared statement."""
    return _FORMAT.sub(lambda m: "?" if m.group(1) == "s" else "%", sql)


def error_class(code: int) -> str:
    """The class asyncmy raises for this error number."""
    found = _class_table().get(code)
    if found is not None:
        return found
    return "InternalError" if code < 1000 else "OperationalError"


# The failure tuples marialoop.c keeps: (errno, sqlstate, message, lost).


def failure_key(failure: tuple[Any, ...]) -> Any:
    return failure[0]


def failure_lost(failure: tuple[Any, ...]) -> bool:
    return bool(failure[3]) or failure[0] in LOST_CODES


def failure_class(failure: tuple[Any, ...]) -> str:
    return error_class(int(failure[0]))


def failure_message(what: str, failure: tuple[Any, ...], secrets: list[str]) -> str:
    """``mysql: <what>: <Class>: (errno, 'message')`` as asyncmy's exception prints, masked."""
    code, _, message = int(failure[0]), failure[1], " ".join(str(failure[2]).split())
    return redact(f"mysql: {what}: {error_class(code)}: {(code, message)}", secrets)


__all__ = [
    "LOST_CODES",
    "MAX_PARAMS",
    "SWITCH",
    "error_class",
    "failure_class",
    "failure_key",
    "failure_lost",
    "failure_message",
    "loop_for",
    "native_sql",
    "unavailable",
]
