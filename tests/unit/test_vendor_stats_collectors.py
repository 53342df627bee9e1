"""The Oracle and SQL Server ``db`` collectors on rows recorded from real servers
(tests/data/dbviews: Oracle's from the AWR report of a SLOB run, whose figures are the same
views' differences; SQL Server's wait statistics from a published output, its file statistics
written from Microsoft's documented columns, as the file says). Only the DB-API cursor is
replaced (tests/support/recorded_views.py): the collectors' statements, their reading of the
rows and their arithmetic are what a real server meets. Neither server can run here."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, Sample
from storage.collectors.oracle_stats import (
    EVENTS,
    ORACLE_EVENTS_SQL,
    ORACLE_HISTOGRAM_SQL,
    ORACLE_SYSSTAT_SQL,
    SYSSTAT_RATES,
    SYSSTAT_VOLUMES,
    OracleStatsCollector,
    oracle_stats_collectors,
)
from storage.collectors.sqlserver_stats import (
    SQLSERVER_WAITS_SQL,
    WAIT_TYPES,
    SqlServerStatsCollector,
    sqlserver_stats_collectors,
)
from storage.collectors.view_counters import dict_rows, wait_histogram
from tests.support.recorded_views import (
    RecordedCursor,
    RecordedTarget,
    load,
    scaled,
)

T = TypeVar("T")
ORACLE = "oracle_slob2_122.txt"
SQLSERVER = "sqlserver_2005_express.txt"
#: The AWR report's Elapsed (21.82 min as printed; its per-second column used ~1309.14 s).
ELAPSED_S = 1309.2
ORACLE_KEEP = ("instance_name", "startup_s", "event", "wait_time_milli", "function_name", "name")
SQLSERVER_KEEP = ("database_name", "start_s", "file_name", "file_type", "wait_type")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def by_entity(samples: list[Sample]) -> dict[str, Sample]:
    return {s.entity: s for s in samples}


def readings(name: str, keep: tuple[str, ...], *factors: float) -> list[dict[str, Any]]:
    views = load(name)
    return [scaled(views, factor, keep) for factor in factors]


async def two_readings(collector: Any, seconds: float) -> list[Sample]:
    """Start on reading 0, sample reading 1 ``seconds`` later."""
    await collector.start(100.0)
    collector.target.cursor.reading = 1
    samples: list[Sample] = await collector.sample(100.0 + seconds)
    return samples


def oracle(*factors: float) -> tuple[OracleStatsCollector, RecordedTarget]:
    cursor = RecordedCursor(readings(ORACLE, ORACLE_KEEP, *factors), upper_names=True)
    target = RecordedTarget("oracle", cursor)
    return OracleStatsCollector(target), target


def sqlserver(*factors: float) -> tuple[SqlServerStatsCollector, RecordedTarget]:
    cursor = RecordedCursor(readings(SQLSERVER, SQLSERVER_KEEP, *factors))
    target = RecordedTarget("sqlserver", cursor)
    return SqlServerStatsCollector(target), target


# --------------------------------------------------------------------------- Oracle


def test_oracle_interval_gives_the_awr_reports_own_figures() -> None:
    """The collector over the report's interval computes what AWR printed per second (its
    Instance Activity Stats' per Second column, to its precision)."""
    collector, _ = oracle(1, 2)
    samples = by_entity(run(two_readings(collector, ELAPSED_S)))
    db = samples["SLOB2"].values
    assert samples["SLOB2"].meta == {"kind": "database"}
    assert collector.database == "SLOB2"
    printed = {  # line of the decompressed report: statistic, per Second
        "read_total_req_s": 8051.28,  # 19614 physical read total IO requests
        "phys_read_req_s": 8047.33,  # 19612 physical read IO requests
        "write_total_req_s": 1.89,  # 19626
        "phys_write_req_s": 0.99,  # 19624
        "blks_read_s": 64077.91,  # 19617 physical reads (blocks)
        "log_write_req_s": 0.48,  # 19683 redo writes
        "commits_s": 0.12,  # 19737 user commits
    }
    for key, value in printed.items():
        assert db[key] == pytest.approx(value, rel=1e-4, abs=0.006), key
    assert db["read_total_kB_s"] * 1024 == pytest.approx(524_990_867.63, rel=1e-4)  # 19615
    assert db["phys_read_kB_s"] * 1024 == pytest.approx(524_926_264.60, rel=1e-4)  # 19613
    assert db["log_write_kB_s"] * 1024 == pytest.approx(4_567.71, rel=1e-4)  # 19650 redo size
    # The SLOB run's reads were direct-path, 8 blocks a request.
    assert db["blks_read_s"] / db["phys_read_req_s"] == pytest.approx(7.96, abs=0.01)
    # Buffer Hit % 99.99 in the report's Instance Efficiency Percentages.
    assert db["cache_hit_pct"] == pytest.approx(99.99, abs=0.01)
    # db file sequential read: 109 foreground waits at 749.07 us, 554 background at 415.71.
    assert db["single_block_read_s"] == pytest.approx(663 / ELAPSED_S)
    assert db["single_block_read_ms"] == pytest.approx(0.47052, abs=1e-5)
    assert db["multi_block_read_ms"] == pytest.approx(0.71478, abs=1e-5)
    assert db["log_write_ms"] == pytest.approx(0.59537, abs=1e-5)
    # No waits for db file parallel read: a rate of 0 and no mean wait (not 0 ms).
    assert db["parallel_read_s"] == 0.0 and "parallel_read_ms" not in db
    assert db["interval_s"] == ELAPSED_S


