"""Whose and what a target's local path is, looked at before a run, by ``dbsim validate`` and
by the web UI's start form alike (each target's ``check_paths``).

What sits at the path is looked at with ``lstat`` (never through a symbolic link) and nothing
is opened. A file tree's root must be a directory; whatever is there must belong to the user
running dbsim: a file or tree of another user is not dbsim's to write, and a dbsim run as
root would write it all the same. A path that does not exist yet is fine: the target creates
it (and the file the SQLite target checks itself, storage.targets.sqlite_file).
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from sim.errors import ConfigError
from sim.nofollow import kind_of


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _lstat(path: Path, field: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise ConfigError(f"{field}: {path}: a part of it is not a directory") from None
    except OSError as exc:
        raise ConfigError(f"{field}: {path}: cannot be looked at: {exc.strerror}") from None


def check_owner(path: Path, field: str = "target.path") -> None:
    """Refuse (one line naming ``field``) what is at ``path`` when another user owns it."""
    info = _lstat(path, field)
    me = os.geteuid()
    if info is not None and info.st_uid != me:
        raise ConfigError(
            f"{field}: {path} belongs to {_user(info.st_uid)}, not to {_user(me)} who runs "
            "dbsim; dbsim writes only its own user's files"
        )


def check_tree_root(path: Path, field: str = "target.path") -> None:
    """Refuse a file tree's root that is not a directory of this user (a link to one too)."""
    info = _lstat(path, field)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{field}: {path} is a symbolic link; name the tree's directory itself (dbsim "
            "never follows one)"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{field}: {path} is {kind_of(info.st_mode)}; a file tree's root is a directory"
        )
    check_owner(path, field)
