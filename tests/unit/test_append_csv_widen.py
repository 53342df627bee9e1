"""A time series never drops a figure without a word: a column first seen after the header was
written widens the file (sim.bundle.files.AppendCsv)."""

from __future__ import annotations

import csv
from pathlib import Path

from sim.bundle.files import AppendCsv


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_a_figure_first_seen_later_widens_the_header_and_leaves_earlier_cells_empty(
    tmp_path: Path,
) -> None:
    path = tmp_path / "blocklatency.csv"
    series = AppendCsv(path, ("t", "entity", "n"))
    series.append([{"t": 1.0, "entity": "loop0", "n": 10}])
    series.append([{"t": 2.0, "entity": "loop0", "n": 12, "seq_pct": 99.5, "inflight_mean": 7.8}])
    series.append([{"t": 3.0, "entity": "loop0", "n": 9}])
    series.close()
    header, rows = _rows(path)
    assert header == ["t", "entity", "n", "inflight_mean", "seq_pct"]
    assert rows[0] == {"t": "1.0", "entity": "loop0", "n": "10", "inflight_mean": "", "seq_pct": ""}
    assert rows[1]["seq_pct"] == "99.5" and rows[1]["inflight_mean"] == "7.8"
    assert rows[2]["n"] == "9" and rows[2]["seq_pct"] == ""


def test_widening_keeps_appending_to_the_same_path_whole(tmp_path: Path) -> None:
    path = tmp_path / "db.csv"
    series = AppendCsv(path, ("t", "a"))
    for i in range(50):
        series.append([{"t": i, "a": i, **({"b": i} if i >= 10 else {})}])
    series.close()
    header, rows = _rows(path)
    assert header == ["t", "a", "b"]
    assert [r["t"] for r in rows] == [str(i) for i in range(50)]
    assert [r["b"] for r in rows[:10]] == [""] * 10
    assert [r["b"] for r in rows[10:]] == [str(i) for i in range(10, 50)]
    assert not list(tmp_path.glob(".*.tmp"))
