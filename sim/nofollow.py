"""Writing files without following links: the primitives dbsim's writers share.

A name dbsim writes is always *created* by it (``O_CREAT|O_EXCL|O_NOFOLLOW``): the kernel then
refuses whatever already sits at that name — a regular file, a symbolic link to someone
else's file, a fifo — instead of opening it, so nothing is ever written through a link. A
file is replaced by writing such a new temporary file and renaming it over the old name
(``rename`` replaces the name, never what a link points at). A stale temporary file left by a
crash is removed only when it is a plain regular file (``unlink`` removes a name and never
follows it either); anything else there is refused, named, and left alone.

The bundle (:func:`sim.bundle.files.atomic_write`), the file-tree target and the EDA trees use these.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

#: A directory opened relative to its parent, refusing a symbolic link in its place.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: A file dbsim creates: never an existing one, never through a link.
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_MODE = 0o644


class UnsafeEntryError(FileExistsError):
    """Something dbsim did not leave sits where it would write (a link, a directory …).

    An ``OSError`` (``EEXIST``), so every writer's existing OSError handling reports it; its
    ``strerror`` says what was found and that dbsim refused."""

    def __init__(self, path: str, found: str) -> None:
        super().__init__(
            errno.EEXIST,
            f"{found}, not a temporary file dbsim left; refusing to write through it",
            path,
        )


def kind_of(mode: int) -> str:
    """``a symbolic link``, ``a directory`` …: what an lstat found, for messages."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "an unknown kind of file"


def clear_stale(name: str, dir_fd: int | None = None) -> None:
    """Remove a leftover temporary file at ``name`` if it is a regular file; refuse (raise
    :class:`UnsafeEntryError`) anything else, which is left where it is."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeEntryError(name, f"it is {kind_of(info.st_mode)}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def write_new(name: str, data: bytes, dir_fd: int | None = None, mode: int = FILE_MODE) -> None:
    """Create ``name`` (it must not exist), write ``data`` and fsync it. On failure the file
    is removed again, so a full disk is not left fuller."""
    fd = os.open(name, NEW_FILE_FLAGS, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)


def replace_file(name: str, data: bytes, tmp: str, dir_fd: int | None = None) -> None:
    """Replace ``name`` atomically with ``data`` through the temporary name ``tmp`` (same
    directory): a crash leaves the old file or the new one, never a torn one, and neither
    ``tmp`` nor ``name`` is ever opened if a link sits there."""
    clear_stale(tmp, dir_fd)
    write_new(tmp, data, dir_fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


__all__ = [
    "DIR_FLAGS",
    "NEW_FILE_FLAGS",
    "UnsafeEntryError",
    "clear_stale",
    "kind_of",
    "replace_file",
    "write_new",
]
