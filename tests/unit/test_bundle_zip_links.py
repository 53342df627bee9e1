"""The web UI's downloads (sim.bundle.archive) serve the bundle's own files and never what a
link or a hard link planted in it reaches (issue #24, item 4): not through a linked top-level
folder (``timeseries`` -> elsewhere), not a linked ``summary.json``, not a hard link to a file
outside the bundle, at any level; a zip names what it left out."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from sim.bundle.archive import (
    LEFT_OUT_NAME,
    DownloadRefused,
    bundle_zip,
    fetch,
    read_bundle_file,
)

SECRET = "not dbsim's: outside the bundle"


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text(SECRET, encoding="utf-8")
    (outside / "ops.csv").write_text(SECRET, encoding="utf-8")
    return outside


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "run"
    (bundle / "timeseries").mkdir(parents=True)
    (bundle / "summary.json").write_text("{}", encoding="utf-8")
    (bundle / "report.html").write_text("<html></html>", encoding="utf-8")
    (bundle / "timeseries" / "ops.csv").write_text("t\n", encoding="utf-8")
    return bundle


def _entries(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist()}


def _assert_nothing_from_outside(entries: dict[str, str]) -> None:
    for name, text in entries.items():
        if not name.endswith(LEFT_OUT_NAME):
            assert SECRET not in text, name


def test_a_clean_bundle_is_served_whole(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    entries = _entries(bundle_zip(bundle))
    assert list(entries) == [
        "run/report.html",
        "run/summary.json",
        "run/timeseries/ops.csv",
    ]
    assert _entries(bundle_zip(bundle, "timeseries")) == {"run/timeseries/ops.csv": "t\n"}
    assert read_bundle_file(bundle, "summary.json") == b"{}"


def test_links_in_a_bundle_are_not_followed(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    bundle = _bundle(tmp_path)
    (bundle / "timeseries" / "planted.csv").symlink_to(outside / "secret.csv")
    (bundle / "linked-dir").symlink_to(outside, target_is_directory=True)
    entries = _entries(bundle_zip(bundle))
    assert list(entries) == [
        "run/report.html",
        "run/summary.json",
        "run/timeseries/ops.csv",
        f"run/{LEFT_OUT_NAME}",
    ]
    assert entries[f"run/{LEFT_OUT_NAME}"].splitlines()[1:] == [
        "run/linked-dir: a symbolic link; not served",
        "run/timeseries/planted.csv: a symbolic link; not served",
    ]
    _assert_nothing_from_outside(entries)


def test_a_top_level_timeseries_link_serves_nothing_outside(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    bundle = _bundle(tmp_path)
    (bundle / "timeseries" / "ops.csv").unlink()
    (bundle / "timeseries").rmdir()
    (bundle / "timeseries").symlink_to(outside, target_is_directory=True)
    with pytest.raises(DownloadRefused, match=r"^timeseries: a symbolic link; not served$"):
        bundle_zip(bundle, "timeseries")
    entries = _entries(bundle_zip(bundle))
    assert "run/timeseries/secret.csv" not in entries
    assert "run/timeseries: a symbolic link; not served" in entries[f"run/{LEFT_OUT_NAME}"]
    _assert_nothing_from_outside(entries)


def test_a_linked_summary_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    bundle = _bundle(tmp_path)
    (bundle / "summary.json").unlink()
    (bundle / "summary.json").symlink_to(outside / "secret.csv")
    with pytest.raises(DownloadRefused, match=r"^summary.json: a symbolic link; not served$"):
        read_bundle_file(bundle, "summary.json")
    entries = _entries(bundle_zip(bundle))
    assert "run/summary.json" not in entries
    _assert_nothing_from_outside(entries)


def test_a_hard_link_to_an_outside_file_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    bundle = _bundle(tmp_path)
    (bundle / "report.html").unlink()
    os.link(outside / "secret.csv", bundle / "report.html")
    os.link(outside / "ops.csv", bundle / "timeseries" / "block.csv")
    with pytest.raises(DownloadRefused, match="a regular file with 2 hard links"):
        read_bundle_file(bundle, "report.html")
    for under in ("", "timeseries"):
        entries = _entries(bundle_zip(bundle, under))
        assert "run/report.html" not in entries and "run/timeseries/block.csv" not in entries
        assert (
            "run/timeseries/block.csv: a regular file with 2 hard links"
            in (entries[f"run/{LEFT_OUT_NAME}"])
        )
        _assert_nothing_from_outside(entries)


def test_a_fifo_or_device_is_left_out_without_being_opened(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    os.mkfifo(bundle / "timeseries" / "stuck.csv")  # opening it for reading would block
    os.mkfifo(bundle / "summary.json.fifo")
    entries = _entries(bundle_zip(bundle))
    note = entries[f"run/{LEFT_OUT_NAME}"]
    assert "run/timeseries/stuck.csv: a fifo; not served" in note
    with pytest.raises(DownloadRefused, match="a fifo"):
        read_bundle_file(bundle, "summary.json.fifo")


def test_what_is_not_there_is_not_found(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_bundle_file(bundle, "analysis.json")
    with pytest.raises(FileNotFoundError):
        bundle_zip(bundle, "histograms")


def test_fetch_returns_refusals_and_absences_as_values(tmp_path: Path) -> None:
    """What the UI runs in gevent's thread pool, which prints a traceback for whatever its
    function raises: a report not written yet must not print one at every poll."""
    outside = _outside(tmp_path)
    bundle = _bundle(tmp_path)
    (bundle / "summary.json").unlink()
    (bundle / "summary.json").symlink_to(outside / "secret.csv")
    assert fetch(bundle, "report.html") == (b"<html></html>", None)
    data, problem = fetch(bundle, "summary.json")
    assert data is None and isinstance(problem, DownloadRefused)
    data, problem = fetch(bundle, "analysis.json")
    assert data is None and isinstance(problem, FileNotFoundError)
    data, problem = fetch(bundle, "timeseries.zip", "timeseries")
    assert problem is None and data is not None
    assert list(_entries(data)) == ["run/timeseries/ops.csv"]
