"""What the lab made, by identity: recorded at ``up``, compared before every step of ``down``.

A name says nothing about who owns a thing now: ``/dev/loop3`` goes to the next
``losetup --find``, a mount ID and an anonymous device number to the next mount, an image path
to whoever writes a file there. So the lab records what the kernel says about each object the
moment it is made, and ``down`` acts on an object only while the kernel still says the same:

- a file or directory: its device and inode (``lstat``, never following a link) and, where
  the file system keeps one, the inode's generation (a file made later in the freed inode
  gets the same number, not the same generation); an image also its size; a file must have
  exactly one link;
- a loop device: its own device number (``st_rdev`` of the node, opened ``O_NOFOLLOW``) and
  the device and inode of the file it reads, as the kernel reports them
  (``LOOP_GET_STATUS64``: ``lo_device``, ``lo_inode``), not the file's name;
- a mount: its mount ID and source device (``MAJ:MIN``) from ``/proc/self/mountinfo``, and on
  Linux 6.8 and later the 64-bit mount ID the kernel never hands out twice
  (``statx(STATX_MNT_ID_UNIQUE)``): the short ID is reused by the next mount.

Every check returns ``None`` when the object is the recorded one, :data:`GONE` when nothing is
there, or a short phrase saying what differs, for the warning that names it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import stat
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import TargetError

GONE = "gone"
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
LOOP_GET_STATUS64 = 0x4C05
LOOP_CLR_FD = 0x4C01
FS_IOC_GETVERSION = 0x80087601  # _IOR('v', 1, long)
# struct loop_info64: lo_device, lo_inode, lo_rdevice, lo_offset, lo_sizelimit, lo_number,
# lo_encrypt_type, lo_encrypt_key_size, lo_flags, lo_file_name, lo_crypt_name, key, lo_init.
_LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32s2Q")
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_NO_AUTOMOUNT = 0x800
AT_STATX_DONT_SYNC = 0x4000  # a FUSE mount answers from its cache, never waits for its server
STATX_MNT_ID_UNIQUE = 0x4000
STATX_MNT_ID_OFFSET = 0x90
UMOUNT_NOFOLLOW = 8
_libc = ctypes.CDLL(None, use_errno=True)


def dev_text(dev: int) -> str:
    """``MAJ:MIN`` of a device number as ``stat`` gives it."""
    return f"{os.major(dev)}:{os.minor(dev)}"


def _kernel_dev_text(dev: int) -> str:
    """``MAJ:MIN`` of a device number in the kernel's own encoding (``new_encode_dev``), as
    ``LOOP_GET_STATUS64`` reports ``lo_device``."""
    return f"{(dev >> 8) & 0xFFF}:{(dev & 0xFF) | ((dev >> 12) & 0xFFF00)}"


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "symbolic link" if stat.S_ISLNK(mode) else "special file"


def generation_of(fd: int) -> int | None:
    """The inode's generation number (``FS_IOC_GETVERSION``; ext4, xfs, btrfs): a file made
    later in a freed inode gets the same number but another generation. None where the file
    system keeps none."""
    try:
        raw = fcntl.ioctl(fd, FS_IOC_GETVERSION, bytes(8))
    except OSError:
        return None
    return int(struct.unpack_from("=I", raw)[0])


def _generation_at(name: str, dir_fd: int | None, st: os.stat_result) -> int | None:
    """:func:`generation_of` the regular file or directory ``name`` that ``st`` describes,
    opened without following a link and checked to be that inode (never a device or fifo)."""
    if _kind(st.st_mode) not in ("file", "dir"):
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return generation_of(fd) if os.fstat(fd).st_ino == st.st_ino else None
    finally:
        os.close(fd)


def node(st: os.stat_result, size: bool = False, generation: int | None = None) -> dict[str, Any]:
    """The identity to record of a file or directory from its ``stat``."""
    found: dict[str, Any] = {"dev": dev_text(st.st_dev), "ino": st.st_ino}
    if size:
        found["size"] = st.st_size
    if generation is not None:
        found["generation"] = generation
    return found


def node_at(path: Path, size: bool = False) -> dict[str, Any]:
    """The identity of what the lab just made at ``path`` (not following a link)."""
    st = os.lstat(path)
    return node(st, size, _generation_at(str(path), None, st))


def differs(
    recorded: Mapping[str, Any], st: os.stat_result, kind: str, generation: int | None = None
) -> str | None:
    """What about ``st`` (and the inode's ``generation``, when both are known) is not the
    recorded ``kind`` of node; None when it is the same."""
    found = _kind(st.st_mode)
    if found != kind:
        return f"it is a {found} now"
    parts = []
    if dev_text(st.st_dev) != recorded["dev"] or st.st_ino != recorded["ino"]:
        parts.append(
            f"inode {st.st_ino} on {dev_text(st.st_dev)}, the lab's was {recorded['ino']} "
            f"on {recorded['dev']}"
        )
    elif generation is not None and recorded.get("generation") not in (None, generation):
        parts.append(f"a new {found} in the lab's freed inode {st.st_ino} (another generation)")
    if "size" in recorded and st.st_size != recorded["size"]:
        parts.append(f"{st.st_size} bytes, the lab's had {recorded['size']}")
    if kind == "file" and st.st_nlink != 1:
        parts.append(f"{st.st_nlink} hard links, the lab made one")
    return "; ".join(parts) or None


@contextlib.contextmanager
def _parent(path: Path) -> Iterator[int | None]:
    try:
        fd = os.open(path.parent, DIR_FLAGS)
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def check(path: Path, recorded: Mapping[str, Any], kind: str) -> str | None:
    """None when ``path`` is the recorded node, :data:`GONE` when nothing is there, else what
    differs."""
    with _parent(path) as parent:
        if parent is None:
            return GONE
        try:
            st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return GONE
        return differs(recorded, st, kind, _generation(recorded, path.name, parent, st))


def _generation(
    recorded: Mapping[str, Any], name: str, parent: int, st: os.stat_result
) -> int | None:
    return _generation_at(name, parent, st) if "generation" in recorded else None


def remove_own(path: Path, recorded: Mapping[str, Any], kind: str) -> str | None:
    """Remove ``path`` — a file (``unlink``), an empty directory (``rmdir``) or, with kind
    ``tree``, a directory and what is in it — only while it is the recorded node: looked up
    and removed relative to one descriptor of its parent, never through a link. None when it
    is gone now; else why it was left. The removal's own OSError (not empty, busy) propagates.
    """
    with _parent(path) as parent:
        if parent is None:
            return None
        try:
            st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        generation = _generation(recorded, path.name, parent, st)
        why = differs(recorded, st, "dir" if kind == "tree" else kind, generation)
        if why:
            return why
        if kind == "file":
            os.unlink(path.name, dir_fd=parent)
        elif kind == "dir":
            os.rmdir(path.name, dir_fd=parent)
        else:
            shutil.rmtree(path.name, dir_fd=parent)
        return None


# ---------------------------------------------------------------------------- loop devices


@contextlib.contextmanager
def open_loop(device: str) -> Iterator[int | None]:
    """A descriptor of the block device node ``device`` (never through a link), or None."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        yield None
        return
    try:
        yield fd if stat.S_ISBLK(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def loop_of(fd: int) -> dict[str, Any] | None:
    """What the loop device open at ``fd`` is: its ``rdev`` and the ``backing_dev`` and
    ``backing_ino`` of the file attached (None, None when the kernel could not stat the file:
    an array whose server is gone); None when nothing is attached or it is no loop device."""
    rdev = dev_text(os.fstat(fd).st_rdev)
    try:
        raw = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(_LOOP_INFO64.size))
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOTTY, errno.EINVAL):
            return None
        return {"rdev": rdev, "backing_dev": None, "backing_ino": None}
    lo_device, lo_inode = _LOOP_INFO64.unpack(raw)[:2]
    return {"rdev": rdev, "backing_dev": _kernel_dev_text(lo_device), "backing_ino": lo_inode}


