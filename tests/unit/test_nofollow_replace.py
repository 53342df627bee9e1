"""sim.nofollow.replace_file, the one writer of every file dbsim replaces (issue #24, item 2):
it writes a new name or replaces a regular file with one link, and refuses — before writing
anything, leaving what is there exactly as it was — a device node, a FIFO, a socket, a
symbolic link (to a file, to a device, dangling), a directory and a hard-linked file, and
anything swapped in while it wrote."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import sim.nofollow
from sim.nofollow import NotReplaceableError, UnsafeEntryError, replace_file

NEW = b"<html>dbsim</html>\n"
OLD = b"the user's own bytes\n"


def _identity(path: Path) -> tuple[int, int, int, int, int]:
    info = path.lstat()
    return info.st_mode, info.st_ino, info.st_dev, info.st_rdev, info.st_nlink


def _write(path: Path) -> None:
    replace_file(str(path), NEW, str(path.with_name(f".{path.name}.tmp")))


def _char_device(path: Path) -> Path:
    """A character device node with /dev/null's numbers (mknod needs root)."""
    null = os.stat("/dev/null").st_rdev
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, null)
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


@contextlib.contextmanager
def _socket_at(path: Path) -> Iterator[Path]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        yield path


def test_a_new_name_is_written(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    _write(page)
    assert page.read_bytes() == NEW
    assert page.stat().st_nlink == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html"]


def test_a_regular_file_is_replaced_by_a_new_inode(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_bytes(OLD)
    kept = os.open(page, os.O_RDONLY)  # the old inode, to show it was not written into
    try:
        before = page.stat().st_ino
        _write(page)
        assert page.read_bytes() == NEW
        assert page.stat().st_ino != before
        assert os.pread(kept, 100, 0) == OLD
    finally:
        os.close(kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    (path / "inside.txt").write_bytes(OLD)
    return path


def _link_to_file(path: Path) -> Path:
    (path.parent / "users-file").write_bytes(OLD)
    path.symlink_to(path.parent / "users-file")
    return path


def _link_to_device(path: Path) -> Path:
    path.symlink_to(_char_device(path.parent / "device"))
    return path


def _dangling_link(path: Path) -> Path:
    path.symlink_to(path.parent / "not-there-yet")
    return path


def _hard_link(path: Path) -> Path:
    (path.parent / "users-file").write_bytes(OLD)
    os.link(path.parent / "users-file", path)
    return path


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "character device": (_char_device, "it is a character device"),
    "fifo": (_fifo, "it is a fifo"),
    "directory": (_directory, "it is a directory"),
    "link to a file": (_link_to_file, "it is a symbolic link"),
    "link to a device": (_link_to_device, "it is a symbolic link"),
    "dangling link": (_dangling_link, "it is a symbolic link"),
    "hard link": (_hard_link, "it is a regular file with 2 hard links"),
}


def _snapshot(directory: Path) -> dict[str, tuple[tuple[int, ...], bytes | str | None]]:
    """Every entry's identity and content (a link's text, a regular file's bytes)."""
    found: dict[str, tuple[tuple[int, ...], bytes | str | None]] = {}
    for entry in sorted(directory.iterdir()):
        info = entry.lstat()
        content: bytes | str | None = None
        if stat.S_ISLNK(info.st_mode):
            content = os.readlink(entry)
        elif stat.S_ISREG(info.st_mode):
            content = entry.read_bytes()
        found[entry.name] = (_identity(entry), content)
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_is_not_a_singly_linked_regular_file_is_refused(tmp_path: Path, case: str) -> None:
    make, found = CASES[case]
    page = make(tmp_path / "compare.html")
    before = _snapshot(tmp_path)
    with pytest.raises(NotReplaceableError) as refused:
        _write(page)
    assert refused.value.filename == str(page)
    assert str(refused.value.strerror).startswith(f"{found}, not a regular file with one link")
    assert "\n" not in str(refused.value)
    assert _snapshot(tmp_path) == before  # nothing replaced, no temporary file left
    if case == "directory":
        assert (page / "inside.txt").read_bytes() == OLD


def test_a_socket_is_refused(tmp_path: Path) -> None:
    with _socket_at(tmp_path / "s") as path:
        before = _snapshot(tmp_path)
        with pytest.raises(NotReplaceableError, match="it is a socket"):
            _write(path)
        assert _snapshot(tmp_path) == before


def test_the_refusal_is_an_oserror_every_writer_reports(tmp_path: Path) -> None:
    page = _fifo(tmp_path / "p")
    with pytest.raises(OSError) as refused:
        _write(page)
    assert isinstance(refused.value, UnsafeEntryError | FileExistsError)


def _swap_during_write(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """Run ``swap`` right after the temporary file is written: between the check and the
    rename, the window a name check alone would leave open."""
    original = sim.nofollow.write_new

    def write_then_swap(
        name: str, data: bytes, dir_fd: int | None = None, mode: int = 0o644
    ) -> None:
        original(name, data, dir_fd, mode)
        swap()

    monkeypatch.setattr(sim.nofollow, "write_new", write_then_swap)


def test_a_file_swapped_for_a_link_while_writing_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "report.html"
    page.write_bytes(OLD)
    (tmp_path / "users-file").write_bytes(OLD)

    def swap() -> None:
        page.unlink()
        page.symlink_to(tmp_path / "users-file")

    _swap_during_write(monkeypatch, swap)
    with pytest.raises(NotReplaceableError, match="swapped while dbsim wrote"):
        _write(page)
    assert page.is_symlink() and os.readlink(page) == str(tmp_path / "users-file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "users-file"]


def test_a_file_swapped_for_another_regular_file_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "report.html"
    page.write_bytes(OLD)
    other = tmp_path / "moved-in"
    other.write_bytes(b"someone else's\n")

    _swap_during_write(monkeypatch, lambda: os.replace(other, page))
    with pytest.raises(NotReplaceableError, match="swapped while dbsim wrote"):
        _write(page)
    assert page.read_bytes() == b"someone else's\n"


def test_a_device_appearing_at_a_new_name_while_writing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "compare.html"
    _swap_during_write(monkeypatch, lambda: _char_device(page) and None)
    with pytest.raises(NotReplaceableError, match="appeared at it while dbsim wrote"):
        _write(page)
    assert stat.S_ISCHR(page.lstat().st_mode)
    assert page.lstat().st_rdev == os.stat("/dev/null").st_rdev
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html"]
