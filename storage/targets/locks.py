"""The pieces of the targets' load locks (:meth:`sim.protocols.Target.load_lock`).

Every lock here is *tried*, never waited for inside a driver or a system call: a loader that
finds the lock taken says so once (``on_wait``) and tries again every ``LOCK_POLL_S`` on its
event loop. So a stopped run (SIGINT while waiting) cancels a plain ``asyncio.sleep``, never a
thread blocked in ``flock`` or a server blocked in ``pg_advisory_lock``, and the lock is given
back by closing what holds it (the descriptor, the connection) whatever way the body ends.

File targets (SQLite files, file trees) lock the *directory that holds their data* with
``flock``: it exists before the first load (the targets check it when they open), dbsim
creates nothing there to hold the lock, and a directory is never a file SQLite itself locks.
(Locking the database file would be worse: SQLite's POSIX ``fcntl`` locks are released for the
whole process when *any* descriptor of the file is closed — ours included — and on NFS the
kernel emulates ``flock`` with those very byte-range locks, so SQLite would wait for our lock
in our own process.) The price is that loads of two targets in one directory take turns. A
file system that cannot ``flock`` a directory (NFS: ENOLCK, EBADF) yields no lock, said in the
lock's ``how``; a distributed run still loads once, because its master elects the loader.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from sim.errors import TargetError
from sim.protocols import EngineContext, LoadLock, WaitCallback

log = logging.getLogger(__name__)

#: How often a waiting loader tries the lock again.
LOCK_POLL_S = 0.2
#: ``flock`` errors meaning "this file system cannot", not "someone else holds it".
UNSUPPORTED_ERRNOS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF})


class LockUnsupported(Exception):
    """The target's storage cannot take this lock (the load goes on without one)."""


def lock_id(*parts: str, bits: int = 64) -> int:
    """A stable signed integer naming a lock (PostgreSQL's advisory locks take a bigint,
    Oracle's DBMS_LOCK 0..2^30-1): a hash of ``parts``, the same in every process."""
    digest = hashlib.blake2b("\0".join(("dbsim-load", *parts)).encode(), digest_size=8).digest()
    if bits == 64:
        return int.from_bytes(digest, "big", signed=True)
    return int.from_bytes(digest, "big") % (1 << bits)


@contextlib.asynccontextmanager
async def polled_lock(
    try_acquire: Callable[[], Awaitable[bool]],
    release: Callable[[], Awaitable[None]],
    *,
    what: str,
    how: str,
    shared: bool,
    on_wait: WaitCallback | None,
) -> AsyncIterator[LoadLock]:
    """Try ``try_acquire`` until it succeeds, then hold the lock around the body.

    ``try_acquire`` raising :class:`LockUnsupported` yields no lock (logged once). The caller
    owns the resource behind the lock and closes it afterwards, which also drops a lock
    acquired by a try that was cancelled before it could report success.
    """
    # Imported here: the registry imports this module (through the SQLite target) for every
    # scenario read, which needs no event loop (dbsim validate, schema; issue #25).
    import asyncio

    started = time.monotonic()
    told = False
    try:
        while not await try_acquire():
            if not told:
                told = True
                if on_wait is not None:
                    on_wait(what)
            await asyncio.sleep(LOCK_POLL_S)
    except LockUnsupported as exc:
        log.warning("loading %s without a load lock: %s", what, exc)
        yield LoadLock(False, f"none: {exc}", shared, time.monotonic() - started)
        return
    lock = LoadLock(True, how, shared, time.monotonic() - started)
    try:
        yield lock
    finally:
        await release()


class _DirectoryFlock:
    """A descriptor of a directory and its ``flock``; one call at a time (a try still running
    in the pool when the wait is cancelled must not lock a descriptor number reused after the
    close)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._mutex = threading.Lock()

    def open(self) -> None:
        with self._mutex:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def try_lock(self, shared: bool) -> bool:
        with self._mutex:
            if self._fd < 0:
                return False
            mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
            try:
                fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            except OSError as exc:
                if exc.errno in UNSUPPORTED_ERRNOS:
                    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                    raise LockUnsupported(f"flock {self.path} refused ({name})") from exc
                raise
            return True

    def unlock(self) -> None:
        with self._mutex:
            if self._fd >= 0:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._mutex:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)  # releases the flock too


@contextlib.asynccontextmanager
async def directory_lock(
    context: EngineContext,
    directory: Path,
    *,
    what: str,
    shared: bool,
    on_wait: WaitCallback | None,
    label: str,
) -> AsyncIterator[LoadLock]:
    """``flock`` on ``directory`` (which must exist) around the body; see the module."""
    handle = _DirectoryFlock(directory)
    try:
        await context.run_blocking(handle.open)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise TargetError(f"{label}: load lock: cannot open {directory}: {reason}") from exc

    async def try_acquire() -> bool:
        try:
            return bool(await context.run_blocking(handle.try_lock, shared))
        except OSError as exc:
            raise TargetError(f"{label}: load lock: flock {directory}: {exc}") from exc

    async def release() -> None:
        await context.run_blocking(handle.unlock)

    try:
        async with polled_lock(
            try_acquire,
            release,
            what=what,
            how=f"flock {directory}",
            shared=shared,
            on_wait=on_wait,
        ) as lock:
            yield lock
    finally:
        await context.run_blocking(handle.close)
