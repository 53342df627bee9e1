"""What fio may write to, checked before fio starts (seed 004: "Só execute FIO em dispositivos
brutos não formatados que não estejam em uso" — run fio only on raw, unformatted devices not in
use).

* **A file tree** is used only when its root is new, empty, or carries dbsim's ``.dbsim-tree``
  marker (the same ownership rule as the EDA trees). fio then writes only inside
  ``<root>/dbsim-baseline/``, a directory the marker records; one that exists but is not
  recorded is a stranger's and refused.
* **A raw block device** is used only when the user names it twice (the target and
  ``--raw-device`` must be the same device), and it is refused when it is mounted (itself or a
  partition), used by another device (device-mapper, md: ``holders/``), a swap area, opened
  exclusively by someone else, or holds any signature ``blkid -p`` knows (a file system, a
  partition table, LVM, RAID, swap). Without blkid nothing can be checked, so nothing is run.

Every refusal is an :class:`~sim.errors.OwnershipError` (exit 2) that says what was found.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, OwnershipError
from workloads.eda.tree import MARKER, new_marker, read_marker, write_marker

BASELINE_DIR = "dbsim-baseline"
FIO_FILE_PREFIX = "dbsim-fio."
MOUNTINFO = Path("/proc/self/mountinfo")
SWAPS = Path("/proc/swaps")


# --------------------------------------------------------------------------- file trees


def claim_tree(root: Path) -> Path:
    """Check ownership of ``root`` (creating it and its marker when new or empty) and return
    the directory fio may write in. Nothing is written when the check fails."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise OwnershipError(f"{root} exists and is not a directory; refusing to touch it")
    marker = read_marker(root) if root.is_dir() else None
    work = root / BASELINE_DIR
    if marker is None:
        if root.is_dir() and any(root.iterdir()):
            raise OwnershipError(
                f"{root} is not empty and has no {MARKER} marker: dbsim did not create it; "
                f"refusing to let fio write there (use an empty or new directory)"
            )
        created = not root.exists()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {root}: {exc.strerror}") from exc
        marker = new_marker(created, workload="baseline")
    elif os.path.lexists(work) and not marker.get("baseline"):
        raise OwnershipError(
            f"{work} exists but is not recorded in {root / MARKER}; refusing to touch it"
        )
    if work.is_symlink() or (work.exists() and not work.is_dir()):
        raise OwnershipError(f"{work} is not a plain directory; refusing to touch it")
    marker["baseline"] = {"dir": BASELINE_DIR}
    write_marker(root, marker)
    work.mkdir(exist_ok=True)
    return work


def release_tree(root: Path) -> None:
    """Remove fio's files and the baseline directory, and un-record it (the marker stays
    when it records EDA trees; otherwise it goes, and the root too if dbsim created it)."""
    marker = read_marker(root)
    if marker is None or not marker.get("baseline"):
        return
    work = root / BASELINE_DIR
    if work.is_dir() and not work.is_symlink():
        for entry in work.iterdir():
            if entry.name.startswith(FIO_FILE_PREFIX) and entry.is_file():
                entry.unlink()
        with contextlib.suppress(OSError):  # someone put something else there: it stays
            work.rmdir()
    del marker["baseline"]
    if marker["trees"]:
        write_marker(root, marker)
        return
    (root / MARKER).unlink()
    if marker.get("created_root"):
        with contextlib.suppress(OSError):
            root.rmdir()


# --------------------------------------------------------------------------- raw devices


def _sys_dir(device: Path) -> tuple[Path, int, int]:
    st = device.stat()
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    sysdir = Path(f"/sys/dev/block/{major}:{minor}").resolve()
    return sysdir, major, minor


def _dev_numbers(sysdir: Path) -> set[str]:
    """``major:minor`` of the device and of each of its partitions."""
    found = set()
    for dev in [sysdir / "dev", *sysdir.glob("*/dev")]:
        with contextlib.suppress(OSError):
            found.add(dev.read_text().strip())
    return found


def _mounted(numbers: set[str], mountinfo: Path = MOUNTINFO) -> list[str]:
    points = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[2] in numbers:
            points.append(fields[4])
    return points


def _swap(device: Path, swaps: Path = SWAPS) -> bool:
    with contextlib.suppress(OSError):
        for line in swaps.read_text().splitlines()[1:]:
            name = line.split()[0] if line.split() else ""
            with contextlib.suppress(OSError):
                if os.path.samefile(name, device):
                    return True
    return False


def signatures(device: Path) -> dict[str, str]:
    """What ``blkid -p`` (low-level probe, no cache) finds on the device: ``{}`` for none."""
    blkid = shutil.which("blkid") or next(
        (p for p in ("/usr/sbin/blkid", "/sbin/blkid") if os.access(p, os.X_OK)), None
    )
    if blkid is None:
        raise OwnershipError(
            f"cannot check {device} for a file-system signature: blkid (util-linux) is not "
            f"installed; refusing to write to it"
        )
    out = subprocess.run(
        [blkid, "-p", "-o", "export", str(device)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if out.returncode == 2:  # nothing found
        return {}
    if out.returncode != 0:
        raise OwnershipError(
            f"blkid could not probe {device} ({out.stderr.strip() or f'exit {out.returncode}'}); "
            f"refusing to write to it"
        )
    pairs = (line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def check_raw_device(target: Path, confirmed: str | None) -> dict[str, Any]:
    """Every check of the module docstring; the device's facts when it may be used."""
    if confirmed is None:
        raise OwnershipError(
            f"{target} is a block device: fio would overwrite it; name it again with "
            f"--raw-device {target} to confirm (only for a raw device holding nothing you need)"
        )
    try:
        same = os.path.samefile(target, confirmed)
    except OSError as exc:
        raise ConfigError(f"--raw-device {confirmed}: {exc.strerror}") from exc
    if not same:
        raise OwnershipError(
            f"--raw-device {confirmed} is not the target {target}; refusing (name the same device)"
        )
    if not stat.S_ISBLK(target.stat().st_mode):
        raise ConfigError(f"--raw-device {confirmed} is not a block device")
    sysdir, major, minor = _sys_dir(target)
    mounted = _mounted(_dev_numbers(sysdir))
    if mounted:
        raise OwnershipError(
            f"{target} is mounted (at {', '.join(mounted)}); refusing to write to a device in use"
        )
    holders = [p.name for p in (sysdir / "holders").glob("*")]
    holders += [h.name for part in sysdir.glob("*/holders") for h in part.glob("*")]
    if holders:
        raise OwnershipError(
            f"{target} is in use by {', '.join(sorted(holders))}; refusing to write to it"
        )
    if _swap(target):
        raise OwnershipError(f"{target} is a swap area in use; refusing to write to it")
    found = signatures(target)
    if found:
        kind = found.get("TYPE") or found.get("PTTYPE") or "a signature"
        usage = found.get("USAGE") or ("partition table" if "PTTYPE" in found else "data")
        raise OwnershipError(
            f"{target} holds {kind} ({usage}): it is not a raw, unformatted device; refusing to "
            f"write to it (seed 004: run fio only on raw devices not in use)"
        )
    try:
        # O_EXCL on a block device: EBUSY when the kernel knows another exclusive user.
        fd = os.open(target, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        raise OwnershipError(f"{target} is busy ({exc.strerror}); refusing to write to it") from exc
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    return {"device": str(target), "dev": f"{major}:{minor}", "size_bytes": size}
