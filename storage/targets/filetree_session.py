"""A file-tree session (see storage.targets.filetree): each public method is one operation.

A session's :class:`FileSession` wraps plain ``os`` calls. Each public method is one
operation and makes exactly one hop to the engine's thread pool (``EngineContext.run_blocking``)
that does all of the operation's system calls (open, pread, close …): file calls release the
GIL, so as many operations stay in flight as there are sessions, and the loop never blocks on
a slow server. Data moves through page-aligned ``mmap`` buffers owned by the session, so the
same code serves ``O_DIRECT`` (which needs aligned memory, offsets and lengths) and buffered
I/O, and no operation allocates its payload. (A session on the native loop, sim.core.
session_native, does the same calls in C over descriptors this class opened and checked.)
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sim.errors import OwnershipError
from sim.nofollow import DIR_FLAGS, NEW_FILE_FLAGS, kind_of
from sim.protocols import Connection, EngineContext
from storage.targets.filetree_dirs import TreeDirs
from storage.targets.filetree_io import (
    DIRECT_ALIGN_BYTES,
    FILE_MODE,
    O_DIRECT,
    READ_FLAGS,
    Buffers,
    IoOptions,
    StreamCursor,
    os_error,
)

if TYPE_CHECKING:
    from storage.targets.filetree import FileTreeTarget

T = TypeVar("T")


class FileSession(TreeDirs, Connection):
    """One session's handle on the tree: each public method is one operation, a blocking call.

    A session on its own thread (sim.core.session_threads) calls them in place; a session on the
    event loop hands each to the engine's pool with :meth:`call`. Either way an ``OSError``
    comes out as a one-line :class:`~sim.errors.TargetError` naming the errno and the path.
    ``bytes_read`` / ``bytes_written`` count the payload moved by this session (each session
    runs one operation at a time, so they need no lock).

    No operation follows a link: every path is opened relative to a descriptor of its parent
    directory (``openat``/``fstatat``/``unlinkat`` … with ``O_NOFOLLOW``), and the parents were
    themselves opened component by component from the root, so neither a file nor a directory
    swapped for a symbolic link is ever gone through. A file written in place is checked after
    its open (``fstat``, no extra path lookup): one link, and with a :class:`TreeGuard` the
    recorded inode. Before touching anything the session refuses with an
    :class:`~sim.errors.OwnershipError` naming the object.
    """

    def __init__(self, target: FileTreeTarget, context: EngineContext) -> None:
        self.target = target
        self._run = context.run_blocking
        self.options = IoOptions()
        self.bytes_read = 0
        self.bytes_written = 0
        self._buffers: Buffers | None = None
        self._rotation = 0
        self._cleanups: list[Callable[[], None]] = []
        self._cursors: list[StreamCursor] = []
        super().__init__(os.fspath(target.root))

    # ------------------------------------------------------------------ set-up

    def configure(self, options: IoOptions, largest_io_bytes: int) -> None:
        """Set the I/O policy and size the buffers for the largest single read or write."""
        size = max(largest_io_bytes, options.transfer_size_bytes, DIRECT_ALIGN_BYTES)
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        if self._buffers is not None:
            self._buffers.release()
        self._buffers = Buffers(size)
        self._buffers.fill(options.seed)
        self.options = options

    def at_close(self, cleanup: Callable[[], None]) -> None:
        """Run the blocking ``cleanup`` (in the pool) when the session closes; its errors are
        ignored: the run is over."""
        self._cleanups.append(cleanup)

    def _flags(self, base: int) -> int:
        return base | O_DIRECT if self.options.direct_io else base

    def _bufs(self) -> Buffers:
        if self._buffers is None:
            self.configure(self.options, self.options.transfer_size_bytes)
        assert self._buffers is not None
        return self._buffers

    def _source(self, length: int) -> memoryview:
        """``length`` bytes of the write buffer, starting at a rotating aligned offset."""
        bufs = self._bufs()
        self._rotation = (self._rotation + DIRECT_ALIGN_BYTES) % bufs.size
        return bufs.write_view[self._rotation : self._rotation + length]

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """One of this session's operations in the engine's pool (one hop)."""
        result: T = await self._run(fn, *args)
        return result

    @staticmethod
    def _do(what: str, path: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with its OSError translated (one line naming ``what`` and ``path``)."""
        try:
            return fn(*args)
        except OSError as exc:
            raise os_error(exc, what, path) from exc

    def _open_written(self, path: str, flags: int) -> int:
        fd_dir, name = self._at(path)
        fd = os.open(name, self._flags(flags | os.O_NOFOLLOW | os.O_CLOEXEC), dir_fd=fd_dir)
        try:
            self._check_written(fd, path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_read(self, path: str) -> int:
        fd_dir, name = self._at(path)
        return os.open(name, self._flags(READ_FLAGS), dir_fd=fd_dir)

    # ------------------------------------------------------------------ native loop parts

    def write_pattern(self) -> bytes:
        """The session's seeded write buffer (twice the transfer buffer's size)."""
        return bytes(self._bufs().write_map)

    def remove_now(self, path: str, directory: bool = False) -> None:
        """Blocking (for ``at_close`` clean-ups): remove a file or an empty directory this
        session made, by name in its parent (``unlinkat`` never follows a link)."""
        fd, name = self._at(path)
        with contextlib.suppress(FileNotFoundError):
            if directory:
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)

    # ------------------------------------------------------------------ metadata

    def stat(self, path: str) -> os.stat_result:
        return self._do("stat", path, self._stat, path)

    def _stat(self, path: str) -> os.stat_result:
        fd, name = self._at(path)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def access(self, path: str, mode: int = os.R_OK | os.W_OK) -> bool:
        """Existence and permission check; False (not an error) when access is denied."""
        return self._do("access", path, self._access, path, mode)

    def _access(self, path: str, mode: int) -> bool:
        fd, name = self._at(path)
        return os.access(name, mode, dir_fd=fd, follow_symlinks=False)

    def chmod(self, path: str, mode: int) -> None:
        self._do("chmod", path, self._chmod, path, mode)

    def _chmod(self, path: str, mode: int) -> None:
        # Linux has no lchmod: an O_PATH descriptor (no open on the server, a lookup) pins the
        # inode, fstat checks it, and chmod through /proc/self/fd changes that inode only.
        fd_dir, name = self._at(path)
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd_dir)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OwnershipError(
                    f"filetree: {path} is {kind_of(info.st_mode)}, not a file dbsim made; "
                    f"refusing to chmod it"
                )
            self._check_written(fd, path, info)
            os.chmod(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        self._do("mkdir", path, self._mkdir, path)

    def _mkdir(self, path: str) -> None:
        fd, name = self._at(path)
        os.mkdir(name, dir_fd=fd)

    def rmdir(self, path: str) -> None:
        self._do("rmdir", path, self.remove_now, path, True)

    def replace_dir(self, old: str | None, new: str) -> None:
        """``rmdir old`` (when given) then ``mkdir new``, as one operation: a bounded ring of
        scratch directories."""
        self._do("mkdir", new, self._replace_dir, old, new)

    def _replace_dir(self, old: str | None, new: str) -> None:
        if old is not None:
            # Already gone (removed by hand)? The ring goes on.
            self.remove_now(old, directory=True)
        self._mkdir(new)

    def unlink(self, path: str) -> None:
        self._do("unlink", path, self.remove_now, path)

    def rename(self, src: str, dst: str) -> None:
        self._do("rename", src, self._rename, src, dst)

    def _rename(self, src: str, dst: str) -> None:
        src_fd, src_name = self._at(src)
        dst_fd, dst_name = self._at(dst)
        os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)

    def readdir(self, path: str) -> int:
        """List a directory (``scandir``, names only); returns the number of entries."""
        return self._do("readdir", path, self._count_entries, path)

    def _count_entries(self, path: str) -> int:
        # Opened afresh (not the cached descriptor), as a listing client does: on NFS the open
        # revalidates the directory.
        fd_dir, name = self._at(path)
        fd = os.open(name, DIR_FLAGS, dir_fd=fd_dir)
        try:
            with os.scandir(fd) as entries:
                return sum(1 for _ in entries)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ data

    def create(self, path: str, data_bytes: int = 0) -> int:
        """Create a new file (``O_CREAT|O_EXCL``), optionally with ``data_bytes`` of data."""
        source = self._source(data_bytes) if data_bytes else None
        n = self._do("create", path, self._create, path, source)
        self.bytes_written += n
        return n

    def _create(self, path: str, source: memoryview | None) -> int:
        fd_dir, name = self._at(path)
        fd = os.open(name, self._flags(NEW_FILE_FLAGS), FILE_MODE, dir_fd=fd_dir)
        try:
            n = os.pwrite(fd, source, 0) if source is not None else 0
            if self.options.fsync != "none":
                os.fsync(fd)  # the new inode too, not only its data
            return n
        finally:
            os.close(fd)

    def read_file(self, path: str) -> int:
        """Read a whole file in transfer-size calls; returns the bytes read."""
        n = self._do("read", path, self._read_file, path)
        self.bytes_read += n
        return n

    def _read_file(self, path: str) -> int:
        chunk = self.options.transfer_size_bytes
        target = [self._bufs().read_view[:chunk]]
        fd = self._open_read(path)
        try:
            total = 0
            while True:
                n = os.preadv(fd, target, total)
                total += n
                if n < chunk:  # a short read is the end of the file
                    return total
        finally:
            os.close(fd)

    def write_file(self, path: str, size_bytes: int) -> int:
        """Rewrite a whole file in transfer-size calls; returns the bytes written."""
        n = self._do("write", path, self._write_file, path, size_bytes)
        self.bytes_written += n
        return n

    def _write_file(self, path: str, size_bytes: int) -> int:
        chunk = self.options.transfer_size_bytes
        # Truncated after the check, not by O_TRUNC at open: a hard link planted in the file's
        # place must not lose its contents before it is recognised.
        fd = self._open_written(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, 0)
            done = 0
            while done < size_bytes:
                done += os.pwrite(fd, self._source(min(chunk, size_bytes - done)), done)
                if self.options.fsync == "each":
                    os.fdatasync(fd)
            if self.options.fsync == "close":
                os.fdatasync(fd)
            return done
        finally:
            os.close(fd)

    def pread(self, path: str, offset: int, length: int) -> int:
        """Open, read ``length`` bytes at ``offset``, close."""
        n = self._do("read", path, self._pread, path, offset, length)
        self.bytes_read += n
        return n

    def _pread(self, path: str, offset: int, length: int) -> int:
        fd = self._open_read(path)
        try:
            return os.preadv(fd, [self._bufs().read_view[:length]], offset)
        finally:
            os.close(fd)

    def pwrite(self, path: str, offset: int, length: int) -> int:
        """Open, write ``length`` bytes at ``offset`` (in place), close."""
        n = self._do("write", path, self._pwrite, path, offset, self._source(length))
        self.bytes_written += n
        return n

    def _pwrite(self, path: str, offset: int, source: memoryview) -> int:
        fd = self._open_written(path, os.O_WRONLY)
        try:
            n = os.pwrite(fd, source, offset)
            if self.options.fsync != "none":
                os.fdatasync(fd)
            return n
        finally:
            os.close(fd)

    def append(self, path: str, length: int, max_bytes: int) -> int:
        """Write ``length`` bytes at the end of the file; a file that would pass ``max_bytes``
        is truncated to empty first, so appends never grow the tree without bound."""
        source = self._source(length)
        n = self._do("append", path, self._append, path, source, max_bytes)
        self.bytes_written += n
        return n

    def _append(self, path: str, source: memoryview, max_bytes: int) -> int:
        fd_dir, name = self._at(path)
        fd = os.open(name, self._flags(os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC), dir_fd=fd_dir)
        try:
            info = os.fstat(fd)  # the size was needed anyway: the check costs nothing more
            self._check_written(fd, path, info)
            end = info.st_size
            if end + len(source) > max_bytes:
                os.ftruncate(fd, 0)
                end = 0
            n = os.pwrite(fd, source, end)
            if self.options.fsync != "none":
                os.fdatasync(fd)
            return n
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ streams

    def stream(self, cursor: StreamCursor, length: int) -> int:
        """The next ``length`` bytes of ``cursor``'s file, read or written at its offset;
        opens the file on the first transfer and closes it on the last."""
        source = self._source(length) if cursor.write else None
        try:
            n = self._stream(cursor, length, source)
        except OSError as exc:
            self._forget(cursor)
            raise os_error(exc, "write" if cursor.write else "read", cursor.path) from exc
        if cursor.write:
            self.bytes_written += n
        else:
            self.bytes_read += n
        return n

    def _stream(self, cursor: StreamCursor, length: int, source: memoryview | None) -> int:
        if cursor.fd is None:
            if cursor.write:
                cursor.fd = self._open_written(cursor.path, os.O_WRONLY)
            else:
                cursor.fd = self._open_read(cursor.path)
            self._cursors.append(cursor)
        length = min(length, cursor.size_bytes - cursor.offset)
        if source is not None:
            n = os.pwrite(cursor.fd, source[:length], cursor.offset)
            if self.options.fsync == "each":
                os.fdatasync(cursor.fd)
        else:
            n = os.preadv(cursor.fd, [self._bufs().read_view[:length]], cursor.offset)
        cursor.offset += n
        if n < length or cursor.offset >= cursor.size_bytes:
            if cursor.write and self.options.fsync == "close":
                os.fdatasync(cursor.fd)
            self._close_cursor(cursor)
            cursor.done = True
        return n

    def _close_cursor(self, cursor: StreamCursor) -> None:
        fd, cursor.fd = cursor.fd, None
        if cursor in self._cursors:
            self._cursors.remove(cursor)
        if fd is not None:
            os.close(fd)

    def _forget(self, cursor: StreamCursor) -> None:
        """After a failed transfer: close the file, restart the pass next time."""
        with contextlib.suppress(OSError):
            self._close_cursor(cursor)
        cursor.offset = 0

    # ------------------------------------------------------------------ end

    async def close(self) -> None:
        cleanups, self._cleanups = self._cleanups, []
        cursors, self._cursors = list(self._cursors), []
        try:
            # The directories last: the clean-ups remove by name in them.
            await self._run(_close_all, cursors, [*cleanups, self._close_dirs])
        finally:
            if self._buffers is not None:
                self._buffers.release()
                self._buffers = None


def _close_all(cursors: list[StreamCursor], cleanups: list[Callable[[], None]]) -> None:
    for cursor in cursors:
        if cursor.fd is not None:
            with contextlib.suppress(OSError):
                os.close(cursor.fd)
            cursor.fd = None
    for cleanup in cleanups:
        # Best effort: the next verify reports what is left.
        with contextlib.suppress(OSError, OwnershipError):
            cleanup()
