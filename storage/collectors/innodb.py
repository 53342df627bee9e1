"""The ``db`` collector of MariaDB and MySQL: InnoDB's status counters as rates per second.

MariaDB/MySQL's dialect record names it (``storage.targets.mysql_record``'s ``stats_collectors``);
it reads ``information_schema.GLOBAL_STATUS``, which any account may read, plus
performance_schema's file waits where that schema is on. A live capture's collector
(``capture``) also counts the sessions running a statement (``active_sessions``) from the
process list, which shows other accounts' sessions only to an account with PROCESS: it
refuses to start without it (``dbsim capture`` then exits 2 naming the grant).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Sample, SqlConnection, Statement, Target, connect_sql
from storage.collectors.database_io import innodb_vocabulary

#: SHOW GLOBAL STATUS counters sampled (cumulative since the server started).
INNODB_COUNTERS = {
    # Named as PostgreSQL's database figure (pages read from storage), which the analysis
    # correlates with latency for the db source.
    "Innodb_buffer_pool_reads": "blks_read_s",
    "Innodb_buffer_pool_read_requests": "buffer_pool_read_requests_s",
    "Innodb_data_reads": "data_reads_s",
    "Innodb_data_writes": "data_writes_s",
    "Innodb_data_read": "data_read_bytes_s",
    "Innodb_data_written": "data_written_bytes_s",
    "Innodb_log_writes": "log_writes_s",
    "Innodb_os_log_written": "log_written_bytes_s",
    # Every engine commit, autocommitted statements included (the importer of MariaDB's status,
    # sim.imports, reads the same counter).
    "Handler_commit": "handler_commits_s",
}
STATUS_SQL = (
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME IN (" + ", ".join(f"'{name.upper()}'" for name in INNODB_COUNTERS) + ")"
)
#: performance_schema file I/O waits on InnoDB's data files (when performance_schema is on).
FILE_WAITS_SQL = (
    "SELECT COALESCE(SUM(COUNT_READ), 0), COALESCE(SUM(SUM_TIMER_READ), 0) "
    "FROM performance_schema.file_summary_by_event_name "
    "WHERE EVENT_NAME = 'wait/io/file/innodb/innodb_data_file'"
)
PICOSECONDS_PER_MS = 1e9
#: Live captures: other sessions running a statement at the interval's end.
ACTIVE_SESSIONS_SQL = (
    "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
    "WHERE COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump') AND ID <> CONNECTION_ID()"
)
#: Read only with PROCESS (error 1227 otherwise), the privilege that also shows every
#: account's sessions in the process list: how a capture tells it has it.
PROCESS_PROBE_SQL = "SELECT NAME FROM information_schema.INNODB_METRICS LIMIT 1"
ACCESS_DENIED_CODES = frozenset({1227, 1044, 1142})


def _is_sql(conn: object) -> bool:
    # Told by what it offers: the driver's connection class lives in storage.targets.mysql,
    # which imports this module.
    return isinstance(conn, SqlConnection) and callable(getattr(conn, "rows", None))


class InnodbStatsCollector(Collector):
    """InnoDB's buffer pool, data file and redo log counters as rates per second (entity: the
    database), plus performance_schema's file read waits where it is enabled.

    Load on the target: one extra connection running one information_schema query (and one
    performance_schema query when enabled, one process-list count in a capture) per
    interval. The counters are server-wide, so another client's reads count too.
    """

    source: ClassVar[str] = "db"

    def __init__(self, target: Target, capture: bool = False) -> None:
        self.target = target
        self.capture = capture
        self._conn: Any = None
        self._waits = False
        self._prev: dict[str, float] | None = None
        self._prev_now: float | None = None

    async def start(self, now: float) -> None:
        conn = await connect_sql(self.target)
        if not _is_sql(conn):
            await conn.close()
            raise CollectorError("collector db: the target's connection is not asyncmy's")
        self._conn = conn
        try:
            if self.capture:
                await self._check_process(conn)
            enabled = await conn.scalar(Statement("ps", "SELECT @@performance_schema", ()))
            self._waits = bool(int(enabled or 0))
            self._prev, self._prev_now = await self._read(), now
        except Exception:
            await self.stop()
            raise

    async def _check_process(self, conn: Any) -> None:
        try:
            await conn.rows(Statement("process_probe", PROCESS_PROBE_SQL, ()))
        except Exception as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            code = cause.args[0] if getattr(cause, "args", None) else None
            if code not in ACCESS_DENIED_CODES:
                raise
            user = getattr(getattr(self.target, "settings", None), "user", "the target's user")
            raise CollectorError(
                f"collector db: {user} has no PROCESS privilege, so the process list shows "
                "only its own sessions and active_sessions would count nothing of the "
                f"application's: GRANT PROCESS ON *.* TO {user}"
            ) from exc

    async def _read(self) -> dict[str, float]:
        conn = self._conn
        if conn is None:
            raise CollectorError("collector db: sample() called before start()")
        rows = await conn.rows(Statement("innodb_status", STATUS_SQL, ()))
        by_upper = {str(r["VARIABLE_NAME"]).upper(): float(r["VARIABLE_VALUE"]) for r in rows}
        values = {
            name: by_upper[name.upper()] for name in INNODB_COUNTERS if name.upper() in by_upper
        }
        if self._waits:
            row = (await conn.rows(Statement("file_waits", FILE_WAITS_SQL, ())))[0]
            count, timer = (float(v or 0) for v in row.values())
            values["file_reads"], values["file_read_wait_ps"] = count, timer
        if self.capture:
            active = await conn.scalar(Statement("active", ACTIVE_SESSIONS_SQL, ()))
            values["now_active_sessions"] = float(active or 0)
        await conn.rollback()
        return values

    async def sample(self, now: float) -> list[Sample]:
        if self._conn is None:
            await self.start(now)
            return []
        if self._prev is None or self._prev_now is None:
            raise CollectorError("collector db: sample() called before start()")
        interval = now - self._prev_now
        if not interval > 0:
            raise CollectorError(f"collector db: clock did not advance ({self._prev_now} -> {now})")
        curr = await self._read()
        prev, self._prev, self._prev_now = self._prev, curr, now
        counters = [name for name in INNODB_COUNTERS if name in curr and name in prev]
        if any(curr[k] < prev[k] for k in counters):
            await self.stop()  # the server restarted: take a fresh baseline next time
            return []
        values = {INNODB_COUNTERS[name]: (curr[name] - prev[name]) / interval for name in counters}
        values.update(innodb_vocabulary(values))
        requests = values.get("buffer_pool_read_requests_s", 0.0) * interval
        misses = values.get("blks_read_s", 0.0) * interval
        values["cache_hit_pct"] = 100.0 * (1 - misses / requests) if requests > 0 else 0.0
        if "file_reads" in curr:
            reads = curr["file_reads"] - prev["file_reads"]
            wait_ms = (curr["file_read_wait_ps"] - prev["file_read_wait_ps"]) / PICOSECONDS_PER_MS
            values["file_reads_s"] = reads / interval
            values["file_read_wait_ms_per_read"] = wait_ms / reads if reads > 0 else 0.0
        if "now_active_sessions" in curr:
            values["active_sessions"] = curr["now_active_sessions"]
        values["interval_s"] = interval
        entity = self.target.settings.database  # type: ignore[attr-defined]
        return [Sample(self.source, str(entity), values, t=now, meta={"kind": "database"})]

    async def stop(self) -> None:
        conn, self._conn = self._conn, None
        self._prev = self._prev_now = None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        """InnoDB pages read from storage per read statement (buffer pool misses) and the
        buffer pool's hit share over the measured window."""
        reads = sum(m.get("blks_read_s", 0.0) for m in means.values()) * measured_s
        requests = sum(m.get("buffer_pool_read_requests_s", 0.0) for m in means.values())
        requests *= measured_s
        facts: dict[str, Any] = {
            "tables_blocks_read": round(reads, 1),
            "tables_cache_hit_pct": round(100.0 * (1 - reads / requests), 2) if requests else None,
        }
        if op_counts.get("read"):
            facts["physical_reads_per_read"] = round(reads / op_counts["read"], 2)
        hit = facts["tables_cache_hit_pct"]
        warnings = []
        if hit is not None and hit > 50.0:
            warnings.append(
                f"the InnoDB buffer pool served {hit:.1f} % of page requests: most reads never "
                "reached storage; use a data set several times larger than the buffer pool"
            )
        return facts, warnings

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": "mysql",
            "performance_schema_file_waits": self._waits,
            "load": "one extra connection; one or two status queries per interval"
            + ("; one process-list count" if self.capture else ""),
        }
