"""The file-tree target: a directory on a local file system or an NFS mount.

Sessions are :class:`~storage.targets.filetree_session.FileSession` objects (one operation per
public method, a blocking call); their shared parts are in storage.targets.filetree_io.

Every ``OSError`` becomes a :class:`~sim.errors.TargetError` of one line naming the errno,
its meaning, the call and the path: ``filetree: write /mnt/t/x: ENOSPC (No space left on
device)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import TargetError
from sim.protocols import SCOPE_HOST, EngineContext, LoadLock, Target, WaitCallback
from storage.targets.filetree_io import (
    DIRECT_ALIGN_BYTES,
    IoOptions,
    StreamCursor,
    TreeGuard,
    os_error,
    os_error_message,
)
from storage.targets.filetree_session import FileSession
from storage.targets.locks import directory_lock
from storage.targets.paths import check_tree_root
from storage.targets.settings import FileTreeSettings

MOUNTS = Path("/proc/self/mounts")


class FileTreeTarget(Target):
    """A directory tree (local or NFS). The workload owns the layout under ``path``; the
    target only opens sessions, runs blocking calls in the engine's pool and describes the
    mount."""

    kind: ClassVar[str] = "filetree"
    dialect: ClassVar[str] = "filetree"
    paramstyle: ClassVar[str] = "none"

    def __init__(self, settings: FileTreeSettings) -> None:
        self.settings = settings
        self.root = Path(os.path.abspath(settings.path))
        self._context: EngineContext | None = None

    @property
    def context(self) -> EngineContext:
        if self._context is None:
            raise TargetError("filetree: target used before open()")
        return self._context

    def check_paths(self) -> None:
        check_tree_root(self.root)

    async def open(self, context: EngineContext) -> None:
        self._context = context
        self.check_paths()
        parent = self.root.parent
        if self.root.exists() and not self.root.is_dir():
            raise TargetError(f"target.path: {self.root} exists and is not a directory")
        if not self.root.exists() and not parent.is_dir():
            raise TargetError(f"target.path: parent directory {parent} does not exist")

    async def run(
        self, what: str, path: str | os.PathLike[str], fn: Callable[..., Any], *args: Any
    ) -> Any:
        """``fn(*args)`` in the engine's pool; an OSError becomes a one-line TargetError about
        ``what`` on ``path`` (the builder's and the verifier's calls go through here)."""
        try:
            return await self.context.run_blocking(fn, *args)
        except OSError as exc:
            raise os_error(exc, what, exc.filename or path) from exc

    async def connect(self) -> FileSession:
        return FileSession(self, self.context)

    @property
    def data_scope(self) -> str:
        return SCOPE_HOST

    def load_lock(
        self, key: str, *, shared: bool = False, on_wait: WaitCallback | None = None
    ) -> AbstractAsyncContextManager[LoadLock]:
        """``flock`` on the root's parent directory, which exists before the first load and
        holds nothing of the user's that dbsim would create (see storage.targets.locks)."""
        return directory_lock(
            self.context,
            self.root.parent,
            what=str(self.root),
            shared=shared,
            on_wait=on_wait,
            label="filetree",
        )

    async def close(self) -> None:
        self._context = None

    def storage_paths(self) -> list[Path]:
        return [self.root]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.root), **mount_of(self.root)}


def mount_of(path: Path, mounts: Path = MOUNTS) -> dict[str, Any]:
    """The mount holding ``path`` (or its nearest existing ancestor): point, type, source and
    options, so an NFS run's bundle records ``vers``, ``nconnect``, ``rsize`` …"""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    real = os.path.realpath(probe)
    try:
        lines = mounts.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    best: list[str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[1])):
            best = [fields[0], point, fields[2], fields[3]]
    if best is None:
        return {}
    return {
        "mount_source": best[0],
        "mount_point": best[1],
        "fstype": best[2],
        "mount_options": best[3],
    }


__all__ = [
    "DIRECT_ALIGN_BYTES",
    "FileSession",
    "FileTreeTarget",
    "IoOptions",
    "StreamCursor",
    "TreeGuard",
    "mount_of",
    "os_error",
    "os_error_message",
]
