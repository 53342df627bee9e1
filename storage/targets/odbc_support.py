"""What storage.targets.odbc needs that is not pyodbc: the dialects' application locks and
how a batch's parameter arrays are sized (``cursor.setinputsizes``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storage.targets.locks import lock_id

# The dialects' application locks, tried without waiting (storage.targets.locks): per dialect,
# (try, release) for an exclusive and for a shared lock; the try answers an integer, >= 0 when
# granted (SQL Server's sp_getapplock status; PostgreSQL's boolean turned into one, as psqlODBC
# returns booleans as the text '1'/'0'). Session-owned, so the lock outlives the transactions
# of the load and dies with its connection.
_SQLSERVER_TRY = (
    "SET NOCOUNT ON; DECLARE @r int; EXEC @r = sp_getapplock @Resource = ?, "
    "@LockMode = '{mode}', @LockOwner = 'Session', @LockTimeout = 0; SELECT @r"
)
APP_LOCKS: dict[str, dict[bool, tuple[str, str]]] = {
    "sqlserver": {
        False: (
            _SQLSERVER_TRY.format(mode="Exclusive"),
            "EXEC sp_releaseapplock @Resource = ?, @LockOwner = 'Session'",
        ),
        True: (
            _SQLSERVER_TRY.format(mode="Shared"),
            "EXEC sp_releaseapplock @Resource = ?, @LockOwner = 'Session'",
        ),
    },
    "postgres": {
        False: (
            "SELECT CASE WHEN pg_try_advisory_lock(?) THEN 0 ELSE -1 END",
            "SELECT pg_advisory_unlock(?)",
        ),
        True: (
            "SELECT CASE WHEN pg_try_advisory_lock_shared(?) THEN 0 ELSE -1 END",
            "SELECT pg_advisory_unlock_shared(?)",
        ),
    },
}


def app_lock_name(dialect: str, database: str, key: str) -> str | int:
    """What the dialect's application lock is called: PostgreSQL's advisory locks take the
    same 64-bit number as the asyncpg target's (so both kinds exclude each other), SQL
    Server's a resource name of at most 255 characters."""
    if dialect == "postgres":
        return lock_id("public", key)
    return f"dbsim-load:{database}:{key}"[:255]


def granted(answer: Any) -> bool:
    return answer is not None and int(answer) >= 0


PSQLODBC_MAX_VARCHAR = 8190
# Longest text or binary value sent in a parameter array; a batch with a longer one goes row by
# row, where pyodbc picks the long types itself. SQL Server refuses NVARCHAR(n) parameters
# above 4,000, and the (max) way, data at execution (size 0), crashes psqlODBC 13 inside
# fast_executemany (SIGSEGV).
LONGEST_ARRAY_TEXT = 4000
_TEXT_TYPES = (str, bytes, bytearray)


def _text_units(value: Any) -> int:
    """The buffer a value needs, in the units of a parameter's column size: UTF-16 code units
    for str (how pyodbc sends text), bytes for binary, 0 for anything else."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-16-le")) // 2
    if isinstance(value, bytes | bytearray):
        return len(value)
    return 0


def parameter_sizes(rows: Sequence[Sequence[Any]]) -> list[int | None] | None:
    """``cursor.setinputsizes`` for a batch: per parameter, the longest text or binary value
    of the batch (at least 1), None for the other types; None for the whole batch when a
    value is longer than ``LONGEST_ARRAY_TEXT``.

    A bare integer sets only the column size, so the SQL type stays the one the driver
    described (or pyodbc's SQL_VARCHAR default when it could not).
    """
    sizes: list[int | None] = []
    # Not strict: a short row is reported by pyodbc, as without declared sizes.
    for column in zip(*rows, strict=False):
        if not any(isinstance(v, _TEXT_TYPES) for v in column):
            sizes.append(None)
            continue
        longest = max(map(_text_units, column))
        if longest > LONGEST_ARRAY_TEXT:
            return None
        sizes.append(max(longest, 1))
    return sizes
