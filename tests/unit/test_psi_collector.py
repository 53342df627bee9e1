"""The PSI collector: parsing recorded pressure files, the stall-share arithmetic from the
``total`` counters, gaps, the cgroup v2 discovery (this machine is cgroup v1), the live file,
and that the collector shows through the registry's declarations alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim import registry
from sim.analysis.series import BundleSeries
from sim.analysis.verdict import Findings, decide
from sim.cli.console import live_tables, summary_tables
from sim.config.resolve import validate
from sim.errors import CollectorError, ScenarioError
from sim.live.storage_table import storage_columns, storage_rows
from sim.live.worker_samples import merge_samples
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample
from sim.report.sections import storage as report_storage
from storage.collectors.psi import (
    MalformedPressure,
    PsiCollector,
    auto_psi,
    cgroup2_mount,
    cgroup_pressure_file,
    parse_pressure,
    pressure_reset,
    stall_shares,
    unified_cgroup,
)
from tests.unit.test_devices import PathsTarget

# Recorded on this machine (Debian 12 userland, kernel 6.18) around 2.0005 s of 4 KiB writes with
# O_DIRECT | O_SYNC by one process (2,535 writes), while other helpers' tests ran beside it.
BEFORE = (
    "some avg10=4.44 avg60=6.61 avg300=6.59 total=111897529\n"
    "full avg10=0.10 avg60=0.08 avg300=0.27 total=20522171\n"
)
AFTER = (
    "some avg10=4.72 avg60=6.59 avg300=6.59 total=112312312\n"
    "full avg10=0.08 avg60=0.08 avg300=0.27 total=20522226\n"
)
RECORDED_S = 2.0005
SOME_STALL_US = 112312312 - 111897529  # 414,783 µs: about a fifth of the interval
FULL_STALL_US = 20522226 - 20522171  # 55 µs: the other tasks rarely all waited at once
# /proc/self/cgroup and mountinfo as a systemd host with the unified hierarchy only writes
# them (the mount line's fields as proc(5) documents them).
CGROUP_V2 = "0::/user.slice/user-1000.slice/session-3.scope\n"
MOUNTINFO_V2 = (
    "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
)
# cgroup v1 controllers only.
CGROUP_V1 = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n"
MOUNTINFO_V1 = "30 25 0:26 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
# This machine's (recorded): hybrid, the v1 controllers beside the unified hierarchy, the
# process in its root.
CGROUP_HYBRID = "9:name=systemd:/\n7:blkio:/\n4:memory:/process_api/cdfc\n0::/\n"
MOUNTINFO_HYBRID = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"


def test_parse_reads_both_lines() -> None:
    reading = parse_pressure(BEFORE)
    assert reading.total_us == {"some": 111897529, "full": 20522171}
    assert reading.avg10 == {"some": 4.44, "full": 0.10}


def test_parse_takes_a_file_without_full_line() -> None:
    assert parse_pressure("some avg10=1.00 avg60=0.50 avg300=0.10 total=42\n").total_us == {
        "some": 42
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no 'some' line"),
        ("some avg10=0.1 avg60=0.1 avg300=0.1\n", "unreadable line"),
        ("some avg10=x avg60=0.1 avg300=0.1 total=1\n", "unreadable line"),
        ("half avg10=0.1 avg60=0.1 avg300=0.1 total=1\n", "unreadable line"),
        (BEFORE + BEFORE, "unreadable line"),
        ("some avg10=0.1 avg60=0.1 avg300=0.1 total=-5\n", "impossible figures"),
        ("some avg10=130 avg60=0.1 avg300=0.1 total=5\n", "impossible figures"),
    ],
)
def test_parse_refuses_malformed_text(text: str, problem: str) -> None:
    with pytest.raises(MalformedPressure, match=problem):
        parse_pressure(text)


def test_stall_share_comes_from_total_deltas_not_avg10() -> None:
    values = stall_shares(parse_pressure(BEFORE), parse_pressure(AFTER), RECORDED_S)
    assert values["some_pct"] == pytest.approx(100 * SOME_STALL_US / (RECORDED_S * 1e6))
    assert 20.7 < values["some_pct"] < 20.8  # while avg10 said 4.72: it lags the interval
    assert values["full_pct"] == pytest.approx(100 * FULL_STALL_US / (RECORDED_S * 1e6))
    assert values["some_avg10_pct"] == 4.72 and values["full_avg10_pct"] == 0.08
    with pytest.raises(ValueError, match="positive"):
        stall_shares(parse_pressure(BEFORE), parse_pressure(AFTER), 0.0)


def test_a_total_that_went_down_is_a_reset() -> None:
    assert pressure_reset(parse_pressure(BEFORE), parse_pressure(AFTER)) is None
    assert pressure_reset(parse_pressure(AFTER), parse_pressure(BEFORE)) == (
        "some total: 112312312 -> 111897529"
    )


def test_collector_gives_shares_then_gaps(tmp_path: Path) -> None:
    pressure = tmp_path / "io"
    pressure.write_text(BEFORE)
    collector = PsiCollector({"system": pressure})

    async def drive() -> list[list[Sample]]:
        await collector.start(10.0)
        out = []
        pressure.write_text(AFTER)
        out.append(await collector.sample(10.0 + RECORDED_S))
        pressure.write_text("garbage\n")
        out.append(await collector.sample(13.0))
        pressure.write_text(BEFORE)  # below the last good reading: a new counter
        out.append(await collector.sample(14.0))
        pressure.write_text(AFTER)
        out.append(await collector.sample(14.0 + RECORDED_S))
        await collector.stop()
        return out

    first, unreadable, reset, after_reset = asyncio.run(drive())
    assert first[0].values["some_pct"] == pytest.approx(100 * SOME_STALL_US / (RECORDED_S * 1e6))
    assert (unreadable[0].gap, unreadable[0].values) == (GAP_UNREADABLE, {})
    assert "unreadable line 'garbage'" in unreadable[0].detail
    assert reset[0].gap == GAP_RESET and "some total: 112312312 -> 111897529" in reset[0].detail
    assert after_reset[0].values["full_pct"] == pytest.approx(
        100 * FULL_STALL_US / (RECORDED_S * 1e6)
    )


def test_collector_refuses_an_unreadable_start(tmp_path: Path) -> None:
    collector = PsiCollector({"system": tmp_path / "absent"})
    with pytest.raises(CollectorError, match="cannot read"):
        asyncio.run(collector.start(0.0))


def test_cgroup_v2_discovery_on_recorded_text() -> None:
    assert unified_cgroup(CGROUP_V2) == "/user.slice/user-1000.slice/session-3.scope"
    assert cgroup2_mount(MOUNTINFO_V2) == ("/sys/fs/cgroup", "/")
    path, file = cgroup_pressure_file(CGROUP_V2, MOUNTINFO_V2)  # type: ignore[misc]
    assert path == "/user.slice/user-1000.slice/session-3.scope"
    assert file == Path("/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/io.pressure")
    # A cgroup namespace's mount whose root is the container's cgroup.
    nested = "40 30 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    found = cgroup_pressure_file("0::/docker/abc/app\n", nested)
    assert found == ("/docker/abc/app", Path("/sys/fs/cgroup/app/io.pressure"))


def test_cgroup_v1_host_has_none_and_says_why() -> None:
    assert unified_cgroup(CGROUP_V1) is None
    assert cgroup2_mount(MOUNTINFO_V1) is None
    assert cgroup_pressure_file(CGROUP_V1, MOUNTINFO_V1) == (
        "no cgroup v2 hierarchy (cgroup v1 controllers only)"
    )


def test_root_cgroup_of_a_hybrid_host_is_the_system_and_is_not_read_twice() -> None:
    assert cgroup2_mount(MOUNTINFO_HYBRID) == ("/sys/fs/cgroup/unified", "/")
    assert cgroup_pressure_file(CGROUP_HYBRID, MOUNTINFO_HYBRID) == (
        "the process is in the root cgroup v2: its pressure is the system's"
    )


def test_auto_watches_the_system_file_and_a_cgroup_where_there_is_one(tmp_path: Path) -> None:
    system = tmp_path / "io"
    system.write_text(BEFORE)
    cgroup_dir = tmp_path / "cg" / "run.scope"
    cgroup_dir.mkdir(parents=True)
    (cgroup_dir / "io.pressure").write_text(AFTER)
    proc_cgroup, mountinfo = tmp_path / "cgroup", tmp_path / "mountinfo"
    proc_cgroup.write_text("0::/run.scope\n")
    mountinfo.write_text(f"26 22 0:23 / {tmp_path / 'cg'} rw - cgroup2 cgroup2 rw\n")
    target = PathsTarget([])
    (collector,) = auto_psi(target, {}, system, proc_cgroup, mountinfo)
    assert isinstance(collector, PsiCollector)
    assert collector.files == {"system": system, "cgroup:/run.scope": cgroup_dir / "io.pressure"}
    (alone,) = auto_psi(target, {"psi": {"cgroup": False}}, system, proc_cgroup, mountinfo)
    assert list(alone.files) == ["system"]  # type: ignore[attr-defined]
    proc_cgroup.write_text(CGROUP_V1)
    (v1,) = auto_psi(target, {}, system, proc_cgroup, mountinfo)
    assert v1.describe()["cgroup"] == "no cgroup v2 hierarchy (cgroup v1 controllers only)"
    assert auto_psi(target, {}, tmp_path / "no-psi", proc_cgroup, mountinfo) == []


def test_scenario_section_is_built_from_the_registry() -> None:
    scenario = validate({"workload": {"name": "slob"}, "collectors": {"psi": {"cgroup": False}}})
    assert scenario.collectors.psi.cgroup is False  # type: ignore[attr-defined]
    with pytest.raises(ScenarioError) as caught:
        validate({"workload": {"name": "slob"}, "collectors": {"psi": {"cgroup": "sometimes"}}})
    assert caught.value.problems == [
        "collectors.psi.cgroup: Input should be a valid boolean, unable to interpret input "
        "(got 'sometimes')"
    ]


# --------------------------------------------------------------------------- one module only


PSI = Sample("psi", "system", {"some_pct": 12.5, "full_pct": 7.25, "some_avg10_pct": 11.0})


def test_it_shows_in_console_report_and_web_ui_from_its_declaration() -> None:
    from rich.console import Console

    console = Console(width=160, record=True)
    for table in live_tables([PSI]):
        console.print(table)
    for table in summary_tables({"storage": {"psi": {"system": dict(PSI.values)}}}):
        console.print(table)
    text = console.export_text()
    assert "scope" in text and "some %" in text and "12.5" in text and "7.2" in text
    assert "I/O pressure (% of time stalled, measured window)" in " ".join(text.split())
    html = str(report_storage({"storage": {"psi": {"system": {**PSI.values, "samples": 9}}}}))
    assert "I/O pressure (PSI" in html and "samples system: 9" in html and "12.5" in html
    assert ("io_some_pct", "I/O stall some %") in storage_columns()
    (row,) = storage_rows([PSI])
    assert (row["source"], row["entity"], row["io_some_pct"], row["io_full_pct"]) == (
        "psi",
        "system",
        12.5,
        7.25,
    )


def test_scope_is_per_host_in_a_distributed_merge() -> None:
    merged = merge_samples([(0, "a", [PSI]), (1, "a", [PSI]), (2, "b", [PSI])])
    assert sorted(s.entity for s in merged) == ["a/system", "b/system"]
    assert registry.collectors()["psi"].scope == registry.COLLECTOR_SCOPE_HOST


def test_the_analysis_correlates_its_figures_and_shows_them_as_evidence() -> None:
    import numpy as np

    from sim.analysis.sections import collector_coupling

    n = 8
    stall = np.linspace(1.0, 40.0, n)
    series = BundleSeries(
        path=Path("."),
        summary={},
        scenario={},
        interval_s=1.0,
        t=np.arange(1.0, n + 1),
        duration_s=np.ones(n),
        step=[None] * n,
        ops={
            "read": {
                "count": np.full(n, 100.0),
                "p50_us": 100.0 + 3 * stall,
                "p99_us": 400.0 + 10 * stall,
            }
        },
        sources={"psi": {"system": {"some_pct": stall, "full_pct": stall / 2}}},
    )
    (row,) = collector_coupling(series, "read")
    assert (row["source"], row["title"], row["r"], row["n"]) == ("psi", "I/O pressure", 1.0, n)
    findings = Findings(collector_coupling=[(row["title"], row["r"], row["n"], row["what"])])
    evidence = decide(findings)["evidence"]
    follows = [e for e in evidence if e["check"] == "latency follows I/O pressure"]
    assert follows and follows[0]["passed"] is True and follows[0]["value"] == 1.0


# --------------------------------------------------------------------------- this machine


PRESSURE_IO = Path("/proc/pressure/io")


@pytest.mark.skipif(not PRESSURE_IO.exists(), reason="this kernel has no PSI")
def test_live_direct_writes_show_a_stall_share(tmp_path: Path) -> None:
    """A writer with O_DIRECT and O_SYNC waits for the device on every write: the system's
    "some" stall share over the run is above zero (other processes can only add to it)."""
    (collector,) = auto_psi(PathsTarget([]), {})
    assert isinstance(collector, PsiCollector) and "system" in collector.files
    writer = (
        "import mmap, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_DIRECT | os.O_SYNC)\n"
        "buf = mmap.mmap(-1, 4096); buf.write(b'x' * 4096)\n"
        "end = time.monotonic() + 2.0\n"
        "i = 0\n"
        "while time.monotonic() < end:\n"
        "    os.pwrite(fd, buf, (i % 256) * 4096); i += 1\n"
        "os.close(fd)\n"
    )

    async def drive() -> tuple[list[Sample], subprocess.CompletedProcess[bytes]]:
        await collector.start(time.monotonic())
        proc = subprocess.Popen(
            [sys.executable, "-c", writer, str(tmp_path / "direct")], stderr=subprocess.PIPE
        )
        await asyncio.sleep(2.5)
        samples = await collector.sample(time.monotonic())
        _, err = proc.communicate(timeout=30)
        return samples, subprocess.CompletedProcess(proc.args, proc.returncode, b"", err)

    samples, done = asyncio.run(drive())
    if done.returncode != 0 and b"Invalid argument" in done.stderr:
        pytest.skip(f"{tmp_path} refuses O_DIRECT (tmpfs?)")
    assert done.returncode == 0, done.stderr.decode()[-500:]
    system = next(s for s in samples if s.entity == "system")
    assert not system.gap
    assert 0.0 < system.values["some_pct"] <= 100.5
