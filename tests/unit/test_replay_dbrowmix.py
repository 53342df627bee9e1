"""``dbsim replay --on SCENARIO.yaml`` with the workload's row updates (sim.replay.dbrowmix): a
pgbench-like production's writes, single blocks scattered over a large table, made by updates
of one random row each instead of appends (whose consecutive blocks the write-back merges);
the shares solved in whole percents from the costs, a run's costs measured, the correction
damped; and the workload's side (row_update_pct in the mix, every dialect's statement). Pure
functions: the live databases are in tests/integration/test_{sqlite,postgres,mysql}_slob.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from sim.replay import dbjob, dbrowmix, dbsize
from sim.replay.fidelity import READ_SHARE_POINTS, SIZE_TOL
from sim.sql import Catalogue
from tests.unit.test_replay_dbappend import _pgbench
from tests.unit.test_slob_append import build, counted, dealt
from workloads.slob.mix import mix_counts, mix_shares, takes_this_op
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SQL_DIR

#: What the lab's 80,000-row table cost in a row-update mix's run: a cache hit on ~15 % of the
#: rows (the 128 MiB memory group against 625 MiB), a block written back once an update.
LAB = dbrowmix.RowCosts(0.85, 1.0, dbrowmix.ROW_RANGE_MODEL, "test")


def test_the_figures_of_a_mix_are_the_documented_model() -> None:
    """row_update_pct 90, range_pct 50 at h 0.85, W 1, ranges 1 + 2 requests of 74 KiB:
    per operation 0.9 x 0.85 row reads, 0.1 x (0.5 x 3 + 0.5 x 2 x 0.85) reads of the reads."""
    got = dbrowmix.figures(90, 50, LAB)
    reads = 0.9 * 0.85 + 0.1 * (0.5 * 3 + 0.5 * 1.7)
    kib = 8 * 0.9 * 0.85 + 0.1 * (0.5 * (8 + 2 * 74) + 0.5 * 8 * 1.7)
    assert got.reads_op == pytest.approx(reads)
    assert got.writes_op == pytest.approx(0.9)
    assert got.read_kib == pytest.approx(kib / reads)
    assert got.write_pct == pytest.approx(100 * 0.9 / (0.9 + reads))


def test_run_e_capture_is_reached_with_single_block_writes_on_the_labs_costs() -> None:
    """bench/README.md run E's capture (148 IOPS, 50.2 % reads of 11.6 KiB): on the lab's costs
    a pair of whole percents makes the write share within its 2 points and the read size
    within its 10 %, with no SLOB update and no append."""
    made = dbrowmix.row_mix(49.8, 11.6, 148.0, LAB)
    assert made.why is None and made.size_why is None
    assert abs(made.got.write_pct - 49.8) <= READ_SHARE_POINTS / 2
    assert abs(made.got.read_kib / 11.6 - 1) <= SIZE_TOL / 2
    assert 80 <= made.row_update_pct < 100 and 0 < made.range_pct < 100


def test_the_write_share_row_updates_alone_cannot_reach_is_named() -> None:
    """A row update that reads its block from the device every time and writes it once writes
    half its I/Os: a capture of 70 % writes is out of reach, said with the costs."""
    costs = dbrowmix.RowCosts(1.0, 1.0, dbrowmix.ROW_RANGE_MODEL, "test")
    made = dbrowmix.row_mix(70.0, 11.6, 148.0, costs)
    assert made.row_update_pct >= 99 and made.got.write_pct <= 50.0
    assert made.why is not None and made.why.startswith("the workload cannot reach the write")


def test_without_range_reads_the_plain_reads_fill_and_the_size_is_named() -> None:
    costs = dbrowmix.RowCosts(0.85, 1.0, None, "test")
    made = dbrowmix.row_mix(49.8, 11.6, 148.0, costs)
    assert made.range_pct == 0 and made.why is None
    assert made.size_why is not None and "no range reads" in made.size_why
    single = dbrowmix.row_mix(49.8, 8.0, 148.0, costs)
    assert single.size_why is None and single.got.read_kib == pytest.approx(8.0)


def test_a_runs_costs_are_its_writes_over_row_updates_and_reads_over_rows_touched() -> None:
    """70 row updates/s, 2 range reads/s, 10 plain reads/s of two rows; the device read 80/s
    of which 6/s (3 a range) above one block at 197 KiB, and wrote 70/s."""
    sizes = {"le_8": 74.0, "le_256": 6.0}
    shape = SimpleNamespace(
        read_iops=80.0, read_kib=(74 * 8 + 6 * 197) / 80, read_sizes=sizes, write_iops=70.0
    )
    ops = {"row_update": {"ops_s": 70.0}, "range": {"ops_s": 2.0}, "read": {"ops_s": 10.0}}
    got = dbrowmix.run_row_costs(shape, ops)
    assert got is not None and got.ranges is not None
    assert got.writes_per_row_update == pytest.approx(1.0)
    assert got.ranges.multi == pytest.approx(3.0) and got.ranges.multi_kib == pytest.approx(197)
    # 80 - 6 multi - 2 ranges' first blocks = 72 single reads over 70 + 2 x 10 rows.
    assert got.reads_per_row == pytest.approx(72 / 90)
    assert dbrowmix.run_row_costs(shape, {"read": {"ops_s": 10.0}}) is None


def test_the_correction_is_damped_and_bounded() -> None:
    old = dbrowmix.RowCosts(1.0, 1.0, dbrowmix.ROW_RANGE_MODEL, "model")
    got = dbrowmix.RowCosts(0.8, 5.0, None, "measured")
    new = dbrowmix.corrected(old, got, 0.5, 2.0)
    assert new.reads_per_row == pytest.approx(0.9)
    assert new.writes_per_row_update == pytest.approx(2.0)  # 3.0 by the gain, bounded at x2
    assert new.ranges == old.ranges  # the run made no range read: the old cost holds
    assert dbrowmix.corrected(old, None, 0.5, 2.0) is old
    assert dbrowmix.corrected(old, got, 1.0, 2.0).reads_per_row == pytest.approx(0.8)


def test_derive_prefers_row_updates_to_appends_and_says_so() -> None:
    """Run E's capture derived with the workload's row updates and appends both: the row
    updates make the writes (their blocks scattered), SLOB's updates and the appends are off,
    the plain reads read two rows and the range reads sixteen blocks."""
    capture = replace(_pgbench(74.4, 73.8, 11.6, 14.0), write_kib=8.15)
    job = dbjob.derive(capture, 2.0, ranges=dbsize.MODEL, per_append=1.0, rows=LAB)
    p = job.parameters
    assert p["update_pct"] == 0 and "append_pct" not in p and p["scan_pct"] == 0
    assert p["work_unit"] == dbrowmix.ROW_WORK_UNIT
    assert p["range_blocks"] == dbrowmix.ROW_RANGE_BLOCKS and p["range_pct"] > 0
    assert p["row_update_pct"] > 80 and job.reachable and job.size_why is None
    assert abs(job.expected_write_pct - job.asked_write_pct) <= READ_SHARE_POINTS
    assert job.rate_iops == pytest.approx(2 * capture.iops)
    assert job.row_costs is not None and job.row_costs["reads_per_row"] == 0.85
    assert any("row_update_pct" in line for line in job.how)
    SlobParameters(**p, scale=80_000)  # the scenario accepts what the replay derived
    without = dbjob.derive(capture, 2.0, ranges=dbsize.MODEL, per_append=1.0)
    assert "row_update_pct" not in without.parameters and without.parameters["append_pct"] > 0


def test_appends_stay_where_row_updates_cannot_make_the_writes() -> None:
    capture = replace(_pgbench(30.0, 70.0, 8.0, 0.0), write_kib=8.0)
    costs = dbrowmix.RowCosts(1.0, 1.0, None, "test")
    job = dbjob.derive(capture, 1.0, per_append=1.0, rows=costs)
    assert "row_update_pct" not in job.parameters and job.parameters["append_pct"] > 0


def test_single_block_writes_take_row_updates_a_little_beyond_their_model_share() -> None:
    """Run G's capture (51.6 % writes of 8.16 KiB, reads of 9.57): on the model's costs row
    updates alone write 50 %, and with the reads that size the mean read less, so their mix
    misses the share; appends would reach it on the model but merge into 16-27 KiB writes.
    Row updates are taken (their share rises with the calibration's measured cache hits);
    writes of several blocks, or a share beyond the tolerance, keep the appends."""
    model = dbrowmix.model_costs(True)
    capture = replace(_pgbench(68.5, 73.1, 9.57, 14.0), write_kib=8.16)
    job = dbjob.derive(capture, 1.0, ranges=dbsize.MODEL, per_append=1.0, rows=model)
    assert job.parameters.get("row_update_pct", 0) > 80 and "append_pct" not in job.parameters
    assert dbrowmix.rows_preferred(51.6, 8.16, model)
    assert not dbrowmix.rows_preferred(51.6, 24.0, model)  # merged: not single blocks
    assert not dbrowmix.rows_preferred(50.0 + READ_SHARE_POINTS + 0.1, 8.16, model)
    assert not dbrowmix.rows_preferred(51.6, 8.16, None)
    merged = replace(capture, write_kib=24.0)
    job = dbjob.derive(merged, 1.0, ranges=dbsize.MODEL, per_append=1.0, rows=model)
    assert "row_update_pct" not in job.parameters and job.parameters["append_pct"] > 0


# ------------------------------------------------------------------ the workload's side


def test_row_update_pct_takes_its_share_of_the_operations_that_are_not_updates() -> None:
    assert mix_shares(10, 20, 0, 0, 50) == {
        "read": 36.0, "update": 10.0, "scan": 0.0, "append": 9.0, "row_update": 45.0,
    }  # fmt: skip
    assert mix_counts(10, 20, 0, 0, [(0, 100)], 50) == {
        "read": 36, "update": 10, "scan": 0, "append": 9, "row_update": 45,
    }  # fmt: skip
    assert mix_shares(10, 0, 0, 0) == {"read": 90.0, "update": 10.0, "scan": 0.0}


@pytest.mark.parametrize(("u", "row", "a", "rp"), [(0, 60, 0, 20), (10, 50, 20, 0), (7, 99, 3, 5)])
def test_the_session_deals_row_updates_in_the_documented_order(
    u: int, row: int, a: int, rp: int
) -> None:
    workload = build(update_pct=u, row_update_pct=row, append_pct=a, range_pct=rp)
    names = [name for name, _, _ in dealt(workload, 1000)]
    want, not_updates, others, plain = [], 0, 0, 0
    for i in range(1000):  # counted out one candidate at a time
        if takes_this_op(i, u):
            want.append("update")
            continue
        not_updates += 1
        if takes_this_op(not_updates - 1, row):
            want.append("row_update")
            continue
        others += 1
        if takes_this_op(others - 1, a):
            want.append("append")
            continue
        plain += 1
        want.append("range" if takes_this_op(plain - 1, rp) else "read")
    assert names == want
    windows = [(0, 1000), (13, 999)]
    counts = counted([n for first, end in windows for n in names[first:end]])
    assert {k: v for k, v in workload.expected_mix(windows).items() if v} == counts


def test_a_row_update_binds_a_unique_value_and_one_key() -> None:
    workload = build(update_pct=0, row_update_pct=100)
    dealt_ops = dealt(workload, 50)
    assert {name for name, _, _ in dealt_ops} == {"row_update"}
    keys = []
    for _, statement, args in dealt_ops:
        binds = dict(zip(statement.param_names, args, strict=True))
        assert len(binds["v"]) == 128 and 1 <= binds["k"] <= 20_000
        keys.append(binds["k"])
    assert len(set(keys)) > 45  # random keys, not a range


def test_row_update_pct_is_a_share_and_every_dialect_has_the_statement() -> None:
    with pytest.raises(ValidationError, match="row_update_pct"):
        SlobParameters(row_update_pct=101)
    assert SlobParameters().row_update_pct == 0
    dialects = [p.stem for p in Path(SQL_DIR).glob("*.sql") if p.stem != "default"]
    assert len(dialects) == 5  # with default.sql: the six files
    for dialect in dialects:
        statement = Catalogue.load(SQL_DIR, dialect).render("update_row", "named", table="t")
        assert "custid" in statement.sql and set(statement.param_names) == {"v", "k"}
