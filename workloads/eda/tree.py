"""The EDA file trees: layout arithmetic, build, verify and drop (the ``.dbsim-tree`` marker
and the root's checks are in :mod:`workloads.eda.marker`).

Under the target's root, one tree per process of each job set::

    <root>/.dbsim-tree                     JSON: owner, id, root identity, every tree's state
    <root>/EDA_FRONTEND-001-1/.dbsim-dir       JSON: the id, and the inode of each dir_NN
    <root>/EDA_FRONTEND-001-1/dir_00/.dbsim-dir    … and of each file in it
    <root>/EDA_FRONTEND-001-1/dir_00/file_00   16 KiB data files
    <root>/EDA_FRONTEND-001-1/dir_00/empty_00  empty files (access, chmod, append)
    <root>/EDA_BACKEND-001-1/dir_00/file_00    10 MiB data files

Ownership: dbsim writes only into a root that is empty or carries its marker, and refuses
(before writing a byte) a non-empty directory without one. The marker carries a random id
and the root's identity, every directory dbsim makes a record of what it made there
(:mod:`workloads.eda.ownership`); load, verify and drop check both, and every entry's
inode, before they write or remove anything, and never open through a link. Names read back
from the marker are checked against :data:`TREE_NAME`, so a hand-edited marker can never
point a removal outside the root.

Every function here is blocking: the workload runs them in the engine's thread pool.
"""

from __future__ import annotations

import contextlib
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.nofollow import NEW_FILE_FLAGS
from workloads.eda import ownership
from workloads.eda.marker import (
    MARKER,
    MARKER_OWNER,
    MARKER_TMP,
    MARKER_VERSION,
    STATE_LOADED,
    STATE_LOADING,
    TREE_NAME,
    _check_root,
    _clear_marker_tmp,
    _exists,
    _read_marker,
    _write_marker,
    claim,
    new_marker,
    opened_root,
    read_marker,
    root_identity,
    write_marker,
)
from workloads.eda.ownership import (
    CREATED_PREFIX,
    DIR_RECORD,
    SCRATCH_PREFIX,
    check_entry,
    new_record,
    open_checked,
    read_record,
    refuse,
    write_record,
)
from workloads.eda.parameters import BACKEND, FRONTEND, EdaParameters

WRITE_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ProcessTree:
    """The files of one process of one job set (``proc`` counts from 1 within its component)."""

    component: str
    job_set: int
    proc: int
    rate_ops_s: float
    dirs: int
    files_per_dir: int
    empty_files_per_dir: int
    file_size_bytes: int

    @property
    def name(self) -> str:
        return f"{self.component}-{self.job_set:03d}-{self.proc}"

    def dir_names(self) -> list[str]:
        return [f"dir_{d:0{_width(self.dirs)}d}" for d in range(self.dirs)]

    def data_files(self) -> list[str]:
        """Relative paths of the data files, directory by directory."""
        width = _width(self.files_per_dir)
        return [
            f"{d}/file_{f:0{width}d}" for d in self.dir_names() for f in range(self.files_per_dir)
        ]

    def empty_files(self) -> list[str]:
        width = _width(self.empty_files_per_dir)
        return [
            f"{d}/empty_{f:0{width}d}"
            for d in self.dir_names()
            for f in range(self.empty_files_per_dir)
        ]

    @property
    def file_count(self) -> int:
        return self.dirs * (self.files_per_dir + self.empty_files_per_dir)

    @property
    def data_bytes(self) -> int:
        return self.dirs * self.files_per_dir * self.file_size_bytes

    def fingerprint(self, seed: int) -> dict[str, Any]:
        """What shapes the tree's contents: a different one means rebuild."""
        return {
            "component": self.component,
            "dirs": self.dirs,
            "files_per_dir": self.files_per_dir,
            "empty_files_per_dir": self.empty_files_per_dir,
            "file_size_bytes": self.file_size_bytes,
            "seed": seed,
        }


def _width(count: int) -> int:
    return max(2, len(str(count - 1)))


def plan(p: EdaParameters) -> list[ProcessTree]:
    """Every process of every job set, in session order: job set by job set, front-end
    processes first. Sessions 0..n-1 are the first n processes, so a step of k × (processes
    per job set) sessions runs exactly k whole job sets."""
    trees = []
    for job_set in range(1, p.job_sets + 1):
        for component in p.components():
            c = p.of(component)
            empty = c.empty_files_per_dir if component == FRONTEND else 0
            for proc in range(1, c.processes_per_job_set + 1):
                trees.append(
                    ProcessTree(
                        component,
                        job_set,
                        proc,
                        c.process_rate_ops_s,
                        c.dirs,
                        c.files_per_dir,
                        empty,
                        c.file_size_bytes,
                    )
                )
    return trees


def processes_per_job_set(p: EdaParameters) -> int:
    return sum(p.of(c).processes_per_job_set for c in p.components())


def job_set_rate_ops_s(p: EdaParameters) -> float:
    """Requested ops/s of one job set (450 with the reference figures)."""
    return sum(p.of(c).process_rate_ops_s * p.of(c).processes_per_job_set for c in p.components())


