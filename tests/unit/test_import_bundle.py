"""write_capture_bundle, the one writer of imported captures: a run bundle's layout that the
bundle reader accepts, ``kind: capture`` and the ``capture`` object, ``t`` from the capture's
first reading, a figure a row lacks left empty (never 0), time-weighted storage means, a
fresh directory every time, and nothing of the user's touched when it cannot write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from sim.bundle.reader import read_csv_rows, read_summary
from sim.errors import OutputDirectoryError
from sim.imports.bundle import ZONE_UNKNOWN, write_capture_bundle, zone_of

T0 = datetime(2024, 1, 15, 10, 0, 0)
META = {"origin": "import", "format": "test", "interval_s": 10.0, "dropped": []}


def rows() -> list[tuple[datetime, str, str, dict[str, float]]]:
    return [
        (T0 + timedelta(seconds=10), "block", "sda", {"r_s": 100.0, "w_s": 20.0}),
        (T0 + timedelta(seconds=10), "block", "sdb", {"r_s": 1.0}),
        (T0 + timedelta(seconds=20), "block", "sda", {"r_s": 300.0, "w_s": 40.0}),
        # 70 s later: a gap between two files, not a 70-second interval
        (T0 + timedelta(seconds=90), "block", "sda", {"r_s": 500.0, "w_s": 60.0}),
    ]


def test_layout_times_and_absent_figures(tmp_path: Path) -> None:
    path = write_capture_bundle(tmp_path, "cap", META, rows())
    assert path.name == "20240115-100000-cap"
    assert sorted(p.name for p in path.iterdir()) == ["summary.json", "timeseries"]
    assert (path / "timeseries" / "ops.csv").read_text().startswith("t,interval,phase,step,op")
    assert read_csv_rows(path / "timeseries" / "ops.csv") == []
    series = read_csv_rows(path / "timeseries" / "block.csv")
    assert [(r["t"], r["interval"], r["phase"], r["entity"]) for r in series] == [
        ("10.0", "1", "measure", "sda"),
        ("10.0", "1", "measure", "sdb"),
        ("20.0", "2", "measure", "sda"),
        ("90.0", "3", "measure", "sda"),
    ]
    assert series[1]["w_s"] == ""  # sdb had no w_s: an empty cell, not 0
    summary = read_summary(path)
    assert summary["kind"] == "capture" and summary["status"] == "completed"
    assert summary["timing"]["sessions_started_at"] == "2024-01-15T10:00:00"
    assert summary["timing"]["measured_s"] == 90.0 and summary["intervals_written"] == 3
    assert summary["capture"]["timezone"] == ZONE_UNKNOWN
    # Means weighted by interval length, at most interval_s (10 s) each:
    # sda r_s (100*10 + 300*10 + 500*10) / 30 = 300; w_s (20+40+60)/3 = 40.
    assert summary["storage"]["block"]["sda"] == {"r_s": 300.0, "w_s": 40.0, "samples": 3}
    assert summary["storage"]["block"]["sdb"] == {"r_s": 1.0, "samples": 1}


def test_a_second_import_gets_its_own_directory(tmp_path: Path) -> None:
    first = write_capture_bundle(tmp_path, "cap", META, rows())
    before = (first / "summary.json").read_bytes()
    second = write_capture_bundle(tmp_path, "cap", META, rows())
    assert second != first and second.name == "20240115-100000-cap-2"
    assert (first / "summary.json").read_bytes() == before


@pytest.mark.parametrize(
    ("moment", "zone"),
    [
        (datetime(2024, 1, 15, 10, tzinfo=UTC), "UTC"),
        (datetime(2024, 1, 15, 10, tzinfo=timezone(timedelta(hours=2))), "+02:00"),
        (datetime(2024, 1, 15, 10, tzinfo=timezone(-timedelta(hours=5, minutes=30))), "-05:30"),
        (datetime(2024, 1, 15, 10), ZONE_UNKNOWN),
    ],
)
def test_the_zone_said(moment: datetime, zone: str) -> None:
    assert zone_of(moment) == zone


def test_an_output_path_that_is_a_file_is_refused_and_kept(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    with pytest.raises(OutputDirectoryError) as refused:
        write_capture_bundle(taken, "cap", META, rows())
    assert str(refused.value).startswith(f"-o: cannot create {taken}")
    assert taken.read_text() == "mine\n"
