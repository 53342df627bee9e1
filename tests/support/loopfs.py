"""A throwaway ext4 file system on a loop device, for tests that need a real disk to fill
(root: losetup, mkfs.ext4, mount)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.support.ramdisk import ram_dir


@contextlib.contextmanager
def loop_ext4(where: Path, size_mib: int = 4, mkfs_options: Sequence[str] = ()) -> Iterator[Path]:
    """A sparse image on a tmpfs of its own beside ``where`` (tests/support/ramdisk.py: the
    device's I/O stays off the host's disk), formatted ext4 (``mkfs_options`` added),
    loop-mounted at ``where``; always torn down (lazily unmounted if something still holds
    it)."""
    with ram_dir(where.parent / f"{where.name}.ram", size_mib * 2**20) as ram:
        image = ram / f"{where.name}.img"
        with open(image, "wb") as handle:
            handle.truncate(size_mib * 2**20)
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", *mkfs_options, str(image)], check=True, capture_output=True
        )
        device = subprocess.run(
            ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
        ).stdout.strip()
        where.mkdir()
        mounted = False
        try:
            subprocess.run(["mount", device, str(where)], check=True, capture_output=True)
            mounted = True
            yield where
        finally:
            if mounted and subprocess.run(["umount", str(where)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(where)], capture_output=True)
            subprocess.run(["losetup", "-d", device], capture_output=True)
            image.unlink(missing_ok=True)
