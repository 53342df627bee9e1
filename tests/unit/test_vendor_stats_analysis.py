"""The Oracle and SQL Server collectors' samples in the analysis, as PostgreSQL's are: database
blocks read per read statement (io_per_op) from ``blks_read_s``, and the database's own
single-block read wait among the figures application latency is correlated with. The samples
are the collectors' own over the recorded interval (tests/data/dbviews), written as a bundle's
db.csv rows; only the read wait is varied from interval to interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.analysis import analyze_bundle
from tests.unit.test_analysis import Column, cpu, device, op, write_bundle
from tests.unit.test_vendor_stats_collectors import ELAPSED_S, oracle, run, sqlserver, two_readings

N = 12
RNG = np.random.default_rng(28)


def db_columns(samples: list, wait: list[float]) -> dict[str, dict[str, Column]]:
    """Every entity's figures repeated over N intervals, the database's read wait varied."""
    database = next(s.entity for s in samples if s.meta.get("kind") == "database")
    columns: dict[str, dict[str, Column]] = {}
    names = sorted({k for s in samples for k in s.values})
    for sample in samples:
        columns[sample.entity] = {
            k: ([sample.values[k]] * N if k in sample.values else [None] * N) for k in names
        }
    columns[database]["single_block_read_ms"] = wait
    return columns


@pytest.mark.parametrize("engine", ["oracle", "sqlserver"])
def test_blocks_per_read_and_the_read_wait_reach_the_analysis(engine: str, tmp_path: Path) -> None:
    collector, _ = oracle(1, 2) if engine == "oracle" else sqlserver(1, 2)
    samples = run(two_readings(collector, ELAPSED_S if engine == "oracle" else 10.0))
    blocks_s = next(s for s in samples if s.meta.get("kind") == "database").values["blks_read_s"]
    wait = list(RNG.uniform(0.3, 3.0, N))
    p99 = [1500.0 + 900.0 * w + RNG.normal(0, 20) for w in wait]
    reads_s = 1000.0
    path = write_bundle(
        tmp_path / engine,
        ops={"read": op([reads_s] * N, p99)},
        block={"sdb": device(list(RNG.uniform(3000, 3100, N)), util=60.0)},
        host=cpu(N, 30, 10),
        db=db_columns(samples, wait),
        sessions=8,
    )
    result = analyze_bundle(path)
    assert result["io_per_op"]["db_blocks_read_per_read"] == pytest.approx(blocks_s / reads_s)
    [row] = [c for c in result["collector_coupling"] if c["source"] == "db"]
    assert "single-block read wait" in row["what"] and row["r"] > 0.9, row
