"""The lab drops its own files from the page cache and nobody else's (storage/lab/pagecache.py).

As root, a lab of the test's own (tests/integration/test_lab.py's ``lab_env``, its image in
memory): a file on the lab's volume and a file outside it (pytest's ``tmp_path``) are written
and read, so both are cached; a symbolic link on the volume points at the outside file.
``lab.drop_caches()`` must leave the volume's file with no page cached and the outside file
(and the file behind the link) fully cached, and the volume's file must then be read from
the lab's loop device (its read count in /proc/diskstats rises by the file's size).
Not a timing test: it counts pages and sectors, not time.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from storage.lab import Lab
from tests.integration.test_lab import lab_env  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.root]

MiB = 1 << 20
FILE_BYTES = 8 * MiB


def _cached_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache now (util-linux ``fincore``)."""
    done = subprocess.run(
        ["fincore", "--bytes", "--raw", "--noheadings", "--output", "RES", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout.split()[0])


def _write_and_read(path: Path) -> None:
    path.write_bytes(os.urandom(FILE_BYTES))
    os.sync()
    assert len(path.read_bytes()) == FILE_BYTES


def _sectors_read(device: str) -> int:
    fields = Path(f"/sys/block/{os.path.basename(device)}/stat").read_text().split()
    return int(fields[2])


def test_the_lab_drops_its_own_pages_and_leaves_everyone_elses(
    lab_env: tuple[Lab, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    lab, mount_point = lab_env
    status = lab.up(64 * MiB, mount_point)
    try:
        assert status["up"], status
        ours, theirs = mount_point / "data.bin", tmp_path / "theirs.bin"
        _write_and_read(ours)
        _write_and_read(theirs)
        (mount_point / "link").symlink_to(theirs)
        assert _cached_bytes(ours) == FILE_BYTES
        assert _cached_bytes(theirs) == FILE_BYTES
        lab.drop_caches()
        assert _cached_bytes(ours) == 0, "the lab's own file is still cached"
        assert _cached_bytes(theirs) == FILE_BYTES, "a file outside the lab was dropped"
        before = _sectors_read(status["device"])
        assert len(ours.read_bytes()) == FILE_BYTES
        assert _sectors_read(status["device"]) - before >= FILE_BYTES // 512
    finally:
        problems = lab.down()
    assert problems == []
