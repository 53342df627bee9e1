"""The stricter proof of the SQL dbsim sends to servers that cannot run here (Oracle, SQL Server):
sqlglot must parse each statement as the dialect, and no rule below may find a construct the
server refuses. sqlglot alone is too lenient: it reads ``LIMIT`` and ``ILIKE`` and ``AS`` before
a table alias in every dialect (so does sqlfluff's oracle dialect; its tsql one takes ILIKE).

Each :class:`Rule` cites the vendor reference that says what the server accepts and carries a
known-bad statement per dialect, which tests/contract/test_sql_rules.py proves it catches.
The rules read sqlglot's tokens (strings and comments are never matched) and, where the
statement parses to a tree, its identifiers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token

ORACLE, SQLSERVER = "oracle", "sqlserver"
#: dbsim's dialect name -> sqlglot's.
SQLGLOT = {ORACLE: "oracle", SQLSERVER: "tsql"}
#: The longest identifier in bytes: Oracle takes 128 from 12.2 (COMPATIBLE >= 12.2), 30 before,
#: and dbsim keeps to 30 (its dialect record); SQL Server's sysname is 128.
MAX_IDENTIFIER_BYTES = {ORACLE: 30, SQLSERVER: 128}

ORACLE_DOCS = "https://docs.oracle.com/en/database/oracle/oracle-database/19/sqlrf"
MS_DOCS = "https://learn.microsoft.com/en-us/sql"

#: Oracle SQL Language Reference 19c, Appendix D "Oracle SQL Reserved Words" (D.1).
ORACLE_RESERVED = frozenset(
    [
        "ACCESS",
        "ADD",
        "ALL",
        "ALTER",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "AUDIT",
        "BETWEEN",
        "BY",
        "CHAR",
        "CHECK",
        "CLUSTER",
        "COLUMN",
        "COMMENT",
        "COMPRESS",
        "CONNECT",
        "CREATE",
        "CURRENT",
        "DATE",
        "DECIMAL",
        "DEFAULT",
        "DELETE",
        "DESC",
        "DISTINCT",
        "DROP",
        "ELSE",
        "EXCLUSIVE",
        "EXISTS",
        "FILE",
        "FLOAT",
        "FOR",
        "FROM",
        "GRANT",
        "GROUP",
        "HAVING",
        "IDENTIFIED",
        "IMMEDIATE",
        "IN",
        "INCREMENT",
        "INDEX",
        "INITIAL",
        "INSERT",
        "INTEGER",
        "INTERSECT",
        "INTO",
        "IS",
        "LEVEL",
        "LIKE",
        "LOCK",
        "LONG",
        "MAXEXTENTS",
        "MINUS",
        "MLSLABEL",
        "MODE",
        "MODIFY",
        "NOAUDIT",
        "NOCOMPRESS",
        "NOT",
        "NOWAIT",
        "NULL",
        "NUMBER",
        "OF",
        "OFFLINE",
        "ON",
        "ONLINE",
        "OPTION",
        "OR",
        "ORDER",
        "PCTFREE",
        "PRIOR",
        "PUBLIC",
        "RAW",
        "RENAME",
        "RESOURCE",
        "REVOKE",
        "ROW",
        "ROWID",
        "ROWNUM",
        "ROWS",
        "SELECT",
        "SESSION",
        "SET",
        "SHARE",
        "SIZE",
        "SMALLINT",
        "START",
        "SUCCESSFUL",
        "SYNONYM",
        "SYSDATE",
        "TABLE",
        "THEN",
        "TO",
        "TRIGGER",
        "UID",
        "UNION",
        "UNIQUE",
        "UPDATE",
        "USER",
        "VALIDATE",
        "VALUES",
        "VARCHAR",
        "VARCHAR2",
        "VIEW",
        "WHENEVER",
        "WHERE",
        "WITH",
    ]
)
#: Reserved words Oracle also reads as pseudocolumns or functions in an expression.
ORACLE_PSEUDOCOLUMNS = frozenset({"ROWID", "ROWNUM", "LEVEL", "SYSDATE", "UID", "USER"})
#: "Reserved Keywords (Transact-SQL)", the SQL Server list.
SQLSERVER_RESERVED = frozenset(
    [
        "ADD",
        "ALL",
        "ALTER",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "AUTHORIZATION",
        "BACKUP",
        "BEGIN",
        "BETWEEN",
        "BREAK",
        "BROWSE",
        "BULK",
        "BY",
        "CASCADE",
        "CASE",
        "CHECK",
        "CHECKPOINT",
        "CLOSE",
        "CLUSTERED",
        "COALESCE",
        "COLLATE",
        "COLUMN",
        "COMMIT",
        "COMPUTE",
        "CONSTRAINT",
        "CONTAINS",
        "CONTAINSTABLE",
        "CONTINUE",
        "CONVERT",
        "CREATE",
        "CROSS",
        "CURRENT",
        "CURRENT_DATE",
        "CURRENT_TIME",
        "CURRENT_TIMESTAMP",
        "CURRENT_USER",
        "CURSOR",
        "DATABASE",
        "DBCC",
        "DEALLOCATE",
        "DECLARE",
        "DEFAULT",
        "DELETE",
        "DENY",
        "DESC",
        "DISK",
        "DISTINCT",
        "DISTRIBUTED",
        "DOUBLE",
        "DROP",
        "DUMP",
        "ELSE",
        "END",
        "ERRLVL",
        "ESCAPE",
        "EXCEPT",
        "EXEC",
        "EXECUTE",
        "EXISTS",
        "EXIT",
        "EXTERNAL",
        "FETCH",
        "FILE",
        "FILLFACTOR",
        "FOR",
        "FOREIGN",
        "FREETEXT",
        "FREETEXTTABLE",
        "FROM",
        "FULL",
        "FUNCTION",
        "GOTO",
        "GRANT",
        "GROUP",
        "HAVING",
        "HOLDLOCK",
        "IDENTITY",
        "IDENTITY_INSERT",
        "IDENTITYCOL",
        "IF",
        "IN",
        "INDEX",
        "INNER",
        "INSERT",
        "INTERSECT",
        "INTO",
        "IS",
        "JOIN",
        "KEY",
        "KILL",
        "LEFT",
        "LIKE",
        "LINENO",
        "LOAD",
        "MERGE",
        "NATIONAL",
        "NOCHECK",
        "NONCLUSTERED",
        "NOT",
        "NULL",
        "NULLIF",
        "OF",
        "OFF",
        "OFFSETS",
        "ON",
        "OPEN",
        "OPENDATASOURCE",
        "OPENQUERY",
        "OPENROWSET",
        "OPENXML",
        "OPTION",
        "OR",
        "ORDER",
        "OUTER",
        "OVER",
        "PERCENT",
        "PIVOT",
        "PLAN",
        "PRECISION",
        "PRIMARY",
        "PRINT",
        "PROC",
        "PROCEDURE",
        "PUBLIC",
        "RAISERROR",
        "READ",
        "READTEXT",
        "RECONFIGURE",
        "REFERENCES",
        "REPLICATION",
        "RESTORE",
        "RESTRICT",
        "RETURN",
        "REVERT",
        "REVOKE",
        "RIGHT",
        "ROLLBACK",
        "ROWCOUNT",
        "ROWGUIDCOL",
        "RULE",
        "SAVE",
        "SCHEMA",
        "SECURITYAUDIT",
        "SELECT",
        "SEMANTICKEYPHRASETABLE",
        "SEMANTICSIMILARITYDETAILSTABLE",
        "SEMANTICSIMILARITYTABLE",
        "SESSION_USER",
        "SET",
        "SETUSER",
        "SHUTDOWN",
        "SOME",
        "STATISTICS",
        "SYSTEM_USER",
        "TABLE",
        "TABLESAMPLE",
        "TEXTSIZE",
        "THEN",
        "TO",
        "TOP",
        "TRAN",
        "TRANSACTION",
        "TRIGGER",
        "TRUNCATE",
        "TRY_CONVERT",
        "TSEQUAL",
        "UNION",
        "UNIQUE",
        "UNPIVOT",
        "UPDATE",
        "UPDATETEXT",
        "USE",
        "USER",
        "VALUES",
        "VARYING",
        "VIEW",
        "WAITFOR",
        "WHEN",
        "WHERE",
        "WHILE",
        "WITH",
        "WITHIN",
        "WRITETEXT",
    ]
)
#: Reserved words SQL Server reads as niladic functions in an expression.
SQLSERVER_NILADIC = frozenset(
    {"CURRENT_TIMESTAMP", "CURRENT_USER", "SESSION_USER", "SYSTEM_USER", "USER"}
)
#: Tokens that end a FROM clause's table references at their nesting depth.
_FROM_ENDS = frozenset(
    {"WHERE", "GROUP_BY", "ORDER_BY", "HAVING", "ON", "USING", "UNION", "INTERSECT", "EXCEPT",
     "CONNECT_BY", "BEGIN", "START_WITH", "FETCH", "OFFSET", "LIMIT", "SELECT", "SET", "VALUES",
     "PIVOT", "UNPIVOT", "WINDOW", "MODEL"}
)  # fmt: skip


@dataclass
class Statement:
    """One statement as the rules see it: its dialect, text, tokens and (when sqlglot parses
    it to more than a bare command) its tree."""

    dialect: str
    sql: str
    tokens: list[Token]
    #: sqlglot's tree (``Any``: its class name changed across the versions dbsim allows).
    tree: Any

    def words(self) -> list[str]:
        """Each token's text upper-cased, strings and quoted identifiers as ``''`` / ``""``."""
        out = []
        for token in self.tokens:
            kind = token.token_type.name
            out.append(
                "''" if kind == "STRING" else '""' if kind == "IDENTIFIER" else token.text.upper()
            )
        return out

    def identifiers(self) -> list[tuple[str, bool, Any]]:
        """(name, quoted, parent node) of every identifier: from the tree, or from the tokens
        (names as written, quoted ones as IDENTIFIER tokens) when sqlglot kept a command."""
        if self.tree is not None:
            return [(i.name, bool(i.quoted), i.parent) for i in self.tree.find_all(exp.Identifier)]
        return [
            (t.text, t.token_type.name == "IDENTIFIER", None)
            for t in self.tokens
            if t.token_type.name in ("VAR", "IDENTIFIER")
        ]


