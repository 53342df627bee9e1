"""How the SQL workloads name their tables, so that no two scenarios can name the same object.

A table is ``<prefix>_<n><suffix>``: the scenario's ``table_prefix``, an underscore, the table
(schema) number without leading zeros, and the workload's fixed suffix (SLOB: ``_cf1``,
``_cf2``, ``_cf3``; SSB: none). Indexes add ``_custid`` to their table's name. The underscore
is what keeps the prefix and the number apart: before it, ``slob1`` with schema 1 and ``slob``
with schema 11 both made ``slob11_cf1``. Now a name splits back into (prefix, number, suffix) in
exactly one way: the number is the last run of digits between underscores before the suffix,
and the suffixes of the two workloads (``_cf1``, ``_cf2``, ``_cf3``, ``_custid`` or nothing
after the digits) never overlap, so different (workload, prefix) pairs never share a name.

Prefixes are lower case: SQLite, SQL Server (in its default collation), MariaDB and Oracle
(for unquoted names) fold identifiers to one case, so ``SLOB`` and ``slob`` would otherwise be
two scenarios naming the same tables. Names made only of lower-case letters, digits and ``_``
are also never quoted, so a catalogue stores them as dbsim wrote them (Oracle: upper-cased).
"""

from __future__ import annotations

import re

#: A table prefix: a lower-case letter, then lower-case letters, digits or ``_``; at most 16.
TABLE_PREFIX_PATTERN = r"^[a-z][a-z0-9_]{0,15}$"
TABLE_PREFIX_HELP = "lower-case letters, digits and _, starting with a letter, at most 16"
INDEX_SUFFIX = "_custid"


def numbered(prefix: str, number: int, suffix: str = "") -> str:
    """Table ``number`` (1-based) of ``prefix``: ``<prefix>_<number><suffix>``."""
    if number < 1:
        raise ValueError(f"table numbers start at 1, not {number}")
    return f"{prefix}_{number}{suffix}"


def index_of(table: str) -> str:
    """The key index of ``table``."""
    return f"{table}{INDEX_SUFFIX}"


def owned_pattern(prefix: str, suffix_regex: str = "") -> re.Pattern[str]:
    """What ``numbered(prefix, n, suffix)`` can produce for any n (for ``dbsim drop``, which
    finds a prefix's tables in the registry whatever the table count was)."""
    return re.compile(re.escape(prefix) + r"_[1-9][0-9]*" + suffix_regex)


def number_of(prefix: str, name: str) -> int:
    """The table number of ``name``, one of ``prefix``'s names (the digits after
    ``<prefix>_``), so a prefix's tables sort as 1, 2 … 10, not 1, 10, 2."""
    digits = name[len(prefix) + 1 :].split("_", 1)[0]
    if not name.startswith(f"{prefix}_") or not digits.isdigit():
        raise ValueError(f"{name} is not a table of {prefix}")
    return int(digits)


def like_prefix(prefix: str) -> str:
    """A LIKE pattern that narrows a registry query to ``prefix``'s names (``_`` is a LIKE
    wildcard, so :func:`owned_pattern` makes the exact choice afterwards)."""
    return f"{prefix}_%"


__all__ = [
    "INDEX_SUFFIX",
    "TABLE_PREFIX_HELP",
    "TABLE_PREFIX_PATTERN",
    "index_of",
    "like_prefix",
    "number_of",
    "numbered",
    "owned_pattern",
]
