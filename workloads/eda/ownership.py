"""How dbsim knows a file tree is its own, and how it removes one without following links.

Identity, written when a tree is built:

* the root's marker (:data:`~workloads.eda.tree.MARKER`) carries a random ``id`` and the root
  directory's ``[device, inode]``, and per tree the inode of the tree's directory;
* every directory dbsim makes holds a record (:data:`DIR_RECORD`, a small JSON dotfile)
  with the same ``id`` and root identity, and the inode of every entry dbsim made in it.

A marker written by hand (no ``id``), copied from another tree (another root inode) or a
directory without a record carrying the id is not dbsim's, and nothing in it is touched.
Inodes are compared exactly; the device is compared with the root's device as it is now
(an NFS client numbers a mount anew each time it is mounted, so a number remembered from an
earlier mount would call every remounted tree a stranger's).

Every check opens relative to a parent directory's descriptor with ``O_NOFOLLOW`` and looks
with ``fstatat(AT_SYMLINK_NOFOLLOW)``: a symbolic link anywhere in a tree, a hard-linked
file (``st_nlink > 1``), an inode that is not the recorded one, or a directory holding
another tree's marker (a tree nested in this one) is refused with an
:class:`~sim.errors.OwnershipError` naming it — before anything is written or removed.

Every function here is blocking (the workload runs them in the engine's thread pool).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from typing import Any

from sim.errors import ConfigError, OwnershipError
from sim.nofollow import DIR_FLAGS, kind_of, write_new
from sim.safeio import decode_utf8, load_json

DIR_RECORD = ".dbsim-dir"
OWNER = "dbsim"
ID_PATTERN = re.compile(r"[0-9a-f]{32}")
#: Names sessions give what they create (removed when they close; a killed run leaves some).
CREATED_PREFIX = "new_"
SCRATCH_PREFIX = "scratch_"
NESTED_MARKER = ".dbsim-tree"
MAX_RECORD_BYTES = 64 * 1024 * 1024


def refuse(path: str, why: str, doing: str = "touch it") -> OwnershipError:
    """The one-line refusal: ``<path> <why>; refusing to <doing>``."""
    return OwnershipError(f"{path} {why}; refusing to {doing}")


@contextlib.contextmanager
def opened_dir(name: str, dir_fd: int | None = None) -> Iterator[int]:
    """``name`` opened as a directory without following a link (relative to ``dir_fd``)."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def read_json(name: str, dir_fd: int, where: str, limit: int = MAX_RECORD_BYTES) -> Any:
    """A small JSON file read without following a link; None when it does not exist."""
    try:
        # O_NONBLOCK: a FIFO planted in the marker's place would block open() before the
        # regular-file check below could refuse it.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        info = _lstat(name, dir_fd)
        found = kind_of(info.st_mode) if info is not None else str(exc.strerror)
        raise refuse(where, f"is {found}, not a file dbsim wrote") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(where, f"is {kind_of(info.st_mode)}, not a file dbsim wrote")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise refuse(where, f"is larger than the {limit:,} bytes dbsim writes there")
    try:
        # Bounded (depth, number length): a record nested 100,000 deep must not recurse.
        return load_json(decode_utf8(data, where=where), what=where, max_depth=16)
    except ConfigError:
        return {}  # not a record of dbsim's: the caller refuses what it cannot recognise


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def encode(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, indent=1, sort_keys=True).encode("utf-8")


# --------------------------------------------------------------------------- records


def new_record(marker: Mapping[str, Any], tree: str, entries: Mapping[str, int]) -> dict[str, Any]:
    """The record of a directory of ``tree``: the marker's id and root, its entries' inodes."""
    return {
        "owner": OWNER,
        "id": marker["id"],
        "root": marker["root"],
        "tree": tree,
        "entries": dict(entries),
    }


def write_record(dir_fd: int, record: Mapping[str, Any]) -> None:
    """Written once, into a directory dbsim has just made (``O_EXCL``: never over a link)."""
    write_new(DIR_RECORD, encode(record), dir_fd)


def read_record(dir_fd: int, where: str, marker: Mapping[str, Any]) -> dict[str, Any]:
    """The record of the directory ``where``; refused unless it carries ``marker``'s id."""
    record = read_json(DIR_RECORD, dir_fd, f"{where}/{DIR_RECORD}")
    if (
        not isinstance(record, dict)
        or record.get("owner") != OWNER
        or record.get("id") != marker.get("id")
        or record.get("root") != marker.get("root")
        or not isinstance(record.get("entries"), dict)
    ):
        found = "has no" if record is None else "has a foreign"
        raise refuse(
            where, f"{found} {DIR_RECORD} record with this tree's id: dbsim did not make it"
        )
    return record


