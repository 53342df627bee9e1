"""What every importer shares: the files it reads, the one error it raises and the list of
what it dropped.

Two ways a file can be wrong, and two outcomes (docs/capture.md, "Importing files"):

* the file is not of the format at all, or a part every record depends on is unusable (no
  header, a header without the columns the figures need): :class:`ImportFileError`, one line
  ``FILE:LINE: FIELD: what is wrong``, exit 2, no bundle;
* a record is damaged (a number that is not one, a line cut short, a row with a column
  missing, a time that goes backwards): the record is dropped and listed with its file, line
  and why (``summary.capture.dropped``), and the rest is imported. A file where nothing is
  left is refused, naming the first line dropped.

A figure is never guessed: a record that cannot be read whole gives no figures at all.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sim import safeio
from sim.errors import ConfigError

#: The largest file an importer reads (a day of 1-second ``iostat -x`` for 20 devices is
#: about 180 MB).
MAX_IMPORT_FILE_BYTES = 1 << 30
#: Dropped records listed in the summary (the count goes on past it).
MAX_DROPPED_LISTED = 100

Row = tuple[datetime, str, str, Mapping[str, float]]
"""One interval's figures for one entity: the wall-clock time at the END of the interval
they cover, the source (``block``, ``nfs`` …), the entity and the figures."""


class ImportFileError(ConfigError):
    """A file that cannot be imported: exit 2 with one line naming the file, the line (0 when
    the problem is the file as a whole) and the field."""

    def __init__(self, path: str, line: int, field_name: str, message: str) -> None:
        self.path, self.line, self.field = path, line, field_name
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {field_name}: {message}")


@dataclass
class Dropped:
    """The records an import left out, each with its file, line and why."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0

    def add(self, path: str, line: int, why: str) -> None:
        self.count += 1
        if len(self.entries) < MAX_DROPPED_LISTED:
            self.entries.append({"file": path, "line": line, "why": why})

    def first_from(self, path: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["file"] == path), None)


@dataclass
class SourceFile:
    """One input file, read whole and bounded: its text split into lines (line ``n`` is
    ``lines[n - 1]``), its SHA-256, and where the importer reports what it dropped."""

    path: str
    text: str
    sha256: str
    dropped: Dropped

    @property
    def lines(self) -> list[str]:
        cached: list[str] | None = self.__dict__.get("_lines")
        if cached is None:
            # Lines as editors and grep -n count them: only \n (and \r\n) end a line;
            # str.splitlines() would also split at form feeds (AWR's page breaks), \x1c-\x1e
            # and \u2028, and every line number after one would be off.
            cached = [line.removesuffix("\r") for line in self.text.split("\n")]
            if cached and cached[-1] == "" and self.text.endswith("\n"):
                cached.pop()
            if self.text == "":
                cached = []
            self.__dict__["_lines"] = cached
        return cached

    def drop(self, line: int, why: str) -> None:
        self.dropped.add(self.path, line, why)

    def refuse(self, line: int, field_name: str, message: str) -> ImportFileError:
        return ImportFileError(self.path, line, field_name, message)

    def nothing_left(self, what: str) -> ImportFileError:
        """The refusal of a file whose every record was dropped (or that held none)."""
        first = self.dropped.first_from(self.path)
        if first is None:
            return self.refuse(0, what, "no record found in the file")
        return self.refuse(first["line"], what, f"no whole record left ({first['why']})")

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "lines": len(self.lines)}


@dataclass(frozen=True)
class ImportClock:
    """``--start`` and ``--interval``: when a file that prints no time (nfsiostat) began,
    and the seconds between its reports."""

    start: datetime | None = None
    interval_s: float | None = None


