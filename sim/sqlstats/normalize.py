"""A captured statement's text made a ``sql`` workload statement: its normalized parameters
renamed ``:p1`` … in order of first appearance, the column each is compared with, its
tables, whether it reads only, and whether it is replayable at all.

The scan is a tokenizer, not a parser: quoted strings, quoted identifiers (``"x"``,
```x```, ``[x]``), comments and PostgreSQL's dollar quotes are skipped whole, so a ``?`` or
``$1`` inside a string is never taken for a parameter. Parameter marks by source style:

* ``dollar`` (pg_stat_statements): ``$N``, each number one parameter (``$1`` twice is one);
* ``qmark`` (MariaDB digests, Query Store's parameterized text): each ``?`` a new one;
* ``colon`` (Oracle, AWR): ``:N``, ``:BN``, ``:name``, each name one parameter (never
  PostgreSQL's ``::`` cast);
* ``at`` (SQL Server's Query Store): ``@1``, ``@P1``, ``@name``, each name one parameter
  (never a ``@@`` function).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

#: Parameter mark styles (the token kinds of :data:`_TOKEN` that are parameters).
STYLES = frozenset({"dollar", "qmark", "colon", "at"})
#: Statement kinds a ``sql`` workload replays; anything else (BEGIN, COMMIT, SET, DDL,
#: utility commands) is left out of the skeleton, with the count said in its header.
REPLAYABLE = frozenset({"select", "with", "insert", "update", "delete", "values", "table"})
READ_KINDS = frozenset({"select", "values", "table"})
WRITE_WORDS = frozenset({"insert", "update", "delete", "merge", "into"})
#: Schemas of the servers' own catalogues: a statement on them is the tools' own, not load.
SYSTEM_PREFIXES = ("pg_", "information_schema", "performance_schema", "mysql.", "sys.")
#: Clause words after which ``col = :pN`` is a comparison (after SET it is an assignment).
COMPARING = frozenset({"where", "on", "having", "when", "and", "or", "not"})
CLAUSES = frozenset({"select", "from", "join", "set", "values", "into", "group", "order"})
TABLE_AFTER = frozenset({"from", "join", "update", "into"})
ALIAS_STOP = frozenset(
    {"where", "on", "set", "join", "inner", "left", "right", "full", "cross", "natural",
     "group", "order", "limit", "having", "union", "values", "using", "for", "window",
     "offset", "fetch", "returning", "lateral"}
)  # fmt: skip

_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>--[^\n]*|/\*.*?\*/)
      | (?P<dollarq>\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*)?\$.*?\$(?P=tag)\$)
      | (?P<string>'(?:[^']|'')*'?)
      | (?P<qident>"(?:[^"]|"")*"?|`(?:[^`]|``)*`?|\[[^\]]*\]?)
      | (?P<dollar>\$\d+)
      | (?P<cast>::)
      | (?P<colon>:[A-Za-z_][A-Za-z0-9_#$]*|:\d+)
      | (?P<qmark>\?)
      | (?P<global>@@[A-Za-z_][A-Za-z0-9_]*)
      | (?P<at>@[A-Za-z0-9_]+)
      | (?P<word>[A-Za-z_][A-Za-z0-9_$#]*(?:\.[A-Za-z_][A-Za-z0-9_$#]*)*)
      | (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
      | (?P<op><>|!=|<=|>=|=|<|>)
      | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


@dataclass
class Normalized:
    """A statement ready for the skeleton.

    ``sql``: the text with ``:p1`` …; ``params``: the names in order; ``compared``: a
    parameter's ``(table, column)`` where the statement says ``column = :pN`` and the table is
    known; ``tables``: the tables it names; ``kind``: its first word, lower case;
    ``read_only``: reads only (a SELECT/VALUES/TABLE, or a WITH without a write word, and no
    ``FOR UPDATE``/``FOR SHARE``); ``folded``: the text holds ``...`` outside strings (a
    digest cut at its length limit, or a folded list): not runnable as it stands."""

    sql: str
    params: list[str] = field(default_factory=list)
    compared: dict[str, tuple[str, str]] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    kind: str = ""
    read_only: bool = False
    folded: bool = False

    @property
    def replayable(self) -> bool:
        return self.kind in REPLAYABLE and not self.folded and not self.on_system_tables

    @property
    def on_system_tables(self) -> bool:
        # Oracle's dictionary (obj$, v$session, wrm$_snapshot …) is named with a dollar.
        return any(t.lower().startswith(SYSTEM_PREFIXES) or "$" in t for t in self.tables)


def tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pairs covering ``text`` exactly."""
    found: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        if kind == "tag":  # a dollar quote's inner group: the whole quote is the token
            kind = "dollarq"
        found.append((kind, match.group(0)))
    return found


def unquote(name: str) -> str:
    """An identifier without its quotes, part by part (```db`.`t``` -> ``db.t``)."""
    return ".".join(part.strip('"`[]') for part in re.split(r"\.(?=[\"`\[A-Za-z_])", name))


def _param_kinds(style: str) -> frozenset[str]:
    if style not in STYLES:
        raise ValueError(f"unknown parameter style {style!r}")
    return frozenset({style})


