"""``dbsim import mssql-views``: snapshots of SQL Server's ``sys.dm_io_virtual_file_stats``,
one row per database file per snapshot, as ``sqlcmd -W -s,`` prints :data:`QUERY` run every
N seconds (docs/capture.md, "SQL Server file statistics").

A database's files are summed per snapshot by type: data files (``ROWS``) and the log
(``LOG``; other types are left out). Figures, each a difference of two snapshots over the
seconds between them:

* ``phys_read_req_s`` = Δ``num_of_reads``, ``phys_read_kB_s`` = Δ``num_of_bytes_read`` /
  1024, ``read_ms`` = Δ``io_stall_read_ms`` / Δ``num_of_reads`` of the data files;
* ``phys_write_req_s``, ``phys_write_kB_s``, ``write_ms`` likewise from their writes;
* ``log_write_req_s``, ``log_write_kB_s``, ``log_write_ms`` from the log file's writes.

No commit count: the file statistics have none. The layout was written from Microsoft's
documentation of the view and of ``sqlcmd``; it was never checked against a real server's
output (no public sample was found, and no SQL Server runs here).
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.imports.source import Parsed, SourceFile
from sim.imports.views import Counters, ViewFormat, mean_ms, parse_views, per_second

QUERY = """SET NOCOUNT ON;
SELECT SYSDATETIMEOFFSET() AS ts, DB_NAME(vfs.database_id) AS database_name,
       mf.type_desc AS file_type,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms
  FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs
  JOIN sys.master_files AS mf
    ON mf.database_id = vfs.database_id AND mf.file_id = vfs.file_id;"""
"""Every database file's cumulative I/O (needs VIEW SERVER STATE)."""

COUNTERS = (
    "num_of_reads", "num_of_bytes_read", "io_stall_read_ms",
    "num_of_writes", "num_of_bytes_written", "io_stall_write_ms",
)  # fmt: skip
KINDS = {"ROWS": "data", "LOG": "log"}
RATES = {
    "phys_read_req_s": ("data_num_of_reads", 1.0),
    "phys_read_kB_s": ("data_num_of_bytes_read", 1 / 1024),
    "phys_write_req_s": ("data_num_of_writes", 1.0),
    "phys_write_kB_s": ("data_num_of_bytes_written", 1 / 1024),
    "log_write_req_s": ("log_num_of_writes", 1.0),
    "log_write_kB_s": ("log_num_of_bytes_written", 1 / 1024),
}


def by_kind(counters: Counters, row: Mapping[str, str]) -> Counters:
    """A file's counters keyed by its type (``data_num_of_reads``); other types: none."""
    kind = KINDS.get(row.get("file_type", "").upper())
    return {} if kind is None else {f"{kind}_{name}": value for name, value in counters.items()}


def figures(delta: Counters, seconds: float, row: Mapping[str, str]) -> dict[str, float]:
    out = per_second(delta, seconds, RATES)
    for figure, stall, count in (
        ("read_ms", "data_io_stall_read_ms", "data_num_of_reads"),
        ("write_ms", "data_io_stall_write_ms", "data_num_of_writes"),
        ("log_write_ms", "log_io_stall_write_ms", "log_num_of_writes"),
    ):
        if (ms := mean_ms(delta, stall, count)) is not None:
            out[figure] = ms
    return out


VIEW = ViewFormat(
    name="mssql-views",
    time_column="ts",
    entity_column="database_name",
    counters=COUNTERS,
    figures=figures,
    counters_of=by_kind,
)


def parse(files: list[SourceFile]) -> Parsed:
    return parse_views(VIEW, files)
