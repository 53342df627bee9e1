"""``dbsim replay --on SCENARIO.yaml`` with the workload's appends (sim.replay.dbappend): a
write share SLOB's update mix cannot make, reached by ``append_pct`` of the operations that do
not update inserting one block into cf3, solved from the costs and sized with the range reads
at a fixed point; the calibration's split of the writes; and the paths without appends as
they were. Pure functions: no run (tests/integration/test_replay_db.py replays)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sim.replay import dbappend, dbjob, dbplan, dbsize
from sim.replay.dbconsole import db_scale_lines
from sim.replay.dbrun import DbScaleRun
from sim.replay.fidelity import IOPS_TOL, READ_SHARE_POINTS, SIZE_TOL
from sim.replay.shape import Shape
from tests.unit.test_replay_derive import _shape

MODEL_A = dbappend.MODEL_WRITES_PER_APPEND


def _pgbench(read: float, write: float, read_kib: float, above_block_pct: float) -> Shape:
    """A pgbench-like capture: its rates, its mean read and its share of reads above a block."""
    sizes = {"le_8": 100.0 - above_block_pct, "le_32": above_block_pct}
    return replace(_shape(read, write, read_kib=read_kib, write_kib=8.0), read_sizes=sizes)


def _model_io(job: dbjob.DbJob) -> tuple[float, float, float]:
    """The device reads/s, writes/s and mean read (KiB) the job's model makes at its rate."""
    p = job.parameters
    u, a = p["update_pct"] / 100, p.get("append_pct", 0) / 100
    plain = (1 - u) * (1 - a) * (1 - p["scan_pct"] / 100)
    ranged = plain * p.get("range_pct", 0) / 100
    cost = dbsize.MODEL
    single = job.block_reads * (u + plain - ranged) + ranged * cost.single
    multi = ranged * cost.multi
    assert single + multi == pytest.approx(job.reads_per_op)  # the job counts what it runs
    ops_s = job.rate_iops / (job.reads_per_op + job.writes_per_op)
    mean = (dbsize.BLOCK_KIB * single + cost.multi_kib * multi) / (single + multi)
    return ops_s * job.reads_per_op, ops_s * job.writes_per_op, mean


def _within(job: dbjob.DbJob, capture: Shape) -> None:
    reads, writes, _ = _model_io(job)
    scale = job.scale
    assert abs(job.expected_write_pct - job.asked_write_pct) <= READ_SHARE_POINTS
    assert writes == pytest.approx(capture.write_iops * scale, rel=IOPS_TOL)
    assert reads == pytest.approx(capture.read_iops * scale, rel=IOPS_TOL)


def test_pgbench_n_with_its_read_size_is_faithful_by_the_model_with_appends() -> None:
    """bench/README.md run D: pgbench -N captured 48.6 % writes and reads of 10.3 KiB (11.5 %
    above one block). SLOB's mix needed update_pct 50 with the cached cf2 scanned (dilution),
    which left the read size unreachable; with appends the writes are updates and appends, and
    the range reads are free to size the reads: every judged figure within its tolerance."""
    capture = _pgbench(75.0, 71.0, 10.3, 11.5)
    before = dbjob.derive(capture, 1.0, ranges=dbsize.MODEL)
    assert before.parameters["scan_pct"] == 100 and "range_pct" not in before.parameters
    assert "the scans of cf2 serve the write share" in str(before.size_why)
    job = dbjob.derive(capture, 1.0, ranges=dbsize.MODEL, per_append=MODEL_A)
    p = job.parameters
    assert job.reachable and job.why is None and job.size_why is None
    assert p["scan_pct"] == 0 and p["append_pct"] > 0 and p["range_pct"] > 0
    assert 0 < p["update_pct"] <= 50 and p["work_unit"] == before.parameters["work_unit"]
    _within(job, capture)
    assert _model_io(job)[2] == pytest.approx(10.3, rel=SIZE_TOL / 5)
    assert f"append_pct {p['append_pct']}" in job.how[1] and "fixed point" in job.how[1]
    assert job.per_append == MODEL_A
    # Calibrated costs (run D: ~5.5 block reads an operation, ~6.9 writes an update) too.
    calibrated = dbjob.derive(capture, 2.0, (5.5, 6.9), ranges=dbsize.MODEL, per_append=MODEL_A)
    assert calibrated.reachable and calibrated.size_why is None
    assert calibrated.parameters["work_unit"] == p["work_unit"]  # the calibration's range
    _within(calibrated, capture)


