"""sim.sqlstats.awr on the public AWR reports of tests/data/awr (their README says whose).

Every figure below was read by hand from the decompressed report at the line cited
(``zcat FILE.gz | grep -n``)."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from sim.sqlstats.awr import read_report
from sim.sqlstats.skeleton import build
from tests.support import forked_dbsim

DATA = Path(__file__).resolve().parents[1] / "data" / "awr"
ROOT = Path(__file__).resolve().parents[2]


def unpacked(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    target.write_bytes(gzip.decompress((DATA / f"{name}.gz").read_bytes()))
    return target


def test_text_report_executions_times_and_the_text_across_a_page_break(tmp_path: Path) -> None:
    captured = read_report(unpacked(tmp_path, "awr_11204_1.txt"))
    assert captured.window_s == pytest.approx(60.22 * 60)  # line 16: Elapsed 60.22 (mins)
    by_id = {s.key: s for s in captured.statements}
    assert len(by_id) == 13  # the section's 13 SQL Ids (lines 1513-1582)
    first = captured.statements[0]
    # line 1513: 722 executions, Elapsed Time 0.2 s
    assert (first.key, first.calls) == ("5ms6rbzdnq16t", 722)
    assert first.mean_ms == pytest.approx(0.2 * 1000 / 722)
    # line 1571 (38 executions), its text continued after the page break at line 1582
    assert by_id["2q93zsrvbdw48"].calls == 38
    assert by_id["2q93zsrvbdw48"].text == (
        "select grantee#,privilege#,nvl(col#,0),max(mod(nvl(option$,0),2))from objauth$ "
        "where obj#=:1 group by grantee#,privilege#,nvl(col#,0) order by grantee#"
    )
    # Printed on 4 lines or more (lines 1514-1517): possibly cut, marked so.
    assert first.text.endswith(" ...")
    skeleton = build(captured, None, 10, name="awr")
    assert skeleton.entries == []  # an idle database: the dictionary's own SQL only
    assert skeleton.skipped == {
        "on the server's own catalogues": 10,
        "text cut or folded by the source ('...')": 3,
    }


def test_html_report_takes_the_complete_text_and_reads_per_execution(tmp_path: Path) -> None:
    captured = read_report(unpacked(tmp_path, "awr_19c.html"))
    assert captured.window_s == pytest.approx(117.66 * 60, abs=1)  # line 74: Elapsed 117.66 (mins)
    by_id = {s.key: s for s in captured.statements}
    # line 1496: 390 executions, 0.22 s; line 1387 (SQL ordered by Reads): 44 physical reads
    argument = by_id["5pnxt7ap1kvc0"]
    assert argument.calls == 390
    assert argument.mean_ms == pytest.approx(0.22 * 1000 / 390)
    assert argument.reads_per_call == pytest.approx(44 / 390)
    assert argument.text.startswith("select position#, sequence#, level#, argument, type#")
    assert not argument.text.endswith("...")  # the Complete List's text, not the cut cell
    assert by_id["acmvv4fhdc9zh"].calls == 393  # line 1492
    assert by_id["acmvv4fhdc9zh"].reads is None  # not among SQL ordered by Reads
    assert [s.calls for s in captured.statements] == sorted(
        (s.calls for s in captured.statements), reverse=True
    )


def test_a_file_that_is_no_awr_report_is_refused_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    done = forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", "sql-from-stats", "--awr", str(other)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: --awr {other}: no 'SQL ordered by Executions' section: not an AWR report?"
    ]
