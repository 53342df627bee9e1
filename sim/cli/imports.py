"""``dbsim import FORMAT FILE...``: files DBAs already have (iostat logs, sadf JSON, nfsiostat
output, mountstats snapshots, AWR reports, view snapshots, ONTAP statistics) as a capture
bundle that ``dbsim profile`` reads (docs/capture.md, "Importing files")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import app
from sim.imports import FORMATS

#: Dropped records named on stderr (all of them, up to 100, are in summary.json).
DROPPED_SHOWN = 5


def _formats_help() -> str:
    return "; ".join(f"{entry.name}: {entry.what}" for entry in FORMATS.values())


@app.command(name="import", help=f"Import files as a capture bundle. Formats: {_formats_help()}.")
def import_files(
    format_name: Annotated[str, typer.Argument(metavar="FORMAT", help="The files' format.")],
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE...", help="Files (for mountstats also directories)."),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Directory the bundle is made in.")
    ] = Path("captures"),
    name: Annotated[
        str | None, typer.Option("--name", help="Bundle name (default: FORMAT-FILE).")
    ] = None,
    start: Annotated[
        str | None,
        typer.Option("--start", help="nfsiostat: when it started (ISO 8601 time)."),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option("--interval", help="nfsiostat: its INTERVAL, in seconds."),
    ] = None,
) -> None:
    """Prints the new bundle's path; what was dropped goes to stderr."""
    from sim.imports.run import check_interval, parse_start, run_import
    from sim.imports.source import ImportClock

    given = ImportClock(parse_start(start), check_interval(interval))
    done = run_import(format_name, files, output, name, given)
    dropped = done.dropped
    sys.stderr.write(
        f"imported {done.intervals} intervals of {done.entities} entities from "
        f"{len(files)} path(s); dropped {dropped.count} record(s)\n"
    )
    for entry in dropped.entries[:DROPPED_SHOWN]:
        sys.stderr.write(f"dropped: {entry['file']}:{entry['line']}: {entry['why']}\n")
    if dropped.count > DROPPED_SHOWN:
        sys.stderr.write(
            f"dropped: … {dropped.count - DROPPED_SHOWN} more (summary.json capture.dropped)\n"
        )
    sys.stdout.write(f"{done.path}\n")
