"""Find the block device(s) beneath a file-system path.

``stat(path).st_dev`` gives the device number of the file system holding the path. When its
major is not 0 the number names a block device: ``/sys/dev/block/MAJ:MIN`` leads to its sysfs
directory, and from there to the parent disk of a partition, the backing file of a loop
device, the name and underlying devices (``slaves/``) of a device-mapper or md device.

A major of 0 is an anonymous device (overlayfs, btrfs, tmpfs, nfs …); the mount carrying that
number in ``/proc/self/mountinfo`` says what is underneath: overlayfs is followed through its
``upperdir=``, btrfs through its mount source device (and the other members listed under
``/sys/fs/btrfs``), nfs is reported as such with its ``server:/export``, and memory file
systems have no device.

Every file read goes through the ``sys_root`` and ``proc_root`` given to
:class:`DeviceResolver`, and the device number of a path through its ``dev_of`` hook, so tests
can resolve paths on a fake tree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Role = Literal["filesystem", "parent", "slave"]
StorageKind = Literal["block", "nfs", "none"]

NFS_TYPES = frozenset({"nfs", "nfs4"})
_MAX_DEPTH = 8  # overlay on overlay on … ; a guard against loops, not a real limit


@dataclass(frozen=True)
class BlockDevice:
    """One block device as ``/proc/diskstats`` names it.

    ``role`` is ``filesystem`` for the device the file system sits on, ``parent`` for the
    whole disk of a partition, ``slave`` for a device beneath a device-mapper or md device.
    ``devtype`` is ``disk``, ``partition``, ``loop``, ``dm`` or ``md``.
    """

    name: str
    major: int
    minor: int
    role: Role
    devtype: str = "disk"
    backing_file: str | None = None
    dm_name: str | None = None

    def describe(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {
            "name": self.name,
            "dev": f"{self.major}:{self.minor}",
            "role": self.role,
            "type": self.devtype,
        }
        if self.backing_file is not None:
            out["backing_file"] = self.backing_file
        if self.dm_name is not None:
            out["dm_name"] = self.dm_name
        return out


@dataclass(frozen=True)
class ResolvedStorage:
    """What lies beneath ``path``.

    ``kind`` is ``block`` (``devices`` lists the file-system device first, then its parents
    and slaves), ``nfs`` (``source`` is ``server:/export``, no devices) or ``none`` (tmpfs and
    other file systems without a block device; ``note`` says why).
    """

    path: Path
    kind: StorageKind
    devices: tuple[BlockDevice, ...] = ()
    mount_point: str | None = None
    fstype: str | None = None
    source: str | None = None
    note: str = ""


@dataclass(frozen=True)
class MountInfo:
    """One line of ``/proc/self/mountinfo``."""

    major: int
    minor: int
    root: str
    mount_point: str
    fstype: str
    source: str
    super_options: str

    def option(self, key: str) -> str | None:
        """The value of ``key=`` among the super-block options (``upperdir``, ``addr`` …)."""
        for item in _split_options(self.super_options):
            if item.startswith(key + "="):
                return item[len(key) + 1 :]
        return None


def _split_options(options: str) -> list[str]:
    # Overlay paths may contain escaped commas ("\,"); split on the others only.
    items: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in options:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return items


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as ``\\ooo`` octal escapes."""
    out: list[str] = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and i + 4 <= len(field):
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[MountInfo]:
    """Parse ``/proc/<pid>/mountinfo`` (see proc(5)); malformed lines are skipped."""
    mounts: list[MountInfo] = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3 or ":" not in fields[2]:
            continue
        major, _, minor = fields[2].partition(":")
        mounts.append(
            MountInfo(
                major=int(major),
                minor=int(minor),
                root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]),
                fstype=fields[sep + 1],
                source=_unescape(fields[sep + 2]),
                super_options=fields[sep + 3] if len(fields) > sep + 3 else "",
            )
        )
    return mounts


def _real_dev_of(path: Path) -> tuple[int, int]:
    st_dev = os.stat(path).st_dev
    return os.major(st_dev), os.minor(st_dev)