def test_pgbench_tpcb_like_write_share_is_reached_by_appends() -> None:
    """A pgbench-like capture of 93.8 % writes: SLOB's update mix gives at most about half the
    I/Os (named, test_replay_db); on PostgreSQL, with its 10.3 KiB reads sized by range reads,
    99 appends in 100 operations make it, every rate within its tolerance."""
    capture = _pgbench(20.0, 300.0, 10.3, 11.5)
    assert not dbjob.derive(capture, 1.0, ranges=dbsize.MODEL).reachable
    job = dbjob.derive(capture, 1.0, ranges=dbsize.MODEL, per_append=MODEL_A)
    assert job.reachable and job.size_why is None
    assert (job.parameters["update_pct"], job.parameters["append_pct"]) == (0, 99)
    _within(job, capture)
    assert _model_io(job)[2] == pytest.approx(10.3, rel=SIZE_TOL)


def test_whole_percent_steps_near_all_writes_stay_named() -> None:
    """The same 93.8 % with single-block reads: the reads are one operation in 100 and the
    closest work_unit's whole-percent step leaves them 5.5 % over; and a capture of 99.5 %
    writes would need more than 99 appends in 100 (at most while the capture read)."""
    job = dbjob.derive(_pgbench(20.0, 300.0, 8.0, 0.0), 1.0, per_append=MODEL_A)
    assert not job.reachable and job.parameters["append_pct"] == 99
    assert job.parameters["work_unit"] == 8  # narrowed from 17: the nearest on the model
    assert "narrowed from 17" in job.how[0]
    assert job.why == (
        "the workload cannot reach the write share: 93.75 % of the device I/Os asked "
        "(300 writes/s, 20 reads/s); the appends move in steps of one in 100 of the operations "
        "that do not update: update_pct 0, append_pct 99 gives 93.40 % (299 writes/s, 21.1 "
        "reads/s), outside the read IOPS' ±5 %"
    )
    almost_all = dbjob.derive(_shape(1.0, 199.0, read_kib=8.0), 1.0, per_append=MODEL_A)
    assert not almost_all.reachable and almost_all.parameters["append_pct"] == 99
    assert str(almost_all.why).endswith(
        "(append_pct at most 99 while the capture read: appends alone read nothing)"
    )
    # A run made only of appends would measure no read cost; with no reads captured it may.
    only = dbjob.derive(_shape(0.0, 200.0, read_kib=8.0), 1.0, per_append=MODEL_A)
    assert only.parameters["append_pct"] == 100 and only.reachable


def test_the_append_share_and_the_range_reads_meet_at_a_fixed_point() -> None:
    """The range reads' share depends on the plain reads left, which depend on the append
    share, which depends on the reads an operation: iterated until the append share moves by
    less than 0.01 %, in a few rounds; the first round alone (rho = R) is off."""
    q, u, costs = 0.95, 10, (7.0, 8.0, 1.0)

    def reads_at(append_pct: float) -> float:
        plain = (1 - u / 100) * (1 - append_pct / 100)
        pct = dbsize.range_pct_for(10.3, costs[0], u, plain, dbsize.MODEL) or 0.0
        return dbsize.requests_per_op(costs[0], u, plain, pct, dbsize.MODEL)

    a, rounds = dbappend.fixed_point(q, u, costs, reads_at, 0.99)
    assert 2 <= rounds < dbappend.FIXED_POINT_ROUNDS
    uf, reads_op = u / 100, reads_at(100 * a)
    writes = uf * costs[1] + (1 - uf) * a * costs[2]
    assert writes / reads_op == pytest.approx(q, rel=1e-3)  # q (R u + (1-u)(1-a) rho) = writes
    first = dbappend.append_fraction(q, u, *costs, costs[0])
    assert abs(first - a) > 0.05
    # The brief's closed form with rho = R: a = (q R - u P) / ((1 - u) (A + q R)).
    assert first == pytest.approx((q * 7 - uf * 8) / ((1 - uf) * (1 + q * 7)))


