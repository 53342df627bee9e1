"""Per-dialect SQL statement catalogues, kept beside each workload.

A workload's ``sql/`` folder holds ``default.sql`` plus optional overrides per dialect
(``<dialect>.sql``, one per registered :class:`~sim.dialects.SqlDialect`). Each file is a series
of named blocks::

    -- name: read
    SELECT COUNT(c2) FROM {table} WHERE custid > :lo AND custid < :hi

``{table}``-style fields are identifiers, filled in already quoted for the dialect;
``:name`` fields are bind parameters, rewritten into the driver's paramstyle. An override that
names a statement the default file lacks, or a statement missing for a dialect, fails when the
catalogue is loaded, never mid-run.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sim.dialects import dialect as dialect_record
from sim.dialects import dialects
from sim.errors import WorkloadError

if TYPE_CHECKING:  # SQLAlchemy costs ~0.1 s of every dbsim start; only statements compile with it
    from sqlalchemy.engine.interfaces import Dialect

#: Body of a default statement that every dialect must override (no portable SQL exists).
DIALECT_SPECIFIC = "!dialect-specific"
#: Body of a statement a dialect cannot express (its engine has no such access path): the
#: catalogue leaves it out, and a workload asked to run it says so (``Catalogue.has``).
UNSUPPORTED = "!unsupported"

_NAME_LINE = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
# A bind parameter ``:name`` that is not part of a PostgreSQL ``::type`` cast.
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
# Identifiers that may be spliced into SQL (quoted as well, but refused if odd): ASCII letters,
# digits and _, not starting with a digit. Checked with fullmatch: ``$`` would also accept a
# name that ends in a newline.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Statement:
    """A statement ready for one driver: SQL text and the order of its bind parameters."""

    name: str
    sql: str
    param_names: tuple[str, ...]


def refresh_page_counts(dialect_name: str, quoted_table: str) -> list[Statement]:
    """The statement that brings ``quoted_table``'s page counts up to date (none: they are)."""
    template = dialect_record(dialect_name).refresh_page_counts
    if not template:
        return []
    return [Statement("refresh_page_counts", template.format(table=quoted_table), ())]


def dialect_names() -> tuple[str, ...]:
    """Every registered SQL dialect's name, sorted."""
    return tuple(sorted(dialects()))


def sqlalchemy_dialect(dialect: str) -> Dialect:
    """SQLAlchemy's dialect object for quoting identifiers and compiling DDL."""
    return dialect_record(dialect).sqlalchemy()


def identifier_problem(dialect: str, name: str) -> str | None:
    """Why ``name`` may not be an identifier in ``dialect`` (None when it may). The scenario
    checks every name it makes (``sql_identifiers()`` of its settings and parameters) with
    this before anything connects; :func:`quote_identifier` checks again at render time."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        return (
            f"{name!r} is not allowed in a SQL name: use ASCII letters, digits and _, "
            "not starting with a digit"
        )
    known = dialects()
    record = known.get(dialect)
    limit = (
        record.max_identifier_chars
        if record is not None
        else min(r.max_identifier_chars for r in known.values())
    )
    if len(name) > limit:
        return f"{name!r} has {len(name)} characters; a {dialect} name takes at most {limit}"
    return None


def quote_identifier(dialect: str, name: str) -> str:
    """Validate and quote an identifier for ``dialect``; nothing unquoted reaches SQL."""
    problem = identifier_problem(dialect, name)
    if problem is not None:
        raise WorkloadError(f"identifier {problem}")
    return sqlalchemy_dialect(dialect).identifier_preparer.quote(name)


def parse_blocks(text: str, source: str) -> dict[str, str]:
    """Split a ``-- name:`` file into ``{name: sql}``."""
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        match = _NAME_LINE.match(line.strip())
        if match:
            current = match.group(1)
            if current in blocks:
                raise WorkloadError(f"{source}:{lineno}: statement {current!r} defined twice")
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
        elif line.strip() and not line.strip().startswith("--"):
            raise WorkloadError(f"{source}:{lineno}: SQL before the first '-- name:' line")
    result = {name: "\n".join(lines).strip().rstrip(";").strip() for name, lines in blocks.items()}
    for name, sql in result.items():
        if not sql:
            raise WorkloadError(f"{source}: statement {name!r} is empty")
    return result


def to_paramstyle(sql: str, paramstyle: str) -> tuple[str, tuple[str, ...]]:
    """Rewrite ``:name`` binds into ``paramstyle``; return the SQL and the parameter order."""
    order: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if paramstyle == "named":
            if name not in order:
                order.append(name)
            return f":{name}"
        order.append(name)
        if paramstyle == "qmark":
            return "?"
        if paramstyle == "numeric_dollar":
            return f"${len(order)}"
        if paramstyle == "numeric":
            return f":{len(order)}"
        if paramstyle == "format":
            return "%s"
        raise WorkloadError(f"unsupported paramstyle {paramstyle!r}")

    if paramstyle == "format":
        # The driver formats the text with ``%``: a literal percent sign is written twice.
        sql = sql.replace("%", "%%")
    return _BIND.sub(replace, sql), tuple(order)


class Catalogue:
    """The statements of one workload for one dialect."""

    def __init__(self, statements: dict[str, str], dialect: str, source: str) -> None:
        self.statements = statements
        self.dialect = dialect
        self.source = source

    @classmethod
    def load(cls, sql_dir: Path, dialect: str, required: frozenset[str] = frozenset()) -> Catalogue:
        dialect_record(dialect)  # an unknown dialect fails here, naming the known ones
        default_path = sql_dir / "default.sql"
        statements = parse_blocks(default_path.read_text(encoding="utf-8"), str(default_path))
        override_path = sql_dir / f"{dialect}.sql"
        if override_path.exists():
            overrides = parse_blocks(override_path.read_text(encoding="utf-8"), str(override_path))
            unknown = sorted(set(overrides) - set(statements))
            if unknown:
                raise WorkloadError(
                    f"{override_path}: overrides unknown statement(s) {', '.join(unknown)}; "
                    f"add them to default.sql first"
                )
            statements.update(overrides)
        missing = sorted(
            (required - set(statements))
            | {n for n, sql in statements.items() if sql == DIALECT_SPECIFIC}
        )
        if missing:
            raise WorkloadError(f"{sql_dir}: no {dialect} statement for {', '.join(missing)}")
        kept = {n: sql for n, sql in statements.items() if sql != UNSUPPORTED}
        return cls(kept, dialect, str(sql_dir))

    def has(self, name: str) -> bool:
        """Whether this dialect has statement ``name`` (not marked :data:`UNSUPPORTED`)."""
        return name in self.statements

    def template_fields(self, name: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.text(name)) if f}

    def text(self, name: str) -> str:
        try:
            return self.statements[name]
        except KeyError:
            raise WorkloadError(f"{self.source}: unknown statement {name!r}") from None

    def render(self, name: str, paramstyle: str, **identifiers: str) -> Statement:
        """The statement with identifiers quoted in and binds in ``paramstyle``."""
        quoted = {key: quote_identifier(self.dialect, value) for key, value in identifiers.items()}
        try:
            sql = self.text(name).format(**quoted)
        except KeyError as exc:
            raise WorkloadError(
                f"{self.source}: statement {name!r} needs identifier {exc}"
            ) from None
        sql, order = to_paramstyle(sql, paramstyle)
        return Statement(name=name, sql=sql, param_names=order)
