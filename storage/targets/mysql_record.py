"""MariaDB and MySQL's settings and dialect record (``kind: mysql``), registered here apart
from the driver module (storage.targets.mysql) so the registry knows the kind without importing
asyncmy: every dbsim start that validates or runs a scenario reads every kind's record.

The record names the ``db`` collector of InnoDB's statistics (storage.collectors.innodb), the
ownership marker (a table comment) and InnoDB's page facts: at least two records share every
16 KiB page (a record may take at most about half a page, 8,126 bytes), so no row size keeps
one row per page; SLOB-like rows are padded to ~7 KiB so that exactly two share each page
(``min_rows_per_page = 2``; ``dbsim verify`` checks it from InnoDB's own page counts).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from sim.dialects import PageFit, ServerCache, SqlDialect
from sim.errors import ConfigError
from sim.protocols import Collector, Target
from sim.registry import TargetEntry, register_target
from sim.secrets import SecretRef
from storage.collectors.innodb import InnodbStatsCollector
from storage.targets.first_contact import MYSQL as FIRST_CONTACT
from storage.targets.settings import _Settings

INNODB_PAGE_BYTES = 16384
#: A SLOB row padded to this share of a page: above a third (three never fit) and below the
#: half InnoDB allows a record, so exactly two rows share each page.
ROW_SHARE_OF_PAGE = 7 / 16


def mysql_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    """A padding column, filled by the loader, that brings the row to ~7/16 of a page."""
    pad = max(int(page_bytes * ROW_SHARE_OF_PAGE) - row_bytes, 0)
    return PageFit(
        table_kwargs={"mysql_engine": "InnoDB", "mysql_charset": "latin1"},
        pad_column="pad",
        pad_chars=pad,
    )


def mysql_stats_collectors(target: Target, options: dict[str, Any]) -> list[Collector]:
    """InnoDB's counters (``options["capture"]``: a live capture's, sim.capture)."""
    return [InnodbStatsCollector(target, capture=bool(options.get("capture")))]


MYSQL_DIALECT = SqlDialect(
    name="mysql",
    sqlalchemy_module="sqlalchemy.dialects.mysql",
    sqlglot="mysql",
    max_identifier_chars=64,
    marker="table_option",
    page_bytes=INNODB_PAGE_BYTES,
    one_row_per_page=mysql_page_fit,
    min_rows_per_page=2,
    refresh_page_counts="ANALYZE TABLE {table}",
    stats_collectors=mysql_stats_collectors,
    cache=ServerCache(
        "innodb_buffer_pool_size",
        "SELECT @@innodb_buffer_pool_size",
        direct_query="SELECT @@innodb_flush_method IN ('O_DIRECT', 'O_DIRECT_NO_FSYNC')",
    ),
    cache_recipe=(
        "innodb_buffer_pool_size = {cap_mb}M with innodb_flush_method = O_DIRECT "
        "(InnoDB then reads its files past the host's page cache)"
    ),
    first_contact=FIRST_CONTACT,
)


class MysqlSettings(SecretRef, _Settings):
    """MariaDB or MySQL through asyncmy."""

    kind: Literal["mysql"] = "mysql"
    sql_dialect_of_kind: ClassVar[str | None] = "mysql"
    host: str = "127.0.0.1"
    port: int = Field(default=3306, ge=1, le=65535)
    database: str = "test"
    user: str = "root"
    connect_timeout_s: float = Field(default=10.0, gt=0)
    data_directory: Path | None = None


def _build(settings: BaseModel) -> Target:
    """The target, from the driver module (imported only when the kind is used; by name, as
    the other kinds' factories do: the driver module imports this one)."""
    mysql = importlib.import_module("storage.targets.mysql")
    if mysql.MISSING_DRIVER is not None:
        raise ConfigError(mysql.MISSING_DRIVER)
    assert isinstance(settings, MysqlSettings)
    return mysql.MysqlTarget(settings)


register_target(
    TargetEntry("mysql", MysqlSettings, _build, "MariaDB/MySQL via asyncmy", MYSQL_DIALECT)
)
