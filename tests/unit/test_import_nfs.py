"""dbsim import mountstats / nfsiostat (tests/data/mountstats_series, tests/data/nfsiostat:
see their READMEs): figures worked out by hand from the counters' deltas (listed in
tests/data/mountstats/README.md), and equal to what the live nfs collector computes from the
same two readings."""

from __future__ import annotations

import asyncio
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from sim.bundle.reader import read_csv_rows, read_summary
from sim.errors import ConfigError
from sim.imports import mountstats, nfsiostat
from sim.imports.run import run_import
from sim.imports.source import Dropped, ImportClock, read_source
from storage.collectors.nfs import NfsClientCollector

DATA = Path(__file__).resolve().parents[1] / "data"
SERIES = DATA / "mountstats_series"


def rows_of(bundle: Path) -> dict[str, dict[str, float]]:
    return {
        r["entity"]: {k: float(v) for k, v in r.items() if k not in ("phase", "entity") and v}
        for r in read_csv_rows(bundle / "timeseries" / "nfs.csv")
    }


def live(pair: str, mount: str, tmp_path: Path) -> dict[str, dict[str, float]]:
    """The live collector's samples for ``pair``'s two readings, 10 s apart."""
    path = tmp_path / "mountstats"
    shutil.copyfile(DATA / "mountstats" / f"{pair}.before", path)
    collector = NfsClientCollector(mount, mountstats_path=path, long_bits=64)

    async def run() -> dict[str, dict[str, float]]:
        await collector.start(0.0)
        shutil.copyfile(DATA / "mountstats" / f"{pair}.after", path)
        samples = await collector.sample(10.0)
        return {s.entity: dict(s.values) for s in samples if not s.gap}

    return asyncio.run(run())


def test_series_with_date_lines_statvers10(tmp_path: Path) -> None:
    done = run_import("mountstats", [SERIES / "nfsv3_statvers10.series"], tmp_path, None)
    summary = read_summary(done.path)
    # Line 1 "Mon Jan 15 10:00:00 UTC 2024", line 47 "… 10:00:10 UTC 2024": one 10 s interval.
    assert summary["timing"]["sessions_started_at"] == "2024-01-15T10:00:00+00:00"
    assert summary["capture"]["interval_s"] == 10.0 and summary["capture"]["dropped"] == []
    rows = rows_of(done.path)
    # READ deltas: 12000 ops, 12003 transmissions, 1 major timeout, 140 + 8308 bytes per op,
    # queue 1200 ms, RTT 30000 ms, execute 33600 ms.
    read = rows["/u02/oradata:READ"]
    assert read["ops_s"] == 1200.0
    assert read["kB_s"] == pytest.approx(12000 * (140 + 8308) / 1024 / 10)  # 9900
    assert read["kB_per_op"] == pytest.approx((140 + 8308) / 1024)  # 8.25
    assert read["retrans"] == 3.0 and read["retrans_pct"] == pytest.approx(3 * 100 / 12000)
    assert read["avg_rtt_ms"] == 2.5 and read["avg_exe_ms"] == 2.8
    assert read["avg_queue_ms"] == 0.1 and read["timeouts"] == 1.0
    # Mount: serverread +98304000 B, serverwrite +24576000 B, sends +15755, bklog_u +31510.
    mount = rows["/u02/oradata"]
    assert mount["read_kB_s"] == 98304000 / 1024 / 10  # 9600
    assert mount["write_kB_s"] == 24576000 / 1024 / 10  # 2400
    assert mount["rpc_sends_s"] == 1575.5 and mount["rpc_bklog"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("path", "pair", "mount"),
    [
        ("nfsv3_statvers10.series", "nfsv3_statvers10", "/u02/oradata"),
        ("nfsv3_nconnect8.series", "nfsv3_nconnect8", "/mnt/netapp"),
        ("mixed_mounts.series", "mixed_mounts", "/home"),
        ("mixed_mounts.series", "mixed_mounts", "/scratch"),
        ("dir_nfsv41", "nfsv41_errors", "/var/lib/postgresql"),
    ],
)
def test_series_figures_equal_the_live_collectors(
    tmp_path: Path, path: str, pair: str, mount: str
) -> None:
    done = run_import("mountstats", [SERIES / path], tmp_path / "out", None)
    imported = {
        entity: figures
        for entity, figures in rows_of(done.path).items()
        if entity == mount or entity.startswith(f"{mount}:")
    }
    expected = live(pair, mount, tmp_path)
    assert set(imported) == set(expected)
    for entity, values in expected.items():
        for key, value in values.items():
            # The bundle keeps 4 decimals, as a run's bundle does.
            assert imported[entity][key] == pytest.approx(round(value, 4), abs=1e-9), (entity, key)