def _run(shape: Shape, operations: dict[str, float]) -> DbScaleRun:
    summary = {"operations": {k: {"ops_s": v} for k, v in operations.items()}}
    return DbScaleRun(1.0, Path("b"), summary, {}, shape, {}, Path("s.yaml"))


def test_a_run_splits_its_writes_between_updates_and_appends() -> None:
    """One equation, two costs: without updates the appends made every write; with both, the
    job's costs scaled by one common factor, the measured writes over the predicted."""
    assert dbappend.split_writes(60.0, 0.0, 50.0, (8.0, 1.0)) == (None, pytest.approx(1.2))
    assert dbappend.split_writes(60.0, 10.0, 0.0, (8.0, 1.0)) == (pytest.approx(6.0), None)
    # 10 updates/s and 40 appends/s predicted 10 x 8 + 40 x 1 = 120 writes/s; 150 measured.
    per_update, per_append = dbappend.split_writes(150.0, 10.0, 40.0, (8.0, 1.0))
    assert (per_update, per_append) == (pytest.approx(10.0), pytest.approx(1.25))
    job = dbjob.derive(_pgbench(75.0, 71.0, 8.0, 0.0), 1.0, per_append=MODEL_A)
    p = job.parameters
    assert p["append_pct"] > 0 and p["update_pct"] > 0 and "range_pct" not in p
    ops = {"read": 20.0, "update": 10.0, "append": 30.0}
    writes = 1.3 * (10.0 * job.per_update + 30.0 * MODEL_A)
    run = _run(_shape(30.0 * 6.0, writes, read_kib=8.0), ops)
    got = dbplan.run_costs(run, job)
    # The reads an operation that reads cf1: the appends, which read nothing, left out.
    u, a = p["update_pct"] / 100, p["append_pct"] / 100
    assert got["reads_per_op"] == pytest.approx(180.0 / (60.0 * (u + (1 - u) * (1 - a))))
    assert got["writes_per_update"] == pytest.approx(1.3 * job.per_update)
    assert got["writes_per_append"] == pytest.approx(1.3 * MODEL_A)
    # Damped and bounded like the other costs, recorded beside writes_per_update.
    costs, record = dbplan.corrected_costs((6.0, job.per_update, None, MODEL_A), run, job)
    assert len(costs) == 4 and costs[3] == pytest.approx(MODEL_A * (1 + 0.5 * 0.3))
    row = record["writes_per_append"]
    assert row["before"] == MODEL_A and row["measured"] == pytest.approx(1.3)
    # With range reads the block reads come from the plain reads and updates, as before.
    ranged = replace(job, parameters={**p, "range_pct": 10, "range_blocks": 2})
    got = dbplan.run_costs(replace(run, shape=replace(run.shape, read_sizes={"le_8": 1})), ranged)
    assert got["reads_per_op"] == pytest.approx((180.0 - 0.0) / 30.0)
    assert got["writes_per_append"] == pytest.approx(1.3 * MODEL_A)


