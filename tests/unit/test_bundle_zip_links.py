"""The bundle zip serves the bundle's own files and never what a link planted in it points at."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from sim.bundle.archive import bundle_zip


def test_links_in_a_bundle_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not dbsim's", encoding="utf-8")
    bundle = tmp_path / "run"
    (bundle / "timeseries").mkdir(parents=True)
    (bundle / "summary.json").write_text("{}", encoding="utf-8")
    (bundle / "timeseries" / "ops.csv").write_text("t\n", encoding="utf-8")
    (bundle / "timeseries" / "planted.csv").symlink_to(outside / "secret.txt")
    (bundle / "linked-dir").symlink_to(outside, target_is_directory=True)
    names = zipfile.ZipFile(io.BytesIO(bundle_zip(bundle))).namelist()
    assert names == ["run/summary.json", "run/timeseries/ops.csv"]
