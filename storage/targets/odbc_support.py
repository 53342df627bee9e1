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


#: docs/databases.md's section on SQL Server TLS, named in every TLS explanation.
TLS_DOCS = "docs/databases.md#tls"
# What Microsoft's ODBC driver says when TLS fails, lower-cased, and one line that says why and
# how to fix it. The texts are the driver's own (OpenSSL 1.1 and 3 spell "self signed"
# differently; SChannel's come from Windows builds and the driver's own checks).
_TLS_CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("self signed certificate", "self-signed certificate"),
        "the server's certificate is self-signed (a stock SQL Server's): set "
        "trust_server_certificate: true (encryption kept, the certificate unchecked) or "
        "server_certificate: the server's .pem (pinned)",
    ),
    (
        ("unable to get local issuer certificate", "not trusted", "unable to verify the first"),
        "the certificate's issuing CA is not trusted on this machine: add the CA to the "
        "system store (update-ca-certificates), or set server_certificate",
    ),
    (
        ("target principal name is incorrect", "hostname mismatch", "does not match"),
        "the certificate is for another name than target.host: set host_name_in_certificate "
        "to the name it carries, or connect by that name",
    ),
    (
        ("certificate has expired", "certificate is not yet valid"),
        "the server's certificate is out of its validity dates: renew it on the server (or "
        "check this machine's clock)",
    ),
    (
        ("unsupported protocol", "wrong version number", "no protocols available"),
        "the server offers only a TLS version this machine's OpenSSL refuses (TLS 1.0/1.1 "
        "on an old SQL Server): patch the server for TLS 1.2, or set encrypt: optional",
    ),
    (
        ("dh key too small", "ca md too weak", "ee key too small"),
        "the server's certificate or key is too weak for this machine's OpenSSL security "
        "level: replace it on the server",
    ),
    (
        ("encryption not supported",),
        "the server or the client cannot encrypt: give the server a certificate (or set "
        "encrypt: optional on a test box)",
    ),
)


def tls_explanation(message: str) -> str | None:
    """One line saying why a TLS handshake failed and what fixes it, with the docs' anchor;
    None when ``message`` is not a TLS failure dbsim knows."""
    text = message.lower()
    for needles, why in _TLS_CAUSES:
        if any(needle in text for needle in needles):
            return f"{why} — see {TLS_DOCS}"
    if "ssl provider" in text or "linkid=2226722" in text:
        return (
            "TLS to the server failed: check encrypt, trust_server_certificate, "
            f"host_name_in_certificate and server_certificate — see {TLS_DOCS}"
        )
    return None


def microsoft_driver(driver: str) -> bool:
    """Whether ``driver`` is Microsoft's ODBC driver for SQL Server (17, 18 …), which takes
    the port in SERVER=host,port and ignores a PORT keyword."""
    name = driver.lower()
    return "for sql server" in name or name in ("sql server", "sql server native client 11.0")