def test_a_capture_slobs_mix_makes_is_derived_as_before() -> None:
    """append_pct 0: SLOB's own mix reaches the writes (or the writes are the file system's
    own, under 1 % of the I/Os), so nothing changes but the cost recorded."""
    for shape, costs, extra in (
        (_shape(400.0, 40.0, read_kib=8.0, write_kib=8.0), (None, None), {}),
        (_shape(400.0, 40.0, read_kib=8.0, write_kib=8.0), (20.0, 8.0), {}),
        (_shape(275.5, 0.547, read_kib=9.3, write_kib=17.3), (None, None), {}),
        (_pgbench(300.0, 0.0, 9.27, 6.7), (None, None), {"ranges": dbsize.MODEL}),
        (_shape(275.5, 0.0, read_kib=9.3), (13.0, None), {"scan_requests": 0.02}),
    ):
        old = dbjob.derive(shape, 2.0, costs, **extra)
        new = dbjob.derive(shape, 2.0, costs, per_append=MODEL_A, **extra)
        assert "append_pct" not in new.parameters
        assert replace(new, per_append=0.0) == old
    # The costs a run measured without appends, the same as before.
    assert dbjob.measured_costs(55.35, 48.0, 15.0, 50, 50, append_pct=0) == dbjob.measured_costs(
        55.35, 48.0, 15.0, 50, 50
    )
    assert dbjob.reading_share(10, 20) == dbjob.reading_share(10, 20, 0.0)
    assert dbjob.size_scan_pct(9.3, 13.0, 8.0, 0) == dbjob.size_scan_pct(9.3, 13.0, 8.0, 0, 0.0)
    job = dbjob.derive(_shape(400.0, 40.0, read_kib=8.0, write_kib=8.0), 1.0, (20.0, 8.0))
    run = _run(_shape(440.0, 40.0, read_kib=8.0), {"read": 15.0, "update": 5.0})
    costs, record = dbplan.corrected_costs((20.0, 8.0, None), run, job)
    assert len(costs) == 3 and "writes_per_append" not in record


def test_the_console_and_the_cause_name_the_appends() -> None:
    capture = _pgbench(75.0, 71.0, 8.0, 0.0)
    job = dbjob.derive(capture, 1.0, per_append=MODEL_A)
    a = job.parameters["append_pct"]
    entry = {
        "scale": 1.0,
        "slob": job.as_dict(),
        "run": {"rate_iops": job.rate_iops, "iops_held": True},
        "replay": {"window": {"how": "the measured stage"}},
        "correction": {
            "writes_per_append": {"before": 1.0, "measured": 1.4, "after": 1.2},
        },
    }
    text = " ".join(db_scale_lines(entry, lambda s, indent: [s]))
    assert f"append_pct={a}" in text and "1 writes an append" in text
    assert "writes an append 1 -> 1.2 (measured 1.4)" in text
    # A run whose appends wrote 40 % more than counted: the split moved, the steps named.
    ops = {"read": 20.0, "update": 10.0, "append": 30.0}
    moved = _run(_shape(60.0, 86.0, read_kib=8.0), ops)
    cause = dbplan.judge(capture, moved, job)["cause"]
    assert "writes an append 1 ->" in cause
    steps = f"the appends' nearest steps make update_pct {job.parameters['update_pct']} "
    assert f"{steps}append_pct {a - 1}: " in cause and f"append_pct {a + 1}: " in cause


def test_a_target_without_appends_says_why() -> None:
    why = dbappend.appends_on({"target": {"kind": "no-such-kind"}})
    assert why is not None


def test_a_scale_with_appends_is_a_scenario_the_run_path_accepts(tmp_path: Path) -> None:
    """The job's append_pct goes into the user's scenario like the other parameters, and a
    scale that appends after a calibration that did not lets ``dbsim run`` load cf3."""
    from sim.config.resolve import validate
    from sim.replay.dbrun import read_scenario, scenario_for
    from tests.unit.test_replay_db import _scenario

    job = dbjob.derive(_pgbench(75.0, 71.0, 10.3, 11.5), 2.0, ranges=dbsize.MODEL,
                       per_append=MODEL_A)  # fmt: skip
    doc = scenario_for(read_scenario(_scenario(tmp_path)), job, 12.0, "2x")
    assert doc["workload"]["parameters"]["append_pct"] == job.parameters["append_pct"]
    validate(doc)
    first = dbjob.derive(_shape(400.0, 40.0, read_kib=8.0), 1.0, per_append=MODEL_A)
    assert not dbplan._loaded(first, job) and dbplan._loaded(job, job)
    assert dbappend.appends_on({"target": {"kind": "postgres"}}) is None
