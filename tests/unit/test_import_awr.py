"""``dbsim import awr`` on public AWR reports (tests/data/awr, see its README): every figure
is worked out here by hand from the lines of the report cited beside it (line numbers of the
decompressed file, as ``zcat FILE.gz | grep -n`` prints them)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.imports import awr
from sim.imports.source import Dropped, ImportFileError, Parsed, read_source
from tests.support import forked_dbsim

DATA = Path(__file__).resolve().parents[1] / "data" / "awr"
ELAPSED_11204 = 60.22 * 60  # awr_11204_1.txt line 16: "Elapsed: 60.22 (mins)"
ELAPSED_122 = 21.82 * 60  # awr_122.html line 65: "Elapsed: 21.82 (mins)"
ELAPSED_19C = 117.66 * 60  # awr_19c.html: "Elapsed: 117.66 (mins)"
ELAPSED_122_TEXT = 60.25 * 60  # awr_122_bpsc.txt line 20: "Elapsed: 60.25 (mins)"


def unpacked(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    target.write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return target


def parse(*paths: Path) -> tuple[Parsed, Dropped]:
    dropped = Dropped()
    return awr.parse([read_source(path, dropped) for path in paths]), dropped


def figures_of(parsed: Parsed, entity: str) -> dict[str, float]:
    found = [row[3] for row in parsed.rows if row[2] == entity]
    assert len(found) == 1, f"{entity}: {len(found)} rows"
    return dict(found[0])


def dbsim(*args: str) -> subprocess.CompletedProcess[str]:
    return forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_text_11204_vocabulary_from_instance_activity_and_wait_events(tmp_path: Path) -> None:
    parsed, dropped = parse(unpacked(tmp_path, "awr_11204_1.txt"))
    db = figures_of(parsed, "orcl1")
    assert db["phys_read_req_s"] == pytest.approx(68 / ELAPSED_11204)  # line 2022
    assert db["phys_read_kB_s"] == pytest.approx(557_056 / 1024 / ELAPSED_11204)  # line 2023
    assert db["phys_write_req_s"] == pytest.approx(509 / ELAPSED_11204)  # line 2032
    assert db["phys_write_kB_s"] == pytest.approx(6_397_952 / 1024 / ELAPSED_11204)  # 2033
    assert db["log_write_kB_s"] == pytest.approx(1_723_792 / 1024 / ELAPSED_11204)  # 1878
    assert db["commits_s"] == pytest.approx(29 / ELAPSED_11204)  # line 1882
    # Background Wait Events, line 257: log file parallel write 196 waits, avg 2 ms; the
    # foreground table does not list it.
    assert db["log_write_req_s"] == pytest.approx(196 / ELAPSED_11204)
    assert db["log_write_ms"] == 2.0
    # Line 259: db file sequential read 73 waits, avg 4 ms (background only, too).
    assert db["single_block_read_s"] == pytest.approx(73 / ELAPSED_11204)
    assert db["single_block_read_ms"] == 4.0
    assert "multi_block_read_s" not in db  # no db file scattered read in this report
    assert dropped.count == 0
    assert parsed.interval_s == pytest.approx(ELAPSED_11204)
    assert parsed.started is not None and parsed.started.isoformat() == "2014-07-10T04:00:45"
    assert parsed.rows[0][0].isoformat() == "2014-07-10T05:00:58"  # line 15: End Snap


def test_text_histograms_join_pages_and_the_detail_table(tmp_path: Path) -> None:
    parsed, _ = parse(unpacked(tmp_path, "awr_11204_1.txt"))
    # Line 448 (the histogram's second page): <1ms 72.8 <2ms 14.7 <4ms 3.8 <8ms 1.6
    # <16ms 2.2 <32ms 2.7 <=1s 2.2; line 506 (Detail 64 msec to 2 sec): <32ms 97.8 <64ms 2.2.
    log = figures_of(parsed, "orcl1:wait:log file parallel write")
    assert log == {
        "le_1ms_pct": 72.8, "le_2ms_pct": 14.7, "le_4ms_pct": 3.8, "le_8ms_pct": 1.6,
        "le_16ms_pct": 2.2, "le_32ms_pct": 2.7, "le_64ms_pct": 2.2, "le_128ms_pct": 0.0,
        "le_256ms_pct": 0.0, "le_512ms_pct": 0.0, "le_1024ms_pct": 0.0, "gt_1024ms_pct": 0.0,
    }  # fmt: skip
    # Line 386: 47.1 14.3 2.9 12.9 17.1 5.7, the <=1s and >1s cells empty (truly 0); not in
    # the detail table, so nothing between 32 ms and 2 s.
    seq = figures_of(parsed, "orcl1:wait:db file sequential read")
    assert [seq[f"le_{n}ms_pct"] for n in (1, 2, 4, 8, 16, 32, 64)] == [
        47.1, 14.3, 2.9, 12.9, 17.1, 5.7, 0.0,
    ]  # fmt: skip
    assert seq["gt_1024ms_pct"] == 0.0


def test_text_and_html_of_one_report_give_the_same_figures(tmp_path: Path) -> None:
    text, _ = parse(unpacked(tmp_path, "awr_11204_1.txt"))
    html, _ = parse(unpacked(tmp_path, "awr_11204_1.html"))
    for entity in ("orcl1", "orcl1:wait:log file parallel write"):
        assert figures_of(text, entity) == figures_of(html, entity)


def test_html_122_rates_mean_waits_and_microsecond_histograms(tmp_path: Path) -> None:
    parsed, dropped = parse(unpacked(tmp_path, "awr_122.html"))
    db = figures_of(parsed, "SLOB2")
    assert db["phys_read_req_s"] == pytest.approx(10_535_057 / ELAPSED_122)  # line 19612
    assert db["phys_read_kB_s"] == pytest.approx(687_200_395_264 / 1024 / ELAPSED_122)  # 19613
    assert db["commits_s"] == pytest.approx(161 / ELAPSED_122)  # line 19433
    # Foreground line 353: 109 waits of 749.07us; background line 377: 554 of 415.71us.
    assert db["single_block_read_s"] == pytest.approx((109 + 554) / ELAPSED_122)
    mean = (109 * 0.74907 + 554 * 0.41571) / (109 + 554)
    assert db["single_block_read_ms"] == pytest.approx(mean)
    # Background line 386: db file scattered read, 9 waits of 714.78us.
    assert db["multi_block_read_s"] == pytest.approx(9 / ELAPSED_122)
    assert db["multi_block_read_ms"] == pytest.approx(0.71478)
    # (up to 32 ms) line 521: <512us 89.3 <1ms 8.1 <2ms 1.4 <4ms .9 <8ms .2 <16ms .2, the
    # rest empty; the event is in no (up to 2 sec) row: nothing from 32 ms on.
    seq = figures_of(parsed, "SLOB2:wait:db file sequential read")
    assert seq["le_1ms_pct"] == pytest.approx(89.3 + 8.1)
    assert [seq[f"le_{n}ms_pct"] for n in (2, 4, 8, 16, 32)] == [1.4, 0.9, 0.2, 0.2, 0.0]
    assert seq["gt_1024ms_pct"] == 0.0
    assert dropped.count == 0


def test_rac_report_blocks_are_never_read_requests(tmp_path: Path) -> None:
    """The RAC report of the same snapshots: its per-instance 'Physical Reads/s' (64,077.91,
    System Statistics - Per Second) counts blocks; the cluster's read requests are System
    Statistics (Global)'s 'physical read IO requests' and equal the instance report's."""
    rac, _ = parse(unpacked(tmp_path, "awr_rac_122.html"))
    single, _ = parse(unpacked(tmp_path, "awr_122.html"))
    instance = figures_of(rac, "SLOB2")
    assert instance == {"phys_read_blocks_s": 64_077.91, "phys_write_blocks_s": 1.83}
    cluster = figures_of(rac, "SLOB2:cluster")
    assert cluster["phys_read_req_s"] == pytest.approx(10_535_057 / ELAPSED_122)
    assert cluster["phys_read_req_s"] == pytest.approx(
        figures_of(single, "SLOB2")["phys_read_req_s"]
    )
    assert any("counts blocks, not read requests" in note for note in rac.notes)


def test_html_19c_after_sqlplus_prompts(tmp_path: Path) -> None:
    parsed, _ = parse(unpacked(tmp_path, "awr_19c.html"))
    db = figures_of(parsed, "DVK")
    # The background events' log file parallel write: 238 waits of 32.35ms.
    assert db["log_write_req_s"] == pytest.approx(238 / ELAPSED_19C)
    assert db["log_write_ms"] == pytest.approx(32.35)
    log = figures_of(parsed, "DVK:wait:log file parallel write")
    assert sum(log.values()) == pytest.approx(100.0, abs=0.3)  # shares rounded to 0.1
    assert parsed.means_only[0].startswith("db: one value per 117.66-min AWR snapshot")


def test_text_122_rates_and_waits_from_instance_activity_and_wait_events(
    tmp_path: Path,
) -> None:
    parsed, dropped = parse(unpacked(tmp_path, "awr_122_bpsc.txt"))
    db = figures_of(parsed, "bpsc")
    assert db["phys_read_req_s"] == pytest.approx(366_729 / ELAPSED_122_TEXT)  # line 1967
    assert db["phys_read_kB_s"] == pytest.approx(3_072_229_376 / 1024 / ELAPSED_122_TEXT)  # 1968
    assert db["phys_write_req_s"] == pytest.approx(45_219 / ELAPSED_122_TEXT)  # line 1979
    assert db["phys_write_kB_s"] == pytest.approx(900_505_600 / 1024 / ELAPSED_122_TEXT)  # 1980
    assert db["log_write_kB_s"] == pytest.approx(528_179_268 / 1024 / ELAPSED_122_TEXT)  # 1778
    assert db["commits_s"] == pytest.approx(74_563 / ELAPSED_122_TEXT)  # line 1782
    # Foreground line 248: db file sequential read 360,121 waits of 109.72us; background
    # line 305: 3,188 of 159.25us. Scattered: lines 256 (1,025 of 391.14us), 317 (55 of
    # 223.49us). Background line 296: log file parallel write 103,636 of 386.73us.
    assert db["single_block_read_s"] == pytest.approx((360_121 + 3_188) / ELAPSED_122_TEXT)
    mean = (360_121 * 0.10972 + 3_188 * 0.15925) / (360_121 + 3_188)
    assert db["single_block_read_ms"] == pytest.approx(mean)
    assert db["multi_block_read_s"] == pytest.approx((1_025 + 55) / ELAPSED_122_TEXT)
    mean = (1_025 * 0.39114 + 55 * 0.22349) / (1_025 + 55)
    assert db["multi_block_read_ms"] == pytest.approx(mean)
    assert db["log_write_req_s"] == pytest.approx(103_636 / ELAPSED_122_TEXT)
    assert db["log_write_ms"] == pytest.approx(0.38673)
    assert dropped.count == 0
    assert parsed.started is not None and parsed.started.isoformat() == "2023-02-04T19:00:39"
    assert parsed.rows[0][0].isoformat() == "2023-02-04T20:00:54"  # line 19: End Snap


def test_text_122_histogram_headings_cut_to_five_characters(tmp_path: Path) -> None:
    """12.2's text report prints '<512 <1ms … <32ms >=32m' (up to 32 ms) and '<128u <256u
    <512u >=512' (the main table): '<512' is 512 µs and '>=32m' 32 ms, not minutes."""
    parsed, _ = parse(unpacked(tmp_path, "awr_122_bpsc.txt"))
    # Line 559 (up to 32 ms): <512 99.6 <1ms .3 <2ms .1 <4ms .1 <8ms .0 <16ms .0 <32ms .0
    # >=32m .0; line 600 (up to 2 sec): <32ms 100.0 <64ms .0, the rest empty (truly 0).
    seq = figures_of(parsed, "bpsc:wait:db file sequential read")
    assert seq["le_1ms_pct"] == pytest.approx(99.6 + 0.3)
    assert [seq[f"le_{n}ms_pct"] for n in (2, 4, 8, 16, 32, 64, 128, 1024)] == [
        0.1, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip
    assert seq["gt_1024ms_pct"] == 0.0
    # Line 558: <512 89.2 <1ms 9.4 <2ms 1.0 <4ms .3, <8ms empty, <16ms .1 <32ms .1, >=32m
    # empty; in no (up to 2 sec) row: nothing from 32 ms on.
    scattered = figures_of(parsed, "bpsc:wait:db file scattered read")
    assert scattered["le_1ms_pct"] == pytest.approx(89.2 + 9.4)
    assert [scattered[f"le_{n}ms_pct"] for n in (2, 4, 8, 16, 32, 64)] == [
        1.0, 0.3, 0.0, 0.1, 0.1, 0.0,
    ]  # fmt: skip
    assert scattered["gt_1024ms_pct"] == 0.0
    # Line 569: <512 92.8 <1ms 5.7 <2ms 1.3 <4ms .2 <8ms .0 <16ms .0 <32ms .0; line 412
    # (the main table) agrees: <512u 92.8, >=512 7.2.
    log = figures_of(parsed, "bpsc:wait:log file parallel write")
    assert log["le_1ms_pct"] == pytest.approx(92.8 + 5.7)
    assert (log["le_2ms_pct"], log["le_4ms_pct"], log["le_8ms_pct"]) == (1.3, 0.2, 0.0)


def test_two_instances_of_one_interval_import_together(tmp_path: Path) -> None:
    one, two = unpacked(tmp_path, "awr_11204_1.txt"), unpacked(tmp_path, "awr_11204_2.txt")
    done = dbsim("import", "awr", str(one), str(two), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    bundle = Path(done.stdout.strip())
    summary = json.loads((bundle / "summary.json").read_text())
    assert summary["kind"] == "capture" and summary["capture"]["format"] == "awr"
    storage = summary["storage"]["db"]
    # awr_11204_2.txt line 2223: physical read IO requests 1,401.
    assert storage["orcl2"]["phys_read_req_s"] == pytest.approx(1401 / ELAPSED_11204, abs=1e-4)
    assert storage["orcl1"]["phys_read_req_s"] == pytest.approx(68 / ELAPSED_11204, abs=1e-4)
    assert summary["capture"]["timezone"] == "as written in the file (zone unknown)"


def test_one_instance_twice_over_the_same_time_is_refused(tmp_path: Path) -> None:
    text, html = unpacked(tmp_path, "awr_11204_1.txt"), unpacked(tmp_path, "awr_11204_1.html")
    done = dbsim("import", "awr", str(text), str(html), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "overlaps" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("SELECT * FROM dual;\n", ":1: layout: not an AWR report"),
        ("STATSPACK report for\n\nDB Name\n", ":1: layout: a Statspack report"),
    ],
)
def test_files_that_are_not_awr_reports_are_refused(
    tmp_path: Path, content: str, where: str
) -> None:
    path = tmp_path / "report.txt"
    path.write_text(content)
    done = dbsim("import", "awr", str(path), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}{where}")
    assert "Traceback" not in done.stderr


def test_a_report_cut_after_its_header_is_refused_at_its_snapshot_line(tmp_path: Path) -> None:
    lines = unpacked(tmp_path, "awr_11204_1.txt").read_text().splitlines(keepends=True)
    head = tmp_path / "head.txt"
    head.write_text("".join(lines[:18]))  # the title, the instance and the snapshots only
    done = dbsim("import", "awr", str(head), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"error: {head}:14: tables: none of Load Profile" in done.stderr
    no_elapsed = tmp_path / "no-elapsed.txt"
    no_elapsed.write_text("".join(line for i, line in enumerate(lines) if i != 15))
    done = dbsim("import", "awr", str(no_elapsed), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"error: {no_elapsed}:14: Elapsed: " in done.stderr


def test_read_report_refuses_with_the_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "x.html"
    path.write_text("<html><h1>WORKLOAD REPOSITORY report for</h1></html>\n")
    with pytest.raises(ImportFileError) as refused:
        parse(path)
    assert refused.value.field == "Begin Snap/End Snap"


@pytest.mark.parametrize("elapsed", ["nan", "inf", "0.00", "-5.00"])
def test_an_elapsed_time_that_is_no_duration_is_refused(tmp_path: Path, elapsed: str) -> None:
    lines = unpacked(tmp_path, "awr_11204_1.txt").read_text().split("\n")
    lines[15] = f"   Elapsed:               {elapsed} (mins)"  # line 16
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines))
    with pytest.raises(ImportFileError) as refused:
        parse(path)
    assert (refused.value.line, refused.value.field) == (14, "Elapsed")
