"""The native ODBC loop (``storage/targets/native/odbcloop.c``, over unixODBC's driver
manager), when built: the sessions of ``kind: odbc`` and ``kind: sqlserver`` targets.

The extension is optional (``setup.py`` builds it with ``optional=True``; it needs unixODBC's
headers, Debian's unixodbc-dev): without it, or with ``DBSIM_ODBCLOOP=0``, ODBC sessions run
on pyodbc on OS threads and the run's summary says why (:func:`unavailable`). The loop
connects with the target's own connection string (the driver, its keywords, the password) and
its errors are classed and worded as the pyodbc path words them: pyodbc's exception class for
the SQLSTATE and ``<kind>: <what>: SQLSTATE <state>: [<state>] <message> (<native>)
(<function>)`` (storage.targets.odbc.translate_error over pyodbc's own message format),
secrets masked. Only psqlODBC and MariaDB Connector/ODBC ran it here: never a SQL Server.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

from sim.secrets import redact

MAX_PARAMS = 64
#: ``DBSIM_ODBCLOOP=0`` keeps ODBC sessions on pyodbc (the suite's fallback pass).
SWITCH = "DBSIM_ODBCLOOP"
#: The login timeout, as the pyodbc path's (storage.targets.odbc.DEFAULT_LOGIN_TIMEOUT_S).
LOGIN_TIMEOUT_S = 10

#: pyodbc's exception class by SQLSTATE (its errors.cpp table: the first prefix that matches);
#: any other state is pyodbc's base class, Error.
PYODBC_CLASSES: tuple[tuple[str, str], ...] = (
    ("01002", "OperationalError"),
    ("08001", "OperationalError"),
    ("08003", "OperationalError"),
    ("08004", "OperationalError"),
    ("08007", "OperationalError"),
    ("08S01", "OperationalError"),
    ("0A000", "NotSupportedError"),
    ("28000", "InterfaceError"),
    ("40002", "IntegrityError"),
    ("22", "DataError"),
    ("23", "IntegrityError"),
    ("24", "ProgrammingError"),
    ("25", "ProgrammingError"),
    ("42", "ProgrammingError"),
    ("HY001", "OperationalError"),
    ("HY014", "OperationalError"),
    ("HYT00", "OperationalError"),
    ("HYT01", "OperationalError"),
    ("IM001", "InterfaceError"),
    ("IM002", "InterfaceError"),
    ("IM003", "InterfaceError"),
)


@functools.cache
def _extension() -> tuple[ModuleType | None, str]:
    """The C extension and '' , or None and why not. Imported on first use: it links
    libodbc, which a PostgreSQL or MariaDB run (whose choice imports this module) never needs."""
    try:
        from storage.targets import _odbcloop  # type: ignore[attr-defined]
    except ImportError as exc:  # not built here (no unixODBC headers): pyodbc carries the load
        return None, f"unixODBC extension not built ({exc})"
    return _odbcloop, ""


def unavailable() -> str:
    """Why the native loop cannot run here ('' when it can)."""
    if os.environ.get(SWITCH) == "0":
        return f"disabled by {SWITCH}=0"
    return _extension()[1]


def error_class(sqlstate: str) -> str:
    """The class pyodbc raises for this SQLSTATE."""
    for prefix, cls in PYODBC_CLASSES:
        if sqlstate.startswith(prefix):
            return cls
    return "Error"


def pyodbc_text(failure: tuple[Any, ...]) -> str:
    """The failure as pyodbc's exception message: ``[state] message (native) (function)``."""
    state, native, message, function = failure[0], failure[1], failure[2], failure[3]
    return f"[{state or 'HY000'}] {message} ({native}) ({function})"


# The failure tuples odbcloop.c keeps: (sqlstate, native, message, function, lost).


def failure_key(failure: tuple[Any, ...]) -> Any:
    return (failure[0], failure[1], failure_lost(failure))


def failure_lost(failure: tuple[Any, ...]) -> bool:
    """The connection is gone: class 08 (PyodbcTarget.is_disconnect's judgment), or the
    driver said the connection is dead."""
    return bool(failure[4]) or str(failure[0]).startswith("08")


def failure_class(failure: tuple[Any, ...]) -> str:
    return error_class(str(failure[0]))


class OdbcBackend:
    """What :class:`~storage.targets.pgloop_session.SqlProgram` asks of a loop module, for one
    ODBC target: its wording needs the target's kind and, for a failed connection, the
    target's own description of the attempt."""

    MAX_PARAMS = MAX_PARAMS

    def __init__(self, target: Any) -> None:
        self.target = target
        self.failure_key = failure_key
        self.failure_lost = failure_lost
        self.failure_class = failure_class

    def loop_for(self, settings: Any, password: str | None) -> Any:
        """One session's native loop with the target's connection string, not yet connected
        (the target built it when it opened, with the password it resolved)."""
        extension, why = _extension()
        if extension is None:
            raise RuntimeError(why)
        return extension.Loop(self.target._connection_string(), LOGIN_TIMEOUT_S)

    @staticmethod
    def native_sql(sql: str) -> str:
        """The target's statement text (qmark binds) is what the driver prepares."""
        return sql

    def failure_message(self, what: str, failure: tuple[Any, ...], secrets: list[str]) -> str:
        """As OdbcConnection words a failed statement (``<kind>: <what>: SQLSTATE …``) and the
        target a failed connection (its ``_where()``), masked."""
        from storage.targets.odbc import translate_error

        where = self.target._where() if what == "connect" else f"{self.target.kind}: {what}"
        cause = Exception(str(failure[0]) or "HY000", pyodbc_text(failure))
        return str(translate_error(cause, where, lambda text: redact(text, secrets)))


__all__ = [
    "LOGIN_TIMEOUT_S",
    "MAX_PARAMS",
    "PYODBC_CLASSES",
    "SWITCH",
    "OdbcBackend",
    "error_class",
    "failure_class",
    "failure_key",
    "failure_lost",
    "pyodbc_text",
    "unavailable",
]