@dataclass(frozen=True)
class Rule:
    """A construct a server refuses: the check, where the vendor says so, and a statement the
    check must catch per dialect it applies to."""

    name: str
    what: str
    cite: tuple[str, ...]
    bad: dict[str, str]
    check: Callable[[Statement], list[str]] = field(repr=False)

    @property
    def dialects(self) -> tuple[str, ...]:
        return tuple(self.bad)


# --------------------------------------------------------------------------- the checks


def _row_limit(s: Statement) -> list[str]:
    words = s.words()
    found = ["LIMIT"] if "LIMIT" in words else []
    for i, word in enumerate(words):
        if word == "OFFSET" and not {"ROW", "ROWS"} & set(words[i + 1 : i + 4]):
            found.append("OFFSET without ROWS")
    return found


def _table_alias_as(s: Statement) -> list[str]:
    """``AS`` in a FROM clause at its own depth (``AS OF``, a flashback query, is Oracle's)."""
    found: list[str] = []
    in_from = [False]
    for i, token in enumerate(s.tokens):
        kind = token.token_type.name
        if kind == "L_PAREN":
            in_from.append(False)
        elif kind == "R_PAREN" and len(in_from) > 1:
            in_from.pop()
        elif kind in ("FROM", "JOIN"):
            in_from[-1] = True
        elif kind in _FROM_ENDS:
            in_from[-1] = False
        elif kind == "ALIAS" and in_from[-1]:
            after = s.tokens[i + 1].text.upper() if i + 1 < len(s.tokens) else ""
            if after != "OF":
                found.append(f"AS before the table alias {after.lower()}")
    return found


