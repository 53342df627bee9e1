"""``dbsim import mariadb-views``: snapshots of MariaDB's (and MySQL's) global status
counters, one row per snapshot, as ``mysql --batch`` prints :data:`QUERY` (tab-separated,
with a header) run every N seconds (docs/capture.md, "MariaDB status").

Figures, each a difference of two snapshots over the seconds between them (the names are
``SHOW GLOBAL STATUS``'s):

* ``phys_read_req_s`` = Δ``Innodb_data_reads``, ``phys_read_kB_s`` = Δ``Innodb_data_read``
  / 1024: InnoDB's reads of its data files (the operating system's cache may serve them);
* ``phys_write_req_s`` = Δ``Innodb_data_writes``, ``phys_write_kB_s`` =
  Δ``Innodb_data_written`` / 1024: its writes to data files (doublewrite included);
* ``log_write_req_s`` = Δ``Innodb_log_writes``, ``log_write_kB_s`` =
  Δ``Innodb_os_log_written`` / 1024: redo log writes;
* ``commits_s`` = Δ``Handler_commit``: commits the storage engines made, read-only
  transactions' included (``Com_commit`` counts only explicit COMMIT statements).

``Uptime`` going down (a restart) or any counter going down (``FLUSH STATUS``) is a reset.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.imports.source import Parsed, SourceFile
from sim.imports.views import Counters, ViewFormat, parse_views, per_second

STATUS = (
    "innodb_data_reads", "innodb_data_read", "innodb_data_writes", "innodb_data_written",
    "innodb_log_writes", "innodb_os_log_written", "handler_commit", "uptime",
)  # fmt: skip
QUERY = """SELECT NOW(6) AS ts, @@hostname AS server,
       SUM(IF(VARIABLE_NAME = 'INNODB_DATA_READS', VARIABLE_VALUE, 0)) AS innodb_data_reads,
       SUM(IF(VARIABLE_NAME = 'INNODB_DATA_READ', VARIABLE_VALUE, 0)) AS innodb_data_read,
       SUM(IF(VARIABLE_NAME = 'INNODB_DATA_WRITES', VARIABLE_VALUE, 0)) AS innodb_data_writes,
       SUM(IF(VARIABLE_NAME = 'INNODB_DATA_WRITTEN', VARIABLE_VALUE, 0)) AS innodb_data_written,
       SUM(IF(VARIABLE_NAME = 'INNODB_LOG_WRITES', VARIABLE_VALUE, 0)) AS innodb_log_writes,
       SUM(IF(VARIABLE_NAME = 'INNODB_OS_LOG_WRITTEN', VARIABLE_VALUE, 0)) AS innodb_os_log_written,
       SUM(IF(VARIABLE_NAME = 'HANDLER_COMMIT', VARIABLE_VALUE, 0)) AS handler_commit,
       SUM(IF(VARIABLE_NAME = 'UPTIME', VARIABLE_VALUE, 0)) AS uptime
  FROM information_schema.GLOBAL_STATUS"""
"""One row of the server's cumulative counters (checked on MariaDB 10.11, this machine's;
MySQL 8.0 moved the status variables to ``performance_schema.global_status``)."""

RATES = {
    "phys_read_req_s": ("innodb_data_reads", 1.0),
    "phys_read_kB_s": ("innodb_data_read", 1 / 1024),
    "phys_write_req_s": ("innodb_data_writes", 1.0),
    "phys_write_kB_s": ("innodb_data_written", 1 / 1024),
    "log_write_req_s": ("innodb_log_writes", 1.0),
    "log_write_kB_s": ("innodb_os_log_written", 1 / 1024),
    "commits_s": ("handler_commit", 1.0),
}


def figures(delta: Counters, seconds: float, row: Mapping[str, str]) -> dict[str, float]:
    return per_second(delta, seconds, RATES)


VIEW = ViewFormat(
    name="mariadb-views",
    time_column="ts",
    entity_column="server",
    counters=("innodb_data_reads", "innodb_data_read", "uptime"),
    optional=tuple(
        name for name in STATUS if name not in ("innodb_data_reads", "innodb_data_read", "uptime")
    ),
    figures=figures,
)


def parse(files: list[SourceFile]) -> Parsed:
    return parse_views(VIEW, files)