def test_oracle_wait_histograms_land_in_the_profiles_buckets() -> None:
    """v$event_histogram's buckets (waits under N ms) give the shares AWR printed."""
    collector, _ = oracle(1, 2)
    samples = by_entity(run(two_readings(collector, ELAPSED_S)))
    single = samples["SLOB2:wait:db file sequential read"]
    assert single.meta == {"kind": "wait"}
    printed = {"le_1ms_pct": 97.4, "le_2ms_pct": 1.4, "le_4ms_pct": 0.9, "le_8ms_pct": 0.2,
               "le_16ms_pct": 0.2, "le_32ms_pct": 0.0, "gt_1024ms_pct": 0.0}  # fmt: skip
    for key, value in printed.items():
        assert single.values[key] == pytest.approx(value, abs=0.06), key
    assert sum(v for k, v in single.values.items() if k.endswith("_pct")) == pytest.approx(100)
    assert single.values["waits_s"] == pytest.approx(663 / ELAPSED_S)
    lgwr = samples["SLOB2:wait:log file parallel write"].values
    assert lgwr["le_1ms_pct"] == pytest.approx(47.6 + 47.3, abs=0.06)


def test_oracle_iostat_functions() -> None:
    collector, _ = oracle(1, 2)
    samples = by_entity(run(two_readings(collector, ELAPSED_S)))
    direct = samples["SLOB2:function:Direct Reads"]
    assert direct.meta == {"kind": "function"}
    assert direct.values["read_req_s"] == pytest.approx(8024.12, rel=1e-4)
    assert direct.values["read_kB_s"] / 1024 == pytest.approx(499.764, rel=1e-3)
    assert "wait_ms" not in direct.values  # no waits: direct reads are waited as events
    cache = samples["SLOB2:function:Buffer Cache Reads"].values
    assert cache["wait_ms"] == pytest.approx(0.43569, rel=0.01)


def test_oracle_reads_only_and_rolls_back_each_reading() -> None:
    collector, target = oracle(1, 2)
    run(two_readings(collector, ELAPSED_S))
    (conn,) = target.connections
    assert conn.rollbacks == 2  # RecordedConnection refuses execute and commit outright
    assert len(target.cursor.executed) == 10  # five views per reading
    run(collector.stop())
    assert conn.closed