def _ilike(s: Statement) -> list[str]:
    return ["ILIKE"] if "ILIKE" in s.words() else []


def _if_exists(s: Statement) -> list[str]:
    words = s.words()
    found = []
    for i, word in enumerate(words):
        if word != "IF":
            continue
        rest = words[i + 1 : i + 3]
        if s.dialect == ORACLE and (rest[:1] == ["EXISTS"] or rest == ["NOT", "EXISTS"]):
            found.append("IF " + " ".join(rest[: 1 if rest[0] == "EXISTS" else 2]))
        if s.dialect == SQLSERVER and words[:1] == ["CREATE"] and rest == ["NOT", "EXISTS"]:
            found.append("CREATE … IF NOT EXISTS")
    return found


def _boolean_literal(s: Statement) -> list[str]:
    return [t.text.upper() for t in s.tokens if t.token_type.name in ("TRUE", "FALSE")]


def _double_colon(s: Statement) -> list[str]:
    return ["::" for t in s.tokens if t.token_type.name == "DCOLON"]


def _identifier_length(s: Statement) -> list[str]:
    limit = MAX_IDENTIFIER_BYTES[s.dialect]
    return [
        f"{name} ({len(name.encode())} bytes > {limit})"
        for name, _, _ in s.identifiers()
        if len(name.encode()) > limit
    ]


