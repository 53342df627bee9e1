"""The lab's own page cache, dropped — and nobody else's.

Before the lab's processes start (``up``, ``exec``, :meth:`Lab.drop_caches`) the pages of the
lab's files must be out of the host's page cache: pages cached earlier would be served
without touching the device and are charged to whichever memory group first read them, not
to the lab's. A global ``echo 3 > /proc/sys/vm/drop_caches`` did that by dropping every
cache of the host: another lab's data, the other tests' files, a user's database.

Per volume: every regular file of the volume's file system is opened relative to its
directory with ``O_NOFOLLOW`` (a link is never followed), kept only when it is on the
volume's device (``st_dev`` is the loop device's number: a file system mounted inside the
volume is someone else's and not descended into), and its pages are dropped with
``posix_fadvise(POSIX_FADV_DONTNEED)``, after a ``syncfs`` of that file system made them
clean (:func:`sync_lab_files`); then ``BLKFLSBUF`` on the loop device itself — opened with
``O_NOFOLLOW`` and checked to be the volume's device number — drops the device's own cached
blocks (ext4's metadata). With named volumes the
PostgreSQL directory beside them (on the host's file system, made by the lab) is dropped the
same way, restricted to the device that directory is on.

Only the lab's own file systems are synced, never the host's (``sync``): a ``sync`` makes
every file system on the host commit its journal, and on another test's loop device that
commit is counted as that test's writes. Measured on an ext4 on a loop device: ten ``sync``
calls on it idle added 12 writes of no data (the kernel counts an empty flush as a write as
well as a flush), and ten after ten direct 8 KiB writes each added 54 writes beyond the 100
(38 flushes, 16 journal blocks). Beside other tests, a replay's ext4 saw 11 to 25 flushes
and 10 to 27 4-KiB journal writes a second besides fio's 200 8-KiB writes
(tests/integration/test_replay_fio.py: 1x delivered 211.3 writes/s of 200.2 asked, +5.5 %).

Why not unmount and mount again, which drops all of a file system's pages at once: a running
PostgreSQL or a shell whose directory is on the volume makes the unmount fail, and a new
mount gets a new mount ID, the identity ``down`` checks the lab's mount by. What fadvise
leaves cached: pages a process has mapped (and dentries and inodes, which are not data).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storage.lab import identity

#: ioctl BLKFLSBUF (linux/fs.h, _IO(0x12, 97)): write back and invalidate a block device's
#: buffer cache.
BLKFLSBUF = 0x1261
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_libc = ctypes.CDLL(None, use_errno=True)


def drop_lab_caches(state: Mapping[str, Any]) -> int:
    """Drop the page cache of the lab's files and devices (``state``: the lab's record);
    the number of files whose pages were dropped."""
    sync_lab_files(state)  # dirty pages are not dropped by fadvise: written back, they are clean
    dropped = 0
    for record in state.get("volumes", []):
        if record.get("mounted") and record.get("dev"):
            dropped += drop_tree(Path(record["mount_point"]), record["dev"])
        if record.get("loop") and record.get("dev"):
            flush_device(record["loop"], record["dev"])
    pg_root = _own_postgres_root(state)
    if pg_root is not None:
        dropped += drop_tree(*pg_root)
    return dropped


def sync_lab_files(state: Mapping[str, Any]) -> int:
    """Write back the dirty pages of the lab's own file systems (``syncfs`` of each mounted
    volume, and of the PostgreSQL directory the lab made beside named volumes), not the
    host's (module docstring); the number of file systems synced."""
    synced = 0
    for record in state.get("volumes", []):
        if record.get("mounted") and record.get("dev"):
            synced += syncfs(Path(record["mount_point"]), record["dev"])
    pg_root = _own_postgres_root(state)
    if pg_root is not None:
        synced += syncfs(*pg_root)
    return synced


def _own_postgres_root(state: Mapping[str, Any]) -> tuple[Path, str] | None:
    """The PostgreSQL directory the lab made beside named volumes and its device, when it is
    still the one recorded (identity checked); None otherwise."""
    pg = state.get("postgres") or {}
    root_id = pg.get("root_id")
    if (
        pg.get("remove_root")
        and root_id
        and identity.check(Path(pg["root"]), root_id, "dir") is None
    ):
        return Path(pg["root"]), root_id["dev"]
    return None


def syncfs(top: Path, dev: str) -> bool:
    """``syncfs(2)`` on the file system of directory ``top`` when it is on device ``dev``
    (``MAJ:MIN``; a link is not followed); whether it was done."""
    try:
        fd = os.open(top, _OPEN_DIR)
    except OSError:  # gone, or a link
        return False
    try:
        if identity.dev_text(os.fstat(fd).st_dev) != dev:
            return False
        if _libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(top))
        return True
    finally:
        os.close(fd)


def drop_tree(top: Path, dev: str) -> int:
    """``posix_fadvise(DONTNEED)`` every regular file under ``top`` that is on device ``dev``
    (``MAJ:MIN``); nothing when ``top`` itself is not on it (the volume is not mounted there,
    or another mount hides it). The number of files dropped."""
    dropped = 0
    for _, dirnames, filenames, dir_fd in os.fwalk(top, follow_symlinks=False):
        if identity.dev_text(os.fstat(dir_fd).st_dev) != dev:
            dirnames.clear()  # another file system mounted here (or at the top): not ours
            continue
        for name in filenames:
            dropped += _drop_file(name, dir_fd, dev)
    return dropped


def _drop_file(name: str, dir_fd: int, dev: str) -> int:
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError:  # removed since the directory was read, a link (ELOOP), a socket
        return 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or identity.dev_text(st.st_dev) != dev:
            return 0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return 1
    finally:
        os.close(fd)


def flush_device(device: str, dev: str) -> bool:
    """``BLKFLSBUF`` on ``device`` when it is the block device numbered ``dev``; whether it
    was done."""
    with identity.open_loop(device) as fd:
        if fd is None or identity.dev_text(os.fstat(fd).st_rdev) != dev:
            return False
        fcntl.ioctl(fd, BLKFLSBUF)
        return True