# --------------------------------------------------------------------------- checking


@dataclass
class TreeCheck:
    """What :func:`check_tree` found: damage (rebuild it), identities (guard its session)."""

    problems: list[str]
    dirs: dict[str, int]
    files: dict[str, int]
    root_ino: int


def _base(
    root: Path, fd: int, info: os.stat_result, name: str, marker: dict[str, Any]
) -> int | None:
    """The tree directory ``name`` opened and checked against the marker (None: missing)."""
    where = str(root / name)
    ino = marker["trees"].get(name, {}).get("dir")
    entry = os.stat(name, dir_fd=fd, follow_symlinks=False) if _exists(name, fd) else None
    if entry is None:
        return None
    if ino is None:  # recorded before its directory existed (a load cut short): its record decides
        ino = entry.st_ino
    check_entry(fd, name, where, True, ino, info.st_dev)
    base = open_checked(fd, name, where, ino, info.st_dev)
    try:
        record = read_record(base, where, marker)
    except BaseException:
        os.close(base)
        raise
    if record.get("tree") != name:
        os.close(base)
        raise refuse(where, f"is recorded as tree {record.get('tree')!r}")
    return base


def check_tree(
    root: Path, tree: ProcessTree, max_empty_bytes: int, marker: dict[str, Any]
) -> TreeCheck:
    """Identity first (refused with OwnershipError: a link, a hard link, a stranger's inode),
    then damage as problems (empty list: fine), by one ``fstatat`` per entry: every data file
    at its size, every empty file present and no larger than ``max_empty_bytes`` (appends
    grow them up to that)."""
    problems: list[str] = []
    result = TreeCheck(problems, {}, {}, 0)
    with opened_root(root) as (fd, info):
        _check_root(root, info, marker)
        result.root_ino = info.st_ino
        dev = info.st_dev
        base = _base(root, fd, info, tree.name, marker)
        where = root / tree.name
        if base is None:
            problems.append(f"{where}: missing")
            return result
        try:
            result.dirs[str(where)] = os.fstat(base).st_ino
            dirs = read_record(base, str(where), marker)["entries"]
            sizes = [(f, tree.file_size_bytes, True) for f in tree.data_files()]
            sizes += [(f, max_empty_bytes, False) for f in tree.empty_files()]
            by_dir: dict[str, list[tuple[str, int, bool]]] = {}
            for rel, size, exact in sizes:
                d, _, name = rel.partition("/")
                by_dir.setdefault(d, []).append((name, size, exact))
            for d in tree.dir_names():
                _check_dir(base, where, d, dirs, by_dir.get(d, []), marker, dev, result)
        finally:
            os.close(base)
    return result


def _check_dir(
    base: int,
    where: Path,
    d: str,
    dirs: dict[str, Any],
    files: list[tuple[str, int, bool]],
    marker: dict[str, Any],
    dev: int,
    result: TreeCheck,
) -> None:
    path = where / d
    if d not in dirs:
        raise refuse(str(path), f"is not recorded in {where}/{DIR_RECORD}")
    if check_entry(base, d, str(path), True, dirs[d], dev) is None:
        result.problems.append(f"{path}: missing")
        return
    fd = open_checked(base, d, str(path), dirs[d], dev)
    try:
        result.dirs[str(path)] = dirs[d]
        entries = read_record(fd, str(path), marker)["entries"]
        for name, size, exact in files:
            if name not in entries:
                raise refuse(str(path / name), f"is not recorded in {path}/{DIR_RECORD}")
            found = check_entry(fd, name, str(path / name), False, entries[name], dev)
            got = None if found is None else found.st_size
            if got is None or (got != size if exact else got > size):
                want = size if exact else f"<= {size}"
                result.problems.append(f"{path / name}: {_describe(got)}, expected {want}")
            result.files[str(path / name)] = entries[name]
    finally:
        os.close(fd)


def leftovers(root: Path, tree: ProcessTree) -> int:
    """Files and directories sessions created and did not remove (a killed run leaves some)."""
    count = 0
    with opened_root(root) as (fd, _):
        for d in tree.dir_names():
            try:
                with (
                    ownership.opened_dir(tree.name, fd) as base,
                    ownership.opened_dir(d, base) as dfd,
                    os.scandir(dfd) as scan,
                ):
                    prefixes = (CREATED_PREFIX, SCRATCH_PREFIX)
                    count += sum(1 for e in scan if e.name.startswith(prefixes))
            except FileNotFoundError:
                continue
    return count


def _describe(size: int | None) -> str:
    return "missing" if size is None else f"{size} bytes"


# --------------------------------------------------------------------------- building


