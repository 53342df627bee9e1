"""The ``db`` collector of Oracle: the instance's own I/O statistics from its ``v$`` views, as
rates per second (the figures an AWR report gives for its snapshot interval, every interval).

Read each interval over one connection of the target's (all cumulative since the instance
started; the figures are differences of two readings):

* ``v$sysstat``: ``physical read/write total IO requests`` and ``… total bytes`` (every file:
  data, temp, redo, control), ``physical read/write IO requests`` and ``… bytes`` (database
  files), ``physical reads`` (blocks), ``physical reads cache``, ``session logical reads``,
  ``redo writes``, ``redo size``, ``user commits``;
* ``v$system_event``: waits and time waited of ``db file sequential read`` (single-block
  reads), ``db file scattered read`` (multi-block reads into the cache), ``db file parallel
  read`` (batched single-block reads), ``log file parallel write`` (LGWR's writes) and ``log
  file sync`` (a commit waiting for them);
* ``v$event_histogram``: the same events' waits per bucket, as the profile's
  ``le_<N>ms_pct`` columns of the entity ``<instance>:wait:<event>``;
* ``v$iostat_function`` (11g on): requests, megabytes and waits per I/O function (Buffer
  Cache Reads, Direct Reads, LGWR, DBWR …) as ``<instance>:function:<function>``, the AWR
  "IOStat by Function" figures. Its megabytes are whole megabytes, so ``read_kB_s`` moves in
  steps of 1024 kB per interval.

The instance's entity (its name) carries the database I/O vocabulary
(storage.collectors.database_io): ``phys_read_req_s`` / ``phys_read_kB_s`` and the write pair
from the database-file statistics (as ``dbsim import awr`` takes them, so a live run and an
imported report read alike), ``single_block_read_s`` / ``_ms`` and ``multi_block_read_s`` /
``_ms`` from the events, ``log_write_req_s`` (redo writes), ``log_write_kB_s`` (redo size),
``log_write_ms`` (log file parallel write), ``commits_s`` (user commits); and ``blks_read_s``
(physical reads, in blocks: what the analysis divides by the read statements, ≈ WORK_UNIT − 1
for a SLOB read on data far larger than the cache) with ``cache_hit_pct`` (1 − physical reads
cache / session logical reads).

Resets: the instance's ``startup_time`` moving is a restart, a gap for every entity; these
views are never reset otherwise. Needs SELECT on ``v_$instance``, ``v_$sysstat``,
``v_$system_event``, ``v_$event_histogram`` and ``v_$iostat_function`` (``GRANT SELECT ANY
DICTIONARY`` or ``SELECT_CATALOG_ROLE`` gives them all); without them the collector stops
naming that GRANT.
Load: one extra connection, five small view queries per interval, each in a transaction
rolled back (``user rollbacks`` counts them; ``user commits`` does not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Target
from storage.collectors.view_counters import (
    KIND_DATABASE,
    WAIT_MARK,
    Reading,
    ViewCountersCollector,
    mean_ms,
    number,
    wait_histogram,
)

ORACLE_INSTANCE_SQL = """SELECT instance_name,
       (startup_time - DATE '1970-01-01') * 86400 AS startup_s
  FROM v$instance"""
ORACLE_SYSSTAT_SQL = """SELECT name, value
  FROM v$sysstat
 WHERE name IN ('physical read total IO requests', 'physical read total bytes',
                'physical write total IO requests', 'physical write total bytes',
                'physical read IO requests', 'physical read bytes',
                'physical write IO requests', 'physical write bytes',
                'physical reads', 'physical reads cache', 'session logical reads',
                'redo writes', 'redo size', 'user commits')"""
ORACLE_EVENTS_SQL = """SELECT event, total_waits, time_waited_micro
  FROM v$system_event
 WHERE event IN ('db file sequential read', 'db file scattered read', 'db file parallel read',
                 'log file parallel write', 'log file sync')"""
ORACLE_HISTOGRAM_SQL = """SELECT event, wait_time_milli, wait_count
  FROM v$event_histogram
 WHERE event IN ('db file sequential read', 'db file scattered read', 'db file parallel read',
                 'log file parallel write', 'log file sync')"""
ORACLE_IOSTAT_SQL = """SELECT function_name,
       small_read_reqs + large_read_reqs AS read_reqs,
       small_read_megabytes + large_read_megabytes AS read_mb,
       small_write_reqs + large_write_reqs AS write_reqs,
       small_write_megabytes + large_write_megabytes AS write_mb,
       number_of_waits, wait_time
  FROM v$iostat_function"""

#: v$sysstat statistic -> the instance entity's rate key (per second).
SYSSTAT_RATES = {
    "physical read total IO requests": "read_total_req_s",
    "physical write total IO requests": "write_total_req_s",
    "physical read IO requests": "phys_read_req_s",
    "physical write IO requests": "phys_write_req_s",
    "physical reads": "blks_read_s",
    "physical reads cache": "blks_read_cache_s",
    "session logical reads": "logical_reads_s",
    "redo writes": "log_write_req_s",
    "user commits": "commits_s",
}
#: v$sysstat byte counts -> kB per second.
SYSSTAT_VOLUMES = {
    "physical read total bytes": "read_total_kB_s",
    "physical write total bytes": "write_total_kB_s",
    "physical read bytes": "phys_read_kB_s",
    "physical write bytes": "phys_write_kB_s",
    "redo size": "log_write_kB_s",
}
#: Wait event -> the vocabulary's (count per second, mean wait) keys on the instance entity.
EVENTS = {
    "db file sequential read": ("single_block_read_s", "single_block_read_ms"),
    "db file scattered read": ("multi_block_read_s", "multi_block_read_ms"),
    "db file parallel read": ("parallel_read_s", "parallel_read_ms"),
    "log file parallel write": ("log_file_parallel_write_s", "log_write_ms"),
    "log file sync": ("log_file_sync_s", "log_file_sync_ms"),
}
FUNCTION_MARK = ":function:"
#: ORA-00942 "table or view does not exist": what a user without SELECT on a v$ view gets.
NO_SUCH_VIEW = "ORA-00942"
GRANT = "GRANT SELECT ANY DICTIONARY TO {user}"


def _event_key(event: str, counter: str) -> str:
    return f"event:{event}:{counter}"


class OracleStatsCollector(ViewCountersCollector):
    """Oracle's instance statistics (see the module docstring); entities: the instance, its
    wait events (``<instance>:wait:<event>``) and I/O functions
    (``<instance>:function:<function>``)."""

    engine: ClassVar[str] = "Oracle"

    def __init__(self, target: Target, capture: bool = False) -> None:
        if target.dialect != "oracle":
            raise CollectorError(f"collector db: Oracle statistics on a {target.kind} target")
        super().__init__(target, capture)

    async def read(self) -> tuple[str, Reading]:
        instance_row = (await self.rows("instance", ORACLE_INSTANCE_SQL))[0]
        instance = str(instance_row["instance_name"])
        database: dict[str, float] = {"reset_instance": number(instance_row["startup_s"])}
        for row in await self.rows("sysstat", ORACLE_SYSSTAT_SQL):
            database[str(row["name"])] = number(row["value"])
        reading: Reading = {instance: database}
        for row in await self.rows("events", ORACLE_EVENTS_SQL):
            event = str(row["event"])
            waits, micro = number(row["total_waits"]), number(row["time_waited_micro"])
            database[_event_key(event, "waits")] = waits
            database[_event_key(event, "us")] = micro
            reading[f"{instance}{WAIT_MARK}{event}"] = {"waits": waits, "us": micro}
        for row in await self.rows("histogram", ORACLE_HISTOGRAM_SQL):
            entity = reading.setdefault(f"{instance}{WAIT_MARK}{row['event']}", {})
            entity[f"bucket_{number(row['wait_time_milli']):.0f}ms"] = number(row["wait_count"])
        for row in await self.rows("iostat_function", ORACLE_IOSTAT_SQL):
            reading[f"{instance}{FUNCTION_MARK}{row['function_name']}"] = {
                k: number(v) for k, v in row.items() if k != "function_name"
            }
        return instance, reading

    def figures(
        self, entity: str, before: Mapping[str, float], after: Mapping[str, float], seconds: float
    ) -> tuple[str, dict[str, float]]:
        def delta(name: str) -> float:
            return after.get(name, 0.0) - before.get(name, 0.0)

        if WAIT_MARK in entity:
            values = {"waits_s": delta("waits") / seconds}
            if (wait := mean_ms(delta("us") / 1000.0, delta("waits"))) is not None:
                values["wait_ms"] = wait
            buckets = {
                float(k.removeprefix("bucket_").removesuffix("ms")): delta(k)
                for k in after
                if k.startswith("bucket_")
            }
            values.update(wait_histogram(buckets))
            return "wait", values
        if FUNCTION_MARK in entity:
            values = {
                "read_req_s": delta("read_reqs") / seconds,
                "read_kB_s": delta("read_mb") * 1024.0 / seconds,
                "write_req_s": delta("write_reqs") / seconds,
                "write_kB_s": delta("write_mb") * 1024.0 / seconds,
                "waits_s": delta("number_of_waits") / seconds,
            }
            if (wait := mean_ms(delta("wait_time"), delta("number_of_waits"))) is not None:
                values["wait_ms"] = wait
            return "function", values
        values = {
            key: delta(name) / seconds for name, key in SYSSTAT_RATES.items() if name in after
        }
        values.update(
            {key: delta(name) / 1024.0 / seconds for name, key in SYSSTAT_VOLUMES.items()
             if name in after}
        )  # fmt: skip
        for event, (rate, wait_key) in EVENTS.items():
            waits = delta(_event_key(event, "waits"))
            values[rate] = waits / seconds
            if (wait := mean_ms(delta(_event_key(event, "us")) / 1000.0, waits)) is not None:
                values[wait_key] = wait
        logical, cached = delta("session logical reads"), delta("physical reads cache")
        if logical > 0 and "physical reads cache" in after:
            values["cache_hit_pct"] = max(0.0, 100.0 * (1.0 - cached / logical))
        return KIND_DATABASE, values

    def missing_grant(self, exc: BaseException) -> CollectorError | None:
        if NO_SUCH_VIEW not in str(exc):
            return None
        user = str(getattr(getattr(self.target, "settings", None), "user", "the target's user"))
        return CollectorError(
            f"collector db: {exc}: the Oracle statistics read v$instance, v$sysstat, "
            f"v$system_event, v$event_histogram and v$iostat_function ({GRANT.format(user=user)}, "
            "or SELECT_CATALOG_ROLE, or SELECT on each v_$ view)"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": "oracle",
            "instance": self.database,
            "views": ["v$sysstat", "v$system_event", "v$event_histogram", "v$iostat_function"],
            "load": "one extra connection; five view queries per interval",
        }


def oracle_stats_collectors(target: Target, options: dict[str, Any]) -> list[Collector]:
    """Oracle's statistics collector (the oracle dialect record's ``stats_collectors``)."""
    return [OracleStatsCollector(target, capture=bool(options.get("capture")))]