def loop_identity(device: str) -> dict[str, Any] | None:
    """:func:`loop_of` the node ``device`` (None: no such device, or nothing attached)."""
    with open_loop(device) as fd:
        return None if fd is None else loop_of(fd)


def loop_differs(recorded: Mapping[str, Any], now: Mapping[str, Any] | None) -> str | None:
    """None when ``now`` is the recorded loop device on the recorded file, :data:`GONE` when
    nothing is attached, else what differs."""
    if now is None:
        return GONE
    if now["rdev"] != recorded["rdev"]:
        return f"device {now['rdev']}, the lab's was {recorded['rdev']}"
    if now["backing_ino"] is None:
        return "the kernel cannot stat the file it is attached to"
    if (now["backing_dev"], now["backing_ino"]) != (
        recorded["backing_dev"],
        recorded["backing_ino"],
    ):
        return (
            f"attached to inode {now['backing_ino']} on {now['backing_dev']}, the lab's image "
            f"is inode {recorded['backing_ino']} on {recorded['backing_dev']}"
        )
    return None


def clear_loop(fd: int) -> None:
    """Detach the loop device open at ``fd`` (what ``losetup --detach`` does, on the very
    device that was checked)."""
    try:
        fcntl.ioctl(fd, LOOP_CLR_FD, 0)
    except OSError as exc:
        raise TargetError(f"lab: detach loop device: {exc.strerror}") from exc