def test_oracle_restart_is_a_gap_for_every_entity_then_exact_again() -> None:
    collector, target = oracle(1, 2, 0.5, 1)
    restarted = target.cursor.readings[2]["v$instance"][1][0]
    restarted[1] += 3600.0  # startup_time moved: the instance restarted
    target.cursor.readings[3]["v$instance"][1][0][1] = restarted[1]

    async def scenario() -> list[list[Sample]]:
        out = [await two_readings(collector, 10.0)]
        target.cursor.reading = 2
        out.append(await collector.sample(120.0))
        target.cursor.reading = 3
        out.append(await collector.sample(130.0))
        return out

    first, gap, after = run(scenario())
    assert all(not s.gap for s in first)
    assert {s.gap for s in gap} == {GAP_RESET}
    assert "instance.stats_reset" in by_entity(gap)["SLOB2"].detail
    db = by_entity(after)["SLOB2"].values  # 0.5 -> 1 times the interval over 10 s
    assert db["phys_read_req_s"] == pytest.approx(10535057 * 0.5 / 10)


def test_oracle_counter_that_went_down_is_a_gap_for_its_entity_only() -> None:
    collector, target = oracle(2, 2)
    sysstat = target.cursor.readings[1]["v$sysstat"][1]
    for row in sysstat:
        if row[0] == "user commits":
            row[1] = 1  # below the 322 of the baseline
    samples = by_entity(run(two_readings(collector, 5.0)))
    assert samples["SLOB2"].gap == GAP_RESET
    assert "user commits: 322 -> 1" in samples["SLOB2"].detail
    assert not samples["SLOB2:wait:db file sequential read"].gap


def test_oracle_event_first_waited_counts_from_zero() -> None:
    """v$system_event lists an event only once it was waited for."""
    collector, target = oracle(1, 1)
    columns, rows = target.cursor.readings[1]["v$system_event"]
    target.cursor.readings[1]["v$system_event"] = (
        columns, [*rows, ["db file parallel read", 50, 100_000]]
    )  # fmt: skip
    samples = by_entity(run(two_readings(collector, 10.0)))
    db = samples["SLOB2"].values
    assert db["parallel_read_s"] == 5.0 and db["parallel_read_ms"] == 2.0
    assert samples["SLOB2:wait:db file parallel read"].values["wait_ms"] == 2.0
    assert db["single_block_read_s"] == 0.0  # nothing moved otherwise


def test_oracle_without_the_grant_names_it() -> None:
    collector, target = oracle(1)
    target.cursor.error = RuntimeError(
        "oracle: db_collector_instance: ORA-00942: table or view does not exist"
    )
    with pytest.raises(CollectorError, match=r"GRANT SELECT ANY DICTIONARY TO dbsim"):
        run(collector.start(0.0))
    assert target.connections[0].closed


def test_oracle_findings_per_read_and_read_wait() -> None:
    collector, _ = oracle(1, 2)
    samples = run(two_readings(collector, ELAPSED_S))
    means = {s.entity: dict(s.values) for s in samples}
    facts, warnings = collector.findings(means, {"read": 1_000_000}, ELAPSED_S)
    assert facts["physical_reads_per_read"] == pytest.approx(83.89, abs=0.01)
    assert facts["tables_blocks_read"] == pytest.approx(83_886_767, rel=1e-6)
    assert facts["single_block_read_ms"] == pytest.approx(0.471, abs=0.001)
    # The buffer cache served 99.99 % of the logical reads: the cache warning. (The direct
    # reads never entered it; physical reads per read says what reached storage.)
    # (1 - 687 / 89,172,433: 99.9992 %, rounded to two decimals)
    assert facts["tables_cache_hit_pct"] == 100.0
    assert len(warnings) == 1 and "served 100.0 % of block requests" in warnings[0]


