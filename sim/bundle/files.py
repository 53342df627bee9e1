"""How the bundle's files are written so that none is ever torn: JSON and YAML by a temporary
file and a rename (:func:`atomic_write`), time series and the histogram log appended in whole
lines and cut back to the last whole line when a write fails (:class:`AppendFile`,
:class:`AppendCsv`); and the run directory itself, made fresh, never reused."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sim.errors import OutputDirectoryError
from sim.nofollow import replace_file


def os_reason(exc: OSError) -> str:
    """``ENOSPC (No space left on device)``: the errno's name for searching, its meaning for
    reading (the same shape as the file-tree target's messages)."""
    name = errno.errorcode.get(exc.errno) if isinstance(exc.errno, int) else None
    reason = exc.strerror or str(exc)
    return f"{name} ({reason})" if name else reason


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: never a torn file.

    On any failure (a full disk mid-write, a directory made read-only) the previous ``path``
    is untouched, because the rename never happened, and the temporary file is removed, so a
    full disk is not left fuller and the bundle holds no stray ``.tmp``. The error propagates.

    The temporary file is created with ``O_EXCL|O_NOFOLLOW`` (:mod:`sim.nofollow`): a stale
    one is removed only if it is a regular file, and a link planted at that name is refused
    (:class:`~sim.nofollow.UnsafeEntryError`, an OSError) instead of written through. ``path``
    itself is replaced only when it is a regular file with one link (or free): a device, a
    FIFO, a socket, a link or a directory there is refused the same way and left as it was.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    replace_file(str(path), text.encode("utf-8"), str(tmp))


def iso(ts: float | None) -> str | None:
    return (
        None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    )


def new_bundle_dir(directory: Path, name: str, now: float | None = None) -> Path:
    """Create a fresh run directory; never reuses (and so never overwrites) an existing one."""
    stamp = datetime.fromtimestamp(now or time.time()).strftime("%Y%m%d-%H%M%S")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirectoryError(
            f"output.directory: cannot create {directory}: {os_reason(exc)}"
        ) from exc
    for attempt in range(1, 1000):
        candidate = directory / (f"{stamp}-{name}" if attempt == 1 else f"{stamp}-{name}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            # Name the directory the user chose, not the run directory we tried to make in it.
            raise OutputDirectoryError(
                f"output.directory: cannot create a run directory in {directory}: {os_reason(exc)}"
            ) from exc
        return candidate
    raise OutputDirectoryError(
        f"output.directory: too many runs named {stamp}-{name} in {directory}"
    )


#: A time series is appended in the run's own new directory; a link planted there is not
#: written through.
APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


class AppendFile:
    """An append-only text file written straight to its descriptor, whole lines at a time.

    Unbuffered on purpose: a buffered file writes whenever its buffer fills, so a full disk
    would surface at some later flush with part of a line already in the file and the rest
    lost. Here every :meth:`append` is one ``os.write`` of whole lines (looped only if the
    kernel takes fewer bytes), and when it fails part-way — ENOSPC typically lets the first
    page in and refuses the next — the file is cut back to its size before the call, so it
    ends with the last whole line. Shrinking a file needs no free block: that ``ftruncate``
    works on a full disk. Readers of a running bundle see each interval as soon as it is
    written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = os.open(path, APPEND_FLAGS, 0o644)

    @property
    def empty(self) -> bool:
        return self._fd is None or os.fstat(self._fd).st_size == 0

    def append(self, text: str) -> None:
        if not text or self._fd is None:
            return
        fd = self._fd
        start = os.fstat(fd).st_size
        view = memoryview(text.encode("utf-8"))
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise

    def flush(self) -> None:
        """Nothing is buffered (kept for callers that flush)."""

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class AppendCsv:
    """An append-only CSV whose header is set by the first rows written and widened (the file
    rewritten once) when a later row brings a figure the header lacks."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.path = path
        self.columns = columns
        self._file = AppendFile(path)
        if self._file.empty:
            self._write_rows([dict(zip(columns, columns, strict=True))])

    def _write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        buffer = io.StringIO()
        writer = csv.DictWriter(
            buffer, fieldnames=self.columns, extrasaction="ignore", lineterminator="\n"
        )
        writer.writerows(rows)
        # One write of whole lines: a kill never leaves half a row behind, and a full disk
        # is cut back to the last whole row (AppendFile.append).
        self._file.append(buffer.getvalue())

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        if extra := sorted({key for row in rows for key in row} - set(self.columns)):
            self._widen((*self.columns, *extra))
        self._write_rows(rows)

    def _widen(self, columns: tuple[str, ...]) -> None:
        """A figure first seen after the header was written (a collector whose first interval
        had no request of some kind, a counter a server exposes only once used) widens the
        file instead of being dropped without a word: the file is rewritten once with the new
        header, the earlier rows' new cells empty (a figure not measured then, never a 0), and
        put in place atomically, so a reader of a running bundle sees the old or the new file
        whole."""
        self._file.close()
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8", newline="") as handle:
            earlier = list(csv.DictReader(handle))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(earlier)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        replace_file(str(self.path), buffer.getvalue().encode("utf-8"), str(tmp))
        self.columns = columns
        self._file = AppendFile(self.path)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
