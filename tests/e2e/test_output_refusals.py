"""Issue #24, item 2: an output path dbsim would replace is written only when it is free or a
regular file with one link. ``dbsim compare A B --html PATH`` onto a device node, a FIFO, a
symbolic link (to a file, to a device) or a directory, and ``dbsim report`` on a bundle whose
``report.html`` is one of those, exit 2 with one ``error:`` line naming the path and what is
there, and leave it exactly as it was (inode, device numbers, link text, contents).

One real bundle (a 1-second run of the default scenario) is compared with itself. The FIFO
cases run the real binary (``python -m sim.cli``) under a hang bound (a FIFO once blocked
``open()``), which also proves that the process reports what ``main`` returns; the others run
the same command through ``sim.cli.entry.main`` in the test process (``InProcessDbsim``: the
same directories and environment, ~0.3 CPU-s of start-up less each), since what they check is
the command's decision and what it left.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, InProcessDbsim, clean_environment, single_bundle

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_BAD_INPUT = 0, 2
HANG_TIMEOUT_S = 60.0  # a FIFO once blocked; generous, only a hang fails
USERS = b"the user's own file\n"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dbsim, Path]]:
    base = tmp_path_factory.mktemp("outputs")
    cwd, tmp = base / "cwd", base / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    runner = Dbsim(cwd, clean_environment(tmp))
    try:
        run = runner("run", "--duration", "1", "-o", base / "runs", "-q")
        assert run.rc == EXIT_OK, run.describe()
        yield runner, single_bundle(base / "runs")
    finally:
        runner.cleanup()


def _char_device(path: Path) -> Path:
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link_to_file(path: Path) -> Path:
    (path.parent / "users-file").write_bytes(USERS)
    path.symlink_to(path.parent / "users-file")
    return path


def _link_to_device(path: Path) -> Path:
    path.symlink_to(_char_device(path.parent / "device"))
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    (path / "inside").write_bytes(USERS)
    return path


PLANTED: dict[str, tuple[Callable[[Path], Path], str]] = {
    "device": (_char_device, "a character device"),
    "fifo": (_fifo, "a fifo"),
    "link-to-file": (_link_to_file, "a symbolic link"),
    "link-to-device": (_link_to_device, "a symbolic link"),
    "directory": (_directory, "a directory"),
}


def _runner(bundle: tuple[Dbsim, Path], case: str) -> Dbsim:
    """The real binary for a FIFO (a hang is bounded only there), else in this process."""
    runner, _run = bundle
    return runner if case == "fifo" else InProcessDbsim(runner.cwd, runner.env)


def _state(directory: Path) -> dict[str, tuple[int, int, int, int, bytes | str | None]]:
    """Each entry below ``directory`` (not following links): kind, inode, device numbers,
    links, and its bytes or link text."""
    found = {}
    for entry in sorted(directory.rglob("*")):
        info = entry.lstat()
        content: bytes | str | None = None
        if stat.S_ISLNK(info.st_mode):
            content = os.readlink(entry)
        elif stat.S_ISREG(info.st_mode):
            content = entry.read_bytes()
        key = str(entry.relative_to(directory))
        found[key] = (info.st_mode, info.st_ino, info.st_rdev, info.st_nlink, content)
    return found


def _assert_refused_naming(result_stderr: str, rc: int, path: Path, found: str) -> None:
    lines = result_stderr.splitlines()
    assert rc == EXIT_BAD_INPUT, result_stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result_stderr
    assert str(path) in lines[0] and f"it is {found}" in lines[0], lines[0]
    assert "Traceback" not in result_stderr


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_compare_html_onto_what_dbsim_may_not_replace(
    bundle: tuple[Dbsim, Path], tmp_path: Path, case: str
) -> None:
    runner, run = _runner(bundle, case), bundle[1]
    make, found = PLANTED[case]
    page = make(tmp_path / "compare.html")
    before = _state(tmp_path)
    result = runner("compare", run, run, "--html", page, timeout=HANG_TIMEOUT_S)
    _assert_refused_naming(result.stderr, result.rc, page, found)
    assert _state(tmp_path) == before, "something was replaced or left behind"
    if case == "device" or case == "link-to-device":
        device = tmp_path / ("compare.html" if case == "device" else "device")
        assert os.lstat(device).st_rdev == os.stat("/dev/null").st_rdev


def test_compare_html_over_its_own_regular_file_is_fine(
    bundle: tuple[Dbsim, Path], tmp_path: Path
) -> None:
    runner, run = _runner(bundle, "regular file"), bundle[1]
    page = tmp_path / "compare.html"
    page.write_bytes(USERS)
    result = runner("compare", run, run, "--html", page)
    assert result.rc == EXIT_OK, result.describe()
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html"]


@pytest.mark.parametrize("case", ["fifo", "link-to-file"])
def test_report_over_a_planted_report_html(
    bundle: tuple[Dbsim, Path], tmp_path: Path, case: str
) -> None:
    runner, run = _runner(bundle, case), bundle[1]
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    (copy / "report.html").unlink()
    make, found = PLANTED[case]
    make(copy / "report.html")
    before = _state(tmp_path)
    result = runner("report", copy, timeout=HANG_TIMEOUT_S)
    _assert_refused_naming(result.stderr, result.rc, copy / "report.html", found)
    after = _state(tmp_path)
    assert after[f"{run.name}/report.html"] == before[f"{run.name}/report.html"]
    if case == "link-to-file":
        assert (copy / "users-file").read_bytes() == USERS