def test_a_snapshot_without_a_time_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "mountstats"
    shutil.copyfile(DATA / "mountstats" / "nfsv3_statvers10.before", plain)
    with pytest.raises(ConfigError) as refused:
        run_import("mountstats", [plain, plain], tmp_path / "out", None)
    assert str(refused.value) == (
        f"{plain}: time: a snapshot without a time line before it or a time in the file name"
    )


def test_an_xprt_line_without_its_protocol_drops_that_mount_and_says_why(
    tmp_path: Path,
) -> None:
    # test_import_properties, "drop a column": line 286, the first of /mnt/new build's two
    # nconnect transports, without "tcp". Read as a transport of no known fields, it counted as
    # a connection with no sends: rpc_sends_s 1.6 and connects 1.0 instead of 3.6 and 2.0.
    lines = (SERIES / "mixed_mounts.series").read_text(encoding="utf-8").split("\n")
    assert lines[285] == "\txprt:\ttcp 720 0 1 0 0 20 20 0 40 0 2 20 20"
    lines[285] = "\txprt:\t720 0 1 0 0 20 20 0 40 0 2 20 20"
    path = tmp_path / "mixed_mounts.series"
    path.write_text("\n".join(lines), encoding="utf-8")
    dropped = Dropped()
    parsed = mountstats.parse([read_source(path, dropped)])
    assert dropped.entries == [
        {
            "file": str(path),
            "line": 286,
            "why": "/mnt/new build: xprt: '720' is not a transport the kernel prints "
            "(tcp, udp, local, rdma)",
        }
    ]
    assert not [row for row in parsed.rows if row[2].startswith("/mnt/new build")]
    assert {row[2] for row in parsed.rows} >= {"/home", "/scratch"}


def test_nfsiostat_read_write_statvers10(tmp_path: Path) -> None:
    given = ImportClock(datetime.fromisoformat("2024-01-15T10:00:00"), 10.0)
    done = run_import(
        "nfsiostat", [DATA / "nfsiostat/made_here_nfsv3_statvers10.out"], tmp_path, None, given
    )
    summary = read_summary(done.path)
    # Line 2 opens the since-mount report: dropped; the second report ends 10 s after start.
    assert [d["line"] for d in summary["capture"]["dropped"]] == [2]
    rows = rows_of(done.path)
    assert {r["t"] for r in rows.values()} == {10.0}
    # Line 16: 1575.500 0.200 (ops/s, rpc bklog); line 19: read 1200.000 9900.000 8.250
    # 3 (0.0%) 2.500 2.800 0.100; line 21: write 300.000 2483.203 8.277 0 (0.0%) 3.000
    # 3.250 0.050
    assert rows["/u02/oradata"]["rpc_sends_s"] == 1575.5
    assert rows["/u02/oradata"]["rpc_bklog"] == 0.2
    read = rows["/u02/oradata:READ"]
    assert (read["ops_s"], read["kB_s"], read["kB_per_op"]) == (1200.0, 9900.0, 8.25)
    assert (read["retrans"], read["retrans_pct"]) == (3.0, 0.0)
    assert (read["avg_rtt_ms"], read["avg_exe_ms"], read["avg_queue_ms"]) == (2.5, 2.8, 0.1)
    write = rows["/u02/oradata:WRITE"]
    assert (write["ops_s"], write["kB_s"], write["kB_per_op"]) == (300.0, 2483.203, 8.277)
    # nfsiostat prints 3 decimals (1 for %): the live collector's figures round to them.
    expected = live("nfsv3_statvers10", "/u02/oradata", tmp_path)
    for key in ("ops_s", "kB_s", "kB_per_op", "avg_rtt_ms", "avg_exe_ms", "avg_queue_ms"):
        assert write[key] == pytest.approx(expected["/u02/oradata:WRITE"][key], abs=5e-4)


