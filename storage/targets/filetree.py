"""The file-tree target: a directory on a local file system or an NFS mount.

A session's :class:`FileSession` wraps plain ``os`` calls. Each public method is one
operation and makes exactly one hop to the engine's thread pool (``EngineContext.run_blocking``)
that does all of the operation's system calls (open, pread, close …): file calls release the
GIL, so as many operations stay in flight as there are sessions, and the loop never blocks on
a slow server. Data moves through page-aligned ``mmap`` buffers owned by the session, so the
same code serves ``O_DIRECT`` (which needs aligned memory, offsets and lengths) and buffered
I/O, and no operation allocates its payload.

Every ``OSError`` becomes a :class:`~sim.errors.TargetError` of one line naming the errno,
its meaning, the call and the path: ``filetree: write /mnt/t/x: ENOSPC (No space left on
device)``.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from sim.errors import TargetError
from sim.protocols import SCOPE_HOST, Connection, EngineContext, LoadLock, Target, WaitCallback
from storage.targets.locks import directory_lock
from storage.targets.settings import FileTreeSettings

FsyncPolicy = Literal["none", "close", "each"]
DIRECT_ALIGN_BYTES = 4096  # O_DIRECT alignment that every Linux file system accepts
DEFAULT_TRANSFER_BYTES = 65536
FILE_MODE = 0o644
O_DIRECT: int = getattr(os, "O_DIRECT", 0)
MOUNTS = Path("/proc/self/mounts")


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
class _Buffers:
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


class FileSession(Connection):
    """One session's handle on the tree: each method is one operation, one pool hop.

    ``bytes_read`` / ``bytes_written`` count the payload moved by this session.
    """

    def __init__(self, target: FileTreeTarget, context: EngineContext) -> None:
        self.target = target
        self._run = context.run_blocking
        self.options = IoOptions()
        self.bytes_read = 0
        self.bytes_written = 0
        self._buffers: _Buffers | None = None
        self._rotation = 0
        self._cleanups: list[Callable[[], None]] = []
        self._cursors: list[StreamCursor] = []

    # ------------------------------------------------------------------ set-up

    def configure(self, options: IoOptions, largest_io_bytes: int) -> None:
        """Set the I/O policy and size the buffers for the largest single read or write."""
        size = max(largest_io_bytes, options.transfer_size_bytes, DIRECT_ALIGN_BYTES)
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        if self._buffers is not None:
            self._buffers.release()
        self._buffers = _Buffers(size)
        self._buffers.fill(options.seed)
        self.options = options

    def at_close(self, cleanup: Callable[[], None]) -> None:
        """Run the blocking ``cleanup`` (in the pool) when the session closes; its errors are
        ignored: the run is over."""
        self._cleanups.append(cleanup)

    def _flags(self, base: int) -> int:
        return base | O_DIRECT if self.options.direct_io else base

    def _bufs(self) -> _Buffers:
        if self._buffers is None:
            self.configure(self.options, self.options.transfer_size_bytes)
        assert self._buffers is not None
        return self._buffers

    def _source(self, length: int) -> memoryview:
        """``length`` bytes of the write buffer, starting at a rotating aligned offset."""
        bufs = self._bufs()
        self._rotation = (self._rotation + DIRECT_ALIGN_BYTES) % bufs.size
        return bufs.write_view[self._rotation : self._rotation + length]

    async def _do(self, what: str, path: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the pool: one hop per operation, OSError translated."""
        try:
            return await self._run(fn, *args)
        except OSError as exc:
            raise os_error(exc, what, path) from exc

    # ------------------------------------------------------------------ metadata

    async def stat(self, path: str) -> os.stat_result:
        result: os.stat_result = await self._do("stat", path, os.stat, path)
        return result

    async def access(self, path: str, mode: int = os.R_OK | os.W_OK) -> bool:
        """Existence and permission check; False (not an error) when access is denied."""
        return bool(await self._do("access", path, os.access, path, mode))

    async def chmod(self, path: str, mode: int) -> None:
        await self._do("chmod", path, os.chmod, path, mode)

    async def mkdir(self, path: str) -> None:
        await self._do("mkdir", path, os.mkdir, path)

    async def rmdir(self, path: str) -> None:
        await self._do("rmdir", path, os.rmdir, path)

    async def replace_dir(self, old: str | None, new: str) -> None:
        """``rmdir old`` (when given) then ``mkdir new``, in one hop: a bounded ring of scratch
        directories."""
        await self._do("mkdir", new, _replace_dir, old, new)

    async def unlink(self, path: str) -> None:
        await self._do("unlink", path, os.unlink, path)

    async def rename(self, src: str, dst: str) -> None:
        await self._do("rename", src, os.rename, src, dst)

    async def readdir(self, path: str) -> int:
        """List a directory (``scandir``, names only); returns the number of entries."""
        return int(await self._do("readdir", path, _count_entries, path))

    # ------------------------------------------------------------------ data

    async def create(self, path: str, data_bytes: int = 0) -> int:
        """Create a new file (``O_CREAT|O_EXCL``), optionally with ``data_bytes`` of data."""
        source = self._source(data_bytes) if data_bytes else None
        n = int(await self._do("create", path, self._create, path, source))
        self.bytes_written += n
        return n

    def _create(self, path: str, source: memoryview | None) -> int:
        fd = os.open(path, self._flags(os.O_WRONLY | os.O_CREAT | os.O_EXCL), FILE_MODE)
        try:
            n = os.pwrite(fd, source, 0) if source is not None else 0
            if self.options.fsync != "none":
                os.fsync(fd)  # the new inode too, not only its data
            return n
        finally:
            os.close(fd)

    async def read_file(self, path: str) -> int:
        """Read a whole file in transfer-size calls; returns the bytes read."""
        n = int(await self._do("read", path, self._read_file, path))
        self.bytes_read += n
        return n

    def _read_file(self, path: str) -> int:
        chunk = self.options.transfer_size_bytes
        target = [self._bufs().read_view[:chunk]]
        fd = os.open(path, self._flags(os.O_RDONLY))
        try:
            total = 0
            while True:
                n = os.preadv(fd, target, total)
                total += n
                if n < chunk:  # a short read is the end of the file
                    return total
        finally:
            os.close(fd)

    async def write_file(self, path: str, size_bytes: int) -> int:
        """Rewrite a whole file (``O_TRUNC``) in transfer-size calls; returns the bytes written."""
        n = int(await self._do("write", path, self._write_file, path, size_bytes))
        self.bytes_written += n
        return n

    def _write_file(self, path: str, size_bytes: int) -> int:
        chunk = self.options.transfer_size_bytes
        fd = os.open(path, self._flags(os.O_WRONLY | os.O_CREAT | os.O_TRUNC), FILE_MODE)
        try:
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

    async def pread(self, path: str, offset: int, length: int) -> int:
        """Open, read ``length`` bytes at ``offset``, close."""
        n = int(await self._do("read", path, self._pread, path, offset, length))
        self.bytes_read += n
        return n

    def _pread(self, path: str, offset: int, length: int) -> int:
        fd = os.open(path, self._flags(os.O_RDONLY))
        try:
            return os.preadv(fd, [self._bufs().read_view[:length]], offset)
        finally:
            os.close(fd)

    async def pwrite(self, path: str, offset: int, length: int) -> int:
        """Open, write ``length`` bytes at ``offset`` (in place), close."""
        n = int(await self._do("write", path, self._pwrite, path, offset, self._source(length)))
        self.bytes_written += n
        return n

    def _pwrite(self, path: str, offset: int, source: memoryview) -> int:
        fd = os.open(path, self._flags(os.O_WRONLY))
        try:
            n = os.pwrite(fd, source, offset)
            if self.options.fsync != "none":
                os.fdatasync(fd)
            return n
        finally:
            os.close(fd)

    async def append(self, path: str, length: int, max_bytes: int) -> int:
        """Write ``length`` bytes at the end of the file; a file that would pass ``max_bytes``
        is truncated to empty first, so appends never grow the tree without bound."""
        source = self._source(length)
        n = int(await self._do("append", path, self._append, path, source, max_bytes))
        self.bytes_written += n
        return n

    def _append(self, path: str, source: memoryview, max_bytes: int) -> int:
        fd = os.open(path, self._flags(os.O_WRONLY))
        try:
            end = os.fstat(fd).st_size
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

    async def stream(self, cursor: StreamCursor, length: int) -> int:
        """The next ``length`` bytes of ``cursor``'s file, read or written at its offset;
        opens the file on the first transfer and closes it on the last."""
        source = self._source(length) if cursor.write else None
        try:
            n = int(await self._run(self._stream, cursor, length, source))
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
            flags = os.O_WRONLY if cursor.write else os.O_RDONLY
            cursor.fd = os.open(cursor.path, self._flags(flags))
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
            await self._run(_close_all, cursors, cleanups)
        finally:
            if self._buffers is not None:
                self._buffers.release()
                self._buffers = None


def _replace_dir(old: str | None, new: str) -> None:
    if old is not None:
        # Already gone (removed by hand)? The ring goes on.
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(old)
    os.mkdir(new)


def _count_entries(path: str) -> int:
    with os.scandir(path) as entries:
        return sum(1 for _ in entries)


def _close_all(cursors: list[StreamCursor], cleanups: list[Callable[[], None]]) -> None:
    for cursor in cursors:
        if cursor.fd is not None:
            with contextlib.suppress(OSError):
                os.close(cursor.fd)
            cursor.fd = None
    for cleanup in cleanups:
        # Best effort: the next verify reports what is left.
        with contextlib.suppress(OSError):
            cleanup()


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

    async def open(self, context: EngineContext) -> None:
        self._context = context
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
