"""dbsim import iostat / sadf on public samples (tests/data/iostat, tests/data/sadf: see their
READMEs): every figure the profile reads is worked out here by hand from the line cited.

Units: iostat's MB is 1024 kB, a sector 512 bytes (so ``rMB/s`` x 1024 = kB/s, ``avgrq-sz``
sectors / 2 = kB); ``t`` is seconds since the capture's first reading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.bundle.reader import read_csv_rows, read_summary
from sim.errors import ConfigError
from sim.imports.run import run_import

DATA = Path(__file__).resolve().parents[1] / "data"


def imported(tmp_path: Path, fmt: str, *files: str) -> tuple[dict[str, Any], Path]:
    done = run_import(fmt, [DATA / f for f in files], tmp_path / "out", None)
    return read_summary(done.path), done.path


def row(bundle: Path, source: str, entity: str, t: float) -> dict[str, str]:
    rows = read_csv_rows(bundle / "timeseries" / f"{source}.csv")
    found = [r for r in rows if r["entity"] == entity and float(r["t"]) == t]
    assert len(found) == 1, f"{entity} at t={t}: {len(found)} rows"
    return found[0]


def figures(found: dict[str, str], **expected: float) -> None:
    for key, value in expected.items():
        assert float(found[key]) == pytest.approx(value, abs=1e-4), key


def test_iostat_sysstat10_columns_object2(tmp_path: Path) -> None:
    summary, bundle = imported(tmp_path, "iostat", "iostat/iostatplot_object2.out")
    capture = summary["capture"]
    assert summary["kind"] == "capture" and capture["origin"] == "import"
    assert capture["format"] == "iostat" and capture["interval_s"] == 1.0
    # Line 3 (09:34:00 AM) is the since-boot report: dropped, and the capture's start.
    assert capture["dropped"] == [
        {
            "file": str(DATA / "iostat/iostatplot_object2.out"),
            "line": 3,
            "why": "first report of an iostat run: averages since boot, not an interval",
        }
    ]
    assert summary["timing"]["sessions_started_at"] == "2016-03-15T09:34:00"
    assert capture["timezone"] == "as written in the file (zone unknown)"
    # Line 57 (report of 09:34:07 AM, line 52):
    # sda rrqm/s 0.00 wrqm/s 0.00 r/s 0.00 w/s 159.00 rMB/s 0.00 wMB/s 1.74 avgrq-sz 22.39
    #     avgqu-sz 3.88 await 24.40 r_await 0.00 w_await 24.40 svctm 0.33 %util 5.20
    found = row(bundle, "block", "sda", 7.0)
    figures(
        found,
        r_s=0.0,
        w_s=159.0,
        iops=159.0,  # r/s + w/s (no d/s column)
        wkB_s=1.74 * 1024,
        rkB_s=0.0,
        areq_sz_kB=22.39 / 2,
        aqu_sz=3.88,
        await_ms=24.40,
        w_await_ms=24.40,
        util_pct=5.20,
    )
    assert "rareq_sz_kB" not in found and "svctm" not in str(found)
    means = "\n".join(capture["means_only"])
    assert "request size of reads and writes together (areq_sz_kB)" in means
    assert any("svctm" in note for note in summary["messages"])


def test_iostat_indented_pm_times_object1(tmp_path: Path) -> None:
    summary, bundle = imported(tmp_path, "iostat", "iostat/iostatplot_object1_indented.out")
    assert summary["intervals_written"] == 3 and summary["capture"]["interval_s"] == 5.0
    # Line 3 " 03/15/2016 08:54:35 PM": the start; line 22 of the report at 08:54:45 PM:
    # sda 0.00 4.80 122.40 19.40 0.97 0.27 17.96 0.34 2.39 0.52 14.19 0.37 5.28
    assert summary["timing"]["sessions_started_at"] == "2016-03-15T20:54:35"
    figures(
        row(bundle, "block", "sda", 10.0),
        r_s=122.40,
        w_s=19.40,
        iops=122.40 + 19.40,
        rkB_s=0.97 * 1024,
        wkB_s=0.27 * 1024,
        r_await_ms=0.52,
        w_await_ms=14.19,
        aqu_sz=0.34,
        util_pct=5.28,
    )
    # Line 19: %user 5.13 %nice 0.00 %system 2.54 %iowait 0.36 %steal 0.00 %idle 91.97
    figures(
        row(bundle, "host", "object1", 10.0),
        cpu_user_pct=5.13,
        cpu_system_pct=2.54,
        cpu_iowait_pct=0.36,
        cpu_idle_pct=91.97,
        cpu_busy_pct=100 - 91.97 - 0.36,
    )
    assert summary["host"] == {"hostname": "object1", "kernel": "3.13.0-76-generic", "cpus": 4}


def test_iostat_without_header_and_cut_last_line(tmp_path: Path) -> None:
    summary, bundle = imported(tmp_path, "iostat", "iostat/postgres_long_commit.log")
    dropped = summary["capture"]["dropped"]
    # No "Linux" header: the file's first report (line 1) is still iostat's since-boot one;
    # line 98 has no end of line (the file stops mid-line for all iostat knows).
    assert [d["line"] for d in dropped] == [98, 1]
    assert "no end of line" in dropped[0]["why"]
    # Line 62 of the report at 06:48:00 AM (line 55), t = 06:48:00 - 06:47:54 = 6 s:
    # vdc 0.00 0.00 199.00 0.00 1.69 0.00 17.37 4.85 1.13 1.13 0.00 5.03 100.00
    figures(
        row(bundle, "block", "vdc", 6.0),
        r_s=199.0,
        w_s=0.0,
        iops=199.0,
        rkB_s=1.69 * 1024,
        areq_sz_kB=17.37 / 2,
        aqu_sz=4.85,
        r_await_ms=1.13,
        util_pct=100.0,
    )
    # The last report (06:48:04, t = 10) keeps vda and vdb; vdc's cut line gave nothing.
    rows = read_csv_rows(bundle / "timeseries" / "block.csv")
    assert sorted(r["entity"] for r in rows if float(r["t"]) == 10.0) == ["vda", "vdb"]


def test_iostat_sysstat12_made_here(tmp_path: Path) -> None:
    summary, bundle = imported(tmp_path, "iostat", "iostat/made_here_sysstat12.log")
    # Line 28 (report of 12/05/26 01:14:07, line 17; the start 01:14:06 is line 3):
    # vda r/s 7.00 rkB/s 28.00 rrqm/s 0.00 %rrqm 0.00 r_await 0.29 rareq-sz 4.00 w/s 16.00
    #     wkB/s 60.00 wrqm/s 0.00 %wrqm 0.00 w_await 0.19 wareq-sz 3.75 d/s 2.00 dkB/s 16.00
    #     drqm/s 0.00 %drqm 0.00 d_await 0.00 dareq-sz 8.00 f/s 4.00 f_await 0.25
    #     aqu-sz 0.01 %util 0.40
    figures(
        row(bundle, "block", "vda", 1.0),
        r_s=7.0,
        rkB_s=28.0,
        r_await_ms=0.29,
        rareq_sz_kB=4.0,
        w_s=16.0,
        wkB_s=60.0,
        w_await_ms=0.19,
        wareq_sz_kB=3.75,
        d_s=2.0,
        dkB_s=16.0,
        f_s=4.0,
        f_await_ms=0.25,
        iops=7 + 16 + 2,
        aqu_sz=0.01,
        util_pct=0.40,
    )
    assert summary["timing"]["sessions_started_at"] == "2026-12-05T01:14:06"


def test_iostat_without_times_is_refused_at_its_first_report() -> None:
    with pytest.raises(ConfigError) as refused:
        run_import("iostat", [DATA / "iostat/etcd_suite_no_times.log"], Path("/nonexistent"), None)
    assert str(refused.value).startswith(f"{DATA / 'iostat/etcd_suite_no_times.log'}:3: time:")


def test_sadf_sysstat_expected_file(tmp_path: Path) -> None:
    summary, bundle = imported(tmp_path, "sadf", "sadf/sysstat_tests_expected.sadf-j.json")
    capture = summary["capture"]
    # Line 14: 13:20:19 "tz": "UTC", "interval": 31: the capture began 31 s earlier.
    assert summary["timing"]["sessions_started_at"] == "2019-04-18T13:19:48+00:00"
    assert capture["timezone"] == "UTC" and summary["intervals_written"] == 5
    # Line 100: sdr tps 4.81 rkB 4.81 wkB 16.04 dkB 0.00 areq-sz 4.33 aqu-sz 0.06
    #           await 15.33 util-percent 6.42 (t = 31 s)
    figures(
        row(bundle, "block", "sdr", 31.0),
        iops=4.81,
        rkB_s=4.81,
        wkB_s=16.04,
        dkB_s=0.0,
        areq_sz_kB=4.33,
        aqu_sz=0.06,
        await_ms=15.33,
        util_pct=6.42,
    )
    # Line 16: cpu all usr 2.15 nice 12.50 sys 1.84 iowait 0.12 steal 0 irq 0.34 soft 0.19
    #          guest 0 gnice 0 idle 82.88
    figures(
        row(bundle, "host", "SYSSTAT.TEST", 31.0),
        cpu_user_pct=2.15 + 12.50,
        cpu_system_pct=1.84 + 0.34 + 0.19,
        cpu_iowait_pct=0.12,
        cpu_idle_pct=82.88,
    )
    assert "r_s" not in read_csv_rows(bundle / "timeseries" / "block.csv")[0]
    assert any("not counted apart" in m for m in capture["means_only"])


@pytest.mark.parametrize(
    ("name", "line_figures", "started"),
    [
        # Line 19: sda tps 5.93 rkB 55.16 wkB 173.42 areq-sz 38.57 aqu-sz 0.04 await 6.68
        #          util-percent 1.22; line 14: 09:34:34 "utc": 1 "interval": 46
        (
            "sysstat_data-11.6.5.sadf-j.json",
            {"iops": 5.93, "rkB_s": 55.16, "wkB_s": 173.42, "areq_sz_kB": 38.57,
             "aqu_sz": 0.04, "await_ms": 6.68, "util_pct": 1.22},
            "2018-08-29T09:33:48+00:00",
        ),
        # Line 19: sda tps 1.00 wkB 4.00 areq-sz 4.00 aqu-sz 0.02 await 22.00 util 2.10;
        # line 14: 08:17:02 "interval": 1
        (
            "sysstat_data-9.1.6.sadf-j.json",
            {"iops": 1.0, "rkB_s": 0.0, "wkB_s": 4.0, "areq_sz_kB": 4.0, "aqu_sz": 0.02,
             "await_ms": 22.0, "util_pct": 2.10},
            "2017-01-21T08:17:01+00:00",
        ),
        # Line 19: sda all zero; line 14: 05:39:34 "interval": 1
        ("sysstat_data-12.0.0.sadf-j.json", {"iops": 0.0, "util_pct": 0.0},
         "2019-06-30T05:39:33+00:00"),
    ],
)  # fmt: skip
def test_sadf_sysstat_data_files(
    tmp_path: Path, name: str, line_figures: dict[str, float], started: str
) -> None:
    summary, bundle = imported(tmp_path, "sadf", f"sadf/{name}")
    assert summary["timing"]["sessions_started_at"] == started
    t = summary["timing"]["measured_s"]
    figures(row(bundle, "block", "sda", t), **line_figures)


def test_sadf_without_disk_figures_is_refused() -> None:
    # sysstat's own expected output of `sadf -j data-11.6.5 -- -m FAN,IN,TEMP`: one record
    # (line 14: 09:34:34, "interval": 46) of fans, voltages and temperatures, no "disk".
    path = DATA / "sadf/sysstat_expected_data-11.6.5_sensors.sadf-j.json"
    with pytest.raises(ConfigError) as refused:
        run_import("sadf", [path], Path("/nonexistent"), None)
    assert str(refused.value) == (
        f"{path}: disk: no sar -d figures (make the file with: sadf -j SAFILE -- -d -u)"
    )


def test_iostat_sysstat7_time_lines_and_sectors_pcp_qa(tmp_path: Path) -> None:
    # RHEL 5's iostat (sysstat 7): "Time: 03:49:57 PM" lines, the date only in line 1
    # (10/07/2014), and rsec/s wsec/s (sectors) instead of kB.
    summary, bundle = imported(tmp_path, "iostat", "iostat/pcp_qa_sysstat7_rhel5.log")
    capture = summary["capture"]
    # Line 3 opens the since-boot report: dropped, and the capture's start.
    assert [d["line"] for d in capture["dropped"]] == [3]
    assert summary["timing"]["sessions_started_at"] == "2014-10-07T15:49:57"
    # Line 28 (report of line 26, 03:49:59 PM, t = 2 s):
    # %user 14.62 %nice 0.00 %system 10.88 %iowait 0.00 %steal 0.00 %idle 74.50
    figures(
        row(bundle, "host", "somehost.redhat.com", 2.0),
        cpu_user_pct=14.62 + 0.0,
        cpu_system_pct=10.88,
        cpu_iowait_pct=0.0,
        cpu_idle_pct=74.50,
    )
    # Line 31: sda, every column 0.00.
    figures(row(bundle, "block", "sda", 2.0), iops=0.0, rkB_s=0.0, wkB_s=0.0, util_pct=0.0)
    # Line 47 (report of line 45, 03:51:01 PM, t = 64 s):
    # %user 19.09 %nice 0.04 %system 8.10 %iowait 1.06 %steal 0.00 %idle 71.71
    figures(
        row(bundle, "host", "somehost.redhat.com", 64.0),
        cpu_user_pct=19.09 + 0.04,
        cpu_system_pct=8.10,
        cpu_iowait_pct=1.06,
        cpu_idle_pct=71.71,
    )
    # The dm-* devices (lines 21-24) are only in the dropped since-boot report.
    devices = {r["entity"] for r in read_csv_rows(bundle / "timeseries" / "block.csv")}
    assert "sdb5" in devices and not any(d.startswith("dm-") for d in devices)