def test_nfsiostat_errors_column_and_two_mounts(tmp_path: Path) -> None:
    given = ImportClock(datetime.fromisoformat("2024-01-15T10:00:00+00:00"), 10.0)
    done = run_import(
        "nfsiostat", [DATA / "nfsiostat/made_here_mixed_mounts_dir.out"], tmp_path, None, given
    )
    rows = rows_of(done.path)
    # Line 8 (since mounting, dropped) said 5.003 ops/s and 2500 errors; line 40, the
    # interval: lookup 5.000 2.637 0.527 0 (0.0%) 0.600 0.700 0.000 5 (10.0%). readdir with
    # 0 ops/s (line 42) gives no row, as the live collector gives none for an op without calls.
    lookup = rows["/home:LOOKUP"]
    assert (lookup["ops_s"], lookup["kB_s"], lookup["kB_per_op"]) == (5.0, 2.637, 0.527)
    assert (lookup["errors"], lookup["errors_pct"]) == (5.0, 10.0)
    assert "/home:READDIR" not in rows and rows["/scratch"]["rpc_sends_s"] == 20.5


def test_nfsiostat_needs_start_and_interval() -> None:
    path = DATA / "nfsiostat/made_here_nfsv3_statvers10.out"
    with pytest.raises(ConfigError) as refused:
        run_import("nfsiostat", [path], Path("/nonexistent"), None)
    assert str(refused.value).startswith(f"{path}:2: --start: nfsiostat prints no time")


# Published nfsiostat output (tests/data/nfsiostat/README.md): both print every figure on its
# own line and "read:" apart from its column names (Python 2's `print x,` turned into Python
# 3's `print(x),`). Each is one report of one mount: the averages since mounting, which the
# import drops.
TECHNOTES = DATA / "nfsiostat/technotes_one_value_per_line.out"
BHARATHM = DATA / "nfsiostat/bharathm_graphite_one_value_per_line.out"
BHARATHM_MOUNT = (
    "/var/vcap/data/kubelet/pods/dd5634a4-b08a-4ea6-9f9b-6a3dcc55f1b9/volume-subpaths/"
    "pvc-0475f087-b120-4ecb-8f65-aad56b2dfb12/perf23250d2config/0"
)


def blocks_of(path: Path) -> tuple[list[nfsiostat.Block], Dropped]:
    dropped = Dropped()
    return nfsiostat._blocks(read_source(path, dropped)), dropped


def test_one_value_per_line_technotes_is_read_whole() -> None:
    blocks, dropped = blocks_of(TECHNOTES)
    assert dropped.entries == [] and len(blocks) == 1
    block = blocks[0]
    assert (block.line, block.mount, block.index, block.broken) == (1, "/foo", 0, False)
    # Lines 4-5: 262.16, 0.00 under line 3's "op/s rpc bklog".
    assert block.figures["/foo"] == {"rpc_sends_s": 262.16, "rpc_bklog": 0.0}
    # Lines 8-13 under "read:" (line 6) and its column names (line 7): 11.557, 356.081,
    # 30.812, "0 (0.0%)", 5.167, 5.239.
    assert block.figures["/foo:READ"] == {
        "ops_s": 11.557,
        "kB_s": 356.081,
        "kB_per_op": 30.812,
        "retrans": 0.0,
        "retrans_pct": 0.0,
        "avg_rtt_ms": 5.167,
        "avg_exe_ms": 5.239,
    }
    # Lines 16-21 under "write:" (line 14): 3.620, 105.680, 29.190, "0 (0.0%)", 16.032,
    # 331.458.
    write = block.figures["/foo:WRITE"]
    assert (write["ops_s"], write["kB_s"], write["kB_per_op"]) == (3.62, 105.68, 29.19)
    assert (write["avg_rtt_ms"], write["avg_exe_ms"]) == (16.032, 331.458)