def prepare_tree(root: Path, tree: ProcessTree, marker: dict[str, Any]) -> int:
    """Remove an earlier (recorded, so ours) copy of the tree, then create its directories,
    its files (empty, ``O_EXCL``) and every directory's record of their inodes; returns the
    tree directory's inode. Data is written afterwards into these very inodes."""
    with opened_root(root) as (fd, info):
        _check_root(root, info, marker)
        if _exists(tree.name, fd):
            _remove(root, fd, info, tree.name, marker)
        os.mkdir(tree.name, dir_fd=fd)
        with ownership.opened_dir(tree.name, fd) as base:
            dirs: dict[str, int] = {}
            names: dict[str, list[str]] = {}
            for rel in (*tree.data_files(), *tree.empty_files()):
                d, _, name = rel.partition("/")
                names.setdefault(d, []).append(name)
            for d in tree.dir_names():
                os.mkdir(d, dir_fd=base)
                with ownership.opened_dir(d, base) as dfd:
                    dirs[d] = os.fstat(dfd).st_ino
                    entries = {name: _create_empty(name, dfd) for name in names.get(d, [])}
                    write_record(dfd, new_record(marker, tree.name, entries))
            write_record(base, new_record(marker, tree.name, dirs))
            return os.fstat(base).st_ino


def _create_empty(name: str, dir_fd: int) -> int:
    fd = os.open(name, NEW_FILE_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


def content(seed: int, tree: ProcessTree, index: int, size: int) -> bytes:
    """A deterministic pattern of up to WRITE_CHUNK_BYTES, different for every file (repeated
    to fill larger files)."""
    return random.Random(f"{seed}:{tree.name}:{index}").randbytes(min(size, WRITE_CHUNK_BYTES))


def write_data_file(root: Path, rel: str, ino: int, size: int, pattern: bytes) -> int:
    """Write ``size`` bytes of ``pattern`` (repeated) into the file ``rel`` (``tree/dir/file``)
    that :func:`prepare_tree` created as inode ``ino``, and ``fdatasync`` it, so the tree is
    on stable storage before anything is measured; returns the bytes written."""
    tree, d, name = rel.split("/")
    with (
        opened_root(root) as (rfd, _),
        ownership.opened_dir(tree, rfd) as base,
        ownership.opened_dir(d, base) as dfd,
    ):
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    try:
        info = os.fstat(fd)
        if info.st_ino != ino or info.st_nlink != 1:
            raise refuse(str(root / rel), "is not the file dbsim just created", "write to it")
        view = memoryview(pattern)
        done = 0
        while done < size:
            n = os.write(fd, view[: min(len(view), size - done)])
            done += n
        os.fdatasync(fd)
        return done
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- dropping


def _remove(root: Path, fd: int, info: os.stat_result, name: str, marker: dict[str, Any]) -> None:
    """Remove tree ``name``: checked whole first, then removed entry by entry, checked again."""
    if not TREE_NAME.fullmatch(name) or name not in marker["trees"]:
        raise refuse(str(root / name), "is not an EDA tree the marker records", "remove it")
    for delete in (False, True):
        base = _base(root, fd, info, name, marker)
        if base is None:
            return
        try:
            ownership.sweep(base, str(root / name), marker, info.st_dev, delete)
        finally:
            os.close(base)
    os.rmdir(name, dir_fd=fd)


def drop_all(root: Path) -> list[str]:
    """Remove every tree the marker records, then the marker, then the root when dbsim created
    it and nothing else is left; returns the trees removed (none without a marker). Every
    tree is checked before the first one is removed."""
    if not root.is_dir():
        return []
    with opened_root(root) as (fd, info):
        marker = _read_marker(root, fd, info)
        if marker is None:
            return []
        _clear_marker_tmp(root, fd)
        names = sorted(marker["trees"])
        for name in names:  # the check pass over every tree: nothing removed yet
            base = _base(root, fd, info, name, marker)
            if base is not None:
                try:
                    ownership.sweep(base, str(root / name), marker, info.st_dev, False)
                finally:
                    os.close(base)
        removed = []
        for name in names:
            _remove(root, fd, info, name, marker)
            del marker["trees"][name]
            _write_marker(root, fd, marker)  # a crash part-way leaves a marker listing the rest
            removed.append(name)
        os.unlink(MARKER, dir_fd=fd)
    if marker.get("created_root"):
        # Something else lives there now? Then the root stays.
        with contextlib.suppress(OSError):
            root.rmdir()
    return removed


def tree_of(root: Path, tree: ProcessTree) -> dict[str, Any]:
    """The absolute paths a session needs, as strings (built once per session)."""
    base = os.path.join(os.fspath(root), tree.name)
    return {
        "base": base,
        "dirs": [os.path.join(base, d) for d in tree.dir_names()],
        "data": [os.path.join(base, f) for f in tree.data_files()],
        "empty": [os.path.join(base, f) for f in tree.empty_files()],
    }


__all__ = [
    "BACKEND",
    "CREATED_PREFIX",
    "FRONTEND",
    "MARKER",
    "MARKER_OWNER",
    "MARKER_TMP",
    "MARKER_VERSION",
    "SCRATCH_PREFIX",
    "STATE_LOADED",
    "STATE_LOADING",
    "TREE_NAME",
    "ProcessTree",
    "claim",
    "drop_all",
    "new_marker",
    "plan",
    "read_marker",
    "root_identity",
    "write_marker",
]
