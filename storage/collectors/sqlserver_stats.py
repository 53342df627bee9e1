"""The ``db`` collector of SQL Server: the database's file I/O and the server's I/O waits from
its dynamic management views, as rates per second.

Read each interval over one connection of the target's (cumulative since the server started;
the figures are differences of two readings):

* ``sys.dm_io_virtual_file_stats(DB_ID(), NULL)`` joined to ``sys.master_files``: reads,
  bytes read and read stall, writes, bytes written and write stall of each file of the target's
  database, as the entity ``<database>:file:<logical name>`` (``read_req_s``, ``read_kB_s``,
  ``read_ms``, ``write_req_s``, ``write_kB_s``, ``write_ms``; ``meta`` says ROWS or LOG);
* ``sys.dm_os_wait_stats``: ``PAGEIOLATCH_SH`` (a session waiting for a page being read),
  ``PAGEIOLATCH_EX`` (for a page it will change), ``WRITELOG`` (a commit waiting for the log
  flush) and ``IO_COMPLETION`` (other synchronous I/O: sorts spilling, file growth) as
  ``<database>:wait:<type>`` with ``waits_s`` and ``wait_ms``; these are the server's, every
  database's sessions together.

The database's entity (its name) carries the database I/O vocabulary
(storage.collectors.database_io), as ``dbsim import mssql-views`` makes it: the data files'
(ROWS) reads and writes as ``phys_read_req_s``, ``phys_read_kB_s``, ``phys_write_req_s``,
``phys_write_kB_s``, the log's (LOG) writes as ``log_write_req_s``, ``log_write_kB_s``,
``log_write_ms``; ``read_ms`` (data-file read stall per read); and ``blks_read_s``, the 8 KB
pages read from the data files (bytes read / 8192: a read-ahead request reads up to 64 pages
at once), which the analysis divides by the read statements. No commit count and no cache hit
share: the file statistics have neither. ``single_block_read_ms`` is PAGEIOLATCH_SH's mean
wait, a session's wait for one page from storage.

Resets: the server's start time (``sys.dm_os_sys_info.sqlserver_start_time``) moving is a
restart, a gap for every entity; ``DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR)`` zeroes the
wait statistics, seen as the sum of every wait type's time going down (a gap for the wait
entities and the database's); a file's counters going down (the database taken offline and
back) is a gap for that file and the database. Needs VIEW SERVER STATE (SQL Server 2022:
VIEW SERVER PERFORMANCE STATE); without it the collector stops naming that GRANT. Load: one
extra connection, three DMV queries per interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Target
from storage.collectors.view_counters import (
    KIND_DATABASE,
    WAIT_MARK,
    Reading,
    ViewCountersCollector,
    mean_ms,
    number,
)

SQLSERVER_INSTANCE_SQL = """SELECT DB_NAME() AS database_name,
       DATEDIFF(SECOND, '19700101', sqlserver_start_time) AS start_s
  FROM sys.dm_os_sys_info"""
SQLSERVER_FILES_SQL = """SELECT mf.name AS file_name, mf.type_desc AS file_type,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms
  FROM sys.dm_io_virtual_file_stats(DB_ID(), NULL) vfs
  JOIN sys.master_files mf
    ON mf.database_id = vfs.database_id AND mf.file_id = vfs.file_id"""
#: The four I/O waits, and every wait type's sum, whose fall tells a wait-statistics clear.
SQLSERVER_WAITS_SQL = """SELECT wait_type, waiting_tasks_count, wait_time_ms
  FROM sys.dm_os_wait_stats
 WHERE wait_type IN ('PAGEIOLATCH_SH', 'PAGEIOLATCH_EX', 'WRITELOG', 'IO_COMPLETION')
