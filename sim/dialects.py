"""SQL dialect records: what dbsim must know about a database's SQL, one record per dialect.

A SQL target's module builds one :class:`SqlDialect` and registers it with its target entry
(``sim.registry.TargetEntry.dialect``); nothing else in dbsim lists dialects. Workloads,
the table registry (``workloads.ownership``), the scenario's identifier checks, the ``db``
collector and the contract tests all ask the record:

* ``sqlalchemy`` / ``sqlglot``: the SQLAlchemy dialect that quotes names and compiles DDL,
  and the sqlglot dialect the contract tests parse the statements with;
* ``max_identifier_chars`` and ``folds_unquoted``: how long a name may be and how the
  catalogue stores a name that needed no quotes (Oracle upper-cases it);
* ``drop_suffix``: what DROP TABLE needs after the name (Oracle: ``PURGE``);
* ``marker``: where dbsim writes its ownership token (a table comment, the CREATE text …);
* ``one_row_per_page``: the table options, padding and after-load statements that keep a
  large row alone on its page (SLOB's one row per block), and ``min_rows_per_page``, the
  fewest rows an engine keeps together on a page however large they are; and
  ``refresh_page_counts``, what brings the page counts ``verify`` reads up to date;
* ``stats_collectors``: the ``db`` collector's sampling of the database's own I/O statistics
  (the only place that says which collectors a dialect has: ``storage.collectors.database``
  asks the record; None: the dialect has none yet);
* ``cache``: the server's own data cache (shared_buffers, the InnoDB buffer pool, the SGA's
  buffer cache …) by name and the one-value query giving its bytes, which
  :mod:`sim.core.cache` holds the data size against before a load; with the queries telling
  whether the server reads its files past the host's page cache and which process serves the
  connection (whose memory cgroup bounds that page cache);
* ``first_contact``: what ``dbsim check`` asks beyond ``validate --connect``'s probe (its
  own privileges with their GRANTs, how the page counts prove a row per block, where physical
  reads come from when the engine keeps no statistics): :class:`FirstContact`;
* ``cache_recipe``: how to make the storage do the work on a test box the user controls (a
  small server cache, direct I/O, a memory-capped server), offered by the cache warning.

This module is a published interface: plug-ins (``storage/``, ``workloads/``) may import it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from sim.errors import WorkloadError

if TYPE_CHECKING:
    from sqlalchemy import Column
    from sqlalchemy.engine.interfaces import Dialect

    from sim.protocols import Collector, Target

#: Where the ownership token goes: ``COMMENT ON TABLE`` after the CREATE, a comment inside the
#: CREATE text (kept by the catalogue), a ``COMMENT = '…'`` table option, or nowhere (the
#: identity recorded in the creating transaction must do).
Marker = Literal["comment_on_table", "create_text", "table_option", "none"]

#: What a workload declares it needs from a target: ``"sql"`` (any target with a dialect
#: record) or one target kind by name (``"filetree"``).
NEEDS_SQL = "sql"


@dataclass(frozen=True)
class PageFit:
    """How a table keeps one large row per page on one dialect.

    ``table_kwargs`` go to SQLAlchemy's ``Table`` (``postgresql_with``, ``mysql_engine`` …);
    ``columns`` are extra columns the server fills (a fixed-width filler with a default);
    ``pad_column``/``pad_chars``: a text column the loader fills with that many characters;
    ``create_suffix`` is appended to CREATE TABLE (options SQLAlchemy has no keyword for);
    ``after_load`` are (name, statement) pairs (``{table}`` is the quoted name) run once the
    rows are in.
    """

    table_kwargs: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[Column[Any], ...] = ()
    pad_column: str | None = None
    pad_chars: int = 0
    create_suffix: str = ""
    after_load: tuple[tuple[str, str], ...] = ()


#: ``one_row_per_page(row_bytes, page_bytes) -> PageFit``: ``row_bytes`` is the row's own data.
PageFitter = Callable[[int, int], PageFit]
#: ``stats_collectors(target, options) -> collectors`` for the ``db`` source.
StatsCollectors = Callable[["Target", dict[str, Any]], list["Collector"]]


def _no_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    return PageFit()


@dataclass(frozen=True)
class ServerCache:
    """A server's data cache: its name for messages and the query (one row, one column)
    giving its size in bytes.

    ``direct_query`` (one value, true or false; None: the dialect cannot tell) says whether
    the server reads its data files past the host's page cache (O_DIRECT), so only its own
    cache counts; ``pid_query`` gives the server process serving the connection, whose memory
    cgroup, on this host, bounds the page cache that holds its files."""

    name: str
    query: str
    direct_query: str | None = None
    pid_query: str | None = None


@dataclass(frozen=True)
class ContactPrivilege:
    """A privilege ``dbsim check`` asks of the server: ``what`` (for its line), ``needed_for``,
    ``held`` (one value, non-zero when held; an error counts as not held) and ``grant``
    (``{user}`` … filled from :attr:`FirstContact.names`); ``required`` False: dbsim runs
    without it and says what it loses."""

    what: str
    needed_for: str
    held: str
    grant: str
    required: bool = True


@dataclass(frozen=True)
class FirstContact:
    """What ``dbsim check`` (sim.check) asks of one dialect beyond ``validate --connect``.

    ``names``: placeholder → one-value query for the GRANTs; ``page_proof``: how the page
    counts are read, for the line; ``process_reads``: the engine runs inside dbsim's process,
    so its physical reads are the process's own read calls (SQLite); ``own_cache_bytes``: the
    engine's page cache from the target's settings when the record has no ``cache`` query;
    ``no_privileges``: the line when there is no privilege to ask at all.
    """

    names: Mapping[str, str]
    privileges: tuple[ContactPrivilege, ...] = ()
    page_proof: str = ""
    process_reads: bool = False
    own_cache_bytes: Callable[[Any], int | None] | None = None
    no_privileges: str = ""


@dataclass(frozen=True)
class SqlDialect:
    """Everything dbsim needs to know about one SQL dialect (see the module docstring)."""

    #: The key of per-dialect files (``sql/<name>.sql``) and of ``Target.dialect``.
    name: str
    #: Module path of the SQLAlchemy dialect package (``sqlalchemy.dialects.postgresql``).
    sqlalchemy_module: str
    #: sqlglot's name for the dialect (``postgres``, ``tsql``, ``mysql`` …).
    sqlglot: str
    #: The longest identifier the dialect takes (characters; dbsim's names are ASCII).
    max_identifier_chars: int
    #: How the catalogue stores a name written without quotes: ``upper`` (Oracle) or as
    #: written (SQLAlchemy quotes every name that would otherwise be folded).
    folds_unquoted: Literal["upper", "as_written"] = "as_written"
    drop_suffix: str = ""
    marker: Marker = "comment_on_table"
    #: Page size when the engine fixes it (InnoDB: 16 KiB); None: the target's settings say.
    page_bytes: int | None = None
    one_row_per_page: PageFitter = _no_page_fit
    min_rows_per_page: int = 1
    #: Run (``{table}`` is the quoted name) before reading a table's page counts, where they
    #: come from statistics that may lag the data (InnoDB: ``ANALYZE TABLE``); "" for none.
    refresh_page_counts: str = ""
    stats_collectors: StatsCollectors | None = None
    #: None when the engine keeps no cache worth counting (SQLite reads through the host's).
    cache: ServerCache | None = None
    #: Statements run once after a drop that removed the last table dbsim's registry records,
    #: so the space they took goes back to the file system (SQLite keeps freed pages in the
    #: file: VACUUM, then a WAL checkpoint that truncates the log; VACUUM renumbers root pages,
    #: the identity of tables still registered, so not before the last); () where dropping
    #: frees the space itself.
    after_drop: tuple[str, ...] = ()
    #: The settings that make the storage do the work with caches of at most ``{cap_mb}`` MiB
    #: in all (``{quarter_mb}``: a quarter of it), one clause for the cache warning
    #: (sim.core.cache); "" when the dialect has none to offer.
    cache_recipe: str = ""
    #: ``dbsim check``'s record (None: the dialect has none, and check refuses the target).
    first_contact: FirstContact | None = None

    def sqlalchemy(self) -> Dialect:
        """SQLAlchemy's dialect object (built once per dialect)."""
        return _sqlalchemy_dialect(self.sqlalchemy_module)