@dataclass
class Parsed:
    """What an importer read from its files.

    ``interval_s``: the seconds between samples as the file says them (``iostat 60``: 60;
    AWR: the snapshot interval). ``started``: when the first interval began (the reading the
    first rates are taken from); None: the first row's time minus ``interval_s``.
    ``timezone``: None lets the writer say it from the times (aware or naive).
    ``means_only``: what the file gives only means for. ``host``: what the file says about the
    machine it was written on (hostname, kernel, CPUs)."""

    rows: list[Row]
    interval_s: float | None
    means_only: list[str] = field(default_factory=list)
    started: datetime | None = None
    timezone: str | None = None
    host: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _decode(data: bytes, where: str) -> str:
    """UTF-8 (a BOM allowed), or UTF-16 with its BOM (Windows tools write it)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-16 text (byte {exc.start})") from None
    return safeio.decode_utf8(data.removeprefix(b"\xef\xbb\xbf"), where=where)


def read_source(path: Path, dropped: Dropped) -> SourceFile:
    """``path`` read as an input file (a regular file, bounded; ConfigError otherwise)."""
    data = safeio.read_bytes(path, what="file to import", max_bytes=MAX_IMPORT_FILE_BYTES)
    text = _decode(data, str(path))
    return SourceFile(str(path), text, hashlib.sha256(data).hexdigest(), dropped)


def expand_paths(paths: list[Path], *, directories: bool) -> list[Path]:
    """The files named: each path itself, or (``directories``) a directory's regular files
    in name order, hidden ones left out. Anything else is refused by the reader."""
    out: list[Path] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            out.append(path)  # the reader names what is wrong with it
            continue
        if not stat.S_ISDIR(info.st_mode):
            out.append(path)
            continue
        if not directories:
            raise ConfigError(f"{path}: a directory; this format is read from files")
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        found = [path / n for n in names if _regular(path / n)]
        if not found:
            raise ConfigError(f"{path}: no file in this directory")
        out.extend(found)
    return out


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def source_of(role: str) -> str:
    """The source that plays ``role`` (``sim.registry.ROLE_DEVICE`` …): an importer writes
    its rows under the name the live collector of that role writes."""
    from sim import registry

    found = registry.collector_with_role(role)
    if found is None:
        raise RuntimeError(f"no collector registered for the role {role!r}")
    return found


def number(text: str) -> float | None:
    """``text`` as a finite number, or None (``nan``, ``inf``, ``1,5``, ``12x``, too long)."""
    if len(text) > safeio.MAX_NUMBER_CHARS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def combine(files: list[SourceFile], parse_one: Callable[[SourceFile], Parsed]) -> Parsed:
    """Several files of one format as one capture: each parsed alone, then put in time order.
    A file with no whole record, files that overlap in time and files whose times differ in
    kind (with a zone, without) are refused."""
    parts: list[tuple[SourceFile, Parsed]] = []
    for source in files:
        part = parse_one(source)
        if not part.rows:
            raise source.nothing_left("records")
        parts.append((source, part))
    parts.sort(key=lambda item: min(row[0] for row in item[1].rows))
    merged = Parsed(rows=[], interval_s=parts[0][1].interval_s, started=parts[0][1].started)
    merged.timezone, merged.host = parts[0][1].timezone, parts[0][1].host
    previous: tuple[SourceFile, datetime] | None = None
    for source, part in parts:
        first = min(row[0] for row in part.rows)
        if previous is not None:
            _check_follows(previous, source, first)
        previous = (source, max(row[0] for row in part.rows))
        merged.rows.extend(part.rows)
        for seen, mine in ((merged.means_only, part.means_only), (merged.notes, part.notes)):
            seen.extend(item for item in mine if item not in seen)
        if part.interval_s != merged.interval_s:
            merged.notes.append(
                f"{source.path}: samples every {part.interval_s} s, "
                f"{parts[0][0].path}: every {merged.interval_s} s"
            )
    return merged


def _check_follows(
    previous: tuple[SourceFile, datetime], source: SourceFile, first: datetime
) -> None:
    before, last = previous
    if (first.utcoffset() is None) != (last.utcoffset() is None):
        raise source.refuse(
            0, "time", f"times with and without a zone; {before.path}'s are not alike"
        )
    if first <= last:
        raise source.refuse(
            0,
            "time",
            f"starts at {first.isoformat()}, not after the end of {before.path} "
            f"({last.isoformat()}): the files overlap",
        )


class Timeline:
    """Rows record by record, in time order. A record whose time is not after the one before
    makes both doubtful (which of the two times is wrong, the file cannot say): it is
    dropped, and the rows of the one before are taken back and listed as dropped too."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.rows: list[Row] = []
        self._last: tuple[datetime, int, int] | None = None  # time, line, first row index
        self._aware: bool | None = None

    def accept(self, moment: datetime, line: int) -> bool:
        """Whether the record at ``line`` may add rows (it then goes after the last one)."""
        if not same_kind(self, moment):
            self.source.drop(line, "a time with a zone where the others have none, or without")
            return False
        last = self._last
        if last is not None and moment <= last[0]:
            self.source.drop(line, f"time {moment} is not after the record before ({last[0]})")
            if len(self.rows) > last[2]:
                del self.rows[last[2] :]
                self.source.drop(last[1], "figures taken back: the record after it goes back")
            self._last = (last[0], last[1], len(self.rows))
            return False
        self._last = (moment, line, len(self.rows))
        return True


def same_kind(holder: Any, moment: datetime) -> bool:
    """Whether ``moment`` has a zone as the first time ``holder`` saw (``holder._aware``):
    times with and without one cannot be put in one order."""
    aware = moment.utcoffset() is not None
    if holder._aware is None:
        holder._aware = aware
    return bool(holder._aware == aware)
