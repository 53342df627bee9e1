"""The interval histogram log has one reader (sim.bundle.reader.read_interval_histograms):
a bundle written by the real BundleWriter read back, and a log damaged in the ways a planted
or cut file is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.bundle import reader
from sim.bundle.reader import read_interval_histograms
from sim.bundle.writer import BundleWriter
from sim.core.metrics import Interval, OpStats


def _interval(index: int, phase: str, latency_us: int) -> Interval:
    stats = OpStats()
    stats.histogram.record_value(latency_us, 10)
    return Interval(index, float(index), index + 1.0, phase, 0, {"read": stats})


def _bundle(root: Path) -> Path:
    (root / "run").mkdir()
    writer = BundleWriter(root / "run", {"name": "hlog", "load": {}})
    writer.on_interval(_interval(0, "warmup", 50), [])
    writer.on_interval(_interval(1, "measure", 300), [])
    writer.on_interval(_interval(2, "measure", 700), [])
    writer.close()
    return root / "run"


def _log(bundle: Path) -> Path:
    return bundle.joinpath(*reader.INTERVAL_HISTOGRAMS)


def test_the_measured_lines_of_a_written_bundle(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    read = list(read_interval_histograms(bundle))
    assert [(t, op, h.get_total_count()) for t, op, h in read] == [
        (2.0, "read", 10),
        (3.0, "read", 10),
    ]
    assert read[1][2].get_value_at_percentile(99) == pytest.approx(700, rel=1e-3)
    (warmup,) = read_interval_histograms(bundle, phase="warmup")
    assert warmup[0] == 1.0


def test_a_damaged_line_costs_that_line_only(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = _log(bundle)
    lines = path.read_text().splitlines(keepends=True)
    good = lines[-1]
    damaged = [
        "1.0,2.0,measure,read,not-base64!\n",  # a histogram hdrh cannot decode
        "1.0,nan,measure,read," + good.split(",")[4],  # a time that is no number
        "1.0,2.0,measure\n",  # a line cut short
        "1.0,9.0,measure,read," + "A" * (reader.MAX_HLOG_LINE_CHARS + 10) + "\n",  # too long
    ]
    path.write_text("".join([*lines[:-1], *damaged, good]))
    assert [t for t, _, _ in read_interval_histograms(bundle)] == [2.0, 3.0]


def test_nothing_from_a_missing_log_or_one_that_is_not_a_regular_file(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = _log(bundle)
    path.unlink()
    assert list(read_interval_histograms(bundle)) == []
    os.mkfifo(path)  # a FIFO planted as the log must not block the reader
    assert list(read_interval_histograms(bundle)) == []
