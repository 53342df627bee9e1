"""``target.path`` of the SQLite target, looked at before SQLite opens (or creates) anything.

SQLite itself opens whatever is at the path: it follows a link, blocks on a FIFO or fails on
it with "disk I/O error", takes any empty file for a new database and writes into it, and
reports a directory or a text file only as the driver's line, exit 3. Here each is one line
naming ``target.path``, exit 2, and nothing is opened but a regular file's first 16 bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

from sim.errors import ConfigError
from sim.nofollow import clear_stale, kind_of

#: The first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def check_sqlite_path(path: Path, field: str = "target.path") -> bool:
    """True when ``path`` is a SQLite database file, False when the name is free (SQLite will
    create the file). Anything else raises ConfigError, one
    line naming ``field``: a symbolic link (looping, dangling or not: dbsim opens no database
    through one), a directory, FIFO, device or socket, an empty file (SQLite would adopt it
    as a new database, but a database dbsim made is never empty: its first connection writes
    the header) and a file that does not start with SQLite's header."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:  # its directory is the target's to check when it opens
        return False
    except OSError as exc:
        raise ConfigError(f"{field}: {path}: {_reason(exc)}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{field}: {path} is a symbolic link{_link_state(path)}; dbsim opens no database "
            "through a link: give the database file's own path"
        )
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{field}: {path} is {kind_of(info.st_mode)}, not a SQLite database")
    if info.st_size == 0:
        raise ConfigError(
            f"{field}: {path} is an empty file dbsim did not create; dbsim makes a new "
            "database only at a free name: remove the file or choose another path"
        )
    if _header(path, field) != SQLITE_HEADER:
        raise ConfigError(
            f"{field}: {path} is not a SQLite database (it does not start with SQLite's "
            "header); dbsim writes only into database files"
        )
    return True


def create_database(path: Path, prepare: Callable[[sqlite3.Connection], None]) -> None:
    """A new database at the free name ``path``, never visible there as an empty file (which
    :func:`check_sqlite_path` refuses, in this process or in a worker looking meanwhile):
    built under a temporary name beside it, ``prepare``d (page size, journal mode), its header
    written, closed, then linked into place. ``link`` replaces nothing: a database another
    process made there meanwhile is kept and used."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.dbsim-new")
    leftovers = [tmp.with_name(tmp.name + suffix) for suffix in ("", "-journal", "-wal", "-shm")]
    for name in leftovers:
        clear_stale(str(name))  # a crash's regular leftover goes; anything else is refused
    try:
        raw = sqlite3.connect(tmp)
        try:
            prepare(raw)
            raw.execute("PRAGMA user_version = 0")  # a write: SQLite writes the header
            raw.commit()
        finally:
            raw.close()
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path, follow_symlinks=False)
    finally:
        for name in leftovers:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def _header(path: Path, field: str) -> bytes:
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        raise ConfigError(f"{field}: {path}: {_reason(exc)}") from None
    try:
        return os.read(fd, len(SQLITE_HEADER))
    finally:
        os.close(fd)


def _link_state(path: Path) -> str:
    """`` that loops`` / `` to nothing``: what following the link would have met."""
    try:
        os.stat(path)
    except OSError as exc:
        return {errno.ELOOP: " that loops", errno.ENOENT: " to nothing"}.get(exc.errno or 0, "")
    return ""


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "too many symbolic links on the way (a loop)"
    if exc.errno == errno.ENOTDIR:
        return "a part of it is not a directory"
    return f"cannot be looked at: {exc.strerror or exc}"


__all__ = ["SQLITE_HEADER", "check_sqlite_path", "create_database"]
