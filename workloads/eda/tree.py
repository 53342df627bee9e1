"""The EDA file trees: layout arithmetic, the ``.dbsim-tree`` marker, build, verify and drop.

Under the target's root, one tree per process of each job set::

    <root>/.dbsim-tree                     JSON: owner, fingerprint and state of every tree
    <root>/EDA_FRONTEND-001-1/dir_00/file_00   16 KiB data files
    <root>/EDA_FRONTEND-001-1/dir_00/empty_00  empty files (access, chmod, append)
    <root>/EDA_BACKEND-001-1/dir_00/file_00    10 MiB data files

Ownership: dbsim writes only into a root that is empty or carries its marker, and refuses
(before writing a byte) a non-empty directory without one. It rebuilds only trees the marker
records, and drop removes only those, then the marker, then the root if dbsim created it.
Names read back from the marker are checked against :data:`TREE_NAME`, so a hand-edited
marker can never point a removal outside the root.

Every function here is blocking: the workload runs them in the engine's thread pool.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import OwnershipError, WorkloadError
from workloads.eda.parameters import BACKEND, FRONTEND, EdaParameters

MARKER = ".dbsim-tree"
MARKER_OWNER = "dbsim"
MARKER_VERSION = 1
STATE_LOADING = "loading"
STATE_LOADED = "loaded"
TREE_NAME = re.compile(r"EDA_(FRONTEND|BACKEND)-[0-9]{3,}-[0-9]+")
#: Names sessions give the files and directories they create (removed when they close).
CREATED_PREFIX = "new_"
SCRATCH_PREFIX = "scratch_"
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


# --------------------------------------------------------------------------- the marker


def read_marker(root: Path) -> dict[str, Any] | None:
    """The root's marker, or None when there is none; OwnershipError when one exists but is
    not dbsim's (or cannot be read)."""
    path = root / MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        marker = json.loads(text)
    except ValueError:
        marker = None
    if not isinstance(marker, dict) or marker.get("owner") != MARKER_OWNER:
        raise OwnershipError(f"{path} is not a dbsim marker; refusing to touch {root}")
    trees = marker.setdefault("trees", {})
    if not isinstance(trees, dict) or not all(TREE_NAME.fullmatch(str(n)) for n in trees):
        raise OwnershipError(f"{path}: unexpected tree names; refusing to touch {root}")
    return marker


def write_marker(root: Path, marker: dict[str, Any]) -> None:
    """Replace the marker atomically (a crash leaves the old one or the new one)."""
    tmp = root / f"{MARKER}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(marker, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, root / MARKER)


def claim(root: Path, trees: list[ProcessTree]) -> dict[str, Any]:
    """Check ownership before anything is written; return the marker to build under.

    Refuses a non-empty root without a marker and a planned tree's name that exists in the
    root but is not recorded in the marker (a stranger's directory of the same name).
    """
    if root.exists() and not root.is_dir():
        raise OwnershipError(f"{root} exists and is not a directory; refusing to touch it")
    marker = read_marker(root) if root.is_dir() else None
    if marker is None:
        if root.is_dir() and any(root.iterdir()):
            raise OwnershipError(
                f"{root} is not empty and has no {MARKER} marker: dbsim did not create it; "
                f"refusing to write there (use an empty or new directory)"
            )
        return {
            "owner": MARKER_OWNER,
            "workload": "eda",
            "version": MARKER_VERSION,
            "created_root": not root.exists(),
            "trees": {},
        }
    for tree in trees:
        if tree.name not in marker["trees"] and os.path.lexists(root / tree.name):
            raise OwnershipError(
                f"{root / tree.name} exists but is not recorded in {root / MARKER}; "
                f"refusing to touch it"
            )
    return marker


# --------------------------------------------------------------------------- checking


def check_tree(root: Path, tree: ProcessTree, max_empty_bytes: int) -> list[str]:
    """Problems with a built tree (empty list: fine), by one ``stat`` per file: every data file
    at its size, every empty file present and no larger than ``max_empty_bytes`` (appends
    grow them up to that)."""
    base = root / tree.name
    problems: list[str] = []
    for rel in tree.data_files():
        size = _size(base / rel)
        if size != tree.file_size_bytes:
            problems.append(f"{base / rel}: {_describe(size)}, expected {tree.file_size_bytes}")
    for rel in tree.empty_files():
        size = _size(base / rel)
        if size is None or size > max_empty_bytes:
            problems.append(f"{base / rel}: {_describe(size)}, expected <= {max_empty_bytes}")
    return problems


def leftovers(root: Path, tree: ProcessTree) -> int:
    """Files and directories sessions created and did not remove (a killed run leaves some)."""
    count = 0
    for d in tree.dir_names():
        try:
            with os.scandir(root / tree.name / d) as entries:
                count += sum(
                    1 for e in entries if e.name.startswith((CREATED_PREFIX, SCRATCH_PREFIX))
                )
        except FileNotFoundError:
            continue
    return count


def _size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _describe(size: int | None) -> str:
    return "missing" if size is None else f"{size} bytes"


# --------------------------------------------------------------------------- building


def prepare_tree(root: Path, tree: ProcessTree) -> None:
    """Remove an earlier (recorded, so ours) copy of the tree and create its directories."""
    base = root / tree.name
    if os.path.lexists(base):
        remove_tree(root, tree.name)
    base.mkdir()
    for d in tree.dir_names():
        (base / d).mkdir()
    for rel in tree.empty_files():
        (base / rel).touch()


def content(seed: int, tree: ProcessTree, index: int, size: int) -> bytes:
    """A deterministic pattern of up to WRITE_CHUNK_BYTES, different for every file (repeated
    to fill larger files)."""
    return random.Random(f"{seed}:{tree.name}:{index}").randbytes(min(size, WRITE_CHUNK_BYTES))


def write_data_file(path: Path, size: int, pattern: bytes) -> int:
    """Write ``size`` bytes of ``pattern`` (repeated) to a new file and ``fdatasync`` it, so
    the tree is on stable storage before anything is measured; returns the bytes written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
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


def remove_tree(root: Path, name: str) -> None:
    """Remove ``root/name`` — only a tree name, only a real directory (never a link)."""
    if not TREE_NAME.fullmatch(name):
        raise WorkloadError(f"refusing to remove {root / name}: not an EDA tree name")
    path = root / name
    if path.is_symlink():
        path.unlink()
        return
    shutil.rmtree(path)


def drop_all(root: Path) -> list[str]:
    """Remove every tree the marker records, then the marker, then the root when dbsim created
    it and nothing else is left; returns the trees removed (none without a marker)."""
    if not root.is_dir():
        return []
    marker = read_marker(root)
    if marker is None:
        return []
    removed = []
    for name in sorted(marker["trees"]):
        if os.path.lexists(root / name):
            remove_tree(root, name)
        del marker["trees"][name]
        write_marker(root, marker)  # a crash part-way leaves a marker that lists the rest
        removed.append(name)
    (root / MARKER).unlink()
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
    "FRONTEND",
    "MARKER",
    "ProcessTree",
    "claim",
    "drop_all",
    "plan",
    "read_marker",
    "write_marker",
]
