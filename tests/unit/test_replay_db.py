"""``dbsim replay --on SCENARIO.yaml``: the SLOB-like parameters derived from a capture's mix,
the scenario written for each scale, the fidelity causes a database run can show, and the
refusals (sim.replay.dbjob, dbrun, dbplan)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.config.resolve import validate
from sim.errors import ConfigError
from sim.replay import dbjob, dbplan, dbwarmup
from sim.replay.dbrun import DbScaleRun, read_scenario, scenario_for
from sim.replay.shape import Shape
from tests.unit.test_replay_derive import _shape


def _io_of(job: dbjob.DbJob) -> tuple[float, float]:
    """Device reads and writes per second the model expects of the job at its rate."""
    ops_s = job.rate_iops / (job.reads_per_op + job.writes_per_op)
    return ops_s * job.reads_per_op, ops_s * job.writes_per_op


def test_a_read_heavy_mix_gets_the_update_share_that_makes_its_write_share() -> None:
    shape = _shape(400.0, 40.0, read_kib=8.0, write_kib=8.0)  # 9.1 % writes
    job = dbjob.derive(shape, 2.0)
    # 440 IOPS at >= 20 ops/s: 22 I/Os an operation at most, so work_unit 23 (22 reads).
    assert job.parameters["work_unit"] == 23 and job.reads_per_op == 22
    # q = 0.1 writes a read; u = 100 q (w-1)/w = 9.57 -> 10 updates in 100 operations.
    assert job.parameters["update_pct"] == 10 and job.parameters["redo_stress"] == "LITE"
    assert job.rate_iops == pytest.approx(880.0) and job.reachable and job.why is None
    reads, writes = _io_of(job)
    assert reads + writes == pytest.approx(880.0)
    assert abs(100 * writes / (reads + writes) - 100 * 40 / 440) <= 2.0  # the read share's rule


def test_a_calibration_corrects_the_update_share_from_the_measured_costs() -> None:
    shape = _shape(400.0, 40.0, read_kib=8.0, write_kib=8.0)
    # Measured: 20 reads an operation, and an update cost only 8 writes (no checkpoint came).
    job = dbjob.derive(shape, 1.0, (20.0, 8.0))
    assert job.parameters["update_pct"] == 25  # 100 x 0.1 x 20 / 8
    assert job.writes_per_op == pytest.approx(2.0) and job.reachable
    assert "calibrated" in job.how[1]


def test_a_write_share_beyond_slobs_mix_is_named_not_approximated() -> None:
    job = dbjob.derive(_shape(20.0, 300.0), 1.0)  # a pgbench-like capture: 94 % writes
    assert not job.reachable and job.parameters["update_pct"] == 100
    assert job.why is not None
    assert job.why.startswith("the workload cannot reach the write share: 93.8 %")
    assert "at most" in job.why


def test_writes_finer_than_one_update_in_100_operations_are_named() -> None:
    """pgbench -S on lab A (tests/integration/test_replay_db.py): 276 reads/s and 0.55
    writes/s of the file system's own; 0 updates make none, 1 in 100 about six times too
    many."""
    job = dbjob.derive(_shape(275.5, 0.547, read_kib=9.3, write_kib=17.3), 1.0)
    assert job.parameters["update_pct"] == 0 and not job.reachable
    assert job.why is not None and "steps of one update in 100 operations" in job.why
    assert "0.20 % of the device I/Os asked (0.547 writes/s) are under 1 %" in job.why
    assert "the file system's own, for which no update is asked" in job.why


def test_writes_under_the_stray_share_are_not_asked_of_slobs_updates() -> None:
    """A pgbench -S capture that held 2.3 writes/s of the host's among 266 reads/s (0.86 %,
    CI rehearsal of 2026-12-07): SLOB's snap took update_pct 1 (1.85 % writes asked), whose
    updates wrote 14.2/s and moved the read share 4.4 points. Under the warm-up's and the
    appends' 1 %, the writes are the file system's own for the update share too; at 1.1 %
    they are asked."""
    job = dbjob.derive(_shape(266.0, 2.3, read_kib=9.46, write_kib=10.6), 1.0)
    assert job.parameters["update_pct"] == 0 and not job.reachable
    assert any("the capture's writes (0.86 % of its I/Os) are under 1 %" in h for h in job.how)
    asked = dbjob.derive(_shape(266.0, 3.0, read_kib=9.46, write_kib=10.6), 1.0)
    assert asked.parameters["update_pct"] == 1


def test_the_slob_rule_and_the_scan_share() -> None:
    assert [dbjob.snap_update_pct(p) for p in (-1, 0, 12.4, 50.2, 74, 76, 140)] == [
        0, 0, 12, 50, 50, 100, 100,
    ]  # fmt: skip
    assert dbjob.scan_pct_for(None, 64, 128) == 0
    # 10 % sequential requests: p x 8 / (p x 8 + (1 - p) x 63) = 0.1 -> p = 46.7 % of reads
    assert dbjob.scan_pct_for(10.0, 64, 128) == 47
    assert dbjob.work_unit_for(30.0) == 3 and dbjob.work_unit_for(1e6) == 64


def _scenario(tmp_path: Path, workload: str = "slob") -> Path:
    doc = {
        "name": "mine",
        "target": {"kind": "postgres", "host": "127.0.0.1"},
        "workload": {"name": workload, "parameters": {"scale": "400M", "table_prefix": "r1"}},
        "load": {"sessions": 4, "duration_s": 60},
        "slos": [{"operation": "read", "p99_ms": 5}],
    }
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_each_scale_gets_the_users_scenario_with_the_job_and_the_rate_in_iops(
    tmp_path: Path,
) -> None:
    path = _scenario(tmp_path)
    before = path.read_bytes()
    base = read_scenario(path)
    job = dbjob.derive(_shape(400.0, 40.0), 2.0)
    doc = scenario_for(base, job, 12.0, "2x")
    params = doc["workload"]["parameters"]
    assert params["scale"] == "400M" and params["table_prefix"] == "r1"  # the user's data
    assert params["update_pct"] == 10 and params["work_unit"] == 23
    load = doc["load"]
    assert load["mode"] == "open" and load["rate_iops"] == 880.0 and load["sessions"] == 4
    assert load["duration_s"] == 12.0 and load["calibration_s"] <= 12.0
    assert "slos" not in doc and base["load"]["duration_s"] == 60  # the base is not touched
    assert path.read_bytes() == before
    validate(doc)  # the run path accepts it


def test_a_scenario_of_another_workload_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give a slob scenario"):
        read_scenario(_scenario(tmp_path, "pgbench"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="a scenario is a mapping"):
        read_scenario(bad)


def _run(shape: Shape, stage: dict[str, Any], summary: dict[str, Any] | None = None) -> DbScaleRun:
    return DbScaleRun(
        1.0, Path("b"), summary or {}, {}, shape, stage, Path("s.yaml")
    )  # fmt: skip


def test_the_causes_of_an_unfaithful_database_replay() -> None:
    production = _shape(400.0, 40.0, read_kib=8.0, write_kib=8.0)
    job = dbjob.derive(production, 1.0)
    slow = _run(
        _shape(200.0, 20.0, read_kib=8.0, write_kib=8.0),
        {"iops_unmet": "target too slow: 220 of 440"},
    )
    judged = dbplan.judge(production, slow, job)
    assert not judged["faithful"] and judged["cause"].startswith("target too slow: 220 of 440")
    # Figures within tolerance from a run whose data sat under the caches: not a storage replay.
    hidden = {"cache": {"hidden_by_caches": True, "warning": "cache: the data (80 MiB) ..."}}
    cached = _run(production, {}, hidden)
    judged = dbplan.judge(production, cached, job)
    assert not judged["faithful"] and judged["cause"].startswith("not exercising storage")
    wrong_mix = dbjob.derive(_shape(20.0, 300.0), 1.0)
    mixed = _run(_shape(300.0, 150.0), {})
    judged = dbplan.judge(_shape(20.0, 300.0), mixed, wrong_mix)
    assert judged["cause"].startswith("the workload cannot reach the write share")
    # The total held, the split moved (test_replay_db with 10 % updates: writes +55 %).
    stage = {"iops_held": True, "rate_iops": 440.0, "delivered_iops": 436.0}
    moved = _run(_shape(360.0, 76.0, read_kib=8.0, write_kib=8.0), stage)
    judged = dbplan.judge(production, moved, job)
    assert judged["failed"] == ["read IOPS", "write IOPS", "read share"]
    assert judged["cause"].startswith("the database's read IOPS is not the capture's (-10.0 %)")
    assert "held 436.0 of 440.0 device IOPS" in judged["cause"]
    # Rates held, sizes the database's own: the size named with both figures.
    small = _run(_shape(400.0, 40.0, read_kib=8.0, write_kib=8.0), {})
    judged = dbplan.judge(_shape(400.0, 40.0, read_kib=9.3, write_kib=8.0), small, job)
    assert judged["failed"] == ["read size"]
    assert judged["cause"].startswith("the database's mean read size is 8 KiB against the")
    good = dbplan.judge(production, _run(production, {}), job)
    assert good["faithful"] and good["cause"] is None


def test_a_failed_runs_own_reason_is_what_the_replay_says(tmp_path: Path) -> None:
    from sim.replay.dbrun import _failure

    (tmp_path / "summary.json").write_text(
        '{"status": "failed", "calibration": {"error": "storage not exercised: loop7 read 0/s"}}'
    )
    assert _failure(tmp_path) == "storage not exercised: loop7 read 0/s"
    assert _failure(tmp_path / "none") is None


def test_a_write_share_between_slobs_steps_is_reached_with_cached_scans() -> None:
    """pgbench -N on a lab tablespace, captured in its write-back steady state (bench/replay_db.py):
    72.3 reads/s, 63.8 writes/s (46.9 %). The calibration measured 4.92 device reads an
    operation that reads cf1 and 6.4 writes an update: update_pct 67.8 is wanted, which SLOB's
    rule does not allow; 50 with half the reads scanning the cached cf2 makes 46.4 % writes."""
    shape = _shape(72.3, 63.8, read_kib=8.0, write_kib=8.0)
    job = dbjob.derive(shape, 1.0, (4.92, 6.4))
    assert job.parameters["update_pct"] == 50 and job.parameters["scan_pct"] == 50
    assert job.reads_per_op == pytest.approx(4.92 * 0.75)  # updates and half the reads read cf1
    assert job.expected_write_pct == pytest.approx(46.4, abs=0.05) and job.reachable
    assert "scan_pct 50 (reads that scan the cached cf2" in job.how[1]
    # Measured again from a run at those parameters: per cf1-reading operation, not per op.
    reads, per_update = dbjob.measured_costs(55.35, 48.0, 15.0, 50, 50)
    assert reads == pytest.approx(4.92) and per_update == pytest.approx(6.4)
    # No scan makes the share when update_pct 50 already writes more than asked.
    assert dbjob.diluting_scan_pct(0.5, 4.92, 6.4) is None


def test_a_capture_that_wrote_waits_for_the_hosts_write_back(tmp_path: Path) -> None:
    (tmp_path / "dirty_expire_centisecs").write_text("3000\n")
    (tmp_path / "dirty_writeback_centisecs").write_text("500\n")
    delay, how = dbjob.writeback_delay_s(str(tmp_path))
    assert delay == 35.0 and "30 s expiry + 5 s flusher period" in how
    assert dbjob.writeback_delay_s(str(tmp_path / "none"))[0] == 35.0  # the kernel's defaults
    assert dbjob.warmup_for(_shape(275.5, 0.547))[0] == dbjob.SHORT_WARMUP_S  # the FS's own
    warm, why = dbjob.warmup_for(_shape(72.3, 63.8))
    assert dbjob.SHORT_WARMUP_S < warm <= dbjob.MAX_WARMUP_S and "write-back delay" in why


def test_windows_shorter_than_the_write_back_are_said_before_any_scale(tmp_path: Path) -> None:
    (tmp_path / "dirty_expire_centisecs").write_text("3000\n")
    (tmp_path / "dirty_writeback_centisecs").write_text("500\n")
    vm = str(tmp_path)
    wrote = _shape(122.0, 3.2)  # 2.6 % writes over the helper's 10 s window
    capture, runs = dbwarmup.short_windows(wrote, 8.0, vm)
    assert capture.startswith("the capture's window (10 s) is shorter than this host's")
    assert "its 3.2 writes/s are a sample of those cycles" in capture
    assert runs.startswith("--duration 8 s is shorter than this host's write-back delay (35 s)")
    assert dbwarmup.short_windows(wrote, 35.0, vm) == [capture]  # the runs long enough
    long = replace(wrote, window=replace(wrote.window, seconds=60.0))
    assert dbwarmup.short_windows(long, 30.0, vm) == [runs.replace("8 s", "30 s")]
    assert dbwarmup.short_windows(long, 40.0, vm) == []
    assert dbwarmup.short_windows(_shape(275.5, 0.547), 8.0, vm) == []  # no writes to replay


def test_each_scale_corrects_the_next_scales_costs_damped_and_bounded() -> None:
    job = dbjob.derive(_shape(400.0, 40.0, read_kib=8.0, write_kib=8.0), 1.0, (20.0, 8.0))
    u = job.parameters["update_pct"]  # 25
    ops = {"operations": {"read": {"ops_s": 15.0}, "update": {"ops_s": 5.0}}}
    # The run read 22 blocks an operation and wrote 12 an update: half-way, 21 and 10.
    run = _run(_shape(22.0 * 20, 12.0 * 20 * u / 100, read_kib=8.0), {}, ops)
    costs, record = dbplan.corrected_costs((20.0, 8.0, None), run, job)
    assert costs[:2] == pytest.approx((21.0, 10.0)) and costs[2] is None  # no scans ran
    assert record["writes_per_update"]["measured"] == pytest.approx(12.0)
    # Ten times the writes: moved at most x2. A scale the target could not deliver: kept.
    run = _run(_shape(440.0, 800.0, read_kib=8.0), {}, ops)
    assert dbplan.corrected_costs((20.0, 8.0, None), run, job)[0][1] == pytest.approx(16.0)
    slow = _run(_shape(100.0, 10.0, read_kib=8.0), {"iops_unmet": "target too slow"}, ops)
    assert dbplan.corrected_costs((20.0, 8.0, None), slow, job)[0] == (20.0, 8.0, None)


def test_the_captured_mean_read_size_becomes_a_share_of_scans() -> None:
    """pgbench -S on lab A read 9.3 KiB on average (the kernel's read-ahead merging some
    lookups): f = (9.3 - 8) / (128 - 8) = 1.083 % of the read requests at 128 KiB."""
    assert dbjob.multiblock_share(9.3) == pytest.approx(1.3 / 120)
    assert dbjob.multiblock_share(8.0) == 0.0 and dbjob.multiblock_share(None) == 0.0
    assert dbjob.captured_multiblock_pct({"le_8": 90.0, "le_16": 6.0, "le_128": 4.0}) == 10.0
    # 13 reads an operation, 8 requests a scan (cf2's 128 blocks / 16), no updates:
    # k = f/(1-f) = 0.010952; s = 100 k 13 / (100 (8 + 13 k)) = 1.76 % of the reads -> 2.
    assert dbjob.size_scan_pct(9.3, 13.0, 8.0, 0) == 2
    # Scans that reached no device (the calibration measured 0.02 requests each): none does.
    assert dbjob.size_scan_pct(9.3, 13.0, 0.02, 0) is None
    assert dbjob.size_scan_pct(8.0, 13.0, 8.0, 0) == 0
    shape = Shape(
        _shape(275.5, 0.0).window, 275.5, 0.0, 9.3, None, {"le_8": 93.0, "le_16": 7.0}
    )  # fmt: skip
    job = dbjob.derive(shape, 1.0)
    assert job.parameters["scan_pct"] == 2 and job.size_why is None
    assert "scan_pct 2 for the read size" in job.how[2] and "above one block: 7.0 %" in job.how[2]
    # The model's reads: 13 an operation on cf1 for 98 % of the operations, 8 requests a scan.
    assert job.reads_per_op == pytest.approx(13 * 0.98 + 0.02 * 8)
    cached = dbjob.derive(shape, 1.0, (13.0, None), scan_requests=0.02)
    assert cached.parameters["scan_pct"] == 0 and cached.size_why is not None
    assert "the caches held cf2, no share of scans makes that" in cached.size_why


def test_a_run_measures_what_a_scan_cost_on_the_device() -> None:
    """A run at scan_pct 2 whose reads averaged 9.3 KiB at 275 IOPS with 0.4 scans/s: 2.98
    multi-block requests/s, 7.45 a scan; one whose reads were 8 KiB: its scans made none."""
    job = dbjob.derive(_shape(275.5, 0.0, read_kib=9.3), 1.0)
    ops = {"operations": {"read": {"ops_s": 19.6}, "scan": {"ops_s": 0.4}}}
    run = _run(_shape(275.5, 0.0, read_kib=9.3), {}, ops)
    got = dbplan.run_costs(run, job)
    assert got["scan_requests"] == pytest.approx(275.5 * 1.3 / 120 / 0.4)
    assert got["reads_per_op"] == pytest.approx(275.5 * (1 - 1.3 / 120) / 19.6)
    flat = dbplan.run_costs(_run(_shape(275.5, 0.0, read_kib=8.0), {}, ops), job)
    assert flat["scan_requests"] == 0.0
    costs, record = dbplan.corrected_costs((14.0, None, 8.0), run, job)
    assert costs[2] == pytest.approx(8.0 + 0.5 * (275.5 * 1.3 / 120 / 0.4 - 8.0))
    assert record["scan_requests"]["measured"] == pytest.approx(7.4616, abs=1e-3)
    # Scans the caches served are taken at once, not damped (the lab: 2.98 requests a scan in
    # a calibration that had just loaded cf2, then 0.041 at 1x): the next scale scans no more
    # for the read size, and says why.
    cached_run = _run(_shape(275.5, 0.0, read_kib=8.0 * 1.0004), {}, ops)
    costs, _ = dbplan.corrected_costs((14.0, None, 2.98), cached_run, job)
    assert costs[2] is not None and costs[2] < dbjob.CACHED_SCAN_REQUESTS
    after = dbjob.derive(_shape(275.5, 0.0, read_kib=9.3), 2.0, costs[:2], scan_requests=costs[2])
    assert after.parameters["scan_pct"] == 0 and "the caches held cf2" in str(after.size_why)


def test_a_split_that_moved_names_the_cost_and_slobs_nearest_steps() -> None:
    """bench/replay_db.py at 2x (pgbench -N, 49.9 % writes captured): derived from 5.74 reads
    an operation and 5.96 writes an update (update_pct 50, scan_pct 100: 50.9 % writes), the
    run read 5.48 an operation (the target's cache warming) and wrote 5.95 an update: 52.1 %
    writes, and SLOB has nothing between scan_pct 50 (42.0 %) and 100."""
    capture = _shape(66.42, 66.21, read_kib=10.76, write_kib=8.09)
    job = dbjob.derive(capture, 2.0, (5.737, 5.956))
    assert (job.parameters["update_pct"], job.parameters["scan_pct"]) == (50, 100)
    ops = {"operations": {"scan": {"ops_s": 23.2}, "update": {"ops_s": 23.2}}}
    run = replace(_run(_shape(127.08, 138.08, read_kib=8.0, write_kib=8.0), {}, ops), scale=2.0)
    judged = dbplan.judge(capture, run, job)
    assert judged["failed"] == ["read share", "read size"]
    cause = judged["cause"]
    assert "reads an operation on cf1 5.74 -> 5.48 (-4.5 %)" in cause
    assert "writes an update 5.96 -> 5.95" in cause
    assert "update_pct 50 scan_pct 50: 42.0 %, update_pct 50 scan_pct 100: 52.1 %" in cause
    assert "49.9 % captured" in cause


def test_the_captured_mean_read_size_becomes_a_share_of_range_reads() -> None:
    """pgbench -S on the lab: 9.27 KiB mean reads, 6.7 % above one block. On a target with
    range reads the share of plain reads that read two consecutive blocks is the one whose
    requests (a block, then the read-ahead's window) make that mean; without, the replay says
    why the size is out of reach, naming the dialect."""
    from sim.replay import dbsize

    shape = replace(
        _shape(300.0, 0.0, read_kib=9.27), read_sizes={"le_8": 933.0, "le_16": 20.0, "le_32": 47.0}
    )
    job = dbjob.derive(shape, 1.0, ranges=dbsize.MODEL)
    pct, reads = job.parameters["range_pct"], job.block_reads
    assert job.parameters["range_blocks"] == 2 and job.size_why is None
    single = reads * (1 - pct / 100) + pct / 100 * dbsize.MODEL.single
    multi = pct / 100 * dbsize.MODEL.multi
    mean = (8.0 * single + dbsize.MODEL.multi_kib * multi) / (single + multi)
    assert mean == pytest.approx(9.27, rel=0.01)  # the whole-percent step: within 1 %
    assert job.reads_per_op == pytest.approx(single + multi)
    assert "range_pct" in job.how[2] and "above one block: 6.7 %" in job.how[2]
    # Ranges that made no multi-block request (cached, or no read-ahead): said, not guessed.
    flat = dbsize.RangeCost(1.0, 0.02, 0.0, "measured")
    assert dbjob.derive(shape, 1.0, ranges=flat).size_why is not None
    none = dbjob.derive(shape, 1.0, (15.0, None), scan_requests=0.02, no_ranges="mysql has none")
    assert "range_pct" not in none.parameters and str(none.size_why).endswith("mysql has none")


def test_a_run_measures_what_a_range_read_cost_on_the_device() -> None:
    """Its requests above one block (size buckets) over its range reads a second; the block
    reads an operation from the plain reads and updates only; corrected damped and bounded."""
    from sim.replay import dbsize

    run = replace(_shape(300.0, 0.0, read_kib=9.0), read_sizes={"le_8": 950.0, "le_32": 50.0})
    operations = {"read": {"ops_s": 10.0}, "range": {"ops_s": 10.0}}
    reads, per_update, cost = dbsize.run_range_costs(run, operations)
    assert cost is not None and cost.multi == pytest.approx(300 * 0.05 / 10)
    assert cost.multi_kib == pytest.approx((9.0 * 300 - 8.0 * 285) / 15)
    assert reads == pytest.approx((285 - 10) / 10) and per_update is None
    moved = dbsize.corrected(dbsize.MODEL, cost, 0.5, 2.0)
    assert moved is not None and moved.multi == pytest.approx(1.0 + 0.5 * (1.5 - 1.0))
    assert dbsize.corrected(dbsize.MODEL, replace(cost, multi=0.0), 0.5, 2.0).multi == 0.0


def test_only_a_dialect_with_range_reads_is_asked_for_them() -> None:
    from sim.replay import dbsize

    assert dbsize.range_reads_on({"target": {"kind": "postgres"}}) is None
    for kind in ("mysql", "sqlite", "oracle", "sqlserver"):
        why = dbsize.range_reads_on({"target": {"kind": kind}})
        assert why == (
            f"{kind} has no read of consecutive blocks (range_read: rows addressed by block, "
            "like PostgreSQL's TID ranges)"
        )
