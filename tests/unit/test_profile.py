"""``dbsim profile``'s figures, each computed here by hand from the bundle's own CSV rows.

The bundles come from recorded readings under tests/data through the collectors' arithmetic
(tests/support/profile_bundles.py): the diskstats deltas of ``steady.1`` → ``steady.2``
times a factor per interval, so a test knows where it put the busiest minute, and the
mountstats pairs. The profile reads the bundle as written (timeseries/block.csv …); the test
reads the same file with :mod:`csv` and does the sums itself.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sim.errors import ConfigError
from sim.profile import build_profile
from sim.profile.console import print_profile
from sim.profile.device import counted_devices
from sim.profile.words import headline
from tests.support.profile_bundles import block_rows, csv_rows, nfs_rows, write_bundle

PLUS_ONE = timezone(timedelta(hours=1))
START = datetime(2025, 1, 6, 0, 0, tzinfo=PLUS_ONE)


def _by_interval(rows: list[dict[str, str]]) -> dict[float, list[dict[str, str]]]:
    found: dict[float, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        found[float(row["t"])].append(row)
    return dict(sorted(found.items()))


def _sum(rows: list[dict[str, str]], column: str) -> float:
    return sum(float(r[column]) for r in rows)


def _weighted(rows: list[dict[str, str]], column: str, weight: str) -> float:
    return sum(float(r[column]) * float(r[weight]) for r in rows) / _sum(rows, weight)


def _iops(rows: list[dict[str, str]]) -> float:
    return _sum(rows, "r_s") + _sum(rows, "w_s")


def _value(record: dict[str, Any]) -> float:
    assert set(record) == {"value", "unit", "what", "source"}, record
    assert record["what"] in ("measured", "imported", "derived"), record
    return float(record["value"])


@pytest.fixture
def busy_minute(tmp_path: Path) -> Path:
    """Ten minutes of one-second intervals: twice the recorded I/O for 30 s from t = 100 s,
    three times for the minute from t = 300 s, the recorded second elsewhere."""
    factors = [1] * 600
    factors[100:130] = [2] * 30
    factors[300:360] = [3] * 60
    return write_bundle(tmp_path, block_rows(START, 1.0, factors), 1.0)


def test_the_busiest_minute_is_where_the_series_put_it(busy_minute: Path) -> None:
    doc = build_profile(busy_minute)
    minute = doc["peaks"]["busiest_minute"]
    assert (minute["start_t"], minute["end_t"], minute["intervals"]) == (300.0, 360.0, 60)
    assert minute["start"] == "2025-01-06T00:05:00+01:00"
    # By hand: block.csv's rows with 300 < t <= 360, every device, one second each.
    window = [
        r
        for t, rows in _by_interval(csv_rows(busy_minute, "block")).items()
        if 300 < t <= 360
        for r in rows
    ]
    assert len(window) == 60 * 4  # steady.1 lists four devices: loop0, nvme0n1, sdb, vda
    figures = minute["figures"]
    assert _value(minute["iops"]) == pytest.approx(_iops(window) / 60, rel=1e-5)
    assert _value(figures["read_pct"]) == pytest.approx(
        100 * _sum(window, "r_s") / _iops(window), rel=1e-5
    )
    assert _value(figures["read_kib"]) == pytest.approx(
        _weighted(window, "rareq_sz_kB", "r_s"), rel=1e-5
    )
    assert _value(figures["read_await_ms"]) == pytest.approx(
        _weighted(window, "r_await_ms", "r_s"), rel=1e-5
    )
    assert _value(figures["write_await_ms"]) == pytest.approx(
        _weighted(window, "w_await_ms", "w_s"), rel=1e-5
    )
    assert _value(figures["queue"]) == pytest.approx(_sum(window, "aqu_sz") / 60, rel=1e-5)
    assert _value(figures["mb_s"]) == pytest.approx(
        (_sum(window, "rkB_s") + _sum(window, "wkB_s")) / 1024 / 60, rel=1e-5
    )
    assert doc["devices"]["counted"] == ["loop0", "nvme0n1", "sdb", "vda"]


def test_the_sentences_say_the_peak_with_its_figures(busy_minute: Path) -> None:
    doc = build_profile(busy_minute)
    figures = doc["peaks"]["busiest_minute"]["figures"]
    first = headline(doc)[0]
    reads = _value(figures["read_pct"])
    assert reads > 50  # nvme0n1's 50,000 reads a second dominate
    said = (
        f"Peak: {_value(figures['iops']):,.0f}\u00a0IOPS, {reads:.3g}\u00a0% reads of "
        f"{_value(figures['read_kib']):.3g}\u00a0KiB, device read latency "
        f"{_value(figures['read_await_ms']):.3g}\u00a0ms (mean await)"
    )
    assert first.startswith(said), first
    assert "the busiest minute, from 2025-01-06 00:05:00 UTC+01:00" in first


def test_means_percentiles_and_what_the_data_could_not_say(busy_minute: Path) -> None:
    doc = build_profile(busy_minute)
    per_t = [_iops(rows) for rows in _by_interval(csv_rows(busy_minute, "block")).values()]
    summary = doc["devices"]["summary"]["iops"]
    assert _value(summary["mean"]) == pytest.approx(sum(per_t) / 600, rel=1e-5)
    rank = math.ceil(0.95 * 600)  # nearest rank: the 570th of 600
    assert _value(summary["p95"]) == pytest.approx(sorted(per_t)[rank - 1], rel=1e-5)
    assert _value(summary["max"]) == pytest.approx(max(per_t), rel=1e-5)
    assert doc["peaks"]["busiest_15min"] == {
        "unresolved": "the data spans 600 s, less than 15 minutes: no busiest 15 minutes"
    }
    said = [item["what"] for item in doc["not_in_data"]]
    assert any("no request-size distribution" in s for s in said), said
    assert any("less than a day: no daily shape" in s for s in said), said
    assert "no database figures" in said, said


def test_daily_shape_15_minutes_and_the_95th_percentile_hour(tmp_path: Path) -> None:
    """26 hours of 60-s intervals: office hours (09-17) at three times the recorded second,
    and the quarter from 14:00 on the first day at five times."""
    factors = []
    for k in range(26 * 60):
        at = START + timedelta(seconds=60 * k)
        factors.append(5 if at.day == 6 and at.hour == 14 and at.minute < 15 else 1)
        factors[-1] += 2 if 9 <= at.hour <= 17 and factors[-1] == 1 else 0
    bundle = write_bundle(tmp_path, block_rows(START, 60.0, factors), 60.0)
    doc = build_profile(bundle)
    by_t = {t: _iops(rows) for t, rows in _by_interval(csv_rows(bundle, "block")).items()}
    quarter = doc["peaks"]["busiest_15min"]
    assert (quarter["start"], quarter["intervals"]) == ("2025-01-06T14:00:00+01:00", 15)
    assert _value(quarter["iops"]) == pytest.approx(
        sum(v for t, v in by_t.items() if 14 * 3600 < t <= 14 * 3600 + 900) / 15, rel=1e-5
    )
    minute = doc["peaks"]["busiest_minute"]  # one interval: the first of the busiest ones
    assert (minute["start_t"], minute["seconds"]) == (14 * 3600.0, 60.0)
    # By hand: each interval in the hour of the day that holds its midpoint (t - 30 s).
    hours: dict[int, list[float]] = defaultdict(list)
    for t, value in by_t.items():
        hours[(START + timedelta(seconds=t - 30)).hour].append(value)
    shape = doc["daily_shape"]
    assert shape["zone"] == "+01:00"
    assert [h["hour"] for h in shape["hours"]] == list(range(24))
    for entry in shape["hours"]:
        values = hours[entry["hour"]]
        assert _value(entry["mean"]) == pytest.approx(sum(values) / len(values), rel=1e-5)
        assert _value(entry["max"]) == pytest.approx(max(values), rel=1e-5)
        assert entry["days"] == (2 if entry["hour"] < 2 else 1)
    # The clock hours: 26 of them, each a mean of 60 intervals; nearest rank 25 of 26.
    clock: dict[float, list[float]] = defaultdict(list)
    for t, value in by_t.items():
        clock[(t - 30) // 3600].append(value)
    means = sorted(sum(v) / len(v) for v in clock.values())
    hour = doc["peaks"]["p95_hour"]
    assert hour["of_hours"] == 26
    assert _value(hour["iops"]) == pytest.approx(means[math.ceil(0.95 * 26) - 1], rel=1e-5)


@pytest.mark.parametrize("width", [80, 120])
def test_the_console_fits_its_width_with_every_table(tmp_path: Path, width: int) -> None:
    """A day of minutes (peak columns, the average day) on the console: no line wider than
    the width, no figure or heading cut short."""
    factors = [1 + (k // 60) % 3 for k in range(25 * 60)]
    doc = build_profile(write_bundle(tmp_path, block_rows(START, 60.0, factors), 60.0))
    out = Console(width=width, file=io.StringIO(), color_system=None)
    print_profile(out, doc, [f"profile: {tmp_path}/profile.json"])
    text = out.file.getvalue()  # type: ignore[attr-defined]
    # Only a path longer than the line (the test's own) may pass it, whole on its own line.
    wide = [line for line in text.splitlines() if len(line) > width]
    assert all(" " not in line.strip().rstrip(",") for line in wide), wide
    assert "…" not in text and "{" not in text
    for heading in ("busiest", "minute", "15-min", "average day", "Not in the data:"):
        assert heading in text, heading
    assert text.splitlines()[0].startswith("Peak: ")


def test_hourly_snapshots_have_no_minute_peak(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, block_rows(START, 3600.0, [1, 2, 1, 3, 1, 1]), 3600.0)
    doc = build_profile(bundle)
    assert doc["peaks"]["busiest_minute"] == {
        "unresolved": "intervals of 3600 s, longer than a minute: no busiest minute"
    }
    assert "unresolved" in doc["peaks"]["busiest_15min"]
    interval = doc["peaks"]["busiest_interval"]
    assert (interval["start_t"], interval["end_t"]) == (3 * 3600.0, 4 * 3600.0)
    assert "the busiest interval (3600\u00a0s)" in headline(doc)[0]
    said = [item["what"] for item in doc["not_in_data"]]
    assert "intervals of 3600 s, longer than a minute: no busiest minute" in said


def test_no_peak_window_spans_a_gap_between_files(tmp_path: Path) -> None:
    """Two stretches two hours apart: 50 s at three times the recorded second (too short for
    a minute on its own), then 100 s at the recorded second."""
    first = block_rows(START, 1.0, [3] * 50)
    later = block_rows(START + timedelta(hours=2), 1.0, [1] * 100)
    bundle = write_bundle(tmp_path, [*first, *later], 1.0)
    doc = build_profile(bundle)
    minute = doc["peaks"]["busiest_minute"]
    assert minute["start_t"] >= 7200, minute
    assert doc["span"]["seconds"] == pytest.approx(150.0)  # sampled time, not the gap


def test_partitions_and_device_mapper_are_not_counted_twice() -> None:
    counted, left_out = counted_devices(["dm-0", "nvme0n1", "nvme0n1p2", "sda", "sda1"])
    assert counted == ["nvme0n1", "sda"]
    assert set(left_out) == {"dm-0", "nvme0n1p2", "sda1"}
    assert "partition of sda" in left_out["sda1"]
    assert counted_devices(["dm-0", "dm-1"]) == (["dm-0", "dm-1"], {})  # nothing beneath


def test_nfs_calls_per_operation(tmp_path: Path) -> None:
    rows = nfs_rows(START, "nfsv3_statvers10", "/u02/oradata", 10.0, 3)
    bundle = write_bundle(tmp_path, rows, 10.0)
    doc = build_profile(bundle)
    assert doc["peaks"]["load"]["label"] == "NFS calls/s"
    read = doc["nfs_client"]["mounts"]["/u02/oradata"]["operations"]["READ"]["summary"]
    # tests/data/mountstats/README.md, nfsv3_statvers10: "READ | 12000 / 12003 / 1 / 140 /
    # 8308 / 1200 / 30000 / 33600": 12,000 calls in 10 s, 140 + 8,308 bytes per call.
    assert _value(read["ops_s"]["mean"]) == pytest.approx(12000 / 10)
    assert _value(read["kB_per_op"]["mean"]) == pytest.approx((140 + 8308) / 1024, rel=1e-3)
    assert _value(read["avg_exe_ms"]["mean"]) == pytest.approx(33600 / 12000, rel=1e-3)
    row = next(r for r in csv_rows(bundle, "nfs") if r["entity"] == "/u02/oradata:READ")
    assert _value(read["kB_per_op"]["mean"]) == pytest.approx(float(row["kB_per_op"]))


def test_a_capture_still_running_is_read_to_its_last_whole_line(busy_minute: Path) -> None:
    summary_path = busy_minute / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["status"] = "running"
    summary_path.write_text(json.dumps(summary))
    with (busy_minute / "timeseries" / "block.csv").open("a") as handle:
        handle.write("601.0,601,measure,vda,99")  # an interval being appended: no newline
    doc = build_profile(busy_minute)
    assert doc["span"]["intervals"] == 600
    assert doc["status"] == "running"
    assert any("still running" in item["what"] for item in doc["not_in_data"])


def test_every_figure_says_its_unit_what_it_is_and_where_from(busy_minute: Path) -> None:
    doc = build_profile(busy_minute)
    seen = 0

    def walk(node: Any) -> None:
        nonlocal seen
        if isinstance(node, dict):
            if "value" in node and "unit" in node:
                _value(node) if node["value"] is not None else None
                assert node["source"].startswith("timeseries/"), node
                seen += 1
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(doc)
    assert seen > 50
    assert doc["profile_version"] == 1
    assert doc["devices"]["columns"]["iops"]["what"] == "derived"
    assert doc["devices"]["columns"]["read_iops"]["what"] == "derived"  # summed over 4 devices
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN


def test_a_single_device_column_is_imported_as_the_capture_says(tmp_path: Path) -> None:
    rows = [r for r in block_rows(START, 1.0, [1, 2, 1]) if r[2] == "vda"]
    doc = build_profile(write_bundle(tmp_path, rows, 1.0))
    assert doc["devices"]["columns"]["read_iops"] == {
        "unit": "1/s",
        "what": "imported",
        "source": "timeseries/block.csv: r_s",
        "meaning": "reads completed per second",
    }


def test_a_directory_that_is_not_a_bundle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a run bundle"):
        build_profile(tmp_path)


def test_traced_request_sizes_sequential_share_and_in_flight(tmp_path: Path) -> None:
    """The blocklatency collector's recording (tests/unit/test_blocklatency_collector.py:
    16 sequential 4-KiB reads, 3 sequential 128-KiB writes with their flushes, 6 random
    64-KiB reads) through its own arithmetic, one recorded tick per interval, beside loop0's
    diskstats rows."""
    from storage.collectors.blocklatency_script import entity_figures
    from tests.unit.test_blocklatency_collector import interval_entities, recorded_ticks

    ticks = recorded_ticks()
    block = [r for r in block_rows(START, 1.0, [1, 1, 1]) if r[2] == "loop0"]
    traced = [
        (START + timedelta(seconds=k + 1), "blocklatency", entity, entity_figures(counts))
        for k, tick in enumerate((ticks[2], ticks[4], ticks[6]))
        for entity, counts in interval_entities([tick]).items()
    ]
    bundle = write_bundle(tmp_path, [*block, *traced], 1.0)
    doc = build_profile(bundle)
    reads = {b["bucket"]: b for b in doc["devices"]["read_sizes"]["buckets"]}
    # Recording lines 10 (@size[…, 1, 0]: 16) and 33 (@size[…, 1, 4]: 6): 22 reads.
    assert doc["devices"]["read_sizes"]["requests"] == 22
    assert reads["size_kib_le_4"]["pct"]["value"] == pytest.approx(100 * 16 / 22, rel=1e-5)
    assert reads["size_kib_le_64"]["pct"]["value"] == pytest.approx(100 * 6 / 22, rel=1e-5)
    writes = {b["bucket"]: b for b in doc["devices"]["write_sizes"]["buckets"]}
    assert writes["size_kib_le_128"]["pct"]["value"] == 100.0  # line 22: @size[…, 2, 5]: 3
    rows = [r for r in csv_rows(bundle, "blocklatency") if r["entity"] == "loop0"]
    summary = doc["devices"]["summary"]
    # By hand: each interval's seq_pct and inflight_mean weighted by its traced requests n.
    assert summary["seq_pct"]["mean"]["value"] == pytest.approx(
        _weighted(rows, "seq_pct", "n"), rel=1e-5
    )
    assert summary["inflight_mean"]["mean"]["value"] == pytest.approx(
        _weighted(rows, "inflight_mean", "n"), rel=1e-5
    )
    assert summary["read_p99_ms"]["max"]["value"] == pytest.approx(
        max(
            float(r["p99_ms"])
            for r in csv_rows(bundle, "blocklatency")
            if r["entity"] == "loop0:read"
        )
    )
    said = " ".join(item["what"] for item in doc["not_in_data"])
    assert "request-size distribution" not in said and "sequential" not in said
    assert "Requests in the peak:" in " ".join(headline(doc))


def test_device_rows_without_any_io_count_are_nothing_to_profile(tmp_path: Path) -> None:
    """Bad input: a block series holding only %util (no r_s, w_s or iops) gives no IOPS."""
    rows = [(START + timedelta(seconds=k + 1), "block", "vda", {"util_pct": 5.0}) for k in range(3)]
    with pytest.raises(ConfigError, match="no storage figures to profile"):
        build_profile(write_bundle(tmp_path, rows, 1.0))
