"""Path → block device resolution, on a fake /sys + /proc tree and on this machine."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sim.protocols import EngineContext, SqlConnection, Target
from sim.registry import _collectors  # not collectors(): that imports every plug-in
from storage.collectors import BlockDeviceCollector, auto_block
from storage.collectors.diskstats import read_diskstats
from storage.devices import DeviceResolver, parse_mountinfo

# ----------------------------------------------------------------------------------- fake tree


class FakeTree:
    """A /sys and /proc in ``root``; data directories under ``root/mnt`` with device numbers
    given by :meth:`dev_of` (longest registered prefix wins), as ``os.stat`` would."""

    def __init__(self, root: Path) -> None:
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.mnt = root / "mnt"
        self.numbers: dict[Path, tuple[int, int]] = {}
        self.mountinfo: list[str] = []
        (self.proc / "self").mkdir(parents=True)
        for sub in ("dev/block", "class/block", "block"):
            (self.sys / sub).mkdir(parents=True)

    def device(self, rel: str, dev: str, **files: str) -> Path:
        """A device directory ``sys/devices/<rel>`` with its ``dev`` file and the links
        /sys/dev/block/M:m, /sys/class/block/<name> (and /sys/block/<name> for disks)."""
        d = self.sys / "devices" / rel
        d.mkdir(parents=True)
        (d / "dev").write_text(dev + "\n")
        for name, text in files.items():
            f = d / name.replace("__", "/")
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text + "\n")
        (self.sys / "dev" / "block" / dev).symlink_to(d)
        (self.sys / "class" / "block" / d.name).symlink_to(d)
        if "partition" not in files:
            (self.sys / "block" / d.name).symlink_to(d)
        return d

    @staticmethod
    def slave(holder: Path, slave: Path) -> None:
        (holder / "slaves").mkdir(exist_ok=True)
        (holder / "slaves" / slave.name).symlink_to(slave)

    def mount(self, name: str, dev: tuple[int, int], fstype: str, source: str, opts: str) -> Path:
        point = self.mnt / name
        point.mkdir(parents=True)
        self.numbers[point] = dev
        n = len(self.mountinfo) + 30
        self.mountinfo.append(
            f"{n} 1 {dev[0]}:{dev[1]} / {point} rw,relatime - {fstype} {source} {opts}"
        )
        (self.proc / "self" / "mountinfo").write_text("\n".join(self.mountinfo) + "\n")
        return point

    def dev_of(self, path: Path) -> tuple[int, int]:
        best = max((p for p in self.numbers if path == p or p in path.parents), key=_depth)
        return self.numbers[best]

    def resolver(self) -> DeviceResolver:
        return DeviceResolver(sys_root=self.sys, proc_root=self.proc, dev_of=self.dev_of)


def _depth(p: Path) -> int:
    return len(p.parts)


@pytest.fixture
def tree(tmp_path: Path) -> FakeTree:
    t = FakeTree(tmp_path)
    sda = t.device("pci0/block/sda", "8:0")
    t.device("pci0/block/sda/sda1", "8:1", partition="1")
    t.device("pci0/block/sdb", "8:16")
    sdb1 = t.device("pci0/block/sdb/sdb1", "8:17", partition="1")
    sdc = t.device("pci0/block/sdc", "8:32")
    sdd = t.device("pci0/block/sdd", "8:48")
    sde = t.device("pci0/block/sde", "8:64")
    t.device("pci0/block/sdf", "8:80")
    t.device("pci0/block/sdg", "8:96")
    t.device("virtual/block/loop3", "7:3", loop__backing_file="/srv/images/data.img")
    dm0 = t.device("virtual/block/dm-0", "253:0", dm__name="vg0-data", dm__uuid="LVM-x")
    md0 = t.device("virtual/block/md0", "9:0", md__level="raid1")
    dm1 = t.device("virtual/block/dm-1", "253:1", dm__name="crypt-md")
    t.slave(dm0, sdb1)
    t.slave(dm0, sdc)
    t.slave(md0, sdd)
    t.slave(md0, sde)
    t.slave(dm1, md0)
    for member in ("sdf", "sdg"):
        d = t.sys / "fs" / "btrfs" / "0c2f-uuid" / "devices"
        d.mkdir(parents=True, exist_ok=True)
        (d / member).symlink_to(sda.parent / member)
    return t


def names_roles(resolved: Any) -> list[tuple[str, str, str]]:
    return [(d.name, d.role, d.devtype) for d in resolved.devices]


# ----------------------------------------------------------------------------------- fake cases


def test_whole_disk(tree: FakeTree) -> None:
    point = tree.mount("disk", (8, 16), "xfs", "/dev/sdb", "rw")
    r = tree.resolver().resolve(point / "db" / "file.dat")  # missing: nearest ancestor used
    assert r.kind == "block"
    assert names_roles(r) == [("sdb", "filesystem", "disk")]
    assert (r.mount_point, r.fstype, r.source) == (str(point), "xfs", "/dev/sdb")
    assert (r.devices[0].major, r.devices[0].minor) == (8, 16)


def test_partition_reports_parent_disk(tree: FakeTree) -> None:
    point = tree.mount("part", (8, 1), "ext4", "/dev/sda1", "rw")
    r = tree.resolver().resolve(point)
    assert names_roles(r) == [("sda1", "filesystem", "partition"), ("sda", "parent", "disk")]


def test_loop_with_backing_file(tree: FakeTree) -> None:
    point = tree.mount("loop", (7, 3), "ext4", "/dev/loop3", "rw")
    r = tree.resolver().resolve(point)
    assert names_roles(r) == [("loop3", "filesystem", "loop")]
    assert r.devices[0].backing_file == "/srv/images/data.img"
    assert r.devices[0].describe()["backing_file"] == "/srv/images/data.img"


def test_device_mapper_with_slaves(tree: FakeTree) -> None:
    point = tree.mount("lvm", (253, 0), "xfs", "/dev/mapper/vg0-data", "rw")
    r = tree.resolver().resolve(point)
    assert names_roles(r) == [
        ("dm-0", "filesystem", "dm"),
        ("sdb1", "slave", "partition"),
        ("sdb", "parent", "disk"),
        ("sdc", "slave", "disk"),
    ]
    assert r.devices[0].dm_name == "vg0-data"


def test_dm_on_md_raid_goes_down_every_level(tree: FakeTree) -> None:
    point = tree.mount("crypt", (253, 1), "ext4", "/dev/mapper/crypt-md", "rw")
    r = tree.resolver().resolve(point)
    assert names_roles(r) == [
        ("dm-1", "filesystem", "dm"),
        ("md0", "slave", "md"),
        ("sdd", "slave", "disk"),
        ("sde", "slave", "disk"),
    ]


def test_overlay_follows_upperdir(tree: FakeTree) -> None:
    part = tree.mount("part", (8, 1), "ext4", "/dev/sda1", "rw")
    upper = part / "overlay" / "upper"
    upper.mkdir(parents=True)
    opts = f"rw,lowerdir={part}/l1:{part}/l2,upperdir={upper},workdir={part}/overlay/work"
    merged = tree.mount("merged", (0, 50), "overlay", "overlay", opts)
    r = tree.resolver().resolve(merged / "pgdata")
    assert r.kind == "block"
    assert (r.fstype, r.mount_point) == ("overlay", str(merged))
    assert names_roles(r) == [("sda1", "filesystem", "partition"), ("sda", "parent", "disk")]
    assert f"upperdir {upper} on ext4" in r.note


def test_overlay_upperdir_not_visible(tree: FakeTree) -> None:
    merged = tree.mount("ctr", (0, 51), "overlay", "overlay", "rw,upperdir=/no/such/upper")
    r = tree.resolver().resolve(merged)
    assert (r.kind, r.devices, r.fstype) == ("none", (), "overlay")
    assert "/no/such/upper not reachable" in r.note


def test_nfs_mount(tree: FakeTree) -> None:
    point = tree.mount("nfs", (0, 52), "nfs4", "filer01:/vol/db", "rw,vers=4.1,addr=10.0.0.5")
    r = tree.resolver().resolve(point / "data")
    assert (r.kind, r.devices, r.source, r.mount_point) == (
        "nfs",
        (),
        "filer01:/vol/db",
        str(point),
    )
    assert r.note == "nfs"


def test_tmpfs_has_no_device(tree: FakeTree) -> None:
    point = tree.mount("scratch", (0, 53), "tmpfs", "tmpfs", "rw,size=1g")
    r = tree.resolver().resolve(point)
    assert (r.kind, r.devices, r.fstype) == ("none", (), "tmpfs")
    assert "tmpfs" in r.note


def test_btrfs_uses_mount_source_and_members(tree: FakeTree) -> None:
    point = tree.mount("btrfs", (0, 54), "btrfs", "/dev/sdf", "rw,subvol=/data")
    subvol = point / "nested-subvolume"
    subvol.mkdir()
    tree.numbers[subvol] = (0, 99)  # a subvolume not mounted by itself: its own number
    for path in (point, subvol):
        r = tree.resolver().resolve(path)
        assert r.kind == "block"
        assert names_roles(r) == [("sdf", "filesystem", "disk"), ("sdg", "slave", "disk")]


def test_btrfs_on_dm_found_by_mapper_name(tree: FakeTree) -> None:
    point = tree.mount("btrfs-lvm", (0, 55), "btrfs", "/dev/mapper/vg0-data", "rw")
    r = tree.resolver().resolve(point)
    assert [d.name for d in r.devices] == ["dm-0", "sdb1", "sdb", "sdc"]


def test_mountinfo_escapes_and_optional_fields() -> None:
    line = (
        "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 shared:7 - ext3 /dev/root "
        "rw,errors=continue"
    )
    (m,) = parse_mountinfo(line + "\nbroken line\n")
    assert (m.major, m.minor, m.mount_point, m.fstype, m.source) == (
        98,
        0,
        "/mnt/with space",
        "ext3",
        "/dev/root",
    )
    assert m.option("errors") == "continue"


# ----------------------------------------------------------------------------------- auto()


class PathsTarget(Target):
    kind = "fake"
    dialect = "filetree"
    paramstyle = "qmark"

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> SqlConnection:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list[Path]:
        return self.paths

    def describe(self) -> dict[str, Any]:
        return {}


def test_auto_watches_devices_once_and_skips_deviceless(tree: FakeTree) -> None:
    lvm = tree.mount("lvm", (253, 0), "xfs", "/dev/mapper/vg0-data", "rw")
    part = tree.mount("part", (8, 17), "ext4", "/dev/sdb1", "rw")  # also beneath dm-0
    tmp = tree.mount("tmp", (0, 60), "tmpfs", "tmpfs", "rw")
    target = PathsTarget([lvm / "data", part / "wal", tmp])
    (collector,) = auto_block(target, {}, resolver=tree.resolver())
    assert isinstance(collector, BlockDeviceCollector)
    assert collector.names == ("dm-0", "sdb1", "sdb", "sdc")
    roles = [d["role"] for d in collector.describe()["devices"]]
    assert roles == ["filesystem", "slave", "parent", "slave"]
    assert auto_block(PathsTarget([tmp]), {}, resolver=tree.resolver()) == []
    assert auto_block(PathsTarget([]), {}, resolver=tree.resolver()) == []


def test_auto_devices_option_wins() -> None:
    (collector,) = auto_block(
        PathsTarget([Path("/")]), {"block": {"devices": ["vda", "vdb", "vda"]}}
    )
    assert isinstance(collector, BlockDeviceCollector)
    assert collector.names == ("vda", "vdb")


def test_block_collector_is_registered() -> None:
    entry = _collectors["block"]
    assert entry.source == "block" and entry.summary
    assert entry.auto(PathsTarget([]), {}) == []


# ----------------------------------------------------------------------------------- real machine


def _real(path: str, skip_if_memory_fs: bool) -> None:
    r = DeviceResolver().resolve(path)
    if skip_if_memory_fs and r.kind == "none" and r.fstype in ("tmpfs", "ramfs"):
        pytest.skip(f"{path} is on {r.fstype} here: no block device to find")
    assert r.kind == "block", f"{path} resolved to {r}"
    table = read_diskstats()
    st_dev = os.stat(path).st_dev
    first = r.devices[0]
    assert first.role == "filesystem"
    assert (first.major, first.minor) == (os.major(st_dev), os.minor(st_dev)) or r.fstype in (
        "overlay",
        "btrfs",
    )
    for device in r.devices:
        assert device.name in table, f"{device.name} not in /proc/diskstats"
        assert (table[device.name].major, table[device.name].minor) == (device.major, device.minor)


def test_real_root_resolves_to_a_diskstats_device() -> None:
    _real("/", skip_if_memory_fs=False)


def test_real_tempdir_resolves_to_a_diskstats_device() -> None:
    _real(tempfile.gettempdir(), skip_if_memory_fs=True)


def test_real_proc_has_no_device() -> None:
    r = DeviceResolver().resolve("/proc")
    assert (r.kind, r.fstype) == ("none", "proc")
