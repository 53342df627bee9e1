"""Writing files without following links: the primitives dbsim's writers share.

A name dbsim writes is always *created* by it (``O_CREAT|O_EXCL|O_NOFOLLOW``): the kernel then
refuses whatever already sits at that name — a regular file, a symbolic link to someone
else's file, a fifo — instead of opening it, so nothing is ever written through a link. A
file is replaced by writing such a new temporary file and renaming it over the old name
(``rename`` replaces the name, never what a link points at). A stale temporary file left by a
crash is removed only when it is a plain regular file (``unlink`` removes a name and never
follows it either); anything else there is refused, named, and left alone.

``rename`` would replace *any* name but a directory's, though: a device node, a FIFO, a
socket, a link (``--html /dev/full`` once replaced the system's ``/dev/full``). So the final
name is replaced only when it is a regular file with one link, pinned by an ``O_PATH``
descriptor (which opens no device and blocks on no FIFO) and compared again, device and
inode, just before the rename; a new name is put in place with ``link``, which never replaces
anything that appeared there meanwhile. Everything else is refused
(:class:`NotReplaceableError`) before the temporary file is even written.

Every writer of a file dbsim replaces goes through :func:`replace_file`: the bundle
(:func:`sim.bundle.files.atomic_write`: ``summary.json``, ``report.html``, ``compare --html``,
baseline pages and results), and the EDA tree's marker.
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

    def __init__(self, path: str, found: str, refusal: str = "") -> None:
        refusal = refusal or "not a temporary file dbsim left; refusing to write through it"
        super().__init__(errno.EEXIST, f"{found}, {refusal}", path)


class NotReplaceableError(UnsafeEntryError):
    """The name a file would replace holds something dbsim may not replace: not a regular
    file, a regular file with more than one link, or something swapped in while it wrote."""

    def __init__(self, path: str, found: str) -> None:
        super().__init__(
            path,
            found,
            "not a regular file with one link; dbsim replaces only such a file or writes a "
            "new name, so it left it as it was",
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


#: What :func:`pin_replaceable` holds: the name's own inode, opened for nothing but ``fstat``.
PIN_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _describe(info: os.stat_result) -> str:
    if stat.S_ISREG(info.st_mode) and info.st_nlink != 1:
        return f"it is a regular file with {info.st_nlink} hard links"
    return f"it is {kind_of(info.st_mode)}"


def _replaceable(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def pin_replaceable(name: str, dir_fd: int | None = None) -> int | None:
    """An ``O_PATH`` descriptor of the regular, singly linked file at ``name`` (None when the
    name is free); anything else there raises :class:`NotReplaceableError`. ``O_PATH`` opens
    the name itself (a link, not its target) and runs no driver's open: a device node is not
    touched and a FIFO does not block."""
    try:
        fd = os.open(name, PIN_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not _replaceable(info):
            raise NotReplaceableError(name, _describe(info))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _put_new(tmp: str, name: str, dir_fd: int | None) -> None:
    """``tmp`` under the free ``name``: ``link`` fails on whatever appeared there since the
    check (rename would replace it); where links are not supported, a rename after one more
    look."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise NotReplaceableError(name, "something appeared at it while dbsim wrote") from None
    except OSError:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise NotReplaceableError(name, _describe(info)) from None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)


def _put_over(tmp: str, name: str, pinned: int, dir_fd: int | None) -> None:
    """``tmp`` renamed over ``name`` if ``name`` is still the pinned file, with one link."""
    was = os.fstat(pinned)
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:  # removed meanwhile: the name is free again
        _put_new(tmp, name, dir_fd)
        return
    if (now.st_dev, now.st_ino) != (was.st_dev, was.st_ino):
        raise NotReplaceableError(name, f"it was swapped while dbsim wrote ({_describe(now)})")
    if not _replaceable(now):
        raise NotReplaceableError(name, _describe(now))
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def replace_file(name: str, data: bytes, tmp: str, dir_fd: int | None = None) -> None:
    """Replace ``name`` atomically with ``data`` through the temporary name ``tmp`` (same
    directory): a crash leaves the old file or the new one, never a torn one, and neither
    ``tmp`` nor ``name`` is ever opened if a link sits there. ``name`` must be free or a
    regular file with one link, checked before ``tmp`` is written and again, by identity,
    just before the rename (:class:`NotReplaceableError` otherwise, nothing changed)."""
    clear_stale(tmp, dir_fd)
    pinned = pin_replaceable(name, dir_fd)
    try:
        write_new(tmp, data, dir_fd)
        try:
            if pinned is None:
                _put_new(tmp, name, dir_fd)
            else:
                _put_over(tmp, name, pinned, dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        if pinned is not None:
            os.close(pinned)


__all__ = [
    "DIR_FLAGS",
    "NEW_FILE_FLAGS",
    "PIN_FLAGS",
    "NotReplaceableError",
    "UnsafeEntryError",
    "clear_stale",
    "kind_of",
    "pin_replaceable",
    "replace_file",
    "write_new",
]