def test_one_value_per_line_bharathm_is_read_whole() -> None:
    blocks, dropped = blocks_of(BHARATHM)
    assert dropped.entries == [] and [b.mount for b in blocks] == [BHARATHM_MOUNT]
    figures = blocks[0].figures
    # Lines 4-5: 6.72, 0.00.
    assert figures[BHARATHM_MOUNT] == {"rpc_sends_s": 6.72, "rpc_bklog": 0.0}
    # Line 8: read ops/s 0.000: no row, as the live collector gives none for an idle op.
    assert f"{BHARATHM_MOUNT}:READ" not in figures
    # Lines 16-21: 0.025, 14.823, 587.597, "0 (0.0%)", 13.444, 478.395.
    write = figures[f"{BHARATHM_MOUNT}:WRITE"]
    assert (write["ops_s"], write["kB_s"], write["kB_per_op"]) == (0.025, 14.823, 587.597)
    assert (write["retrans"], write["avg_rtt_ms"], write["avg_exe_ms"]) == (0.0, 13.444, 478.395)


@pytest.mark.parametrize("path", [TECHNOTES, BHARATHM], ids=["technotes", "bharathm"])
def test_a_lone_since_mount_report_is_refused_with_its_line(path: Path) -> None:
    given = ImportClock(datetime.fromisoformat("2024-01-15T10:00:00"), 5.0)
    with pytest.raises(ConfigError) as refused:
        run_import("nfsiostat", [path], Path("/nonexistent"), None, given)
    assert str(refused.value) == (f"{path}:1: records: no whole record left ({nfsiostat.FIRST})")


def test_one_value_per_line_second_report_imports(tmp_path: Path) -> None:
    # The technotes report twice, as `nfsiostat 5 2` prints two reports: the second
    # (lines 22-42) is taken for the interval ending 5 s after --start.
    path = tmp_path / "twice.out"
    text = TECHNOTES.read_text()
    path.write_text(text + text)
    given = ImportClock(datetime.fromisoformat("2024-01-15T10:00:00"), 5.0)
    done = run_import("nfsiostat", [path], tmp_path / "out", None, given)
    assert [d["line"] for d in read_summary(done.path)["capture"]["dropped"]] == [1]
    rows = rows_of(done.path)
    assert {r["t"] for r in rows.values()} == {5.0}
    # Lines 25-26: 262.16 0.00; lines 29-34: read 11.557 356.081 30.812 0 (0.0%) 5.167
    # 5.239.
    assert (rows["/foo"]["rpc_sends_s"], rows["/foo"]["rpc_bklog"]) == (262.16, 0.0)
    read = rows["/foo:READ"]
    assert (read["ops_s"], read["kB_s"], read["kB_per_op"]) == (11.557, 356.081, 30.812)
    assert (read["avg_rtt_ms"], read["avg_exe_ms"]) == (5.167, 5.239)


def test_one_value_per_line_cut_figure_drops_that_report_with_its_line(
    tmp_path: Path,
) -> None:
    # The second copy without line 33 ("5.167", read's avg RTT): read's figures (from line
    # 29) are five of six when "write:" (line 34 once cut) begins, so the second report of
    # /foo is dropped, at that line.
    lines = (TECHNOTES.read_text() * 2).split("\n")
    assert lines[32].strip() == "5.167"
    del lines[32]
    path = tmp_path / "cut.out"
    path.write_text("\n".join(lines))
    blocks, dropped = blocks_of(path)
    assert [b.broken for b in blocks] == [False, True]
    assert dropped.entries[0]["line"] == 34
    assert dropped.entries[0]["why"] == "/foo: figures cut short"
