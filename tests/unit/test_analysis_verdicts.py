"""The verdict's four calls on synthetic bundles written in the documented format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.analysis import analyze_bundle
from tests.unit.test_analysis import Column, assert_json_ready, cpu, device, op, write_bundle

RNG = np.random.default_rng(2024)

# --------------------------------------------------------------------------- verdict branches


def test_busy_device_with_latency_following_await_is_storage_bound(tmp_path: Path) -> None:
    n = 30
    await_ms = 1 + RNG.uniform(0, 4, n)
    p99 = (2000 + 800 * await_ms + RNG.normal(0, 100, n)).tolist()
    sdb = device(
        list(4000 + RNG.normal(0, 100, n)),
        util=list(RNG.uniform(85, 95, n)),
        r_await=list(await_ms),
        w_await=list(await_ms),
        aqu=4.0,
        read_share=0.9,
    )
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([1000.0] * n, p99)},
        block={"sdb": sdb},
        host=cpu(n, 40, 30),
        sessions=1,
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["verdict"]["call"] == "storage-bound", result["verdict"]
    assert result["primary_device"] == "sdb" and result["primary_op"] == "read"
    corr = result["correlation"]["read"]["p99_us"]["await_ms"]
    assert corr["pearson"] > 0.9 and corr["n"] == n
    assert result["regression"]["read"]["slope_us_per_ms"] == pytest.approx(800, rel=0.1)
    assert result["io_per_op"]["device_ios_per_op"] == pytest.approx(4.0, rel=0.05)
    assert [s["label"] for s in result["segments"]] == ["first half", "second half"]
    assert "sdb" in result["verdict"]["summary"]


def test_stepped_iops_plateau_under_a_throttle_is_storage_bound(tmp_path: Path) -> None:
    # The lab's blk-throttle signature: %util and await stay low, IOPS sit at the ceiling
    # while the sessions double every step and latency doubles with them.
    sessions = [1, 2, 4, 8]
    steps = [s for s in range(4) for _ in range(6)]
    n = len(steps)
    p99 = [200_000.0 * sessions[s] * (1 + 0.03 * RNG.normal()) for s in steps]
    block = {
        "vda": device(
            list(300 + RNG.normal(0, 3, n)),
            util=2.0,
            r_await=list(0.1 + 0.02 * RNG.random(n)),
            aqu=0.03,
        )
    }
    scenario = {
        "load": {"sessions": None, "steps": [{"duration_s": 6, "sessions": s} for s in sessions]}
    }
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([6.0] * n, p99, mean=[v * 0.85 for v in p99])},
        block=block,
        host=cpu(n, 8, 5),
        steps=steps,
        sessions=8,
        scenario=scenario,
    )
    result = analyze_bundle(path)
    assert_json_ready(result)
    assert result["verdict"]["call"] == "storage-bound", result["verdict"]
    curve = result["curve"]
    assert curve["x"] == "device_iops" and len(curve["points"]) == 4
    assert curve["knee"]["method"] == "plateau" and curve["knee"]["x"] == pytest.approx(
        300, rel=0.05
    )
    assert [s["label"] for s in result["segments"]] == ["step 1", "step 2", "step 3", "step 4"]
    assert all(s["verdict"]["call"] == "storage-bound" for s in result["segments"][1:])
    law = result["littles_law"]
    assert law["sessions"] == pytest.approx(3.75)
    assert law["ratio"] == pytest.approx(1.0, abs=0.1)
    assert result["series"]["step"] == steps


def test_client_out_of_cpu_with_idle_storage_is_client_bound(tmp_path: Path) -> None:
    n = 12
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([8000.0] * n, list(RNG.uniform(1500, 3000, n)), mean=[1000.0] * n)},
        block={"sda": device(list(RNG.uniform(150, 250, n)), util=10.0)},
        host=cpu(n, 60, 97),
        sessions=8,
    )
    verdict = analyze_bundle(path)["verdict"]
    assert verdict["call"] == "client-bound", verdict
    process = next(e for e in verdict["evidence"] if e["check"].startswith("dbsim process"))
    assert process["passed"] and process["value"] == pytest.approx(97)


def test_busy_host_with_a_client_that_barely_computes_is_not_client_bound(tmp_path: Path) -> None:
    n = 12  # a neighbour keeps the host busy; dbsim's 8 sessions each compute 1 % of the time
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([2000.0] * n, list(RNG.uniform(5000, 9000, n)), mean=[4000.0] * n)},
        block={"sda": device(list(RNG.uniform(10, 30, n)), util=3.0)},
        host=cpu(n, 99, 8),
        sessions=8,
    )
    assert analyze_bundle(path)["verdict"]["call"] == "database-bound"


def test_idle_storage_and_spare_client_cpu_is_database_bound(tmp_path: Path) -> None:
    n = 10
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([2000.0] * n, list(RNG.uniform(4000, 6000, n)), mean=[2000.0] * n)},
        block={"sda": device(list(RNG.uniform(10, 30, n)), util=3.0)},
        host=cpu(n, 35, 20),
        sessions=4,
    )
    verdict = analyze_bundle(path)["verdict"]
    assert verdict["call"] == "database-bound", verdict
    assert "nearly idle" in verdict["summary"]


def test_database_cache_serving_everything_is_database_bound(tmp_path: Path) -> None:
    n = 10
    nan: list[float | None] = [None] * n
    # The database row leaves the per-table columns empty and vice versa, as the collector does.
    db: dict[str, dict[str, Column]] = {
        "bench": {
            "blks_hit_s": [99_900.0] * n,
            "blks_read_s": [50.0] * n,
            "cache_hit_pct": [99.95] * n,
            "heap_blks_read_s": nan,
        },
        "table:slob1_cf1": {
            "blks_hit_s": nan,
            "blks_read_s": nan,
            "cache_hit_pct": nan,
            "heap_blks_read_s": [5.0] * n,
        },
    }
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([2000.0] * n, list(RNG.uniform(4000, 6000, n)), mean=[2000.0] * n)},
        block={"sda": device(list(RNG.uniform(500, 700, n)), util=30.0)},
        host=cpu(n, 35, 20),
        db=db,
        sessions=4,
    )
    result = analyze_bundle(path)
    assert result["io_per_op"]["cache_hit_pct"] == pytest.approx(99.95, abs=0.01)
    assert result["io_per_op"]["db_blocks_read_per_read"] == pytest.approx(0.025)
    assert result["verdict"]["call"] == "database-bound", result["verdict"]


def test_cached_run_is_never_storage_bound_even_when_await_tracks_latency(tmp_path: Path) -> None:
    # Everything the storage-bound call wants except I/O on the operations' path: latency
    # and await move together perfectly, IOPS are flat, the sessions are always busy.
    n = 20
    await_ms = RNG.uniform(0.1, 2.0, n)
    p99 = list(1000 + 500 * await_ms)
    # (%util, device I/Os per op, database cache hit %, database block reads per op): idle; a
    # database cache serving everything; the OS page cache serving the database's 63 reads.
    cases = ((5.0, 0.01, None, 0.0), (60.0, 0.5, 99.5, 0.5), (5.0, 0.01, 50.0, 63.0))
    for util, reads_per_op, hit, db_reads in cases:
        db = None
        if hit is not None:
            read_s = db_reads * 1000
            db = {
                "bench": {
                    "blks_hit_s": [read_s * hit / (100 - hit)] * n,
                    "blks_read_s": [read_s] * n,
                }
            }
        path = write_bundle(
            tmp_path / f"u{util:.0f}-{db_reads}",
            ops={"read": op([1000.0] * n, p99, mean=[1000.0] * n)},
            block={
                "sda": device(
                    [1000.0 * reads_per_op] * n,
                    util=util,
                    r_await=list(await_ms),
                    w_await=list(await_ms),
                    aqu=list(await_ms),
                )
            },
            host=cpu(n, 30, 20),
            db=db,
            sessions=1,
        )
        verdict = analyze_bundle(path)["verdict"]
        assert verdict["call"] == "database-bound", verdict
        coupling = next(e for e in verdict["evidence"] if e["check"] == "latency follows storage")
        assert coupling["passed"]


def test_busy_but_unrelated_storage_is_inconclusive_with_evidence(tmp_path: Path) -> None:
    n = 16
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([500.0] * n, list(RNG.uniform(1000, 9000, n)), mean=[4000.0] * n)},
        block={
            "sda": device(
                list(RNG.uniform(300, 3000, n)), util=50.0, r_await=list(RNG.uniform(0.1, 3, n))
            )
        },
        host=cpu(n, 50, 30),
        sessions=2,
    )
    verdict = analyze_bundle(path)["verdict"]
    assert verdict["call"] == "inconclusive"
    assert verdict["summary"].startswith("Inconclusive: ")
    checks = {e["check"] for e in verdict["evidence"]}
    assert {"device %util", "latency follows storage", "device I/Os per operation"} <= checks
    for item in verdict["evidence"]:
        assert set(item) == {
            "check", "value", "threshold", "passed", "meaning", "branch", "gate", "comparison"
        }  # fmt: skip
