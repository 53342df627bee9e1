"""Capture bundles for the profile's tests, made from recorded readings under tests/data
through the collectors' own arithmetic, and written by the importers' one writer.

- Block devices: the three devices of ``tests/data/diskstats/steady.1`` advance, interval
  after interval, by their recorded ``steady.1`` → ``steady.2`` deltas times a whole factor
  the test chooses (2: twice the recorded second's I/O in that interval). Each interval's
  figures are :func:`storage.collectors.diskstats.iostat_rates` of two such readings: what the
  block collector writes for them.
- NFS: each pair of ``tests/data/mountstats`` (``.before``, ``.after``) through
  :func:`storage.collectors.nfs_rates.interval_figures`, repeated once per interval.

The bundle says what it is: ``capture.origin`` ``import`` and a ``format`` naming the test
recording, so no figure in it passes for a measurement of a real machine.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sim import registry
from sim.imports.bundle import write_capture_bundle
from storage.collectors.diskstats import DiskCounters, iostat_rates, parse_diskstats
from storage.collectors.mountstats import parse_mountstats
from storage.collectors.nfs_rates import interval_figures

DATA = Path(__file__).resolve().parents[1] / "data"
COUNTERS = [
    "rd_ios",
    "rd_merges",
    "rd_sectors",
    "rd_ticks",
    "wr_ios",
    "wr_merges",
    "wr_sectors",
    "wr_ticks",
    "io_ticks",
    "time_in_queue",
    "dc_ios",
    "dc_merges",
    "dc_sectors",
    "dc_ticks",
    "fl_ios",
    "fl_ticks",
]
FORMAT = "test: tests/data/diskstats steady.1 -> steady.2 deltas times a factor per interval"


def _diskstats(name: str) -> dict[str, DiskCounters]:
    return parse_diskstats((DATA / "diskstats" / name).read_text(encoding="utf-8"))


def block_rows(
    start: datetime, interval_s: float, factors: Sequence[int], *, source: str | None = None
) -> list[tuple[datetime, str, str, dict[str, float]]]:
    """One row per device and interval (see the module docstring); interval ``k`` ends at
    ``start + (k + 1) * interval_s``."""
    source = source or registry.collector_with_role(registry.ROLE_DEVICE) or ""
    first, second = _diskstats("steady.1"), _diskstats("steady.2")
    rows: list[tuple[datetime, str, str, dict[str, float]]] = []
    for name, base in sorted(first.items()):
        delta = {c: getattr(second[name], c) - getattr(base, c) for c in COUNTERS}
        prev = base
        for k, factor in enumerate(factors):
            curr = dataclasses.replace(
                prev, **{c: getattr(prev, c) + factor * delta[c] for c in COUNTERS}
            )
            figures = iostat_rates(prev, curr, interval_s)
            rows.append((start + timedelta(seconds=(k + 1) * interval_s), source, name, figures))
            prev = curr
    return rows


def nfs_rows(
    start: datetime, pair: str, mount: str, interval_s: float, intervals: int
) -> list[tuple[datetime, str, str, dict[str, float]]]:
    """The mount's and its operations' figures of one recorded pair, ``intervals`` times."""
    source = registry.collector_with_role(registry.ROLE_NFS)
    assert source is not None
    before = parse_mountstats((DATA / "mountstats" / f"{pair}.before").read_text())[mount]
    after = parse_mountstats((DATA / "mountstats" / f"{pair}.after").read_text())[mount]
    figures = interval_figures(before, after, interval_s)
    assert figures.mount is not None
    rows = []
    for k in range(intervals):
        end = start + timedelta(seconds=(k + 1) * interval_s)
        rows.append((end, source, mount, dict(figures.mount)))
        rows += [(end, source, f"{mount}:{op}", dict(v)) for op, v in figures.ops.items()]
    return rows


def write_bundle(
    out: Path,
    rows: Sequence[tuple[datetime, str, str, dict[str, float]]],
    interval_s: float,
    *,
    fmt: str = FORMAT,
    **capture: Any,
) -> Path:
    meta = {"origin": "import", "format": fmt, "files": [], "interval_s": interval_s, **capture}
    return write_capture_bundle(out, "profile-test", meta, list(rows))


def csv_rows(bundle: Path, source: str) -> list[dict[str, str]]:
    """The rows of ``timeseries/<source>.csv`` as the test reads them by hand."""
    with (bundle / "timeseries" / f"{source}.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
