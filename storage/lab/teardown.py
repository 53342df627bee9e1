"""``dbsim lab down``: undo what the state records, each step only on the lab's own object.

Before every destructive step the object is compared with the identity recorded when it was
made (:mod:`storage.lab.identity`): a mount is unmounted only if the mount on top at its place
has the recorded mount ID, source device and (Linux 6.8+) 64-bit mount ID; a loop device is
detached only if its device number and the device and inode of the file it reads are the
recorded ones (checked and detached on one descriptor); a file, a directory, a cgroup or the
PostgreSQL cluster's directory is removed only if its device and inode are. Whatever differs
is left alone and named (:attr:`Outcome.warnings`); what is the lab's but cannot be undone is
a problem (:attr:`Outcome.problems`), kept in the state file for the next ``down``.

A record written before identities were recorded (dbsim before issue #24) is adopted where the
kernel vouches for it (:func:`adopt`); its directories and cgroups fall back to the old checks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storage.lab import array, cgroups, identity, system
from storage.lab.identity import GONE
from storage.lab.outcome import Outcome
from storage.lab.pgcluster import Cluster
from storage.lab.volumes import attached_file

#: A loop device detached while something else still holds it open (udev's probe after the
#: unmount, the file system's last release) goes at that last close, asynchronously: a
#: timing phase beside stress-ng --cpu 2 found one still attached when its image was checked
#: right after. The image's removal waits this long for it before calling it attached.
DETACH_WAIT_S = 5.0


def take_down(state: dict[str, Any], password_file: Path, outcome: Outcome) -> None:
    """Undo everything ``state`` records, newest first; each step is tried whatever happened
    before it. ``state`` is updated to what is left."""
    ids = state.get("identity")
    pg = state.get("postgres")
    if pg:
        outcome.attempt("stop postgres", Cluster(Path(pg["root"]), pg["port"]).stop)
    for controller in reversed(cgroups.CONTROLLERS):
        path = state.get("cgroups", {}).get(controller)
        if path:
            recorded = ids["cgroups"].get(controller) if ids else None
            _remove_cgroup(Path(path), recorded, outcome)
    for record in reversed(state["volumes"]):
        volume(record, outcome)
    if pg and pg.get("remove_root"):
        _remove_cluster_dir(pg, outcome)
    if state.get("root_dir_created"):
        _remove_dir(
            Path(state["root"]), ids.get("root_dir") if ids else None, "the lab's root", outcome
        )
    if ids and ids.get("image_dir"):
        _remove_dir(Path(ids["image_dir"]["path"]), ids["image_dir"], "the lab's images", outcome)
    if pg:
        with contextlib.suppress(OSError):
            password_file.unlink(missing_ok=True)


def _remove_cgroup(path: Path, recorded: Mapping[str, Any] | None, outcome: Outcome) -> None:
    if recorded is not None:  # None: a state from before identities (the name, as before)
        why = identity.check(path, recorded, "dir")
        if why == GONE:
            return
        if why:
            outcome.warn(f"cgroup {path} is not the group the lab made ({why}): left alone")
            return
    outcome.problems.extend(cgroups.remove(path))


def _remove_dir(
    path: Path, recorded: Mapping[str, Any] | None, what: str, outcome: Outcome
) -> None:
    """An empty directory the lab made; one that holds something, or is another now, is
    left and named. ``recorded`` None: a state from before identities, by name as before."""
    if identity.top_mount(os.path.realpath(path)) is not None:
        return  # a mount on it was reported already
    why: str | None = None
    try:
        if recorded is not None:
            why = identity.remove_own(path, recorded, "dir")
        elif path.is_dir() and not path.is_symlink():
            path.rmdir()
    except OSError as exc:
        if exc.errno != errno.ENOTEMPTY:
            outcome.fail(f"remove {path} ({what}): {exc.strerror}")
            return
        if not outcome.problems:  # else what it holds may be the lab's, still recorded
            outcome.warn(f"{path} ({what}) holds files that are not the lab's: left alone")
    if why:
        outcome.warn(f"{path} ({what}) is not the directory the lab made ({why}): left alone")


def _remove_cluster_dir(pg: dict[str, Any], outcome: Outcome) -> None:
    """The cluster directory the lab made on the host's file system, once the server is gone."""
    root = Path(pg["root"])
    if Cluster(root, pg["port"]).pid() is not None:
        outcome.fail(f"{root} kept: its postgres still runs")
        return
    if identity.top_mount(os.path.realpath(root)) is not None:
        outcome.warn(f"{root}: something is mounted there: left alone")
        return
    recorded = pg.get("root_id")
    if recorded is None:  # a state from before identities: the directory there now
        if not root.is_dir() or root.is_symlink():
            return
        recorded = identity.node_at(root)
    try:
        why = identity.remove_own(root, recorded, "tree")
    except OSError as exc:
        outcome.fail(f"remove postgres: {exc}")
        return
    if why:
        outcome.warn(f"{root} is not the cluster directory the lab made ({why}): left alone")


