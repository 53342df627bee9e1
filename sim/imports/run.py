"""``dbsim import``'s work: the format looked up, the files read, parsed and written as one
capture bundle."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from sim.imports import FORMATS
from sim.imports.bundle import write_capture_bundle
from sim.imports.source import Dropped, ImportClock, Parsed, expand_paths, read_source

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class Imported:
    """What an import wrote: the bundle and what the user is told about it."""

    path: Path
    intervals: int
    entities: int
    dropped: Dropped


def parse_start(text: str | None) -> datetime | None:
    """``--start``: an ISO 8601 time (with a zone, or as the file's host wrote it)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"--start: {text!r} is not an ISO 8601 time (2024-01-15T10:00:00)"
        ) from None


def check_interval(value: float | None) -> float | None:
    if value is not None and not 0 < value <= 86_400:
        raise ConfigError(f"--interval: {value} s is not between 0 and 86400 seconds")
    return value


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(
            f"--name: {name!r} is not a bundle name (letters, digits, '.', '_', '-'; "
            "at most 64, starting with a letter or digit)"
        )
    return name


def default_name(format_name: str, first: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", first.name).strip(".-_")[:40]
    return f"{format_name}-{stem}" if stem else format_name


def importer(format_name: str) -> Any:
    entry = FORMATS.get(format_name)
    if entry is None:
        known = ", ".join(FORMATS)
        raise ConfigError(f"FORMAT: unknown format {format_name!r} (known: {known})")
    try:
        return importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        if exc.name != entry.module:
            raise
        raise ConfigError(f"FORMAT: {format_name} cannot be imported yet") from None


def run_import(
    format_name: str,
    paths: list[Path],
    out_dir: Path,
    name: str | None,
    given: ImportClock | None = None,
) -> Imported:
    module = importer(format_name)
    given = given or ImportClock()
    uses_clock = getattr(module, "USES_CLOCK", False)
    if not uses_clock and (given.start is not None or given.interval_s is not None):
        raise ConfigError(f"--start/--interval: {format_name} files carry their own times")
    bundle_name = check_name(name) if name else default_name(format_name, paths[0])
    files_to_read = expand_paths(paths, directories=getattr(module, "READS_DIRECTORIES", False))
    dropped = Dropped()
    sources = [read_source(path, dropped) for path in files_to_read]
    parsed: Parsed = module.parse(sources, given) if uses_clock else module.parse(sources)
    if not parsed.rows:
        raise sources[0].nothing_left("records")
    meta: dict[str, Any] = {
        "origin": "import",
        "format": format_name,
        "files": [source.describe() for source in sources],
        "interval_s": parsed.interval_s,
        "dropped": dropped.entries,
        "dropped_count": dropped.count,
        "means_only": parsed.means_only,
    }
    if parsed.timezone:
        meta["timezone"] = parsed.timezone
    path = write_capture_bundle(
        out_dir,
        bundle_name,
        meta,
        parsed.rows,
        started=parsed.started,
        host=parsed.host,
        messages=parsed.notes,
    )
    times = {row[0] for row in parsed.rows}
    entities = {(row[1], row[2]) for row in parsed.rows}
    return Imported(path, len(times), len(entities), dropped)
