"""The file-tree target's parts that sessions and the native loop share: I/O options, the
stream cursor, page-aligned buffers, the tree guard and the one-line OSError message."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sim.errors import TargetError

FsyncPolicy = Literal["none", "close", "each"]
DIRECT_ALIGN_BYTES = 4096  # O_DIRECT alignment that every Linux file system accepts
DEFAULT_TRANSFER_BYTES = 65536
FILE_MODE = 0o644
O_DIRECT: int = getattr(os, "O_DIRECT", 0)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Directory descriptors a session keeps open (a front-end tree has 11 directories).
DIR_FD_CACHE = 16


def os_error_message(exc: OSError, what: str, path: str | os.PathLike[str]) -> str:
    """One line: ``filetree: <what> <path>: ENOSPC (No space left on device)``."""
    code = exc.errno
    name = errno.errorcode.get(code, f"errno {code}") if code is not None else type(exc).__name__
    reason = exc.strerror or str(exc)
    return f"filetree: {what} {os.fspath(path)}: {name} ({reason})"


def os_error(exc: OSError, what: str, path: str | os.PathLike[str]) -> TargetError:
    """``exc`` translated for the user (raise it ``from exc``)."""
    return TargetError(os_error_message(exc, what, path))


@dataclass(frozen=True)
class IoOptions:
    """How a session moves data: set by the workload (these belong to the load, not the tree).

    ``fsync``: ``each`` calls ``fdatasync`` after every write call, ``close`` once before a
    written file is closed, ``none`` never (the page cache or the NFS client decides).
    """

    direct_io: bool = False
    fsync: FsyncPolicy = "none"
    transfer_size_bytes: int = DEFAULT_TRANSFER_BYTES
    seed: int = 0


@dataclass
class StreamCursor:
    """A sequential pass over one file, one transfer per operation (the back-end's streams).

    The descriptor stays open between operations; ``done`` turns true with the transfer that
    reaches ``size_bytes``, which also closes the file (after ``fdatasync`` under ``close``).
    """

    path: str
    size_bytes: int
    write: bool
    offset: int = 0
    fd: int | None = None
    done: bool = False


@dataclass
class Buffers:
    """Page-aligned read and write buffers; the write buffer holds seeded random bytes."""

    size: int
    read_map: mmap.mmap = field(init=False)
    write_map: mmap.mmap = field(init=False)
    read_view: memoryview = field(init=False)
    write_view: memoryview = field(init=False)

    def __post_init__(self) -> None:
        self.read_map = mmap.mmap(-1, self.size)
        # Twice the size, so a write can start at a varying aligned offset: blocks written
        # one after the other differ (a deduplicating server cannot fold them).
        self.write_map = mmap.mmap(-1, 2 * self.size)
        self.read_view = memoryview(self.read_map)
        self.write_view = memoryview(self.write_map)

    def fill(self, seed: int) -> None:
        self.write_map[:] = random.Random(seed).randbytes(len(self.write_map))

    def release(self) -> None:
        # A slice still held by an abandoned call keeps the map exported: then the garbage
        # collector frees it later.
        with contextlib.suppress(BufferError):
            self.read_view.release()
            self.write_view.release()
            self.read_map.close()
            self.write_map.close()


@dataclass(frozen=True)
class TreeGuard:
    """What a session may touch, as the workload recorded it when it built the tree.

    ``root``: the target's root (absolute, as the paths a session is given start with) and the
    inode dbsim recorded for it; ``dirs``: every directory a session works in, absolute path →
    inode; ``files``: every file a session writes in place, absolute path → inode. A directory
    is opened (once, then kept in a small cache) relative to its parent with ``O_NOFOLLOW`` and
    must be on the root's device with its recorded inode; a file written in place must be the
    recorded inode with one link. Files and directories a session creates itself are made with
    ``O_EXCL`` / ``mkdir`` inside those directories and need no record.
    """

    root: str
    root_ino: int
    dirs: Mapping[str, int]
    files: Mapping[str, int]