@cache
def _sqlalchemy_dialect(module: str) -> Dialect:
    dialect: Dialect = importlib.import_module(module).dialect()
    return dialect


def dialects() -> dict[str, SqlDialect]:
    """Every registered dialect record by name."""
    from sim import registry

    found: dict[str, SqlDialect] = {}
    for entry in registry.targets().values():
        if entry.dialect is not None:
            found.setdefault(entry.dialect.name, entry.dialect)
    return found


def dialect(name: str) -> SqlDialect:
    """The record of dialect ``name``; WorkloadError naming the known ones otherwise."""
    known = dialects()
    if name not in known:
        raise WorkloadError(f"unknown SQL dialect {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def dialect_of(target: Target) -> SqlDialect | None:
    """The record of ``target``'s dialect, None for a target that takes no SQL."""
    return dialects().get(getattr(target, "dialect", ""))


def runs_on(needs: str, kind: str, sql_dialect: str | None) -> bool:
    """Whether a workload that ``needs`` this runs on a target of ``kind`` whose settings
    name ``sql_dialect`` (None: not a SQL target)."""
    if needs == NEEDS_SQL:
        return sql_dialect is not None and sql_dialect in dialects()
    return needs == kind


def needs_text(needs: str) -> str:
    """``needs`` for a message: ``a SQL target (postgres, sqlite …)`` or ``a filetree target``."""
    if needs == NEEDS_SQL:
        return f"a SQL target ({', '.join(sorted(dialects()))})"
    return f"a {needs} target"
