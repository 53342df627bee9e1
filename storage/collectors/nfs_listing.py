"""Whether an NFS mount is there when a ``/proc/self/mountstats`` reading does not list it.

The kernel lists mounts in the order they were made, each section whole; a read cut short
(or raced by a mount or unmount elsewhere) loses a section or the rest of the file. So a mount
missing from one reading is not yet "no longer mounted": :func:`unlisted_why` says when the
reading itself shows it may have lost it, and :func:`nfs_mounted` asks the mount table, which
the collector's first reading is checked against (issue #30).
"""

from __future__ import annotations

from pathlib import Path

from storage.collectors.mountstats import NFS_FSTYPES, MountstatsFile
from storage.devices import parse_mountinfo

MOUNTINFO = Path("/proc/self/mountinfo")


def nfs_mounted(mountinfo: Path, mount_point: str) -> bool:
    """Whether the mount table (``/proc/self/mountinfo``: kernel memory, nothing on the
    server) lists ``mount_point`` mounted with NFS; False when it cannot be read."""
    try:
        text = mountinfo.read_text(errors="replace")
    except OSError:
        return False
    return any(
        m.mount_point == mount_point and m.fstype in NFS_FSTYPES for m in parse_mountinfo(text)
    )


def unlisted_why(
    reading: MountstatsFile, followers: frozenset[str] | None, again: bool
) -> str | None:
    """Why a reading that does not list a mount may have been cut before it (the kernel
    lists mounts in the order they were made, each whole, and a cut read loses the rest of
    the file): it ends inside a section, a header names no mount point, or — the first time,
    for a mount listed before — none of the mounts listed after it last time is there (a cut
    at a section boundary). None: not mounted, since a mount listed after it last time is
    there, or it was not listed the time before either, or never listed (``followers``
    None; otherwise the mount points listed after it the last time it was)."""
    if reading.cut is not None:
        return f"the reading ends cut short at line {reading.cut.lineno}"
    if reading.orphans:
        return f"unreadable: {reading.orphans[0].detail}"
    if not reading.order:  # the kernel always lists at least the root file system
        return "the reading lists no mount at all"
    if again or followers is None or followers & set(reading.order):
        return None
    return f"the reading ends after {reading.order[-1]!r}: cut before it?"
