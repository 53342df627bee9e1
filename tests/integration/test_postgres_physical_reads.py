"""The SLOB method on PostgreSQL: each read statement costs about WORK_UNIT−1 block reads.

A SLOB-like read counts WORK_UNIT−1 rows of a random key range; the rows live one per block
in scattered blocks, so when the data is far larger than the database cache (shared_buffers,
128 MB here) nearly every row is a cache miss. The figures come from the ``db`` collector's
samples of the measured window (warm-up excluded) and its pure :func:`physical_reads_per_op`,
as a run's summary would compute them: the table's ``heap_blks_read`` + ``idx_blks_read``
divided by the read statements.

The bound is derived from the two things that move the figure, both measured in the test:
- the cache: with shared_buffers holding B blocks of a table of N blocks, a uniformly random
  block is cached with probability at most B/N, so the ratio to WORK_UNIT−1 is at least
  1 − B/N (0.92 at 1.5 GiB; 1 GiB would put it at 0.875) and at most 1;
- PostgreSQL's statistics are late: a backend sends its table counters at the end of a
  transaction at most once a second (PGSTAT_MIN_INTERVAL, src/backend/utils/activity/pgstat.c),
  so a sample at either edge of the window misses up to 1 s of each session's reads, plus the
  statement in flight. The window's count is off by at most L/W, L = 1 s + the slowest
  statement, W the measured window: 8 s gave 0.79-0.80 beside other work (CI, seven parallel
  workers), 12.5 % of it this lag; 24 s keeps it under ~5 %.

"Physical" here means what PostgreSQL reads with a system call: on this host the kernel's
page cache serves most of them. The table is loaded with COPY (about 20-25 s here), used once
and dropped. Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from sim.config.scenario import Load
from sim.core.engine import Engine
from sim.protocols import EngineContext, Sample, Statement
from storage.collectors.database import PostgresStatsCollector, physical_reads_per_op
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from tests.support.postgres import require_postgres
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration
T = TypeVar("T")

HOST, PORT, DATABASE = "127.0.0.1", 5432, "test"
SCALE = "1536M"
WORK_UNIT = 64
SESSIONS = 4
WARMUP_S = 3.0
MEASURE_S = 24.0
#: PGSTAT_MIN_INTERVAL: a backend's counters reach the shared statistics at most once a second.
STATS_LAG_S = 1.0


def _require_server() -> None:
    require_postgres(HOST, PORT, DATABASE)


async def _opened(target: PostgresTarget, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` with the target open (the engine opens it itself; load and drop do not)."""
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        await target.open(EngineContext(asyncio.get_running_loop(), executor))
        try:
            return await work()
        finally:
            await target.close()


async def _run(prefix: str) -> dict[str, Any]:
    target = PostgresTarget(PostgresSettings(host=HOST, port=PORT, database=DATABASE))
    params = SlobParameters(
        scale=SCALE, work_unit=WORK_UNIT, update_pct=0, table_prefix=prefix, load_batch_rows=20_000
    )
    slob = SlobWorkload(params, target)
    engine = Engine(
        slob,
        target,
        Load(sessions=SESSIONS, warmup_s=WARMUP_S, duration_s=MEASURE_S, seed=7),
        [PostgresStatsCollector(target, table_prefix=prefix)],
        skip_load=True,
    )
    measured: list[Sample] = []
    cache: dict[str, float] = {}

    def on_interval(interval: Any, samples: list[Sample]) -> None:
        if interval.phase == "measure":
            measured.extend(samples)

    engine.events.interval.add_listener(on_interval)
    started = time.perf_counter()
    try:
        report = await _opened(target, lambda: slob.load(lambda *_: None))
        load_s = time.perf_counter() - started
        cache.update(await _opened(target, lambda: _cache_and_table(target, prefix)))
        result = await engine.run()
    finally:
        dropped = await _opened(target, slob.drop)
    return {
        "report": report,
        "load_s": load_s,
        "result": result,
        "reads": engine.recorder.totals.get("read"),
        "measured": measured,
        "dropped": dropped,
        "cache": cache,
    }


async def _cache_and_table(target: PostgresTarget, prefix: str) -> dict[str, float]:
    """shared_buffers and the table's size, both in blocks."""
    conn = await target.connect()
    try:
        # shared_buffers' setting is in blocks (pg_settings' unit: 8kB).
        buffers = await conn.scalar(
            Statement(
                "buffers",
                "SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'",
                (),
            )
        )
        table = await conn.scalar(
            Statement(
                "table",
                "SELECT pg_relation_size($1::regclass) / current_setting('block_size')::bigint",
                (),
            ),
            (f"{prefix}_1_cf1",),
        )
    finally:
        await conn.close()
    return {"buffer_blocks": float(buffers), "table_blocks": float(table)}


# Alone (make test's serial phase): the ratio is of misses in the server's buffer cache, which
# parallel tests share (50.4 reads per statement against 63, with seven workers beside it).
@pytest.mark.timing
def test_reads_per_statement_match_work_unit_on_data_larger_than_the_cache() -> None:
    _require_server()
    prefix = f"phys{secrets.token_hex(3)}"
    out = asyncio.run(_run(prefix))
    result = out["result"]
    assert result.outcome == "completed", result.error
    assert out["dropped"] == [f"{prefix}_1_cf1"]
    assert out["report"]["tables"][0]["built"] is True
    reads = out["reads"]
    assert reads is not None and reads.error_count == 0
    ratio = physical_reads_per_op(out["measured"], reads.count)
    assert ratio is not None
    db = [s for s in out["measured"] if s.meta.get("kind") == "database"]
    hit = sum(s.values["cache_hit_pct"] for s in db) / len(db)
    expected = WORK_UNIT - 1
    cached = out["cache"]["buffer_blocks"] / out["cache"]["table_blocks"]
    lag = (STATS_LAG_S + reads.percentiles_us()["max_us"] / 1e6) / result.measured_s
    low, high = 1 - cached - lag, 1 + lag
    print(
        f"\nSLOB method on PostgreSQL: scale {SCALE} ({out['report']['rows_per_schema']:,} rows), "
        f"loaded by COPY in {out['load_s']:.1f} s; {reads.count:,} reads in "
        f"{result.measured_s:.1f} s measured ({reads.count / result.measured_s:,.0f}/s); "
        f"{ratio:.2f} blocks read per read statement (WORK_UNIT-1 = {expected}, "
        f"ratio {ratio / expected:.3f}); database cache hit {hit:.1f} %; bound "
        f"{low:.3f}-{high:.3f} (shared_buffers {cached:.3f} of the table, statistics lag "
        f"{lag:.3f} of the window)"
    )
    assert low <= ratio / expected <= high