# ---------------------------------------------------------------------------- mounts


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo``."""

    id: int
    parent: int
    dev: str
    target: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as three octal digits.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts(text: str | None = None) -> list[Mount]:
    """Every mount of this namespace, in the kernel's order."""
    if text is None:
        text = Path("/proc/self/mountinfo").read_text()
    found = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        found.append(
            Mount(int(fields[0]), int(fields[1]), fields[2], _unescape(fields[4]), rest[0], rest[1])
        )
    return found


def mounts_at(target: str, text: str | None = None) -> list[Mount]:
    """The mounts whose mount point is ``target`` (a path as the kernel writes it)."""
    return [m for m in mounts(text) if m.target == target]


def top_mount(target: str, text: str | None = None) -> Mount | None:
    """The mount one sees at ``target``: the one no other mount there sits on."""
    stack = mounts_at(target, text)
    covered = {m.parent for m in stack}
    on_top = [m for m in stack if m.id not in covered]
    return on_top[-1] if on_top else (stack[-1] if stack else None)


def unique_mount_id(target: str) -> int | None:
    """The 64-bit ID of the mount at ``target`` (Linux 6.8+; None before, or on error)."""
    statx = getattr(_libc, "statx", None)
    if statx is None:
        return None
    buf = ctypes.create_string_buffer(256)
    flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC
    if statx(AT_FDCWD, os.fsencode(target), flags, STATX_MNT_ID_UNIQUE, buf) != 0:
        return None
    (mask,) = struct.unpack_from("=I", buf, 0)
    if not mask & STATX_MNT_ID_UNIQUE:
        return None
    return int(struct.unpack_from("=Q", buf, STATX_MNT_ID_OFFSET)[0])


def mount_identity(target: str) -> dict[str, Any] | None:
    """The identity to record of the mount now on top at ``target``."""
    top = top_mount(target)
    if top is None:
        return None
    return {"id": top.id, "dev": top.dev, "target": target, "unique": unique_mount_id(target)}


def is_recorded(recorded: Mapping[str, Any], mount: Mount) -> bool:
    """Whether ``mount`` has the recorded short ID and source device."""
    return (mount.id, mount.dev) == (recorded["id"], recorded["dev"])


def mount_differs(recorded: Mapping[str, Any]) -> str | None:
    """None when the mount on top at the recorded place is the recorded one, :data:`GONE`
    when nothing is mounted there, else what is mounted instead."""
    top = top_mount(recorded["target"])
    if top is None:
        return GONE
    unique, now = recorded.get("unique"), None
    if unique is not None:
        now = unique_mount_id(recorded["target"])
    # Unreadable now (a FUSE mount whose server died): the short ID and device must do.
    same_unique = now is None or now == unique
    if is_recorded(recorded, top) and same_unique:
        return None
    reused = ", a new mount that took the lab's mount ID" if is_recorded(recorded, top) else ""
    return (
        f"{top.fstype} from {top.source} is mounted there (mount {top.id}, device {top.dev}"
        f"{reused}); the lab mounted device {recorded['dev']} as mount {recorded['id']}"
    )


def umount(target: str) -> None:
    """Unmount ``target`` (``umount2`` with ``UMOUNT_NOFOLLOW``: a link put in its place is
    not followed; never lazily, which would keep the loop device busy)."""
    if _libc.umount2(os.fsencode(target), UMOUNT_NOFOLLOW) == 0:
        return
    code = ctypes.get_errno()
    hint = f" (a process uses it: see `fuser -vm {target}`)" if code == errno.EBUSY else ""
    raise TargetError(f"lab: unmount {target}: {os.strerror(code)}{hint}")
