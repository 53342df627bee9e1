"""The EDA root's ``.dbsim-tree`` marker: reading, writing and claiming a root, and the root's
identity checks (see :mod:`workloads.eda.tree` for the layout it records).

Every function here is blocking: the workload runs them in the engine's thread pool.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.errors import OwnershipError
from sim.nofollow import UnsafeEntryError, clear_stale, replace_file
from workloads.eda.ownership import ID_PATTERN, encode, read_json, refuse

if TYPE_CHECKING:
    from workloads.eda.tree import ProcessTree

MARKER = ".dbsim-tree"
MARKER_OWNER = "dbsim"
MARKER_TMP = f"{MARKER}.tmp"
MARKER_VERSION = 2  # 2: an id and the root's identity; every directory holds a record
STATE_LOADING = "loading"
STATE_LOADED = "loaded"
TREE_NAME = re.compile(r"EDA_(FRONTEND|BACKEND)-[0-9]{3,}-[0-9]+")


# --------------------------------------------------------------------------- the root


@contextlib.contextmanager
def opened_root(root: Path) -> Iterator[tuple[int, os.stat_result]]:
    """The root directory's descriptor and identity. The configured path may itself be a link
    (an alias of a mount); nothing below it is ever opened through one."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd, os.fstat(fd)
    finally:
        os.close(fd)


def root_identity(root: Path) -> list[int]:
    """``[device, inode]`` of the root, as the marker and every record carry it."""
    with opened_root(root) as (_, info):
        return [info.st_dev, info.st_ino]


def _check_root(root: Path, info: os.stat_result, marker: dict[str, Any]) -> None:
    recorded = marker.get("root")
    if recorded is not None and recorded[1] != info.st_ino:
        raise refuse(
            str(root / MARKER),
            f"was written for another directory (inode {recorded[1]}, this one is "
            f"{info.st_ino}): a copy or a hand-made marker",
            f"touch {root}",
        )


# --------------------------------------------------------------------------- the marker


def read_marker(root: Path) -> dict[str, Any] | None:
    """The root's marker, or None when there is none; OwnershipError when one exists but is
    not dbsim's for this very directory (no id, another root's, unreadable, a link)."""
    with opened_root(root) as (fd, info):
        return _read_marker(root, fd, info)


def _read_marker(root: Path, fd: int, info: os.stat_result) -> dict[str, Any] | None:
    path = str(root / MARKER)
    marker = read_json(MARKER, fd, path)
    if marker is None:
        return None
    if not isinstance(marker, dict) or marker.get("owner") != MARKER_OWNER:
        raise refuse(path, "is not a dbsim marker", f"touch {root}")
    if not ID_PATTERN.fullmatch(str(marker.get("id"))) or marker.get("version") != MARKER_VERSION:
        raise refuse(
            path,
            "carries no dbsim tree id (written by hand, or by an older dbsim that recorded "
            "none: remove those trees by hand and load again)",
            f"touch {root}",
        )
    recorded = marker.get("root")
    if recorded is not None and not (
        isinstance(recorded, list)
        and len(recorded) == 2
        and all(isinstance(x, int) for x in recorded)
    ):
        raise refuse(path, "records no root identity", f"touch {root}")
    _check_root(root, info, marker)
    trees = marker.setdefault("trees", {})
    if not isinstance(trees, dict) or not all(TREE_NAME.fullmatch(str(n)) for n in trees):
        raise refuse(path, "lists unexpected tree names", f"touch {root}")
    return marker


def write_marker(root: Path, marker: dict[str, Any]) -> None:
    """Replace the marker atomically (a crash leaves the old one or the new one), through a
    temporary file created with ``O_EXCL|O_NOFOLLOW``: a link planted there is refused."""
    with opened_root(root) as (fd, info):
        _check_root(root, info, marker)
        _write_marker(root, fd, marker)


def _write_marker(root: Path, fd: int, marker: dict[str, Any]) -> None:
    _clear_marker_tmp(root, fd)
    replace_file(MARKER, encode(marker), MARKER_TMP, fd)


def _clear_marker_tmp(root: Path, fd: int) -> None:
    """A regular leftover ``.dbsim-tree.tmp`` is removed; a link (or anything else) refused."""
    try:
        clear_stale(MARKER_TMP, fd)
    except UnsafeEntryError as exc:
        why = str(exc.strerror).split(";")[0]
        raise refuse(str(root / MARKER_TMP), why, "write through it") from exc


def claim(root: Path, trees: list[ProcessTree]) -> dict[str, Any]:
    """Check ownership before anything is written; return the marker to build under.

    Refuses a non-empty root without a marker, a marker that is not dbsim's for this root,
    a planned tree's name that exists in the root but is not recorded in the marker (a
    stranger's directory of the same name) and a link at the marker's temporary name.
    """
    if root.exists() and not root.is_dir():
        raise OwnershipError(f"{root} exists and is not a directory; refusing to touch it")
    if not root.is_dir():
        return new_marker(created_root=True)
    with opened_root(root) as (fd, info):
        marker = _read_marker(root, fd, info)
        _clear_marker_tmp(root, fd)
        if marker is None:
            with os.scandir(fd) as scan:
                if next(iter(scan), None) is not None:
                    raise OwnershipError(
                        f"{root} is not empty and has no {MARKER} marker: dbsim did not create "
                        f"it; refusing to write there (use an empty or new directory)"
                    )
            return new_marker(created_root=False)
        for tree in trees:
            if tree.name not in marker["trees"] and _exists(tree.name, fd):
                raise OwnershipError(
                    f"{root / tree.name} exists but is not recorded in {root / MARKER}; "
                    f"refusing to touch it"
                )
        return marker


def new_marker(created_root: bool, workload: str = "eda") -> dict[str, Any]:
    """A fresh marker with its random id (the root's identity is recorded once it exists):
    the EDA trees' and the storage baseline's (sim.baseline.safety)."""
    return {
        "owner": MARKER_OWNER,
        "workload": workload,
        "version": MARKER_VERSION,
        "id": secrets.token_hex(16),
        "created_root": created_root,
        "root": None,  # filled in once the root exists (the build creates it)
        "trees": {},
    }


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
