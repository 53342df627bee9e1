"""The view-snapshot importers' rules on small files written here: resets, damaged rows,
repeated headers, the SQL Server layout (no public sample of ``sys.dm_io_virtual_file_stats``
output was found and no SQL Server runs here: the file below follows Microsoft's documented
columns and ``sqlcmd -W -s,``'s layout, unchecked against a real server). The files the real
PostgreSQL and MariaDB write are imported in tests/integration/test_import_views.py."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.imports import mariadb_views, mssql_views, pg_views
from sim.imports.source import Dropped, ImportFileError, Parsed, SourceFile
from sim.imports.views import parse_time

DOCS = Path(__file__).resolve().parents[2] / "docs" / "capture.md"
PG_HEADER = (
    "ts,datname,xact_commit,blks_read,blk_read_time,wal_bytes,wal_write,wal_sync,"
    "wal_write_time,buffers_checkpoint,buffers_clean,buffers_backend,block_size,"
    "track_io_timing,track_wal_io_timing,database_stats_reset,wal_stats_reset,"
    "bgwriter_stats_reset"
)
RESET = "2026-01-01 00:00:00+00"


def pg_row(ts: str, commits: int, reads: int, read_ms: float = 0, reset: str = RESET) -> str:
    return (
        f"{ts},shop,{commits},{reads},{read_ms},{commits * 1000},{commits},{commits},0,"
        f"10,20,30,8192,on,off,{reset},{RESET},{RESET}"
    )


def parse(module: object, text: str) -> tuple[Parsed, Dropped]:
    dropped = Dropped()
    source = SourceFile("views.csv", text, "0" * 64, dropped)
    return module.parse([source]), dropped  # type: ignore[attr-defined]


def test_pg_rates_and_the_read_time_with_track_io_timing_on() -> None:
    text = "\n".join([
        PG_HEADER,
        pg_row("2026-01-05 10:00:00+00", 100, 1000, 50.0),
        PG_HEADER,  # each run of psql --csv prints its header again
        pg_row("2026-01-05 10:01:00+00", 160, 1600, 110.0),
    ])  # fmt: skip
    parsed, dropped = parse(pg_views, text)
    [(end, _, entity, figures)] = parsed.rows
    assert (end, entity) == (datetime(2026, 1, 5, 10, 1, tzinfo=UTC), "shop")
    assert figures["commits_s"] == 60 / 60  # xact_commit 100 -> 160 over 60 s
    assert figures["phys_read_req_s"] == 600 / 60
    assert figures["phys_read_kB_s"] == 600 * 8 / 60  # 8192-byte blocks
    assert figures["single_block_read_ms"] == pytest.approx(60.0 / 600)  # Δblk_read_time / Δreads
    assert figures["log_write_kB_s"] == pytest.approx(60_000 / 1024 / 60)
    assert figures["phys_write_req_s"] == 0.0  # the writers' counters did not move
    assert "log_write_ms" not in figures  # track_wal_io_timing off
    assert parsed.interval_s == 60.0 and dropped.count == 0


def test_a_reset_leaves_its_interval_out_and_says_where() -> None:
    text = "\n".join([
        PG_HEADER,
        pg_row("2026-01-05 10:00:00+00", 100, 1000),
        pg_row("2026-01-05 10:01:00+00", 160, 1600),
        pg_row("2026-01-05 10:02:00+00", 10, 1700),  # xact_commit went down: a restart
        pg_row("2026-01-05 10:03:00+00", 70, 1800),
        pg_row("2026-01-05 10:04:00+00", 130, 1900, reset="2026-01-05 10:03:30+00"),
    ])  # fmt: skip
    parsed, _ = parse(pg_views, text)
    assert [row[0].minute for row in parsed.rows] == [1, 3]
    assert len(parsed.notes) == 2
    assert "views.csv:3 and line 4 (xact_commit: 160 -> 10)" in parsed.notes[0]
    assert "database_stats_reset" in parsed.notes[1]


def test_damaged_rows_are_dropped_with_their_line() -> None:
    text = "\n".join([
        PG_HEADER,
        pg_row("2026-01-05 10:00:00+00", 100, 1000),
        pg_row("2026-01-05 10:00:30+00", 130, 1300).replace(",130,", ",1e400,", 1),
        pg_row("yesterday", 150, 1500),
        pg_row("2026-01-05 10:00:45+00", 145, 1450)[:40],
        pg_row("2026-01-05 10:01:00+00", 160, 1600),
    ])  # fmt: skip
    parsed, dropped = parse(pg_views, text)
    whys = [(entry["line"], entry["why"]) for entry in dropped.entries]
    assert [line for line, _ in whys] == [3, 4, 5]
    assert whys[0][1] == "xact_commit: '1e400' is not a count"
    assert whys[1][1] == "ts: 'yesterday' is not a time"
    assert whys[2][1].endswith("cells where the header has 18")
    [(_, _, _, figures)] = parsed.rows  # the two whole rows, 60 s apart
    assert figures["commits_s"] == 1.0


def test_a_header_without_the_needed_columns_is_refused() -> None:
    with pytest.raises(ImportFileError) as refused:
        parse(pg_views, "ts,datname,blks_read\n2026-01-05 10:00:00+00,shop,1\n")
    assert (refused.value.line, refused.value.field) == (1, "xact_commit")


def test_mariadb_batch_output_is_tab_separated() -> None:
    header = "\t".join(["ts", "server", *mariadb_views.STATUS])
    first = "2026-01-05 10:00:00.000000\tdb1\t10\t163840\t5\t81920\t7\t4096\t100\t3600"
    second = "2026-01-05 10:00:10.000000\tdb1\t30\t491520\t15\t245760\t27\t14336\t150\t3610"
    parsed, _ = parse(mariadb_views, "\n".join([header, first, header, second]))
    [(_, _, entity, figures)] = parsed.rows
    assert entity == "db1"
    assert figures == {
        "phys_read_req_s": 2.0, "phys_read_kB_s": 32.0, "phys_write_req_s": 1.0,
        "phys_write_kB_s": 16.0, "log_write_req_s": 2.0, "log_write_kB_s": 1.0, "commits_s": 5.0,
    }  # fmt: skip


SQLCMD = """ts,database_name,file_type,num_of_reads,num_of_bytes_read,io_stall_read_ms,num_of_writes,num_of_bytes_written,io_stall_write_ms
--,-------------,---------,------------,-----------------,----------------,-------------,--------------------,-----------------
2026-01-05 10:00:00.1234567 +01:00,sales,ROWS,1000,8192000,500,200,1638400,100
2026-01-05 10:00:00.1234567 +01:00,sales,ROWS,50,409600,50,0,0,0
2026-01-05 10:00:00.1234567 +01:00,sales,LOG,10,40960,5,3000,12288000,900
ts,database_name,file_type,num_of_reads,num_of_bytes_read,io_stall_read_ms,num_of_writes,num_of_bytes_written,io_stall_write_ms
--,-------------,---------,------------,-----------------,----------------,-------------,--------------------,-----------------
2026-01-05 10:01:00.1234567 +01:00,sales,ROWS,1500,12288000,1500,260,2129920,220
2026-01-05 10:01:00.1234567 +01:00,sales,ROWS,70,573440,90,0,0,0
2026-01-05 10:01:00.1234567 +01:00,sales,LOG,10,40960,5,3600,14745600,1080