def _identifier_case(s: Statement) -> list[str]:
    """Oracle: a quoted name not in upper case is another object than the unquoted name
    (stored upper-cased). SQL Server: one name spelt in two cases differs under a
    case-sensitive collation."""
    names = s.identifiers()
    if s.dialect == ORACLE:
        return [
            f'"{n}" is quoted but not upper-case'
            for n, quoted, _ in names
            if quoted and n != n.upper()
        ]
    spellings: dict[str, set[str]] = {}
    for name, _, _ in names:
        spellings.setdefault(name.lower(), set()).add(name)
    return [f"{' / '.join(sorted(v))} spelt in two cases" for v in spellings.values() if len(v) > 1]


def _reserved_name(s: Statement) -> list[str]:
    reserved = ORACLE_RESERVED if s.dialect == ORACLE else SQLSERVER_RESERVED
    allowed = ORACLE_PSEUDOCOLUMNS if s.dialect == ORACLE else SQLSERVER_NILADIC
    found = []
    for name, quoted, parent in s.identifiers():
        upper = name.upper()
        if quoted or upper not in reserved:
            continue
        if upper in allowed and (parent is None or isinstance(parent, exp.Column)):
            continue  # ROWID, USER … as what they are in an expression
        found.append(name)
    return found


def _binds(s: Statement) -> list[str]:
    found = []
    for i, token in enumerate(s.tokens):
        kind = token.token_type.name
        following = s.tokens[i + 1] if i + 1 < len(s.tokens) else None
        if s.dialect == ORACLE and kind == "PLACEHOLDER":
            found.append(token.text)
        if kind == "MOD" and following is not None and following.text == "s":
            found.append("%s")
        if (
            s.dialect == SQLSERVER
            and kind == "COLON"
            and following is not None
            and following.token_type.name in ("VAR", "NUMBER")
        ):
            found.append(f":{following.text}")
    return found


def _trailing_semicolon(s: Statement) -> list[str]:
    words = s.words()
    plsql = words[:1] in (["BEGIN"], ["DECLARE"])
    return ["a trailing ;"] if words[-1:] == [";"] and not plsql else []