def normalize(text: str, style: str) -> Normalized:
    """``text`` (a statement as a statistics source shows it) with its parameters renamed."""
    wanted = _param_kinds(style)
    names: dict[str, str] = {}
    out: list[str] = []
    code: list[tuple[str, str]] = []  # the significant tokens, parameters already renamed
    found = _merge_names(tokens(text.strip().rstrip(";").strip()))
    if style == "qmark":
        found = _call_spacing(found)
    for kind, value in found:
        if kind in wanted:
            key = value if kind != "qmark" else f"?{len(names)}"
            name = names.setdefault(key, f"p{len(names) + 1}")
            out.append(f":{name}")
            code.append(("param", name))
            continue
        out.append(value)
        if kind not in ("ws", "comment"):
            code.append((kind, value))
    result = Normalized(sql="".join(out).strip(), params=list(dict.fromkeys(names.values())))
    words = [v.lower() for k, v in code if k == "word"]
    result.kind = words[0] if words else ""
    result.folded = any(v == "." for k, v in code if k == "other") and "..." in _outside(code)
    aliases = _tables(code)
    result.tables = list(dict.fromkeys(aliases.values()))
    result.compared = _comparisons(code, aliases, result.tables)
    result.read_only = _reads_only(result.kind, words)
    return result


def _call_spacing(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """MariaDB's digest text spaces a call (``SUM ( `k` )``), which MariaDB then reads as a
    stored function ``SUM`` (without IGNORE_SPACE): the space before every ``(`` that
    follows a word is dropped (``IN(``, ``VALUES(``, ``t(a, b)`` read the same)."""
    kept: list[tuple[str, str]] = []
    for i, token in enumerate(found):
        after = found[i + 1] if i + 1 < len(found) else ("", "")
        if token[0] == "ws" and kept and kept[-1][0] == "word" and after[1] == "(":
            continue
        kept.append(token)
    return kept


def _merge_names(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Quoted identifiers joined with their dots into one ``word`` (```db`.`t```, ``"s"."t"``,
    ``a."b"``), so a qualified name is one token whatever its quoting."""
    merged: list[tuple[str, str]] = []
    for kind, value in found:
        if kind in ("word", "qident") and len(merged) >= 2:
            dot, before = merged[-1], merged[-2]
            if dot == ("other", ".") and before[0] in ("word", "word_quoted"):
                merged[-2:] = [("word", f"{before[1]}.{value}")]
                continue
        if kind == "qident":
            kind = "word_quoted"
        merged.append((kind, value))
    return [("word", v) if k == "word_quoted" else (k, v) for k, v in merged]


def _outside(code: list[tuple[str, str]]) -> str:
    return "".join(v for k, v in code if k == "other")


def _tables(code: list[tuple[str, str]]) -> dict[str, str]:
    """Alias (or the table's own name) -> table, for every table after FROM/JOIN/UPDATE/INTO
    (and the comma-separated list after FROM)."""
    aliases: dict[str, str] = {}
    expecting = False
    i = 0
    while i < len(code):
        kind, value = code[i]
        low = value.lower()
        if kind == "word" and low in TABLE_AFTER:
            expecting = True
        elif expecting and kind == "word" and low not in ALIAS_STOP:
            table = unquote(value)
            aliases[table.lower()] = table
            aliases[table.split(".")[-1].lower()] = table
            j = i + 1
            if j < len(code) and code[j][1].lower() == "as":
                j += 1
            if j < len(code) and code[j][0] == "word" and code[j][1].lower() not in ALIAS_STOP:
                aliases[unquote(code[j][1]).lower()] = table
                i = j
            # Another table follows a comma (FROM a, b) unless a parenthesis opened.
            expecting = i + 1 < len(code) and code[i + 1][1] == ","
            if expecting:
                i += 1
        else:
            expecting = expecting and kind == "word" and low == "only"
        i += 1
    return aliases


def _comparisons(
    code: list[tuple[str, str]], aliases: dict[str, str], tables: list[str]
) -> dict[str, tuple[str, str]]:
    """``param -> (table, column)`` for ``column = :pN`` and ``:pN = column`` in a WHERE,
    ON, HAVING or WHEN clause; the column's table from its qualifier, or the only table."""
    found: dict[str, tuple[str, str]] = {}
    clause = ""
    for i, (kind, value) in enumerate(code):
        low = value.lower()
        if kind == "word" and (low in COMPARING or low in CLAUSES):
            clause = low
        if kind != "op" or value != "=" or clause not in COMPARING or not 0 < i < len(code) - 1:
            continue
        left, right = code[i - 1], code[i + 1]
        for column, param in ((left, right), (right, left)):
            if column[0] == "word" and param[0] == "param" and param[1] not in found:
                where = _column_table(unquote(column[1]), aliases, tables)
                if where is not None:
                    found[param[1]] = where
    return found


def _column_table(
    column: str, aliases: dict[str, str], tables: list[str]
) -> tuple[str, str] | None:
    qualifier, _, name = column.rpartition(".")
    if qualifier:
        table = aliases.get(qualifier.lower())
        return (table, name) if table is not None else None
    return (tables[0], name) if len(tables) == 1 else None


def _reads_only(kind: str, words: list[str]) -> bool:
    locking = any(
        a == "for" and b in ("update", "share", "no") for a, b in itertools.pairwise(words)
    )
    if kind in READ_KINDS:
        return not locking and "into" not in words
    if kind == "with":
        return not locking and not WRITE_WORDS.intersection(words)
    return False
