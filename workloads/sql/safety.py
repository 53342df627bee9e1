"""What a user's statement does, read by a strict tokenizer before anything connects.

dbsim never writes to what it did not create, and the ``sql`` workload runs on the user's own
tables: every statement is read here first. Refused outright: DDL, more than one statement in a
string, transaction or session control (dbsim owns the transaction), procedure calls (what they
run cannot be seen), ``SELECT … INTO``, dollar quoting, a backslash or a ``:name`` inside a
quoted literal, anything that does not start as a query or a DML statement. What is left is
classed as a *read* (a query with nothing but known functions), a *write* (INSERT, UPDATE,
DELETE, MERGE, REPLACE, a data-modifying CTE, ``FOR UPDATE``) or *uncertain* (a query calling
a function the tokenizer does not know: the database's read-only transaction decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

READ = "read"
WRITE = "write"
UNCERTAIN = "uncertain"

_TOKEN = re.compile(
    r"""
     (?P<ws>\s+)
    |(?P<comment>--[^\n]*|/\*.*?\*/)
    |(?P<string>[NnEeXxBb]?'(?:[^']|'')*')
    |(?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
    |(?P<dollar>\$[A-Za-z_]*\$)
    |(?P<cast>::)
    |(?P<param>:[A-Za-z_]\w*)
    |(?P<word>[A-Za-z_][A-Za-z0-9_$#]*)
    |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)
    |(?P<semi>;)
    |(?P<other>[^\sA-Za-z0-9_;'"`]+?)
    """,
    re.VERBOSE | re.DOTALL,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


DDL = _words(
    "CREATE ALTER DROP TRUNCATE RENAME GRANT REVOKE COMMENT VACUUM ANALYZE REINDEX CLUSTER "
    "OPTIMIZE AUDIT NOAUDIT PURGE FLASHBACK REFRESH SECURITY"
)
#: DDL words that cannot be an identifier anywhere in a statement dbsim runs.
DDL_ANYWHERE = _words("CREATE ALTER DROP TRUNCATE GRANT REVOKE")
CONTROL = _words(
    "BEGIN START COMMIT ROLLBACK END ABORT SAVEPOINT RELEASE SET RESET LOCK UNLOCK USE PRAGMA "
    "ATTACH DETACH COPY LOAD IMPORT EXPORT DECLARE PREPARE DEALLOCATE EXECUTE EXEC CALL DO "
    "LISTEN NOTIFY UNLISTEN DISCARD CHECKPOINT SHUTDOWN KILL FLUSH INSTALL UNINSTALL HANDLER "
    "GO BACKUP RESTORE DBCC"
)
READ_STARTS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "("})
WRITE_STARTS = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "REPLACE", "UPSERT"})
WRITE_WORDS = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
#: Functions and keywords followed by "(" that read only: anything else followed by "(" in a
#: query is a function the tokenizer cannot see into (UNCERTAIN).
KNOWN_CALLS = _words(
    """
    SELECT FROM WHERE AND OR NOT IN EXISTS ANY ALL SOME ON USING AS JOIN VALUES OVER FILTER
    WITHIN PARTITION BY ORDER GROUP HAVING UNION INTERSECT EXCEPT MINUS CASE WHEN THEN ELSE
    LIMIT OFFSET FETCH TOP WITH IS NULL BETWEEN LIKE
    COUNT SUM MIN MAX AVG COALESCE NULLIF GREATEST LEAST ABS ROUND TRUNC FLOOR CEIL CEILING
    MOD POWER SQRT LENGTH CHAR_LENGTH OCTET_LENGTH LOWER UPPER TRIM LTRIM RTRIM SUBSTR
    SUBSTRING CONCAT REPLACE POSITION STRPOS INSTR LPAD RPAD LEFT RIGHT CAST CONVERT EXTRACT
    DATE_TRUNC DATE_PART TO_CHAR TO_DATE TO_NUMBER TO_TIMESTAMP IFNULL ISNULL NVL NVL2 DECODE
    IIF STDDEV VARIANCE ROW_NUMBER RANK DENSE_RANK LAG LEAD FIRST_VALUE LAST_VALUE NTILE
    STRING_AGG ARRAY_AGG GROUP_CONCAT LISTAGG BOOL_AND BOOL_OR EVERY INTERVAL DATE TIMESTAMP
    DECIMAL NUMERIC VARCHAR CHAR INTEGER INT BIGINT
    """
)
_TRAILING = frozenset({"ws", "comment"})
#: Words between INTO / UPDATE / FROM and the table written (MySQL's modifiers, ONLY, TOP).
_BEFORE_TABLE = _words("INTO FROM ONLY TOP LOW_PRIORITY IGNORE QUICK DELAYED")


class UnsafeStatement(ValueError):
    """A statement dbsim refuses to run; the message says why, in one line."""


@dataclass(frozen=True)
class Reading:
    """What one statement does: its kind, its bind names in order, the tables it writes."""

    kind: str
    params: tuple[str, ...]
    writes: tuple[str, ...]
    #: Every table named after FROM, JOIN, INTO or UPDATE (what the database collector samples).
    tables: tuple[str, ...] = ()


def _tokens(sql: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None or match.end() == pos:
            what = "an unterminated quote or comment" if sql[pos] in "'\"`/-" else "text"
            raise UnsafeStatement(f"{what} at character {pos + 1} cannot be read")
        kind = match.lastgroup or "other"
        tokens.append((kind, match.group()))
        pos = match.end()
    return tokens


def _check_literals(tokens: list[tuple[str, str]]) -> None:
    for kind, text in tokens:
        if kind == "dollar":
            raise UnsafeStatement("dollar-quoted text is not read: use a parameter or '…'")
        if kind == "string" and "\\" in text:
            raise UnsafeStatement(
                "a backslash in a quoted literal (engines read it differently): bind it as a "
                "parameter"
            )
        if kind == "string" and re.search(r":[A-Za-z_]", text):
            raise UnsafeStatement(
                f"{text[:30]}: a ':name' inside a quoted literal would be bound: use a parameter"
            )
        if kind == "comment" and text.startswith("/*") and "/*" in text[2:]:
            raise UnsafeStatement("a nested comment is not read")


def _statement_tokens(sql: str) -> list[tuple[str, str]]:
    """The tokens that matter (no whitespace or comments), one statement's only."""
    tokens = _tokens(sql)
    _check_literals(tokens)
    semis = [i for i, (kind, _) in enumerate(tokens) if kind == "semi"]
    if semis:
        first = semis[0]
        if any(kind not in _TRAILING for kind, _ in tokens[first + 1 :]):
            raise UnsafeStatement("more than one statement in one string: give each its own")
        tokens = tokens[:first]
    kept = [(k, t.upper() if k == "word" else t) for k, t in tokens if k not in _TRAILING]
    if not kept:
        raise UnsafeStatement("no statement")
    return kept


def _written_table(tokens: list[tuple[str, str]], start: int) -> str | None:
    """The table named after INTO / UPDATE / FROM at ``start`` (schema-qualified kept)."""
    i = start
    while i < len(tokens) and tokens[i][1] in _BEFORE_TABLE:
        i += 1
    parts: list[str] = []
    while i < len(tokens) and tokens[i][0] in {"word", "quoted"}:
        parts.append(tokens[i][1].strip('"`').lower())
        if i + 1 < len(tokens) and tokens[i + 1][1] == ".":
            i += 2
            continue
        break
    return ".".join(parts) or None


def _tables(tokens: list[tuple[str, str]]) -> tuple[str, ...]:
    named = [
        table
        for i, (kind, text) in enumerate(tokens)
        if kind == "word"
        and text in {"FROM", "JOIN", "INTO", "UPDATE"}
        and (table := _written_table(tokens, i + 1))
    ]
    return tuple(dict.fromkeys(named))


def read_statement(sql: str) -> Reading:
    """Read ``sql``: raise UnsafeStatement (why, in one line) or say what it does."""
    reading = _read(sql)
    tokens = _statement_tokens(sql)
    return Reading(reading.kind, reading.params, reading.writes, _tables(tokens))


def _read(sql: str) -> Reading:
    tokens = _statement_tokens(sql)
    first = tokens[0][1]
    words = [text for kind, text in tokens if kind == "word"]
    params = tuple(text[1:] for kind, text in tokens if kind == "param")
    ddl = sorted(DDL_ANYWHERE.intersection(words))
    if first in DDL or ddl:
        raise UnsafeStatement(f"DDL ({first if first in DDL else ddl[0]}): dbsim never runs DDL")
    if first in CONTROL:
        raise UnsafeStatement(
            f"{first}: transaction, session control and procedure calls are refused "
            "(dbsim owns the transaction; a procedure's work cannot be seen)"
        )
    if first in WRITE_STARTS:
        if "INTO" in words[1:] and first not in {"INSERT", "MERGE", "REPLACE", "UPSERT"}:
            raise UnsafeStatement(f"{first} … INTO: not a statement dbsim runs")
        table = _written_table(tokens, 1)
        return Reading(WRITE, params, (table,) if table else ())
    if first not in READ_STARTS:
        raise UnsafeStatement(f"{first}: not a query or DML statement dbsim knows to be safe")
    if "INTO" in words:
        raise UnsafeStatement("SELECT … INTO creates a table or assigns variables: refused")
    writes = [i for i, (kind, text) in enumerate(tokens) if kind == "word" and text in WRITE_WORDS]
    if writes:
        tables = [t for i in writes if (t := _written_table(tokens, i + 1))]
        return Reading(WRITE, params, tuple(dict.fromkeys(tables)))
    calls = {
        text
        for (kind, text), (_, after) in pairwise(tokens)
        if kind in {"word", "quoted"} and after == "(" and text not in KNOWN_CALLS
    }
    return Reading(UNCERTAIN if calls else READ, params, ())