UNION ALL
SELECT 'ALL', SUM(waiting_tasks_count), SUM(wait_time_ms)
  FROM sys.dm_os_wait_stats"""

FILE_MARK = ":file:"
FILE_COUNTERS = (
    "num_of_reads", "num_of_bytes_read", "io_stall_read_ms",
    "num_of_writes", "num_of_bytes_written", "io_stall_write_ms",
)  # fmt: skip
#: ``sys.master_files.type_desc`` -> the prefix of the database entity's sums.
FILE_KINDS = {"ROWS": "data", "LOG": "log"}
WAIT_TYPES = ("PAGEIOLATCH_SH", "PAGEIOLATCH_EX", "WRITELOG", "IO_COMPLETION")
ALL_WAITS = "ALL"
PAGE_BYTES = 8192.0
#: Errors 297/300: "The user does not have permission …", "VIEW SERVER STATE permission was
#: denied …" (2022: VIEW SERVER PERFORMANCE STATE).
DENIED = ("VIEW SERVER STATE", "VIEW SERVER PERFORMANCE STATE", "VIEW DATABASE STATE")


class SqlServerStatsCollector(ViewCountersCollector):
    """SQL Server's file and wait statistics (see the module docstring); entities: the
    database, its files (``<database>:file:<name>``) and the I/O waits
    (``<database>:wait:<type>``)."""

    engine: ClassVar[str] = "SQL Server"

    def __init__(self, target: Target, capture: bool = False) -> None:
        if target.dialect != "sqlserver":
            raise CollectorError(f"collector db: SQL Server statistics on a {target.kind} target")
        super().__init__(target, capture)
        self._file_types: dict[str, str] = {}

    async def read(self) -> tuple[str, Reading]:
        server = (await self.rows("instance", SQLSERVER_INSTANCE_SQL))[0]
        name = str(server["database_name"])
        database: dict[str, float] = {"reset_server_start": number(server["start_s"])}
        reading: Reading = {name: database}
        for row in await self.rows("file_stats", SQLSERVER_FILES_SQL):
            kind = FILE_KINDS.get(str(row["file_type"]).upper())
            entity = f"{name}{FILE_MARK}{row['file_name']}"
            self._file_types[entity] = str(row["file_type"])
            counters = {c: number(row[c]) for c in FILE_COUNTERS}
            reading[entity] = counters
            if kind is not None:  # FILESTREAM and full-text files are neither
                for counter, value in counters.items():
                    key = f"{kind}_{counter}"
                    database[key] = database.get(key, 0.0) + value
        for row in await self.rows("wait_stats", SQLSERVER_WAITS_SQL):
            waits, ms = number(row["waiting_tasks_count"]), number(row["wait_time_ms"])
            wait_type = str(row["wait_type"])
            database[f"wait:{wait_type}:waits"], database[f"wait:{wait_type}:ms"] = waits, ms
            if wait_type != ALL_WAITS:
                # The sum of all waits rides along so that a clear shows as a fall here too.
                reading[f"{name}{WAIT_MARK}{wait_type}"] = {"waits": waits, "ms": ms}
        total = database.get(f"wait:{ALL_WAITS}:ms", 0.0)
        for entity, counters in reading.items():
            if WAIT_MARK in entity:
                counters["all_waits_ms"] = total
        return name, reading

    def figures(
        self, entity: str, before: Mapping[str, float], after: Mapping[str, float], seconds: float
    ) -> tuple[str, dict[str, float]]:
        def delta(name: str) -> float:
            return after.get(name, 0.0) - before.get(name, 0.0)

        if WAIT_MARK in entity:
            values = {"waits_s": delta("waits") / seconds}
            if (wait := mean_ms(delta("ms"), delta("waits"))) is not None:
                values["wait_ms"] = wait
            return "wait", values
        if FILE_MARK in entity:
            values = _file_figures(delta, "", seconds)
            return "file", values
        values = _file_figures(delta, "data_", seconds)
        out = {
            "phys_read_req_s": values["read_req_s"],
            "phys_read_kB_s": values["read_kB_s"],
            "phys_write_req_s": values["write_req_s"],
            "phys_write_kB_s": values["write_kB_s"],
            "blks_read_s": delta("data_num_of_bytes_read") / PAGE_BYTES / seconds,
        }
        if "read_ms" in values:
            out["read_ms"] = values["read_ms"]
        log = _file_figures(delta, "log_", seconds)
        out.update(
            log_write_req_s=log["write_req_s"], log_write_kB_s=log["write_kB_s"]
        )  # fmt: skip
        if "write_ms" in log:
            out["log_write_ms"] = log["write_ms"]
        reads = delta("wait:PAGEIOLATCH_SH:waits")
        out["single_block_read_s"] = reads / seconds
        if (wait := mean_ms(delta("wait:PAGEIOLATCH_SH:ms"), reads)) is not None:
            out["single_block_read_ms"] = wait
        return KIND_DATABASE, out

    def missing_grant(self, exc: BaseException) -> CollectorError | None:
        text = str(exc)
        if not any(words in text.upper() for words in DENIED):
            return None
        user = str(getattr(getattr(self.target, "settings", None), "user", "the target's login"))
        return CollectorError(
            f"collector db: {text}: the SQL Server statistics read sys.dm_io_virtual_file_stats "
            f"and sys.dm_os_wait_stats (GRANT VIEW SERVER STATE TO {user}; on SQL Server 2022, "
            f"GRANT VIEW SERVER PERFORMANCE STATE TO {user})"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": "sqlserver",
            "database": self.database,
            "files": dict(sorted(self._file_types.items())),
            "views": ["sys.dm_io_virtual_file_stats", "sys.dm_os_wait_stats"],
            "load": "one extra connection; three DMV queries per interval",
        }


def _file_figures(delta: Any, prefix: str, seconds: float) -> dict[str, float]:
    """Reads and writes of one file (``prefix`` "") or of a database's files of one kind."""
    reads, writes = delta(f"{prefix}num_of_reads"), delta(f"{prefix}num_of_writes")
    values = {
        "read_req_s": reads / seconds,
        "read_kB_s": delta(f"{prefix}num_of_bytes_read") / 1024.0 / seconds,
        "write_req_s": writes / seconds,
        "write_kB_s": delta(f"{prefix}num_of_bytes_written") / 1024.0 / seconds,
    }
    if (read := mean_ms(delta(f"{prefix}io_stall_read_ms"), reads)) is not None:
        values["read_ms"] = read
    if (write := mean_ms(delta(f"{prefix}io_stall_write_ms"), writes)) is not None:
        values["write_ms"] = write
    return values


def sqlserver_stats_collectors(target: Target, options: dict[str, Any]) -> list[Collector]:
    """SQL Server's statistics collector (the sqlserver dialect record's
    ``stats_collectors``)."""
    return [SqlServerStatsCollector(target, capture=bool(options.get("capture")))]