def _is_under(path: str, mount_point: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")


class DeviceResolver:
    """Resolves paths to block devices, reading ``sys_root`` and ``proc_root``.

    ``dev_of(path) -> (major, minor)`` returns the device number of the file system holding
    ``path`` (default: from ``os.stat``); tests replace it together with the two roots.
    """

    def __init__(
        self,
        sys_root: Path = Path("/sys"),
        proc_root: Path = Path("/proc"),
        dev_of: Callable[[Path], tuple[int, int]] = _real_dev_of,
    ) -> None:
        self.sys_root = Path(sys_root)
        self.proc_root = Path(proc_root)
        self.dev_of = dev_of

    # ----------------------------------------------------------------- entry point

    def resolve(self, path: Path | str) -> ResolvedStorage:
        """What is beneath ``path`` (or beneath its nearest existing ancestor)."""
        return self._resolve(Path(path), depth=0)

    def _resolve(self, path: Path, depth: int) -> ResolvedStorage:
        path = _existing_ancestor(path)
        major, minor = self.dev_of(path)
        mount = self._mount_for(path, major, minor)
        mount_point = mount.mount_point if mount else None
        fstype = mount.fstype if mount else None
        source = mount.source if mount else None
        if major != 0:
            devices = self.block_devices(major, minor)
            if not devices:
                return ResolvedStorage(
                    path,
                    "none",
                    (),
                    mount_point,
                    fstype,
                    source,
                    note=f"device {major}:{minor} not found under {self.sys_root}/dev/block",
                )
            return ResolvedStorage(path, "block", devices, mount_point, fstype, source)
        if mount is None:
            return ResolvedStorage(path, "none", note=f"no mount found for device 0:{minor}")
        if mount.fstype in NFS_TYPES:
            return ResolvedStorage(path, "nfs", (), mount_point, fstype, source, note="nfs")
        if mount.fstype == "overlay":
            return self._resolve_overlay(path, mount, depth)
        if mount.fstype == "btrfs":
            devices = self._btrfs_devices(mount.source)
            if devices:
                return ResolvedStorage(path, "block", devices, mount_point, fstype, source)
            return ResolvedStorage(
                path,
                "none",
                (),
                mount_point,
                fstype,
                source,
                note=f"btrfs source {mount.source} not found under {self.sys_root}/class/block",
            )
        return ResolvedStorage(
            path,
            "none",
            (),
            mount_point,
            fstype,
            source,
            note=f"{mount.fstype} has no block device",
        )

    # ----------------------------------------------------------------- anonymous devices

    def mounts(self) -> list[MountInfo]:
        text = (self.proc_root / "self" / "mountinfo").read_text(errors="replace")
        return parse_mountinfo(text)

    def _mount_for(self, path: Path, major: int, minor: int) -> MountInfo | None:
        """The mount holding ``path``: same device number, longest mount point over the path.

        Falls back to the longest mount point over the path whatever its number (a btrfs
        subvolume that was not mounted by itself has a number of its own).
        """
        try:
            mounts = self.mounts()
        except OSError:
            return None
        text = str(path)
        over = [m for m in mounts if _is_under(text, m.mount_point)]
        same = [m for m in over if (m.major, m.minor) == (major, minor)]
        if not same:
            same = [m for m in mounts if (m.major, m.minor) == (major, minor)]
        candidates = same or (over if major == 0 else [])
        if not candidates:
            return None
        # Longest mount point wins; among equals, the last mounted (it hides the others).
        return max(enumerate(candidates), key=lambda im: (len(im[1].mount_point), im[0]))[1]

    def _resolve_overlay(self, path: Path, mount: MountInfo, depth: int) -> ResolvedStorage:
        upper = mount.option("upperdir")
        lower = mount.option("lowerdir")
        target = upper or (lower.split(":")[0] if lower else None)
        where = "upperdir" if upper else "lowerdir"
        if target is None or depth >= _MAX_DEPTH:
            return ResolvedStorage(
                path,
                "none",
                (),
                mount.mount_point,
                mount.fstype,
                mount.source,
                note="overlay without upperdir or lowerdir",
            )
        try:
            if not Path(target).is_dir():  # another mount namespace's path (containers)
                raise FileNotFoundError(2, "not visible in this mount namespace")
            inner = self._resolve(Path(target), depth + 1)
        except OSError as exc:
            return ResolvedStorage(
                path,
                "none",
                (),
                mount.mount_point,
                mount.fstype,
                mount.source,
                note=f"overlay {where} {target} not reachable from here: {exc.strerror}",
            )
        return ResolvedStorage(
            path=path,
            kind=inner.kind,
            devices=inner.devices,
            mount_point=mount.mount_point,
            fstype=mount.fstype,
            source=mount.source,
            note=f"overlay {where} {target} on {inner.fstype or '?'}"
            + (f" ({inner.note})" if inner.note else ""),
        )

    def _btrfs_devices(self, source: str) -> tuple[BlockDevice, ...]:
        name = self._device_name_for_source(source)
        if name is None:
            return ()
        number = self._read(self.sys_root / "class" / "block" / name / "dev")
        if number is None or ":" not in number:
            return ()
        major, _, minor = number.partition(":")
        found = list(self.block_devices(int(major), int(minor)))
        # A multi-device btrfs lists all its members under /sys/fs/btrfs/<uuid>/devices/.
        for fs_dir in sorted((self.sys_root / "fs" / "btrfs").glob("*/devices")):
            members = sorted(p.name for p in fs_dir.iterdir())
            if name not in members:
                continue
            for member in members:
                if member != name:
                    found.extend(self._devices_for_name(member, "slave"))
        return _dedup(found)

    def _device_name_for_source(self, source: str) -> str | None:
        """The sysfs name for a mount source such as ``/dev/sdb1`` or ``/dev/mapper/vg-lv``."""
        if not source.startswith("/dev/"):
            return None
        base = os.path.basename(source)
        if (self.sys_root / "class" / "block" / base).exists():
            return base
        if source.startswith("/dev/mapper/"):
            for name_file in sorted((self.sys_root / "block").glob("dm-*/dm/name")):
                if self._read(name_file) == base:
                    return name_file.parent.parent.name
        return None

    # ----------------------------------------------------------------- block devices

    def block_devices(self, major: int, minor: int) -> tuple[BlockDevice, ...]:
        """The device ``major:minor`` with its parent disk and slaves, deduplicated."""
        link = self.sys_root / "dev" / "block" / f"{major}:{minor}"
        if not link.exists():
            return ()
        return _dedup(self._walk(Path(os.path.realpath(link)), "filesystem", depth=0))

    def _devices_for_name(self, name: str, role: Role) -> list[BlockDevice]:
        link = self.sys_root / "class" / "block" / name
        if not link.exists():
            return []
        return self._walk(Path(os.path.realpath(link)), role, depth=0)

    def _walk(self, sysdir: Path, role: Role, depth: int) -> list[BlockDevice]:
        device = self._describe(sysdir, role)
        found = [device]
        if device.devtype == "partition":
            parent = sysdir.parent
            found.append(self._describe(parent, "parent"))
        if depth < _MAX_DEPTH:
            slaves = sysdir / "slaves"
            if slaves.is_dir():
                for entry in sorted(slaves.iterdir(), key=lambda p: p.name):
                    found.extend(self._walk(Path(os.path.realpath(entry)), "slave", depth + 1))
        return found

    def _describe(self, sysdir: Path, role: Role) -> BlockDevice:
        # Names with "/" (cciss/c0d0) appear in sysfs with "!" instead.
        name = sysdir.name.replace("!", "/")
        number = self._read(sysdir / "dev") or "0:0"
        major, _, minor = number.partition(":")
        backing: str | None = None
        dm_name: str | None = None
        if (sysdir / "partition").exists():
            devtype = "partition"
        elif (sysdir / "dm").is_dir():
            devtype = "dm"
            dm_name = self._read(sysdir / "dm" / "name")
        elif (sysdir / "md").is_dir():
            devtype = "md"
        elif sysdir.name.startswith("loop"):
            devtype = "loop"
            backing = self._read(sysdir / "loop" / "backing_file")
        else:
            devtype = "disk"
        return BlockDevice(name, int(major), int(minor), role, devtype, backing, dm_name)

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            return path.read_text(errors="replace").strip()
        except OSError:
            return None


def _existing_ancestor(path: Path) -> Path:
    path = Path(os.path.realpath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _dedup(devices: list[BlockDevice]) -> tuple[BlockDevice, ...]:
    seen: set[str] = set()
    out: list[BlockDevice] = []
    for device in devices:
        if device.name not in seen:
            seen.add(device.name)
            out.append(device)
    return tuple(out)
