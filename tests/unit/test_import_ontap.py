"""``dbsim import ontap-rest`` and ``ontap-qos`` on published ONTAP output (tests/data/
ontap-rest: NetApp Harvest's recorded REST answers; tests/data/ontap-qos: the examples of
NetApp's documentation; see their READMEs). Expected figures are worked out here from the
cited lines."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.imports import ontap_qos, ontap_rest
from sim.imports.source import (
    Dropped,
    ImportClock,
    ImportFileError,
    Parsed,
    SourceFile,
    read_source,
)
from tests.support import forked_dbsim

DATA = Path(__file__).resolve().parents[1] / "data"
REST = DATA / "ontap-rest"
QOS = DATA / "ontap-qos"


def rest(*names: str) -> tuple[Parsed, Dropped]:
    dropped = Dropped()
    return ontap_rest.parse([read_source(REST / name, dropped) for name in names]), dropped


def rows_of(parsed: Parsed, entity: str) -> list[tuple[datetime, dict[str, float]]]:
    return [(row[0], dict(row[3])) for row in parsed.rows if row[2] == entity]


def dbsim(*args: str) -> subprocess.CompletedProcess[str]:
    return forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_two_polls_give_harvests_rates() -> None:
    parsed, dropped = rest("volume-poll-1.json", "volume-poll-2.json")
    # statistics.timestamp, line 16 of each: 16:14:56Z and 16:17:17Z, 141 s apart.
    [(end, vol)] = rows_of(parsed, "volume:osc/osc_vol01")
    assert end == datetime(2024, 7, 29, 16, 17, 17, tzinfo=UTC)
    reads = 422_149_966 - 421_727_167  # iops_raw.read, line 25 of poll-2 and of poll-1
    assert vol["read_iops"] == pytest.approx(reads / 141)
    # latency_raw.read (line 21, microseconds) over the reads.
    assert vol["read_latency_us"] == pytest.approx((1_792_850_352_683 - 1_792_666_552_544) / reads)
    # throughput_raw.read, line 31, bytes.
    assert vol["read_bps"] == pytest.approx((27_638_505_460_121 - 27_610_800_432_299) / 141)
    writes = 23_781_083 - 23_780_415  # line 26
    assert vol["write_iops"] == pytest.approx(writes / 141)
    assert vol["write_latency_us"] == pytest.approx((11_514_404_841 - 11_514_088_463) / writes)
    # RahulTest did nothing in between: 0 operations, a latency of 0, not a division by 0.
    [(_, idle)] = rows_of(parsed, "volume:osc/RahulTest")
    assert idle["total_iops"] == 0.0 and idle["total_latency_us"] == 0.0
    assert parsed.interval_s == 141.0 and dropped.count == 0


def test_a_partial_record_is_dropped_and_the_next_rate_spans_it() -> None:
    parsed, dropped = rest("volume-poll-1.json", "partial-poll-partial.json", "partial-poll-3.json")
    # partial-poll-partial.json line 17: osc_vol01's status is partial_other_error.
    assert dropped.entries[0]["file"].endswith("partial-poll-partial.json")
    assert dropped.entries[0]["line"] == 5  # the record's "name" line
    assert "partial_other_error" in dropped.entries[0]["why"]
    [(end, vol)] = rows_of(parsed, "volume:osc/osc_vol01")
    seconds = (datetime(2024, 7, 29, 16, 30, 51) - datetime(2024, 7, 29, 16, 14, 56)).seconds
    assert end.isoformat() == "2024-07-29T16:30:51+00:00"
    # partial-poll-3.json line 25 against volume-poll-1.json line 25.
    assert vol["read_iops"] == pytest.approx((423_882_268 - 421_727_167) / seconds)
    assert len(rows_of(parsed, "volume:osc/osc_iscsi_vol01")) == 2  # its records were ok


def test_json_lines_read_as_the_separate_answers() -> None:
    lines = "\n".join(
        json.dumps(json.loads((REST / name).read_text()))
        for name in ("volume-poll-1.json", "volume-poll-2.json")
    )
    joined, _ = ontap_rest.parse([SourceFile("polls.jsonl", lines, "0" * 64, Dropped())]), None
    apart, _ = rest("volume-poll-1.json", "volume-poll-2.json")
    assert sorted(joined.rows, key=repr) == sorted(apart.rows, key=repr)


def test_answers_without_timestamps_are_refused(tmp_path: Path) -> None:
    done = dbsim(
        "import", "ontap-rest", str(REST / "missing-timestamp-poll-1.json"),
        str(REST / "missing-timestamp-poll-2.json"), "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {REST / 'missing-timestamp-poll-1.json'}:5: records:")
    assert "statistics.timestamp missing" in done.stderr and "Traceback" not in done.stderr


def test_json_that_does_not_parse_names_its_line(tmp_path: Path) -> None:
    text = (REST / "volume-poll-1.json").read_text().split("\n")
    text[20] = text[20].replace(",", ",,")  # line 21
    path = tmp_path / "broken.json"
    path.write_text("\n".join(text))
    done = dbsim("import", "ontap-rest", str(path), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}:21: JSON: ")


def test_a_counter_going_down_is_a_reset_not_a_rate() -> None:
    first = json.loads((REST / "volume-poll-1.json").read_text())
    second = json.loads((REST / "volume-poll-2.json").read_text())
    second["records"][0]["statistics"]["iops_raw"]["read"] = 5  # a takeover restarted it
    sources = [
        SourceFile(name, json.dumps(doc, indent=2), "0" * 64, Dropped())
        for name, doc in (("a.json", first), ("b.json", second))
    ]
    parsed = ontap_rest.parse(sources)
    assert rows_of(parsed, "volume:osc/osc_vol01") == []
    assert any("counter reset" in note and "iops_raw.read" in note for note in parsed.notes)
    assert len(rows_of(parsed, "volume:osc/h_test")) == 1


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    path=st.lists(st.sampled_from(["statistics", "iops_raw", "latency_raw", "throughput_raw",
                                   "read", "write", "total", "timestamp", "status", "name",
                                   "svm", "records"]), min_size=1, max_size=3),
    value=JSON_VALUES,
    record=st.integers(0, 3),
)  # fmt: skip
def test_mutated_answers_are_refused_or_give_finite_rates(
    path: list[str], value: object, record: int
) -> None:
    docs = [
        json.loads((REST / name).read_text())
        for name in ("volume-poll-1.json", "volume-poll-2.json")
    ]
    node: object = docs[1]["records"][record]
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node[path[-1]] = value
    sources = [
        SourceFile(f"{i}.json", json.dumps(d), "0" * 64, Dropped()) for i, d in enumerate(docs)
    ]
    try:
        parsed = ontap_rest.parse(sources)
    except ImportFileError as refused:
        assert "\n" not in str(refused)
        return
    for row in parsed.rows:
        assert all(math.isfinite(v) and v >= 0 for v in row[3].values()), row


# --------------------------------------------------------------------------- qos statistics


def qos(text: str, clock: ImportClock | None = None) -> tuple[Parsed, Dropped]:
    dropped = Dropped()
    return ontap_qos.parse([SourceFile("qos.txt", text, "0" * 64, dropped)], clock), dropped


def test_policy_group_table_as_printed() -> None:
    stamped = "2026-01-05T10:00:00Z\n" + (QOS / "performance-show.txt").read_text()
    parsed, dropped = qos(stamped)
    rows = {row[2]: row[3] for row in parsed.rows}
    # Line 4: -total- 12316 47.76MB/s 1264.00us (ONTAP's binary units: MB = 2**20 bytes).
    assert rows["total"] == {
        "total_iops": 12316.0, "total_bps": 47.76 * 2**20, "total_latency_us": 1264.0,
    }  # fmt: skip
    # Line 5: pg_vs1 5008 19.56MB/s 2.45ms; line 6: _System-Best-Effort 62 13.36KB/s 4.13ms.
    assert rows["policy-group:pg_vs1"]["total_latency_us"] == pytest.approx(2450.0)
    assert rows["policy-group:_System-Best-Effort"]["total_bps"] == pytest.approx(13.36 * 1024)
    assert rows["policy-group:_System-Background"] == {
        "total_iops": 30.0,
        "total_bps": 0.0,
        "total_latency_us": 0.0,
    }  # fmt: skip  (line 7: 30 0KB/s 0ms)
    assert dropped.count == 0


def test_workload_tables_each_at_their_time_line() -> None:
    text = (
        "2026-01-05T10:00:00Z\n" + (QOS / "workload-performance-show.txt").read_text()
        + "2026-01-05T10:01:00Z\n" + (QOS / "workload-performance-show-floor.txt").read_text()
    )  # fmt: skip
    parsed, _ = qos(text)
    times = sorted({row[0] for row in parsed.rows})
    assert [t.isoformat() for t in times] == [
        "2026-01-05T10:00:00+00:00",
        "2026-01-05T10:01:00+00:00",
    ]
    first = {row[2]: row[3] for row in parsed.rows if row[0] == times[0]}
    # workload-performance-show.txt line 5: app1-wid7967 7967 7219 28.20MB/s 319.00us.
    assert first["workload:app1-wid7967"] == {
        "total_iops": 7219.0, "total_bps": 28.20 * 2**20, "total_latency_us": 319.0,
    }  # fmt: skip
    assert parsed.interval_s == 60.0


def test_without_time_lines_the_clock_options_place_it(tmp_path: Path) -> None:
    path = QOS / "performance-show.txt"
    done = dbsim("import", "ontap-qos", str(path), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}:2: time: no time line")
    clock = ImportClock(datetime(2026, 1, 5, 10, 0, tzinfo=UTC), 5.0)
    parsed, _ = qos(path.read_text(), clock)
    assert {row[0] for row in parsed.rows} == {datetime(2026, 1, 5, 10, 0, 5, tzinfo=UTC)}


def test_several_iterations_under_one_heading_are_not_timed() -> None:
    """The burst example prints 8 iterations under one heading: no time tells them apart."""
    text = "2026-01-05T10:00:00Z\n" + (QOS / "workload-performance-show-burst.txt").read_text()
    with pytest.raises(ImportFileError):
        qos(text)
    dropped = Dropped()
    source = SourceFile("burst.txt", text, "0" * 64, dropped)
    assert ontap_qos.iterations(source)[0].rows == []
    assert (
        dropped.entries[0]["why"] == "8 iterations under one heading: each needs its own time line"
    )


def test_characteristics_and_latency_columns() -> None:
    """Tables laid out as the ONTAP command reference lists their columns (no printed
    sample of them was found)."""
    text = (
        "2026-01-05T10:00:00Z\n"
        "Workload            ID     IOPS      Throughput      Request size    Read  Concurrency\n"
        "--------------- ------ -------- ---------------- --------------- ------- -----------\n"
        "-total-              -     5076        77.09MB/s          15922B     65%           4\n"
        "2026-01-05T10:00:05Z\n"
        "Workload            ID    Latency    Network    Cluster       Data       Disk    QoS Max\n"
        "--------------- ------ ---------- ---------- ---------- ---------- ---------- ----------\n"
        "-total-              -   575.00us    56.00us        0ms   177.00us   342.00us        0ms\n"
    )
    parsed, dropped = qos(text)
    first, second = (row[3] for row in parsed.rows)
    assert first == {
        "total_iops": 5076.0, "total_bps": 77.09 * 2**20, "request_size_bytes": 15922.0,
        "read_pct": 65.0, "concurrency": 4.0,
    }  # fmt: skip
    assert second == {
        "total_latency_us": 575.0, "network_latency_us": 56.0, "cluster_latency_us": 0.0,
        "data_latency_us": 177.0, "disk_latency_us": 342.0, "qos_max_latency_us": 0.0,
    }  # fmt: skip
    assert dropped.count == 0


@settings(max_examples=150, deadline=None)
@given(line=st.integers(0, 7), text=st.text(max_size=30))
def test_mutated_qos_text_is_refused_or_sane(line: int, text: str) -> None:
    lines = ("2026-01-05T10:00:00Z\n" + (QOS / "performance-show.txt").read_text()).split("\n")
    lines[line % len(lines)] = text
    try:
        parsed, _ = qos("\n".join(lines))
    except (ImportFileError, ValueError) as refused:
        assert isinstance(refused, ImportFileError) and "\n" not in str(refused)
        return
    for row in parsed.rows:
        assert all(math.isfinite(v) and v >= 0 for v in row[3].values())
