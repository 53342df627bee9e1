"""A lab writes back only its own file systems' dirty pages (``syncfs``), never the host's
(``sync``): a host-wide ``sync`` made every other test's ext4 commit its journal, and that
commit was counted as the other test's writes (storage/lab/pagecache.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from storage.lab.identity import dev_text
from storage.lab.pagecache import sync_lab_files, syncfs

LAB = Path(__file__).resolve().parents[2] / "storage" / "lab"


def test_the_lab_s_mounted_volumes_on_their_own_device_are_synced_and_nothing_else(
    tmp_path: Path,
) -> None:
    dev = dev_text(os.stat(tmp_path).st_dev)
    state = {
        "volumes": [
            {"mounted": True, "dev": dev, "mount_point": str(tmp_path)},
            {"mounted": True, "dev": "0:0", "mount_point": str(tmp_path)},  # not that device
            {"mounted": False, "dev": dev, "mount_point": str(tmp_path)},
            {"mounted": True, "dev": dev, "mount_point": str(tmp_path / "gone")},
        ]
    }
    assert sync_lab_files(state) == 1
    (tmp_path / "link").symlink_to(tmp_path)
    assert not syncfs(tmp_path / "link", dev)  # a link is never followed


def test_no_lab_module_syncs_the_whole_host() -> None:
    host_wide = re.compile(r"\bos\.sync\(\)|\[\"sync\"\]")
    found = [p.name for p in sorted(LAB.glob("*.py")) if host_wide.search(p.read_text())]
    assert not found, found