# --------------------------------------------------------------------------- identity


def check_entry(
    dir_fd: int, name: str, where: str, want_dir: bool, ino: Any, dev: int
) -> os.stat_result | None:
    """``name`` in ``dir_fd`` is what dbsim made there: not a link, the right kind, one link
    (a file), on the root's device, the recorded inode. None when it is missing."""
    info = _lstat(name, dir_fd)
    if info is None:
        return None
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        raise refuse(where, "is a symbolic link (dbsim never makes one)")
    if want_dir != stat.S_ISDIR(mode) or not (want_dir or stat.S_ISREG(mode)):
        raise refuse(
            where, f"is {kind_of(mode)}, not the {'directory' if want_dir else 'file'} dbsim made"
        )
    if not want_dir and info.st_nlink != 1:
        raise refuse(where, f"has {info.st_nlink} hard links (dbsim makes one)")
    if info.st_dev != dev:
        raise refuse(where, "is on another file system than the tree's root (a mount point)")
    if info.st_ino != ino:
        raise refuse(where, f"is not the one dbsim made (inode {info.st_ino}, recorded {ino})")
    return info


def open_checked(dir_fd: int, name: str, where: str, ino: Any, dev: int) -> int:
    """Open directory ``name`` and check the descriptor itself (what an lstat saw may have
    been swapped before the open)."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    info = os.fstat(fd)
    if info.st_dev != dev or info.st_ino != ino:
        os.close(fd)
        raise refuse(
            where, f"changed while dbsim looked at it (inode {info.st_ino}, recorded {ino})"
        )
    return fd


def foreign(dir_fd: int, name: str, where: str, info: os.stat_result) -> OwnershipError:
    """Why an entry dbsim did not record is not removed."""
    if stat.S_ISDIR(info.st_mode) and _lstat(f"{name}/{NESTED_MARKER}", dir_fd) is not None:
        return refuse(
            where,
            "holds another dbsim tree (its own .dbsim-tree)",
            "remove it (drop that tree first)",
        )
    if stat.S_ISLNK(info.st_mode):
        return refuse(where, "is a symbolic link (dbsim never makes one)")
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return refuse(where, f"has {info.st_nlink} hard links (dbsim makes one)")
    return refuse(where, f"is {kind_of(info.st_mode)} dbsim did not make")


# --------------------------------------------------------------------------- removal


def sweep(dir_fd: int, where: str, marker: Mapping[str, Any], dev: int, delete: bool) -> None:
    """Every entry of a directory dbsim made (``dir_fd``, record checked by the caller) is
    one dbsim recorded or one its sessions create; directories are swept the same way.
    ``delete=False`` only checks (the pass before anything is removed); ``delete=True``
    checks again as it removes, so a swap in between is still refused."""
    record = read_record(dir_fd, where, marker)
    entries: dict[str, Any] = record["entries"]
    with os.scandir(dir_fd) as scan:
        names = sorted(entry.name for entry in scan)
    for name in names:
        if name in (DIR_RECORD, f"{DIR_RECORD}.tmp"):
            continue
        path = f"{where}/{name}"
        info = _lstat(name, dir_fd)
        if info is None:
            continue
        if name in entries:
            is_dir = stat.S_ISDIR(info.st_mode) and not stat.S_ISLNK(info.st_mode)
            check_entry(dir_fd, name, path, is_dir, entries[name], dev)
            if is_dir:
                fd = open_checked(dir_fd, name, path, entries[name], dev)
                try:
                    sweep(fd, path, marker, dev, delete)
                finally:
                    os.close(fd)
                if delete:
                    os.rmdir(name, dir_fd=dir_fd)
            elif delete:
                os.unlink(name, dir_fd=dir_fd)
        elif name.startswith(CREATED_PREFIX) and stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            if delete:
                os.unlink(name, dir_fd=dir_fd)
        elif name.startswith(SCRATCH_PREFIX) and stat.S_ISDIR(info.st_mode):
            with opened_dir(name, dir_fd) as fd, os.scandir(fd) as inside:
                first = next(iter(inside), None)
            if first is not None:
                raise refuse(
                    f"{path}/{first.name}", "was not made by dbsim (in a scratch directory)"
                )
            if delete:
                os.rmdir(name, dir_fd=dir_fd)
        else:
            raise foreign(dir_fd, name, path, info)
    if delete:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(DIR_RECORD, dir_fd=dir_fd)


__all__ = [
    "CREATED_PREFIX",
    "DIR_RECORD",
    "SCRATCH_PREFIX",
    "check_entry",
    "new_record",
    "open_checked",
    "read_record",
    "refuse",
    "sweep",
    "write_record",
]
