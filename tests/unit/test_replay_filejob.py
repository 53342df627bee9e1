"""File production to an EDA deck (sim.replay.filejob) and the file replay's fidelity
(sim.replay.fileplan), on made-up series: no device, no clock."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim.replay.filejob import (
    REPRODUCED,
    FileShape,
    derive,
    footprint,
    is_file_capture,
    production_window,
    solve,
)
from sim.replay.fileplan import cause, checks
from storage.collectors.fileops_script import (
    CLASSES,
    OpCounts,
    bpftrace_script,
    figures,
    parse_tick,
)

COLUMNS = [f"{c.lower()}_s" for c in CLASSES.values()]


def _bundle(tmp_path: Path, rows: list[dict[str, float]]) -> Path:
    (tmp_path / "timeseries").mkdir()
    with (tmp_path / "timeseries" / "fileops.csv").open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["t", "interval", "phase", "entity", *COLUMNS, "ops_s", "read_kib", "write_kib"]
        )
        for i, row in enumerate(rows, 1):
            rates = [row.get(c, 0.0) for c in COLUMNS]
            out.writerow([float(i), i, "measure", "/mnt", *rates, sum(rates), 4.0, 16.0])
    return tmp_path


def test_the_window_leaves_out_the_partial_edges_and_a_start_up_burst(tmp_path: Path) -> None:
    idle: dict[str, float] = {}
    steady = {"getattr_s": 200.0, "read_s": 150.0, "write_s": 60.0}
    burst = {"getattr_s": 10_000.0, "lookup_s": 5000.0}
    rows = [idle, idle, burst, {"getattr_s": 5000.0}, *[steady] * 6, {"getattr_s": 50.0}, idle]
    bundle = _bundle(tmp_path, rows)
    assert is_file_capture(bundle)
    shape = production_window(bundle)
    # burst (first, partial) and the 5,000 one (above twice the median) and the last left out
    assert shape.intervals == 6
    assert shape.rates["GETATTR"] == 200.0 and shape.rates["LOOKUP"] == 0.0
    assert shape.read_kib == 4.0 and shape.write_kib == 16.0


def test_the_operations_rates_make_every_class_with_side_effects_included() -> None:
    asked = {"GETATTR": 300.0, "SETATTR": 50.0, "READ": 100.0, "WRITE": 64.0, "REMOVE": 30.0,
             "CREATE": 20.0, "MKDIR": 5.0}  # fmt: skip
    sizes = {"backend_file_bytes": 1 << 20, "transfer_size_bytes": 16 << 10}
    rates = solve(asked, sizes)
    made = {c: sum(r * footprint(op, sizes).get(c, 0.0) for op, r in rates.items()) for c in asked}
    assert made["GETATTR"] == pytest.approx(300.0)  # chmod's fstat and seq_write's pass inside
    assert rates["chmod"] == pytest.approx(50.0) and rates["stat"] == pytest.approx(249.0)
    # unlink held to create's rate: the mkdir ring's rmdir fills the rest of REMOVE only partly
    assert rates["unlink"] == pytest.approx(20.0) and made["REMOVE"] == pytest.approx(25.0)


def test_derive_sizes_the_blocks_and_the_deck() -> None:
    shape = FileShape({"GETATTR": 200.0, "READ": 150.0, "WRITE": 60.0, "CREATE": 40.0,
                       "REMOVE": 20.0}, 4.0, 16.0, 5, "test")  # fmt: skip
    job = derive(shape, 2.0)
    p = job.parameters
    assert p["component"] == "EDA_BLENDED" and p["direct_io"] is True
    assert p["block_size_bytes"] == 4096 and p["transfer_size_bytes"] == 16384
    assert p["frontend"]["mix"] == {"stat": 488, "random_read": 366, "create": 98, "unlink": 49}
    assert job.rate_ops_s == pytest.approx(2 * 470.0, rel=0.01)
    only_reads = derive(FileShape({"READ": 10.0}, 8.0, None, 3, "test"), 1.0)
    assert only_reads.parameters["component"] == "EDA_FRONTEND"


def test_fidelity_names_the_figure_and_the_cause() -> None:
    capture = FileShape({"GETATTR": 100.0, "READ": 100.0}, 4.0, None, 5, "c")
    replay = FileShape({"GETATTR": 80.0, "READ": 120.0}, 4.0, None, 5, "r")
    found = {c.figure: c for c in checks(capture, replay, 1.0)}
    assert found["calls/s"].ok and not found["GETATTR share"].ok
    job = derive(capture, 1.0)
    failed = [c for c in found.values() if not c.ok]
    assert cause(failed, job, job.rate_ops_s, capture, 1.0).startswith("the file system saw")
    assert cause(failed, job, 0.5 * job.rate_ops_s, capture, 1.0).startswith("the deck fell")
    slow = FileShape({"GETATTR": 50.0, "READ": 50.0}, 4.0, None, 5, "r")
    short = [c for c in checks(capture, slow, 1.0) if not c.ok]
    assert cause(short, job, 0.5 * job.rate_ops_s, capture, 1.0).startswith("target too slow")


def test_the_program_and_its_prints() -> None:
    text = bpftrace_script({7 << 20: "/mnt/" + "x" * 100}, 42)
    assert text.count("tracepoint:raw_syscalls:") == 2
    assert all(len(s) <= 64 for s in text.split('"')[1::2])  # bpftrace's literals hold 64
    counts = parse_tick(["@ops[7340032, 1]: 10", "@bytes[7340032, 1]: 40960", "@ops[1, 99]: 3"])
    assert counts[7340032].calls == {"READ": 10}
    got = figures(counts[7340032], 2.0)
    assert got["read_s"] == 5.0 and got["read_kib"] == 4.0 and got["ops_s"] == 5.0
    assert set(REPRODUCED) <= set(CLASSES.values())
    assert isinstance(OpCounts(), OpCounts)


def test_sizes_that_are_not_4k_multiples_are_kept_to_the_byte_and_buffered() -> None:
    build = derive(FileShape({"READ": 141.0, "WRITE": 90.0}, 1.18, 0.80, 5, "t"), 1.0)
    p = build.parameters
    assert p["direct_io"] is False
    assert p["block_size_bytes"] == 1208 and p["transfer_size_bytes"] == 819
    assert any(rule.startswith("buffered") for rule in build.rules)
    aligned = derive(FileShape({"READ": 10.0, "WRITE": 10.0}, 8.02, 16.0, 5, "t"), 1.0)
    assert aligned.parameters["direct_io"] is True
    assert aligned.parameters["block_size_bytes"] == 8192
