"""The lab's identity checks on real files and on mountinfo text (no root needed).

``down`` removes a file or directory only while it is the inode recorded at ``up``: another
file moved in under the name (another inode, or the same size — ext4 here hands a file made
right after an unlink the freed inode's number, and only the inode's generation tells them
apart), a symbolic link, a second hard link are each left alone with a phrase saying what
differs. Mounts are told apart by the
mountinfo line's ID and source device, the one on top of a stack being the one nothing else
sits on; mount points with spaces are unescaped as the kernel writes them.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage.lab import identity

# Two mounts stacked at one place (a tmpfs on an ext4 loop), one under a path with a space.
MOUNTINFO = """\
22 1 0:21 / /proc rw,relatime - proc proc rw
47 27 7:3 / /mnt/lab rw,relatime - ext4 /dev/loop3 rw
48 47 0:40 / /mnt/lab rw,relatime - tmpfs theirs rw,size=1024k
49 27 7:4 / /mnt/with\\040space rw,relatime shared:5 - ext4 /dev/loop4 rw
"""


def test_the_top_of_a_stack_is_the_mount_nothing_sits_on() -> None:
    top = identity.top_mount("/mnt/lab", MOUNTINFO)
    assert top is not None and (top.id, top.dev, top.fstype) == (48, "0:40", "tmpfs")
    under = identity.mounts_at("/mnt/lab", MOUNTINFO)
    assert [m.id for m in under] == [47, 48]
    assert identity.is_recorded({"id": 47, "dev": "7:3"}, under[0])
    assert not identity.is_recorded({"id": 47, "dev": "7:3"}, top)
    spaced = identity.top_mount("/mnt/with space", MOUNTINFO)
    assert spaced is not None and (spaced.source, spaced.dev) == ("/dev/loop4", "7:4")
    assert identity.top_mount("/mnt/none", MOUNTINFO) is None


def test_the_kernel_device_encoding_decodes_to_stat_numbers() -> None:
    for major, minor in ((7, 3), (254, 0), (259, 1), (7, 300), (8, 1048575)):
        # new_encode_dev, as LOOP_GET_STATUS64 reports lo_device
        encoded = (minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12)
        assert identity._kernel_dev_text(encoded) == f"{major}:{minor}"
        assert identity.dev_text(os.makedev(major, minor)) == f"{major}:{minor}"


def test_a_file_is_removed_only_while_it_is_the_recorded_inode(tmp_path: Path) -> None:
    image = tmp_path / "lab.img"
    image.write_bytes(b"lab")
    recorded = identity.node_at(image, size=True)

    image.unlink()
    image.write_bytes(b"lab")  # same name, same size; here often the same inode number too
    why = identity.remove_own(image, recorded, "file")
    assert why is not None and "inode" in why and image.read_bytes() == b"lab"

    theirs = tmp_path / "theirs"
    theirs.write_bytes(b"theirs")
    image.unlink()
    image.symlink_to(theirs)
    assert identity.remove_own(image, recorded, "file") == "it is a symbolic link now"
    assert image.is_symlink() and theirs.read_bytes() == b"theirs"

    image.unlink()
    image.write_bytes(b"lab")
    recorded = identity.node_at(image, size=True)
    os.link(image, tmp_path / "second-name")
    why = identity.remove_own(image, recorded, "file")
    assert why == "2 hard links, the lab made one" and image.exists()

    os.unlink(tmp_path / "second-name")
    assert identity.remove_own(image, recorded, "file") is None
    assert not image.exists()
    assert identity.remove_own(image, recorded, "file") is None  # gone already: nothing to do
    assert identity.check(image, recorded, "file") == identity.GONE


def test_a_directory_swapped_for_another_is_left(tmp_path: Path) -> None:
    made = tmp_path / "mnt"
    made.mkdir()
    recorded = identity.node_at(made)
    made.rmdir()
    made.mkdir()
    assert identity.remove_own(made, recorded, "dir") is not None and made.is_dir()
    assert identity.remove_own(made, identity.node_at(made), "dir") is None
    assert not made.exists()
