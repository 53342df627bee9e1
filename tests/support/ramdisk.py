"""A tmpfs of a test's own, for the images behind its loop devices and labs (root).

An image on the host's disk puts the device's I/O on the one disk every other test uses: one
lab's I/O moved another's latency (a busy neighbour held a 2000-IOPS step to 899), and a cache
drop evicted the image, so the device then read from the disk. On a tmpfs the image is in
memory, and no cache drop can evict it (tmpfs pages are not page cache that can be dropped:
they live until the file is removed). Its pages are charged to the root memory group, not to a
lab's small one: the loop driver writes them, and in cgroup v1 it charges its I/O to the root
(measured: 225 MiB written through a loop device on a tmpfs by a process in a 64 MiB group
left the group at its limit with no OOM kill, the tmpfs holding all 225 MiB).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

MiB = 1 << 20
#: What a tmpfs needs beyond the images it holds: its directories' and inodes' own pages.
SLACK_BYTES = 4 * MiB
#: How long an unmount waits for the image's last user to let go: a loop device detached while
#: its file system is still mounted somewhere is cleared only when that mount goes, and until
#: then holds its image and the tmpfs busy. The somewhere, found 2026-12-07: a netns test's
#: ``ip netns exec`` child (tests/support/netns_hosts.py), whose new mount namespace copied
#: every mount of the host at its start, this test's tmpfs and ext4 among them; the host's
#: ``/`` is private here, so this test's unmount does not reach the copies, and they go when
#: that child exits, tens of seconds later (shown by hand: a tmpfs mounted before an ``ip netns
#: exec sleep`` stayed in the sleep's mountinfo after its unmount, a shared one too). Waiting
#: longer than a moment does not free it, so the wait is short; the lazy unmount does the rest.
DETACH_WAIT_S = 3.0


class LingeringLoop(UserWarning):
    """A loop device still held on a test's tmpfs after :data:`DETACH_WAIT_S`: the tmpfs is
    unmounted lazily (the kernel frees it at the last close) and this names the device and
    what holds it. Shown in every run's warnings summary, not an error (pyproject.toml): the
    test's own checks passed, and the holder is not the test's: a copy of its mounts in another
    test's mount namespace (:data:`DETACH_WAIT_S`), seen in the timing phase beside the netns
    tests, never with the test run alone."""


def mount_ram(where: Path, size_bytes: int) -> int:
    """A tmpfs of at most ``size_bytes`` (plus :data:`SLACK_BYTES`) mounted at ``where``, a
    directory made here; its device number, for :func:`unmount_ram`. Sparse images take only
    the memory of what is written in them; ``size_bytes`` caps what a runaway test can take."""
    where.mkdir(mode=0o700)
    options = f"size={size_bytes + SLACK_BYTES},mode=0700"
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        check=True,
        capture_output=True,
    )
    return os.stat(where).st_dev


def unmount_ram(where: Path, dev: int) -> None:
    """Unmount the tmpfs :func:`mount_ram` made at ``where`` if it is still the one mounted
    there (its device number ``dev``; a last resort may have unmounted it already), then
    remove the directory. A loop device still attached to an image in it keeps it busy: after
    :data:`DETACH_WAIT_S` the tmpfs is unmounted lazily and a warning names the loop devices
    still on it (a leaked loop device stays in ``losetup -a``)."""
    try:
        here = os.stat(where, follow_symlinks=False).st_dev
    except FileNotFoundError:
        return
    if here == dev:
        deadline = time.monotonic() + DETACH_WAIT_S
        while (done := _umount(where)).returncode != 0:
            if time.monotonic() > deadline:
                # Still busy: detached from the tree now, freed by the kernel when its last
                # user lets go; said, with the loop devices that still read a file in it.
                loops = _loops_on(where) or "none"  # named before the lazy unmount hides it
                _umount(where, "-l")
                warnings.warn(
                    LingeringLoop(
                        f"tmpfs {where} still busy after {DETACH_WAIT_S:.0f} s "
                        f"({done.stderr.strip()}; loop devices on it: {loops}): "
                        "unmounted lazily"
                    ),
                    stacklevel=2,
                )
                break
            time.sleep(0.1)
    where.rmdir()


def _umount(where: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["umount", *options, str(where)], capture_output=True, text=True)


def _loops_on(where: Path) -> list[str]:
    """The loop devices reading a file under ``where``, each with what still holds it: the
    mounts of it (/proc/self/mountinfo), its holders in /sys and the processes that have it
    open or use the file system mounted from it (fuser -m)."""
    prefix = f"{os.path.realpath(where)}/"
    found = []
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        with contextlib.suppress(OSError):
            if backing.read_text().startswith(prefix):
                found.append(_holders(backing.parent.parent.name))
    return found


def _holders(loop: str) -> str:
    mounts = [
        line.split()[4]
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if f" /dev/{loop} " in line
    ]
    held = sorted(p.name for p in Path(f"/sys/block/{loop}/holders").glob("*"))
    users = subprocess.run(["fuser", "-vm", f"/dev/{loop}"], capture_output=True, text=True)
    # fuser cannot look into processes of other PID namespaces' owners (PID 1 here): it says so
    # once per descriptor, hundreds of lines that name nothing; only what it found is kept.
    found = [
        line.strip()
        for line in (users.stdout + users.stderr).splitlines()
        if line.strip() and not line.startswith("Cannot stat")
    ]
    return f"{loop} (mounted at {mounts or 'nowhere'}, holders {held}, used by: {found or 'none'})"


@contextlib.contextmanager
def ram_dir(where: Path, size_bytes: int) -> Iterator[Path]:
    """:func:`mount_ram` for the block, :func:`unmount_ram` after it."""
    dev = mount_ram(where, size_bytes)
    try:
        yield where
    finally:
        unmount_ram(where, dev)