# ---------------------------------------------------------------------------- one volume


def volume(record: dict[str, Any], outcome: Outcome) -> None:
    """Unmount, detach, stop the array, remove the image and the mount directory — each only
    while it is the volume's own. ``record`` keeps what is still the lab's and could not be
    undone; what is not the lab's any more is forgotten."""
    if "identity" not in record:
        record["identity"] = adopt(record)
    ids = record["identity"]
    own_loop = _own_loop(record, ids, outcome)
    if not _unmount(record, ids, own_loop, outcome):
        return  # the lab's file system is still mounted: its device and image stay with it
    _remove_mount_dir(record, ids, outcome)
    if own_loop:
        accept_unstatable = _array_server_gone(record)
        outcome.attempt("detach", lambda: _detach(record, ids["loop"], accept_unstatable))
    if record.get("array"):
        array.stop(record["array"], outcome)
    _remove_image(record, ids, outcome)


def _own_loop(record: dict[str, Any], ids: Mapping[str, Any], outcome: Outcome) -> bool:
    """Whether the recorded loop device still reads the lab's image; one that reads another
    file now is reported and forgotten."""
    loop = record.get("loop")
    if not loop:
        return False
    recorded = ids.get("loop")
    why = "no identity was recorded for it" if recorded is None else None
    if recorded is not None:
        why = identity.loop_differs(recorded, identity.loop_identity(loop))
        if why is not None and why != GONE and _array_server_gone(record):
            why = None  # the array's LUN cannot be stat'ed once its server died; see there
    if why == GONE:
        record["loop"] = None
        return False
    if why:
        outcome.warn(f"volume {record['name']}: {loop} is not the lab's ({why}): left attached")
        record["loop"] = None
        return False
    return True


def _array_server_gone(record: Mapping[str, Any]) -> bool:
    """An array volume whose server was killed: the kernel cannot stat the LUN, so the loop
    device is known by its device number, the LUN's path and the array's own mount (still
    the recorded one, disconnected) instead."""
    rec = record.get("array")
    loop, recorded = record.get("loop"), record.get("identity", {}).get("loop")
    if not rec or not loop or not recorded:
        return False
    now = identity.loop_identity(loop)
    return (
        now is not None
        and now["backing_ino"] is None
        and now["rdev"] == recorded["rdev"]
        and system.loop_backing_file(loop) == attached_file(record)
        and array.mounted(rec)
    )


def _detach(record: dict[str, Any], recorded: Mapping[str, Any], accept_unstatable: bool) -> None:
    with identity.open_loop(record["loop"]) as fd:
        if fd is None:
            return
        why = identity.loop_differs(recorded, identity.loop_of(fd))
        if why is None or (accept_unstatable and why != GONE):
            identity.clear_loop(fd)  # checked and detached on the same descriptor
    record["loop"] = None