def test_oracle_collector_refuses_another_engine() -> None:
    cursor = RecordedCursor([load(ORACLE)])
    with pytest.raises(CollectorError, match="Oracle statistics on a sqlserver target"):
        OracleStatsCollector(RecordedTarget("sqlserver", cursor))
    (made,) = oracle_stats_collectors(RecordedTarget("oracle", cursor), {})
    assert isinstance(made, OracleStatsCollector)


def test_oracle_queries_name_each_counter_the_figures_use() -> None:
    for name in (*SYSSTAT_RATES, *SYSSTAT_VOLUMES):
        assert f"'{name}'" in ORACLE_SYSSTAT_SQL
    for event in EVENTS:
        assert f"'{event}'" in ORACLE_EVENTS_SQL and f"'{event}'" in ORACLE_HISTOGRAM_SQL


# --------------------------------------------------------------------------- SQL Server


def test_sqlserver_recorded_waits_and_files() -> None:
    collector, target = sqlserver(1, 2)
    samples = by_entity(run(two_readings(collector, 10.0)))
    db = samples["slob"]
    assert db.meta == {"kind": "database"}
    sh = samples["slob:wait:PAGEIOLATCH_SH"].values
    assert sh["waits_s"] == 17.8 and sh["wait_ms"] == pytest.approx(327 / 178)
    # 14 waits that took 0 ms together, as recorded: a mean of 0 ms, not a missing one.
    ex = samples["slob:wait:PAGEIOLATCH_EX"].values
    assert ex == {"waits_s": 1.4, "wait_ms": 0.0, "interval_s": 10.0}
    # WRITELOG and IO_COMPLETION have no recorded rows: no entities, never zeros invented.
    assert "slob:wait:WRITELOG" not in samples and "slob:wait:IO_COMPLETION" not in samples
    assert db.values["single_block_read_ms"] == pytest.approx(327 / 178)
    assert db.values["phys_read_req_s"] == 6000.0
    assert db.values["blks_read_s"] == 6000.0  # 491,520,000 bytes / 8 KB / 10 s
    assert db.values["read_ms"] == 0.5
    assert db.values["log_write_req_s"] == 400.0 and db.values["log_write_ms"] == 0.5
    assert db.values["log_write_kB_s"] == 800.0
    assert "commits_s" not in db.values and "cache_hit_pct" not in db.values
    data = samples["slob:file:slob"]
    assert data.meta == {"kind": "file"} and data.values["read_kB_s"] == 48_000.0
    assert collector.describe()["files"] == {"slob:file:slob": "ROWS", "slob:file:slob_log": "LOG"}
    assert target.connections[0].rollbacks == 2


def test_sqlserver_wait_stats_clear_is_a_gap_for_the_waits_not_the_files() -> None:
    collector, target = sqlserver(3, 1)
    target.cursor.readings[1] = scaled(load(SQLSERVER), 1, SQLSERVER_KEEP)
    target.cursor.readings[1]["sys.dm_io_virtual_file_stats"] = scaled(
        load(SQLSERVER), 4, SQLSERVER_KEEP
    )["sys.dm_io_virtual_file_stats"]  # the files went on; DBCC SQLPERF cleared the waits
    samples = by_entity(run(two_readings(collector, 1.0)))
    assert samples["slob:wait:PAGEIOLATCH_SH"].gap == GAP_RESET
    assert samples["slob"].gap == GAP_RESET
    assert not samples["slob:file:slob"].gap
    assert samples["slob:file:slob"].values["read_req_s"] == 60000.0


def test_sqlserver_without_view_server_state_names_the_grant() -> None:
    collector, target = sqlserver(1)
    target.cursor.error = RuntimeError(
        "sqlserver: db_collector_instance: SQLSERVER 42000: [Microsoft][ODBC Driver 18 for SQL "
        "Server][SQL Server]VIEW SERVER STATE permission was denied on object 'server', "
        "database 'master'. (300)"
    )
    with pytest.raises(CollectorError, match="GRANT VIEW SERVER STATE TO dbsim"):
        run(collector.start(0.0))


