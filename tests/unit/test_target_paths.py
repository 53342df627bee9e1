"""storage.targets.paths: a target's local path is its user's and what the target needs,
looked at with lstat (nothing opened, no link followed), one line naming the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.errors import ConfigError
from storage.targets.filetree import FileTreeTarget
from storage.targets.paths import check_owner, check_tree_root
from storage.targets.settings import FileTreeSettings

NOBODY = 65534


def _refused(check: object, path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        check(path)  # type: ignore[operator]
    line = str(caught.value)
    assert line.startswith("target.path: ") and "\n" not in line, line
    return line


def _foreign(path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, NOBODY, NOBODY)
    return path


def test_a_tree_root_must_be_a_directory_of_this_user(tmp_path: Path) -> None:
    check_tree_root(tmp_path / "new")  # free: the target creates it
    (tmp_path / "mine").mkdir()
    check_tree_root(tmp_path / "mine")
    (tmp_path / "file").write_text("x")
    assert "is a regular file; a file tree's root is a directory" in _refused(
        check_tree_root, tmp_path / "file"
    )
    os.mkfifo(tmp_path / "fifo")
    assert "is a fifo;" in _refused(check_tree_root, tmp_path / "fifo")
    assert "is a character device;" in _refused(check_tree_root, Path("/dev/zero"))
    (tmp_path / "link").symlink_to(tmp_path / "mine")
    assert "is a symbolic link" in _refused(check_tree_root, tmp_path / "link")
    (tmp_path / "theirs").mkdir()
    _foreign(tmp_path / "theirs")
    line = _refused(check_tree_root, tmp_path / "theirs")
    assert f"belongs to nobody (uid {NOBODY})" in line and "dbsim writes only" in line
    assert "not a directory" in _refused(check_tree_root, tmp_path / "file" / "below")


def test_a_file_of_another_user_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "theirs.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    before = os.lstat(path)
    check_owner(path)  # still this user's
    _foreign(path)
    assert "belongs to nobody" in _refused(check_owner, path)
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def test_the_file_tree_target_checks_its_root(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    target = FileTreeTarget(FileTreeSettings(path=tmp_path / "fifo"))
    assert "is a fifo" in _refused(lambda _: target.check_paths(), tmp_path)
    FileTreeTarget(FileTreeSettings(path=tmp_path / "tree")).check_paths()
