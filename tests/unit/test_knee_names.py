"""Whose knee it is: a sweep on SQLite whose data sat in the page cache (device reads 2.7 % of
reading operations, 99.5 % of the device's I/O writes and flushes, recorded in a 1-2-4
session sweep on this host) has a write-back knee, not the storage's."""

from __future__ import annotations

import numpy as np

from sim.analysis.sections import KNEE_NAMES, name_knee
from sim.judge.sweep import sweep_line

# Per-interval device rates as that sweep's block.csv had them (r_s, w_s, f_s).
CACHED = {"r_s": np.array([26.0, 27.0]), "w_s": np.array([5100.0, 5200.0]),
          "f_s": np.array([230.0, 236.0])}  # fmt: skip
READING = {"r_s": np.array([900.0, 950.0]), "w_s": np.array([100.0, 90.0]),
           "f_s": np.array([5.0, 5.0])}  # fmt: skip


def knee() -> dict[str, object]:
    return {"x": 6634.4, "p99_us": 12367.0, "method": "plateau"}


def test_cached_data_and_write_back_make_a_write_back_knee() -> None:
    found = knee()
    name_knee(found, 0.0274, CACHED)
    assert found["kind"] == "write-back"
    assert found["name"] == (
        "write-back knee (data cached: the storage's read path was not exercised)"
    )


def test_cached_data_without_write_back_is_a_cache_knee() -> None:
    found = knee()
    name_knee(found, 0.001, {k: v * 0 for k, v in CACHED.items()})
    assert found["kind"] == "cache" and found["name"] == KNEE_NAMES["cache"]


def test_a_device_that_read_has_the_storages_knee() -> None:
    found = knee()
    name_knee(found, 0.95, READING)
    assert (found["kind"], found["name"]) == ("storage", "knee")
    unknown = knee()
    name_knee(unknown, None, CACHED)  # no reading operation: nothing says it was cached
    assert unknown["kind"] == "storage"
    name_knee(None, 0.0, CACHED)  # no knee: nothing to name


def test_the_sweep_line_names_the_knee() -> None:
    found = {**knee(), "x_is": "device_iops"}
    name_knee(found, 0.0274, CACHED)
    sweep = {
        "highest_passing": {"load": 4, "label": "step 3", "ops_s": 1106.0},
        "vary": "sessions",
        "knee": found,
    }
    line = sweep_line(sweep)
    assert line.endswith(
        "; write-back knee (data cached: the storage's read path was not exercised) at 6,634 IOPS"
    )
    assert "; knee at" not in line
