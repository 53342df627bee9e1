"""``dbsim replay``'s refusals through the command line: one ``error:`` line, exit 2, and
nothing of the user's touched (no device is written: each refusal comes before fio runs)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import CliResult, InProcessDbsim
from tests.support.profile_bundles import block_rows, write_bundle

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """An imported capture bundle with device figures (two minutes of one-second rows)."""
    return write_bundle(tmp_path / "captures", block_rows(START, 1.0, [1] * 120), 1.0)


def _one_error(result: CliResult, words: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.rc == 2, result.describe()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], lines


def test_bundles_on_the_file_system_under_test_are_refused_and_the_directory_goes(
    dbsim_in_process: InProcessDbsim, capture: Path, tmp_path: Path
) -> None:
    if shutil.which("fio") is None:
        pytest.skip("!!! NOT RUN: fio is missing (the replay looks for it first)")
    target = tmp_path / "newvol"
    result = dbsim_in_process(
        "replay", capture, "--on", target, "--scale", "1", "-o", tmp_path / "replays"
    )
    _one_error(result, "on the file system under test")
    assert not target.exists()  # dbsim made it for the replay, and took it back
    assert not (tmp_path / "replays").exists()


def test_a_directory_dbsim_did_not_create_is_left_alone(
    dbsim_in_process: InProcessDbsim, capture: Path, tmp_path: Path
) -> None:
    if shutil.which("fio") is None:
        pytest.skip("!!! NOT RUN: fio is missing (the replay looks for it first)")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.db").write_bytes(b"production")
    before = sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in theirs.iterdir())
    result = dbsim_in_process("replay", capture, "--on", theirs, "-o", tmp_path / "replays")
    _one_error(result, "is not empty")
    assert (
        sorted((p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in theirs.iterdir()) == before
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--scale", "1,-2"], "every scale must be above 0"),
        (["--slo", "p99=3"], "--slo"),
        (["--duration", "1"], "--duration"),
        (["--size", "1M"], "--size"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    dbsim_in_process: InProcessDbsim, capture: Path, tmp_path: Path, args: list[str], words: str
) -> None:
    result = dbsim_in_process("replay", capture, "--on", tmp_path / "t", *args)
    _one_error(result, words)
    assert not (tmp_path / "t").exists()


def test_a_bundle_without_device_figures_is_refused(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    result = dbsim_in_process("replay", tmp_path, "--on", tmp_path / "t")
    _one_error(result, "error:")