def test_sqlserver_factory_and_queries() -> None:
    cursor = RecordedCursor([load(SQLSERVER)])
    (made,) = sqlserver_stats_collectors(RecordedTarget("sqlserver", cursor), {})
    assert isinstance(made, SqlServerStatsCollector)
    for wait_type in WAIT_TYPES:
        assert f"'{wait_type}'" in SQLSERVER_WAITS_SQL


# --------------------------------------------------------------------------- shared


def test_dict_rows_lower_cases_names_and_refuses_no_result() -> None:
    rows = dict_rows([("NAME",), ("VALUE",)], [("redo size", 5)])
    assert rows == [{"name": "redo size", "value": 5}]
    with pytest.raises(CollectorError, match="no result set"):
        dict_rows(None, [])


def test_wait_histogram_refuses_buckets_that_are_not_the_profiles() -> None:
    assert wait_histogram({}) == {}
    assert wait_histogram({3.0: 1.0}) == {}
    assert wait_histogram({2048.0: 1.0, 1.0: 3.0})["gt_1024ms_pct"] == 25.0


def test_a_connection_without_rows_is_refused_by_name() -> None:
    from tests.support.recorded_views import RecordedConnection

    class NoRows(RecordedConnection):
        rows = None  # type: ignore[assignment]

    collector, target = oracle(1)

    async def connect() -> NoRows:
        return NoRows(target.cursor)

    target.connect = connect  # type: ignore[method-assign]
    with pytest.raises(CollectorError, match="offers no rows"):
        run(collector.start(0.0))


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    engine=st.sampled_from(["oracle", "sqlserver"]),
    factors=st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=2, max_size=6),
    restart_at=st.integers(0, 6),
)
def test_any_readings_give_gaps_or_finite_non_negative_figures(
    engine: str, factors: list[float], restart_at: int
) -> None:
    """Counters that rise, fall (a clear, a database offline) or restart: every sample is a
    reset gap or figures that are finite and never negative; shares stay within 0-100 %."""
    make = oracle if engine == "oracle" else sqlserver
    collector, target = make(*factors)
    start_view, start_column = (
        ("v$instance", 1) if engine == "oracle" else ("sys.dm_os_sys_info", 1)
    )
    for index in range(restart_at, len(factors)):  # the server restarted before this reading
        row = target.cursor.readings[index][start_view][1][0]
        row[start_column] = row[start_column] + 1000.0

    async def scenario() -> list[Sample]:
        await collector.start(0.0)
        out: list[Sample] = []
        for index in range(1, len(factors)):
            target.cursor.reading = index
            out += await collector.sample(10.0 * index)
        return out

    for sample in run(scenario()):
        if sample.gap:
            assert sample.gap == GAP_RESET and not sample.values and sample.detail
            continue
        for key, value in sample.values.items():
            assert math.isfinite(value) and value >= 0, (sample.entity, key, value)
            if key.endswith("_pct"):
                assert value <= 100.0 + 1e-9, (sample.entity, key, value)


def test_a_lost_connection_is_given_back_and_a_new_baseline_taken() -> None:
    collector, target = oracle(1, 2, 3)

    async def scenario() -> tuple[list[Sample], list[Sample]]:
        await collector.start(0.0)
        target.cursor.error = ConnectionResetError("the server went away")
        target.cursor.reading = 1
        with pytest.raises(ConnectionResetError):
            await collector.sample(10.0)
        assert target.connections[0].closed
        target.cursor.error = None
        first = await collector.sample(20.0)  # reconnects: a baseline, no figures
        target.cursor.reading = 2
        return first, await collector.sample(30.0)

    first, second = run(scenario())
    assert first == [] and len(target.connections) == 2
    db = by_entity(second)["SLOB2"].values
    assert db["phys_read_req_s"] == pytest.approx(10535057 / 10)