(3 rows affected)
"""


def test_sql_server_files_summed_by_type() -> None:
    parsed, dropped = parse(mssql_views, SQLCMD)
    [(end, _, entity, figures)] = parsed.rows
    assert end == datetime(2026, 1, 5, 10, 1, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert entity == "sales"
    reads = (1500 + 70) - (1000 + 50)  # both data files
    assert figures["phys_read_req_s"] == pytest.approx(reads / 60)
    assert figures["phys_read_kB_s"] == pytest.approx(
        (12288000 + 573440 - 8192000 - 409600) / 1024 / 60
    )
    assert figures["read_ms"] == pytest.approx((1500 + 90 - 500 - 50) / reads)
    assert figures["phys_write_req_s"] == pytest.approx(60 / 60)
    assert figures["write_ms"] == pytest.approx(120 / 60)
    assert figures["log_write_req_s"] == pytest.approx(600 / 60)
    assert figures["log_write_kB_s"] == pytest.approx((14745600 - 12288000) / 1024 / 60)
    assert figures["log_write_ms"] == pytest.approx(180 / 600)
    assert "commits_s" not in figures and dropped.count == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-05 10:00:00.123456+00", datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-05 10:00:00.1234567 +00:00", datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-01-05T10:00:00Z", datetime(2026, 1, 5, 10, tzinfo=UTC)),
        ("2026-01-05 10:00:00.000000", datetime(2026, 1, 5, 10)),
        (
            "2026-01-05 10:00:00+05:30",
            datetime(2026, 1, 5, 10, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        ),
        ("yesterday", None),
        ("2026-13-05 10:00:00", None),
    ],
)
def test_snapshot_times_as_the_databases_print_them(text: str, expected: datetime | None) -> None:
    assert parse_time(text) == expected


def test_the_docs_give_the_queries_the_importers_read() -> None:
    docs = DOCS.read_text()
    for query in (pg_views.QUERY, mssql_views.QUERY, mariadb_views.QUERY):
        assert query in docs


@settings(max_examples=200, deadline=None)
@given(line=st.integers(1, 3), cell=st.integers(0, 17), value=st.text(max_size=12))
def test_mutated_snapshots_are_dropped_refused_or_sane(line: int, cell: int, value: str) -> None:
    lines = [
        PG_HEADER,
        pg_row("2026-01-05 10:00:00+00", 100, 1000),
        pg_row("2026-01-05 10:01:00+00", 160, 1600),
        pg_row("2026-01-05 10:02:00+00", 220, 2200),
    ]
    cells = lines[line].split(",")
    cells[cell] = value
    lines[line] = ",".join(cells)
    try:
        parsed, _ = parse(pg_views, "\n".join(lines))
    except ImportFileError as refused:
        assert "\n" not in str(refused)
        return
    for row in parsed.rows:
        assert all(math.isfinite(v) for v in row[3].values())
