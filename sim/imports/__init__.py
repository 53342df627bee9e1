"""Importers: files DBAs already have, turned into capture bundles (``dbsim import``).

One module per format, listed once in :data:`FORMATS`. A module provides::

    READS_DIRECTORIES: bool             # optional: a directory argument is its files in name order
    def parse(files: list[SourceFile]) -> Parsed

and raises :class:`~sim.imports.source.ImportFileError` for a file it cannot import; what it
drops it tells ``SourceFile.drop`` (:mod:`sim.imports.source` has the rules and the helpers:
``number``, ``combine``). :func:`sim.imports.run.run_import` reads the files, calls ``parse``
and writes the bundle with :func:`sim.imports.bundle.write_capture_bundle`, the one writer.
The modules are imported only when their format is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportFormat:
    """One format ``dbsim import`` reads: its name on the command line, its module and what
    it is (``dbsim import --help`` lists them)."""

    name: str
    module: str
    what: str


FORMATS: dict[str, ImportFormat] = {
    entry.name: entry
    for entry in (
        ImportFormat("awr", "sim.imports.awr", "Oracle AWR report, text or HTML"),
        ImportFormat("iostat", "sim.imports.iostat", "sysstat iostat -x -t text output"),
        ImportFormat("sadf", "sim.imports.sadf", "sysstat sadf -j JSON of sar -d"),
        ImportFormat("nfsiostat", "sim.imports.nfsiostat", "nfs-utils nfsiostat INTERVAL output"),
        ImportFormat(
            "mountstats", "sim.imports.mountstats", "a series of /proc/self/mountstats snapshots"
        ),
        ImportFormat("pg-views", "sim.imports.pg_views", "PostgreSQL statistics views as CSV"),
        ImportFormat("mssql-views", "sim.imports.mssql_views", "SQL Server DMV snapshots as CSV"),
        ImportFormat("mariadb-views", "sim.imports.mariadb_views", "MariaDB status as CSV"),
        ImportFormat("ontap-rest", "sim.imports.ontap_rest", "ONTAP REST performance JSON"),
        ImportFormat(
            "ontap-qos", "sim.imports.ontap_qos", "ONTAP qos statistics volume characteristics"
        ),
    )
}