RULES: tuple[Rule, ...] = (
    Rule(
        "row_limit",
        "LIMIT, or OFFSET without ROWS: Oracle (12c on) and SQL Server limit rows with "
        "OFFSET n ROWS FETCH NEXT n ROWS ONLY (SQL Server also with TOP)",
        (f"{ORACLE_DOCS}/SELECT.html (row_limiting_clause)",
         f"{MS_DOCS}/t-sql/queries/select-order-by-clause-transact-sql (OFFSET and FETCH)",
         f"{MS_DOCS}/t-sql/queries/top-transact-sql"),
        {ORACLE: "SELECT custid FROM slob_1_cf1 ORDER BY custid LIMIT 10",
         SQLSERVER: "SELECT custid FROM slob_1_cf1 ORDER BY custid OFFSET 5"},
        _row_limit,
    ),
    Rule(
        "table_alias_as",
        "AS before a table alias: Oracle's table_reference takes t_alias without AS",
        (f"{ORACLE_DOCS}/SELECT.html (query_table_expression, t_alias)",),
        {ORACLE: "SELECT x.custid FROM slob_1_cf1 AS x WHERE x.custid = :lo"},
        _table_alias_as,
    ),
    Rule(
        "ilike",
        "ILIKE (PostgreSQL's): Oracle has LIKE, LIKEC, LIKE2, LIKE4; SQL Server LIKE, whose "
        "case sensitivity is the collation's",
        (f"{ORACLE_DOCS}/Pattern-matching-Conditions.html",
         f"{MS_DOCS}/t-sql/language-elements/like-transact-sql"),
        {ORACLE: "SELECT name FROM dbsim_registry WHERE name ILIKE :pattern",
         SQLSERVER: "SELECT name FROM dbsim_registry WHERE name ILIKE ?"},
        _ilike,
    ),
    Rule(
        "if_exists",
        "IF [NOT] EXISTS in Oracle DDL (only from 23ai; dbsim runs on 19c); CREATE … IF NOT "
        "EXISTS in SQL Server, which has DROP … IF EXISTS (2016 on) but no such CREATE",
        ("https://docs.oracle.com/en/database/oracle/oracle-database/23/sqlrf/DROP-TABLE.html "
         "(IF EXISTS, new in 23ai)",
         f"{ORACLE_DOCS}/DROP-TABLE.html (19c: no IF EXISTS)",
         f"{MS_DOCS}/t-sql/statements/create-table-transact-sql",
         f"{MS_DOCS}/t-sql/statements/drop-table-transact-sql"),
        {ORACLE: "DROP TABLE IF EXISTS slob_1_cf1 PURGE",
         SQLSERVER: "CREATE TABLE IF NOT EXISTS user_1 (custid INT NOT NULL)"},
        _if_exists,
    ),
    Rule(
        "boolean_literal",
        "TRUE / FALSE: Oracle SQL has no BOOLEAN before 23ai; SQL Server has bit 1/0 and no "
        "boolean literal",
        (f"{ORACLE_DOCS}/Data-Types.html",
         f"{MS_DOCS}/t-sql/data-types/bit-transact-sql"),
        {ORACLE: "SELECT COUNT(*) FROM user_indexes WHERE uniqueness = TRUE",
         SQLSERVER: "SELECT COUNT(*) FROM sys.indexes WHERE is_unique = TRUE"},
        _boolean_literal,
    ),
    Rule(
        "double_colon_cast",
        ":: casts (PostgreSQL's): CAST(x AS type) in both (SQL Server's :: is a scope "
        "qualifier, in GRANT … ON SCHEMA:: and static methods, which dbsim never sends)",
        (f"{ORACLE_DOCS}/CAST.html", f"{MS_DOCS}/t-sql/functions/cast-and-convert-transact-sql"),
        {ORACLE: "SELECT custid::VARCHAR2(10) FROM slob_1_cf1",
         SQLSERVER: "SELECT custid::varchar FROM slob_1_cf1"},
        _double_colon,
    ),
    Rule(
        "identifier_length",
        "an identifier longer than the server takes: Oracle 30 bytes before 12.2 (and below "
        "COMPATIBLE 12.2), 128 after, dbsim keeping to 30; SQL Server 128 (sysname)",
        (f"{ORACLE_DOCS}/Database-Object-Names-and-Qualifiers.html (rule 2)",
         f"{MS_DOCS}/relational-databases/databases/database-identifiers"),
        {ORACLE: "SELECT COUNT(*) FROM slob_1_cf1_" + "x" * 20,  # 31 bytes
         SQLSERVER: "SELECT COUNT(*) FROM " + "t" * 129},
        _identifier_length,
    ),
    Rule(
        "identifier_case",
        "Oracle: a quoted identifier not in upper case names another object than the unquoted "
        "(upper-cased) name; SQL Server: a name spelt in two cases differs under a case-"
        "sensitive collation",
        (f"{ORACLE_DOCS}/Database-Object-Names-and-Qualifiers.html (rule 10: quoted names "
         "are case-sensitive, nonquoted names are not)",
         f"{MS_DOCS}/relational-databases/collations/collation-and-unicode-support"),
        {ORACLE: 'SELECT COUNT(*) FROM "slob_1_cf1"',
         SQLSERVER: "SELECT COUNT(*) FROM user_1 WHERE CustID = ? AND custid > 0"},
        _identifier_case,
    ),
    Rule(
        "reserved_word_name",
        "a reserved word as an unquoted name (Oracle's pseudocolumns ROWID, ROWNUM, LEVEL, "
        "UID, USER, SYSDATE and SQL Server's niladic USER, CURRENT_USER … as what they are)",
        (f"{ORACLE_DOCS}/Oracle-SQL-Reserved-Words.html",
         f"{MS_DOCS}/t-sql/language-elements/reserved-keywords-transact-sql"),
        {ORACLE: "CREATE TABLE slob_1_cf9 (custid INTEGER NOT NULL, size INTEGER)",
         SQLSERVER: "CREATE TABLE user_9 (custid INT NOT NULL, file INT)"},
        _reserved_name,
    ),
    Rule(
        "bind_style",
        "a bind marker the driver does not take: python-oracledb binds :name or :1, ODBC "
        "(SQL Server's drivers) takes ? only",
        ("https://python-oracledb.readthedocs.io/en/latest/user_guide/bind.html",
         f"{MS_DOCS}/odbc/reference/develop-app/binding-parameter-markers"),
        {ORACLE: "SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > ? AND custid < ?",
         SQLSERVER: "SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > :lo AND custid < :hi"},
        _binds,
    ),
    Rule(
        "trailing_semicolon",
        "a trailing semicolon on a SQL statement, which python-oracledb sends to the server "
        "as written (ORA-00933 / ORA-00911); PL/SQL blocks keep theirs",
        ("https://python-oracledb.readthedocs.io/en/latest/user_guide/sql_execution.html",),
        {ORACLE: "SELECT COUNT(*) FROM slob_1_cf1;"},
        _trailing_semicolon,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Finding:
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def read(sql: str, dialect: str) -> Statement | Finding:
    """The statement as the rules see it, or the parser's refusal."""
    read_as = SQLGLOT[dialect]
    try:
        tokens = Dialect.get_or_raise(read_as).tokenize(sql)
        tree = sqlglot.parse_one(sql, read=read_as)
    except sqlglot.errors.SqlglotError as exc:
        return Finding("parse", " ".join(str(exc).split())[:200])
    return Statement(dialect, sql, tokens, None if isinstance(tree, exp.Command) else tree)


def check(sql: str, dialect: str, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """Everything the stricter check finds in ``sql`` for ``dialect`` (empty: it passes)."""
    statement = read(sql, dialect)
    if isinstance(statement, Finding):
        return [statement]
    return [
        Finding(rule.name, detail)
        for rule in rules
        if dialect in rule.dialects
        for detail in rule.check(statement)
    ]


def mixed_case_names(statements: Sequence[str], dialect: str) -> list[str]:
    """Names spelt in more than one case across ``statements`` (SQL Server's case-sensitive
    collations tell them apart; Oracle folds the unquoted ones)."""
    spellings: dict[str, set[str]] = {}
    for sql in statements:
        statement = read(sql, dialect)
        if isinstance(statement, Finding):
            continue
        for name, quoted, _ in statement.identifiers():
            if quoted or dialect == SQLSERVER:
                spellings.setdefault(name.lower(), set()).add(name)
    return sorted(" / ".join(sorted(v)) for v in spellings.values() if len(v) > 1)