def _unmount(
    record: dict[str, Any], ids: Mapping[str, Any], own_loop: bool, outcome: Outcome
) -> bool:
    """Unmount the lab's file system if it is the mount on top at its place. False while it
    is still mounted (busy, or under another mount, which is left alone)."""
    recorded = ids.get("mount")
    if not record.get("mounted") or not recorded:
        return True
    name, target = record["name"], recorded["target"]
    why = identity.mount_differs(recorded)
    if why is None and not own_loop and recorded.get("unique") is None:
        why = "its device no longer reads the lab's image"  # no 64-bit ID to tell it by
    if why is None:
        outcome.attempt("unmount", lambda: identity.umount(target))
        top = identity.top_mount(target)
        if top is not None and identity.is_recorded(recorded, top):
            return False  # busy: the problem is recorded
    elif why != GONE:
        outcome.warn(f"volume {name}: {target}: {why}: left mounted")
        top = identity.top_mount(target)
        below = [m for m in identity.mounts_at(target) if m != top]
        if own_loop and any(identity.is_recorded(recorded, m) for m in below):
            outcome.fail(
                f"volume {name}: the lab's file system is still mounted at {target}, under "
                "that mount: unmount it, then run `dbsim lab down` again"
            )
            return False
    record["mounted"] = False
    return True


def _remove_mount_dir(record: dict[str, Any], ids: Mapping[str, Any], outcome: Outcome) -> None:
    if record.get("mount_dir_created"):
        path = Path(record["mount_point"])
        _remove_dir(path, ids.get("mount_dir"), f"volume {record['name']} mount point", outcome)


def _remove_image(record: dict[str, Any], ids: Mapping[str, Any], outcome: Outcome) -> None:
    image, name = record.get("image"), record["name"]
    if not image:
        return
    recorded = ids.get("image")
    if recorded is None:
        outcome.warn(f"volume {name}: {image}: no identity was recorded for it: left alone")
        record["image"] = None
        return
    deadline = time.monotonic() + DETACH_WAIT_S
    while users := [loop for loop in system.loops_for(Path(image)) if _reads(recorded, loop)]:
        if time.monotonic() >= deadline:
            outcome.fail(f"{image} is still attached to {', '.join(users)}")
            return
        time.sleep(0.05)
    try:
        why = identity.remove_own(Path(image), recorded, "file")
    except OSError as exc:
        outcome.fail(f"remove image: {exc}")
        return
    if why:
        outcome.warn(f"volume {name}: {image} is not the lab's image ({why}): left alone")
    record["image"] = None


def _reads(image: Mapping[str, Any], loop: str) -> bool:
    """Whether ``loop`` reads the inode ``image`` identifies (or cannot tell: then it may)."""
    now = identity.loop_identity(loop)
    if now is None:
        return False
    return now["backing_ino"] is None or (now["backing_dev"], now["backing_ino"]) == (
        image["dev"],
        image["ino"],
    )


def adopt(record: Mapping[str, Any]) -> dict[str, Any]:
    """Identities for a volume recorded before they were (dbsim before issue #24), where the
    kernel vouches for them: the loop device if it reads the very inode at the image path (an
    array's: the LUN's path), the image if that loop reads it or it has the recorded size,
    the mount if it is on top at the mount point and its source is that loop device."""
    ids: dict[str, Any] = {}
    image, loop = record.get("image"), record.get("loop")
    now = identity.loop_identity(loop) if loop else None
    st = None
    with contextlib.suppress(OSError):
        st = os.lstat(image) if image else None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        linked = now is not None and (now["backing_dev"], now["backing_ino"]) == (
            identity.dev_text(st.st_dev),
            st.st_ino,
        )
        if linked or st.st_size == record["size_bytes"]:
            ids["image"] = identity.node(st, size=True)
        if linked and not record.get("array"):
            ids["loop"] = now
    lun = attached_file(record) if record.get("array") else None
    if loop and now and lun and system.loop_backing_file(loop) == lun:
        ids["loop"] = now
    if ids.get("loop") and record.get("mounted"):
        target = os.path.realpath(record["mount_point"])
        top = identity.top_mount(target)
        if top is not None and top.dev == record.get("dev"):
            ids["mount"] = identity.mount_identity(target)
    return ids
