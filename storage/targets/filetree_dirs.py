"""Where a file-tree session works: its root and directory descriptors, checked against the
tree's guard (the "where" half of :class:`~storage.targets.filetree_session.FileSession`).

Every directory is opened relative to its parent with ``O_NOFOLLOW``, component by component
from the root, and must be on the root's device with, when guarded, its recorded inode; so no
path a session uses goes through a symbolic link. The native loop gets duplicates of these
descriptors (:meth:`TreeDirs.dir_descriptor`), never a path to resolve.
"""

from __future__ import annotations

import contextlib
import os

from sim.errors import OwnershipError, TargetError
from sim.nofollow import DIR_FLAGS
from storage.targets.filetree_io import DIR_FD_CACHE, TreeGuard


class TreeDirs:
    """A session's root, guard and bounded cache of directory descriptors."""

    def __init__(self, root_path: str) -> None:
        self._root_path = root_path
        self._guard: TreeGuard | None = None
        self._root_fd: int | None = None
        self._root_dev = 0
        # Directory descriptors by absolute path, oldest first; bounded (DIR_FD_CACHE) because
        # a tree may have thousands of directories and every session holds its own.
        self._dir_fds: dict[str, int] = {}

    def guard(self, guard: TreeGuard | None) -> None:
        """Work only in ``guard``'s directories and write only its files (None: anywhere
        under the root, still never through a link or into a hard-linked file)."""
        if guard is not None and guard.root != self._root_path:
            raise TargetError(f"filetree: guard for {guard.root}, session on {self._root_path}")
        self._guard = guard

    # ------------------------------------------------------------------ where (blocking)

    def _root(self) -> int:
        if self._root_fd is None:
            # The configured path itself may be a link (a mount's alias); everything below it
            # is opened without following any.
            fd = os.open(self._root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            info = os.fstat(fd)
            if self._guard is not None and info.st_ino != self._guard.root_ino:
                os.close(fd)
                raise OwnershipError(
                    f"filetree: {self._root_path} is not the directory dbsim built the tree "
                    f"in (inode {info.st_ino}, recorded {self._guard.root_ino}); refusing"
                )
            self._root_fd, self._root_dev = fd, info.st_dev
        return self._root_fd

    def _dir(self, path: str) -> int:
        """A descriptor of directory ``path``, opened component by component from the root."""
        fd = self._dir_fds.get(path)
        if fd is not None:
            return fd
        if path == self._root_path:
            return self._root()
        guard = self._guard
        expected = guard.dirs.get(path) if guard is not None else None
        if guard is not None and expected is None:
            raise OwnershipError(
                f"filetree: {path} is not a directory dbsim recorded; refusing to work in it"
            )
        if not path.startswith(self._root_path + "/"):
            raise OwnershipError(f"filetree: {path} is outside {self._root_path}; refusing")
        parent, _, name = path.rpartition("/")
        fd = os.open(name, DIR_FLAGS, dir_fd=self._dir(parent))
        info = os.fstat(fd)
        if info.st_dev != self._root_dev or (expected is not None and info.st_ino != expected):
            os.close(fd)
            raise OwnershipError(
                f"filetree: {path} is not the directory dbsim made (device {info.st_dev}, "
                f"inode {info.st_ino}); refusing to work in it"
            )
        if len(self._dir_fds) >= DIR_FD_CACHE:
            os.close(self._dir_fds.pop(next(iter(self._dir_fds))))
        self._dir_fds[path] = fd
        return fd

    def _at(self, path: str) -> tuple[int, str]:
        """(descriptor of the parent directory, last name): what every ``*at`` call takes."""
        parent, _, name = path.rpartition("/")
        return self._dir(parent), name

    def _check_written(self, fd: int, path: str, info: os.stat_result | None = None) -> None:
        """Before the first byte is written in place: one link and, guarded, our inode."""
        info = info or os.fstat(fd)
        if info.st_nlink != 1:
            raise OwnershipError(
                f"filetree: {path} has {info.st_nlink} hard links (dbsim makes one); "
                f"refusing to write to it"
            )
        guard = self._guard
        if guard is not None and guard.files.get(path) != info.st_ino:
            raise OwnershipError(
                f"filetree: {path} is not the file dbsim wrote (inode {info.st_ino}); "
                f"refusing to write to it"
            )

    def _close_dirs(self) -> None:
        fds, self._dir_fds = list(self._dir_fds.values()), {}
        if self._root_fd is not None:
            fds.append(self._root_fd)
            self._root_fd = None
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    # ------------------------------------------------------------------ native loop parts

    def dir_descriptor(self, path: str) -> int:
        """Blocking: a descriptor of directory ``path`` the caller owns (a duplicate of the
        session's, opened and checked as every directory is: the native loop's dirfds)."""
        return os.dup(self._dir(path))

    def recorded_inode(self, path: str) -> int | None:
        """The inode a guarded session may write in place at ``path``: None unguarded, 0
        when the guard records no file there (then nothing may be written)."""
        return None if self._guard is None else self._guard.files.get(path, 0)
