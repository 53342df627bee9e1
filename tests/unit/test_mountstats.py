"""/proc/self/mountstats parsing, nfsiostat's arithmetic and the NFS collector on a fake clock.

The recorded snapshots are in tests/data/mountstats (their README gives the deltas written
into each pair). Every expected figure here is worked out by hand from those deltas, with the
arithmetic in a comment, never by running the code under test. kB is 1024 bytes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, Connection, EngineContext, Target
from storage.collectors.mountstats import (
    EVENT_NAMES,
    MountstatsFile,
    OpCounters,
    parse_mountstats,
    read_mountstats,
)
from storage.collectors.mountstats_ops import NFS3_OPS
from storage.collectors.nfs import NfsClientCollector, auto_nfs
from storage.collectors.nfs_advice import ADVICE, option_warnings, read_tunables
from storage.collectors.nfs_rates import (
    CounterReset,
    counter_delta,
    mount_rates,
    mount_reset,
    op_rates,
)
from storage.devices import DeviceResolver, ResolvedStorage

DATA = Path(__file__).resolve().parent.parent / "data" / "mountstats"
SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "002_26a53d12d47323af.txt"


def snap(stem: str, which: str) -> MountstatsFile:
    return read_mountstats(DATA / f"{stem}.{which}")


def rates(stem: str, mount: str, interval_s: float) -> tuple[dict[str, Any], dict[str, float]]:
    return mount_rates(snap(stem, "before")[mount], snap(stem, "after")[mount], interval_s)


# ----------------------------------------------------------------------------------- parsing


def test_parse_nfsv3_statvers_10_rpc_10() -> None:
    mounts = snap("nfsv3_statvers10", "after")
    # rootfs and /dev/sda2 are both on "/": the later line (mounted on top) wins.
    assert (mounts["/"].fstype, mounts["/"].is_nfs, mounts["/"].ops) == ("ext4", False, {})
    m = mounts["/u02/oradata"]
    assert (m.device, m.fstype, m.statvers, m.rpc_iostats, m.program) == (
        "filer01:/vol/oradata", "nfs", "1.0", "1.0", "100003/3",
    )  # fmt: skip
    assert m.age_s == 86410
    assert (m.options["vers"], m.options["rsize"], m.options["hard"]) == ("3", "32768", "")
    assert len(m.events) == 25 and "pnfsreads" not in m.events  # statvers 1.0: 25 events
    assert m.bytes["directreadbytes"] == 98304000 * 8641
    assert m.connections == 1
    xprt = m.xprts[0]
    assert xprt.proto == "tcp" and "max_slots" not in xprt.counters  # the old 10-field line
    assert (xprt.counters["port"], xprt.counters["idle_time"]) == (798, 0)
    assert list(m.ops)[:3] == ["NULL", "GETATTR", "SETATTR"] and len(m.ops) == 22
    assert m.ops["READ"] == OpCounters(
        12000 * 8641 + 17, 12003 * 8641 + 17, 8641, 140 * 12000 * 8641, 8308 * 12000 * 8641,
        1200 * 8641, 30000 * 8641, 33600 * 8641, None,
    )  # fmt: skip


def test_parse_nconnect_8_keeps_every_connection() -> None:
    m = snap("nfsv3_nconnect8", "after")["/mnt/netapp"]
    assert (m.statvers, m.rpc_iostats, m.options["nconnect"], m.connections) == (
        "1.1",
        "1.1",
        "8",
        8,
    )
    assert [x.counters["port"] for x in m.xprts] == [875, 877, 879, 881, 883, 885, 887, 889]
    assert all(len(x.counters) == 13 and x.extra == () for x in m.xprts)
    assert m.xprts[3].counters["connect_count"] == 2
    assert len(m.events) == 27
    assert m.ops["LOOKUP"].errors == 600 * 360  # the 1.1 ninth field
    before = snap("nfsv3_nconnect8", "before")["/mnt/netapp"]
    # Sends over the 8 connections: 2 x 13718 + 6 x 13717 = 109738 more than before.
    assert m.xprt_total("sends") - before.xprt_total("sends") == 109738


def test_parse_nfsv41() -> None:
    m = snap("nfsv41_errors", "after")["/var/lib/postgresql"]
    assert (m.fstype, m.program, m.options["vers"], m.options["soft"]) == (
        "nfs4", "100003/4", "4.1", "",
    )  # fmt: skip
    assert {"caps", "nfsv4", "sec", "impl_id"} <= set(m.lines)
    assert "sessions" in m.lines["nfsv4"]
    assert {"SEQUENCE", "EXCHANGE_ID", "LAYOUTGET", "READ_PLUS"} <= set(m.ops)
    assert m.ops["OPEN"].errors == 2 * 121


def test_parse_mixed_mounts() -> None:
    before, after = snap("mixed_mounts", "before"), snap("mixed_mounts", "after")
    assert {p for p, m in after.items() if m.is_nfs} == {"/home", "/scratch", "/mnt/new build"}
    assert {p for p, m in before.items() if m.is_nfs} == {"/home", "/scratch", "/mnt/gone"}
    assert after["/net"].fstype == "autofs" and not after["/net"].is_nfs
    assert after["/mnt/odd"].device == "none"  # a "no device mounted on" line
    new = after["/mnt/new build"]  # mount point and source were written with \040
    assert (new.device, new.age_s, new.connections) == ("10.2.0.9:/builds/x y", 3, 2)
    udp = after["/scratch"].xprts[0]
    assert udp.proto == "udp" and (udp.counters["sends"], udp.counters["max_slots"]) == (
        205 * 2001, 16,
    )  # fmt: skip
    assert after["/home"].options["vers"] == "4.2"


def nfs_section(
    *,
    statvers: str = "1.1",
    rpc: str = "1.1",
    events: str = " ".join(["0"] * 27),
    before_rpc: str = "",
    after_rpc: str = "",
    ops: str = "",
    read: str = "1 1 0 100 100 0 1 1 0",
) -> str:
    """A whole NFS section for /m, as the kernel prints it, with the given parts: ``ops``
    after NFSv3's 22 (READ's numbers ``read``, the others none), which every kernel lists."""
    fields = 9 if rpc == "1.1" else 8
    for name in reversed(NFS3_OPS):
        numbers = (read if name == "READ" else "0 " * 9).split()[:fields]
        ops = f"\t{name:>12}: {' '.join(numbers)}\n" + ops
    return (
        f"device s:/e mounted on /m with fstype nfs statvers={statvers}\n"
        "\topts:\trw,vers=3\n\tage:\t10\n"
        f"{before_rpc}\tevents:\t{events} \n\tbytes:\t0 0 0 0 0 0 0 0 \n"
        f"\tRPC iostats version: {rpc}  p/v: 100003/3 (nfs)\n"
        "\txprt:\ttcp 875 0 1 0 0 10 10 0 10 0 1 10 10\n"
        f"{after_rpc}\tper-op statistics\n{ops}"
    )


def test_statvers_12_names_readahead() -> None:
    text = nfs_section(statvers="1.2", events=" ".join(str(i) for i in range(27)))
    events = parse_mountstats(text)["/m"].events
    assert events["vfsreadahead"] == 9 and "vfsreadpages" not in events
    assert next(iter(events)) == EVENT_NAMES[0]


def test_malformed_counter_names_the_line() -> None:
    reading = parse_mountstats(nfs_section(read="1 1 0 x 0 0 0 0 0"))
    assert "/m" not in reading
    assert reading.unreadable["/m"].detail == (
        "line 15: READ: 'x' is not a number the kernel prints: '\\t        READ: 1 1 0 x 0 0 0 0 0'"
    )


def test_unknown_lines_are_kept_not_fatal() -> None:
    text = nfs_section(
        before_rpc="\tsunrpc-id:\t2a\n",
        after_rpc="\tremoteports_offset: 0 0\n",
        ops="\t          22: 4 4 0 400 400 0 4 4 0\n",
    )
    m = parse_mountstats(text)["/m"]
    assert m.lines["sunrpc-id"] == "2a" and m.lines["remoteports_offset"] == "0 0"
    assert m.ops["22"].ops == 4  # a procedure without a name is printed by number


# ----------------------------------------------------------------------------------- arithmetic


def test_rates_nfsv3_statvers_10_by_hand() -> None:
    ops, mount = rates("nfsv3_statvers10", "/u02/oradata", 10)
    # READ: 12000 ops, 12003 transmissions, 1 major timeout, 12000 x 140 bytes sent,
    # 12000 x 8308 received, queue 1200 ms, RTT 30000 ms, execute 33600 ms, over 10 s.
    # kB = 12000 x (140 + 8308) / 1024 = 101376000 / 1024 = 99000.
    assert ops["READ"] == pytest.approx(
        {
            "ops_s": 1200.0,  # 12000 / 10
            "kB_s": 9900.0,  # 99000 / 10
            "kB_per_op": 8.25,  # 99000 / 12000
            "retrans": 3.0,  # 12003 - 12000
            "retrans_pct": 0.025,  # 3 x 100 / 12000
            "avg_rtt_ms": 2.5,  # 30000 / 12000
            "avg_exe_ms": 2.8,  # 33600 / 12000
            "avg_queue_ms": 0.1,  # 1200 / 12000
            "timeouts": 1.0,
        }
    )  # RPC iostats 1.0: no errors column, so no errors keys
    # WRITE: 3000 x (8340 + 136) = 25428000 bytes = 24832.03125 kB.
    assert ops["WRITE"]["kB_s"] == pytest.approx(2483.203125)
    assert ops["WRITE"]["kB_per_op"] == pytest.approx(8.27734375)  # 24832.03125 / 3000
    assert ops["WRITE"]["avg_exe_ms"] == pytest.approx(3.25)  # 9750 / 3000
    assert ops["SETATTR"]["ops_s"] == 0 and ops["SETATTR"]["avg_rtt_ms"] == 0  # idle op
    assert mount == pytest.approx(
        {
            "read_kB_s": 9600.0,  # serverreadbytes 98304000 / 1024 / 10
            "write_kB_s": 2400.0,  # serverwritebytes 24576000 / 1024 / 10
            "app_read_kB_s": 9600.0,  # normal 0 + direct 98304000 (O_DIRECT database)
            "app_write_kB_s": 2400.0,
            "read_cache_hit_pct": 0.0,  # no buffered reads
            "ops_s": 1575.2,  # (12000 + 3000 + 500 + 200 + 50 + 2) / 10
            "rpc_sends_s": 1575.5,  # xprt sends 15755 / 10
            "rpc_bklog": 0.2,  # bklog_u 31510 / sends 15755 / 10
            "retrans": 3.0,
            "timeouts": 1.0,
            "connections": 1.0,
            "connects": 0.0,
            "bad_xids": 0.0,
        }
    )  # the 10-field xprt line has no max_slots


def test_rates_nconnect_8_by_hand() -> None:
    ops, mount = rates("nfsv3_nconnect8", "/mnt/netapp", 10)
    # READ: 80000 x (132 + 8312) = 675520000 bytes = 659687.5 kB; 80008 transmissions.
    assert ops["READ"] == pytest.approx(
        {
            "ops_s": 8000.0,
            "kB_s": 65968.75,
            "kB_per_op": 8.24609375,  # 659687.5 / 80000
            "retrans": 8.0,
            "retrans_pct": 0.01,  # 8 x 100 / 80000
            "avg_rtt_ms": 0.7,  # 56000 / 80000
            "avg_exe_ms": 0.8,  # 64000 / 80000
            "avg_queue_ms": 0.05,  # 4000 / 80000
            "timeouts": 0.0,
            "errors": 0.0,
            "errors_pct": 0.0,
        }
    )
    # WRITE: 20000 x (65688 + 136) = 1316480000 bytes = 1285625 kB; 4 errors.
    assert ops["WRITE"]["kB_s"] == pytest.approx(128562.5)
    assert ops["WRITE"]["kB_per_op"] == pytest.approx(64.28125)
    assert (ops["WRITE"]["errors"], ops["WRITE"]["errors_pct"]) == pytest.approx((4, 0.02))
    # LOOKUP: 3000 x (136 + 244) = 1140000 bytes = 1113.28125 kB; 600 errors = 20 %.
    assert ops["LOOKUP"]["kB_s"] == pytest.approx(111.328125)
    assert (ops["LOOKUP"]["errors"], ops["LOOKUP"]["errors_pct"]) == pytest.approx((600, 20))
    assert ops["LOOKUP"]["avg_rtt_ms"] == pytest.approx(0.35)  # 1050 / 3000
    assert mount == pytest.approx(
        {
            "read_kB_s": 64000.0,  # 655360000 / 1024 / 10
            "write_kB_s": 128000.0,  # 1310720000 / 1024 / 10
            "app_read_kB_s": 64000.0,
            "app_write_kB_s": 128000.0,
            "read_cache_hit_pct": 0.0,  # (655360000 - (655360000 - 0)) x 100 / 655360000
            "ops_s": 10973.0,  # 109730 ops / 10
            "rpc_sends_s": 10973.8,  # sends summed over the 8 connections: 109738 / 10
            "rpc_bklog": 33634 / 109738 / 10,  # bklog_u 0+0+1200+0+5000+0+0+27434
            "retrans": 8.0,
            "timeouts": 0.0,
            "errors": 604.0,  # 4 WRITE + 600 LOOKUP
            "connections": 8.0,
            "connects": 1.0,  # the fourth connection reconnected
            "bad_xids": 1.0,
            "max_slots": 128.0,
        }
    )


def test_rates_nfsv41_with_errors_by_hand() -> None:
    ops, mount = rates("nfsv41_errors", "/var/lib/postgresql", 5)
    # READ: 2500 x (220 + 8372) = 21480000 bytes = 20976.5625 kB over 5 s; 2505 sends.
    assert ops["READ"]["kB_s"] == pytest.approx(4195.3125)
    assert ops["READ"]["kB_per_op"] == pytest.approx(8.390625)
    assert (ops["READ"]["retrans"], ops["READ"]["retrans_pct"]) == pytest.approx((5, 0.2))
    assert (ops["READ"]["avg_rtt_ms"], ops["READ"]["avg_exe_ms"]) == pytest.approx((1.6, 1.9))
    # OPEN: 40 x (320 + 440) = 30400 bytes = 29.6875 kB; 2 errors of 40 = 5 %.
    assert ops["OPEN"]["kB_s"] == pytest.approx(5.9375)
    assert (ops["OPEN"]["errors"], ops["OPEN"]["errors_pct"]) == pytest.approx((2, 5))
    assert (ops["LOOKUP"]["errors"], ops["LOOKUP"]["errors_pct"]) == pytest.approx((10, 50))
    assert ops["SEQUENCE"]["ops_s"] == pytest.approx(0.2)  # 1 lease renewal in 5 s
    assert mount["read_kB_s"] == pytest.approx(4000.0)  # 20480000 / 1024 / 5
    assert mount["app_read_kB_s"] == pytest.approx(8000.0)  # 40960000 / 1024 / 5
    # Half of what PostgreSQL read came from the client's page cache:
    # (40960000 - (20480000 - 0)) x 100 / 40960000 = 50.
    assert mount["read_cache_hit_pct"] == pytest.approx(50.0)
    assert mount["ops_s"] == pytest.approx(1052.2)  # 5261 / 5
    assert mount["errors"] == pytest.approx(15.0)  # 3 + 2 + 10


def test_rates_mixed_udp_and_a_new_mount() -> None:
    ops, mount = rates("mixed_mounts", "/scratch", 10)
    # READ over UDP: 100 ops, 110 transmissions, 2 major timeouts, 100 x (132 + 32888) bytes.
    assert ops["READ"] == pytest.approx(
        {
            "ops_s": 10.0,
            "kB_s": 322.4609375,  # 3302000 / 1024 / 10
            "kB_per_op": 32.24609375,
            "retrans": 10.0,
            "retrans_pct": 10.0,
            "avg_rtt_ms": 15.0,
            "avg_exe_ms": 26.0,
            "avg_queue_ms": 0.1,
            "timeouts": 2.0,
            "errors": 0.0,
            "errors_pct": 0.0,
        }
    )
    assert (mount["rpc_sends_s"], mount["rpc_bklog"]) == pytest.approx((20.5, 0.02))  # 41/205/10
    assert (mount["bad_xids"], mount["max_slots"]) == (3.0, 16.0)
    # A mount made 3 s ago, inside the 10 s interval: every counter counts from zero.
    new_ops, new_mount = mount_rates(None, snap("mixed_mounts", "after")["/mnt/new build"], 10)
    assert new_ops["READ"]["kB_s"] == pytest.approx(192.75)  # 30 x (132 + 65660) / 1024 / 10
    assert new_ops["READ"]["avg_exe_ms"] == pytest.approx(70 / 30)
    assert (new_mount["connections"], new_mount["rpc_sends_s"]) == (2.0, 3.6)  # (20 + 16) / 10


def test_counter_wrap_only_where_the_width_allows_it() -> None:
    assert counter_delta(10, 3) == 7
    assert counter_delta(5, 2**32 - 3, "lu", long_bits=32) == 8  # a 32-bit unsigned long
    assert counter_delta(5, 2**32 - 3, "u") == 8  # an unsigned int, on any kernel
    assert counter_delta(5, 2**32 - 3, "lu", long_bits=64) is None  # 64 bits: a reset
    assert counter_delta(5, 2**64 - 3, "llu") is None  # unsigned long long: a reset
    assert counter_delta(-5, 7, "ms") is None  # a signed time that went down: a reset
    # 32 bits, but losing more than half the range in one interval is a restart, not a wrap.
    assert counter_delta(5, 1_800_017, "lu", long_bits=32) is None
    prev = OpCounters(2**32 - 100, 2**32 - 100, 0, 0, 0, 2**20, 0, 0, 0)
    curr = OpCounters(400, 400, 0, 0, 0, 2**20 + 1000, 0, 0, 0)
    values = op_rates(prev, curr, 10, long_bits=32)
    assert values["ops_s"] == 50.0  # (400 + 2**32 - (2**32 - 100)) / 10
    assert values["avg_queue_ms"] == 2.0  # 1000 / 500
    with pytest.raises(CounterReset, match=r"op.ops: 4294967196 -> 400"):
        op_rates(prev, curr, 10, long_bits=64)


def test_zero_ops_and_bad_interval() -> None:
    idle = OpCounters(5, 5, 0, 10, 10, 1, 1, 1, None)
    assert op_rates(idle, idle, 1) == dict.fromkeys(
        ("ops_s", "kB_s", "kB_per_op", "retrans", "retrans_pct", "avg_rtt_ms", "avg_exe_ms",
         "avg_queue_ms", "timeouts"), 0.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="positive"):
        op_rates(idle, idle, 0)


def test_mount_reset() -> None:
    before = snap("nfsv3_nconnect8", "before")["/mnt/netapp"]
    after = snap("nfsv3_nconnect8", "after")["/mnt/netapp"]
    assert mount_reset(before, after) is None
    assert str(mount_reset(after, before)) == "age: 3610 -> 3600"  # remounted in between
    other = dataclasses.replace(after, device="x:/y")
    assert str(mount_reset(before, other)) == "device: 10.1.0.20:/eda_vol -> x:/y"
    # Age went on, but the counters are the older reading's: they restarted.
    older = dataclasses.replace(before, age_s=3620)
    assert str(mount_reset(after, older)) == "events.inoderevalidates: 1872000 -> 1866800"
    gone = dataclasses.replace(after, age_s=3620, xprts=after.xprts[:7])
    assert str(mount_reset(after, gone)) == "connections: 8 -> 7"


# ----------------------------------------------------------------------------------- collector


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_collector_on_a_fake_clock(tmp_path: Path) -> None:
    path = tmp_path / "mountstats"
    shutil.copy(DATA / "nfsv3_nconnect8.before", path)
    collector = NfsClientCollector("/mnt/netapp/", path, tunables={})
    run(collector.start(100.0))
    shutil.copy(DATA / "nfsv3_nconnect8.after", path)
    samples = run(collector.sample(105.0))  # the engine's clock says 5 s, whatever age says
    assert samples[0].entity == "/mnt/netapp" and samples[0].source == "nfs"
    assert samples[0].values["ops_s"] == pytest.approx(21946.0)  # 109730 / 5
    by_entity = {s.entity: s for s in samples[1:]}
    # Ops without calls in the interval (NULL, READDIR, MKDIR …) give no sample.
    active = {"GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READ", "WRITE", "CREATE", "REMOVE"}
    active |= {"READDIRPLUS", "FSSTAT", "COMMIT"}
    assert set(by_entity) == {f"/mnt/netapp:{op}" for op in active}
    read = by_entity["/mnt/netapp:READ"]
    assert read.values["ops_s"] == pytest.approx(16000.0)  # 80000 / 5
    assert read.values["avg_rtt_ms"] == pytest.approx(0.7)  # averages do not depend on t
    assert (read.meta["op"], read.meta["vers"], read.t) == ("READ", "3", 105.0)
    assert run(collector.sample(106.0))[1:] == []  # same file again: no activity
    run(collector.stop())


def test_collector_refuses_what_is_not_there(tmp_path: Path) -> None:
    path = tmp_path / "mountstats"
    shutil.copy(DATA / "mixed_mounts.before", path)
    with pytest.raises(CollectorError, match="not mounted"):
        run(NfsClientCollector("/mnt/new build", path).start(0.0))
    with pytest.raises(CollectorError, match="a tmpfs mount, not NFS"):
        run(NfsClientCollector("/run", path).start(0.0))
    with pytest.raises(CollectorError, match="cannot read"):
        run(NfsClientCollector("/home", tmp_path / "missing").start(0.0))
    collector = NfsClientCollector("/home", path)
    with pytest.raises(CollectorError, match="before start"):
        run(collector.sample(1.0))
    run(collector.start(1.0))
    with pytest.raises(CollectorError, match="did not advance"):
        run(collector.sample(1.0))


def test_collector_mount_goes_and_comes_back(tmp_path: Path) -> None:
    path = tmp_path / "mountstats"
    shutil.copy(DATA / "mixed_mounts.before", path)
    collector = NfsClientCollector("/mnt/gone", path)
    run(collector.start(0.0))
    shutil.copy(DATA / "mixed_mounts.after", path)
    with pytest.raises(CollectorError, match="no longer mounted"):
        run(collector.sample(10.0))
    # Mounted again 4 s ago: its counters all fall inside the 10 s since the failed sample.
    text = (DATA / "mixed_mounts.before").read_text().replace("age:\t100\n", "age:\t4\n")
    path.write_text(text)
    samples = run(collector.sample(20.0))
    getattr_ = next(s for s in samples if s.entity == "/mnt/gone:GETATTR")
    assert getattr_.values["ops_s"] == pytest.approx(1.0)  # 10 GETATTR since mounting / 10 s


def test_collector_remount_between_readings(tmp_path: Path) -> None:
    path = tmp_path / "mountstats"
    shutil.copy(DATA / "nfsv41_errors.after", path)
    collector = NfsClientCollector("/var/lib/postgresql", path)
    run(collector.start(0.0))
    before, after = ((DATA / f"nfsv41_errors.{w}").read_text() for w in ("before", "after"))
    path.write_text(before.replace("age:\t600\n", "age:\t9\n"))  # remounted 9 s ago
    # The old mount's calls before the remount are lost to this reading: no rate at all.
    (gap,) = run(collector.sample(10.0))
    assert (gap.entity, gap.gap, gap.detail, gap.values) == (
        "/var/lib/postgresql", GAP_RESET, "age: 605 -> 9", {},
    )  # fmt: skip
    # The reset reading is the new baseline: 5 s later the pair's deltas give rates again.
    path.write_text(after.replace("age:\t605\n", "age:\t14\n"))
    samples = {s.entity: s for s in run(collector.sample(15.0))}
    assert not any(s.gap for s in samples.values())
    assert samples["/var/lib/postgresql:READ"].values["ops_s"] == pytest.approx(500.0)  # 2500/5


# ----------------------------------------------------------------------------------- advice


@pytest.mark.parametrize(
    ("stem", "mount", "expected"),
    [
        ("nfsv3_nconnect8", "/mnt/netapp", []),
        (
            "nfsv3_statvers10",
            "/u02/oradata",
            ["nconnect is not set", "rsize=32768", "wsize=32768", "attribute caching (acregmin=0"],
        ),
        (
            "nfsv41_errors",
            "/var/lib/postgresql",
            ["nconnect is not set", "rsize=262144", "wsize=262144", "attribute caching", "soft"],
        ),
        (
            "mixed_mounts",
            "/scratch",
            ["nconnect", "rsize", "wsize", "attribute caching", "proto=udp", "soft"],
        ),
        ("mixed_mounts", "/mnt/new build", ["nconnect=2: seed 002 advises nconnect=8", "attri"]),
    ],
)
def test_warnings_where_options_differ_from_seed_002(
    stem: str, mount: str, expected: list[str]
) -> None:
    warnings = option_warnings(snap(stem, "after")[mount], tunables={})
    assert len(warnings) == len(expected), warnings
    for sentence, start in zip(warnings, expected, strict=True):
        assert start in sentence and sentence.endswith(".")


def test_tunable_warnings_and_reading(tmp_path: Path) -> None:
    (tmp_path / "sys" / "sunrpc").mkdir(parents=True)
    (tmp_path / "sys" / "sunrpc" / "tcp_max_slot_table_entries").write_text("65536\n")
    (tmp_path / "mod" / "nfs" / "parameters").mkdir(parents=True)
    (tmp_path / "mod" / "nfs" / "parameters" / "max_session_slots").write_text("64\n")
    tunables = read_tunables(tmp_path / "sys", tmp_path / "mod")
    assert tunables == {"sunrpc.tcp_max_slot_table_entries": 65536, "nfs.max_session_slots": 64}
    v41 = snap("nfsv41_errors", "after")["/var/lib/postgresql"]
    extra = option_warnings(v41, tunables | {"net.ipv4.tcp_keepalive_time": 7200})[5:]
    assert [w.split(" is ")[0] for w in extra] == [
        "sunrpc.tcp_max_slot_table_entries", "nfs max_session_slots", "net.ipv4.tcp_keepalive_time",
    ]  # fmt: skip
    v3 = snap("nfsv3_nconnect8", "after")["/mnt/netapp"]  # NFSv3 has no sessions
    assert (
        option_warnings(v3, {"nfs.max_session_slots": 64, "sunrpc.tcp_max_slot_table_entries": 128})
        == []
    )


def test_describe_lists_options_and_warnings(tmp_path: Path) -> None:
    collector = NfsClientCollector("/mnt/netapp", DATA / "nfsv3_nconnect8.after", tunables={})
    described = collector.describe()
    assert described["options"] == {
        "vers": "3", "proto": "tcp", "nconnect": 8, "rsize": 1048576, "wsize": 1048576,
        "acregmin": 600, "acregmax": 600, "acdirmin": 600, "acdirmax": 600, "actimeo": 600,
        "nocto": False, "noac": False, "hard": True, "soft": False, "timeo": 600,
        "retrans": 2, "sec": "sys",
    }  # fmt: skip
    assert (described["connections"], described["warnings"]) == (8, [])
    assert "/proc/self/mountstats per interval" in described["load"]
    assert "002_26a53d12d47323af" in described["advice_source"]
    missing = NfsClientCollector("/mnt/x", tmp_path / "nothing").describe()
    assert "cannot read" in missing["error"] and missing["warnings"] == []


def test_advice_quotes_the_seed() -> None:
    if not SEED.exists():
        pytest.skip(f"seed file {SEED} is not beside this checkout")
    seed = re.sub(r"\s+", " ", SEED.read_text(encoding="utf-8"))
    for advice in ADVICE.values():
        for fragment in advice.quote.split(" […] "):
            assert re.sub(r"\s+", " ", fragment) in seed, advice.key


# ----------------------------------------------------------------------------------- auto


class PathsTarget(Target):
    kind: ClassVar[str] = "paths"
    dialect: ClassVar[str] = "filetree"
    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> Connection:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list[Path]:
        return self.paths

    def describe(self) -> dict[str, Any]:
        return {}


class StubResolver(DeviceResolver):
    """Answers as DeviceResolver would for a few made-up paths."""

    def resolve(self, path: Path | str) -> ResolvedStorage:
        path = Path(path)
        if str(path).startswith("/mnt/netapp"):
            return ResolvedStorage(path, "nfs", (), "/mnt/netapp", "nfs", "10.1.0.20:/eda_vol")
        return ResolvedStorage(path, "none", note="tmpfs has no block device")


def mount_points(collectors: list[Any]) -> list[str]:
    assert all(isinstance(c, NfsClientCollector) for c in collectors)
    return [c.mount_point for c in collectors]


def test_auto_one_collector_per_nfs_mount() -> None:
    target = PathsTarget([Path("/mnt/netapp/db"), Path("/mnt/netapp/wal"), Path("/tmp/x")])
    assert mount_points(auto_nfs(target, {}, resolver=StubResolver())) == ["/mnt/netapp"]
    chosen = auto_nfs(target, {"nfs": {"mounts": ["/a", "/b/", "/a"]}}, resolver=StubResolver())
    assert mount_points(chosen) == ["/a", "/b"]
    with pytest.raises(CollectorError, match=r"^collector nfs: option mounts: Input should be"):
        auto_nfs(target, {"nfs": {"mounts": "/a"}})
    assert auto_nfs(PathsTarget([]), {}) == []


def test_registered() -> None:
    from sim.registry import _collectors  # not collectors(): that imports every plug-in

    entry = _collectors["nfs"]
    assert "mountstats" in entry.summary
    assert entry.auto(PathsTarget([]), {}) == []
