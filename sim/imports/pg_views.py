"""``dbsim import pg-views``: snapshots of PostgreSQL's statistics views (14 to 16), as CSV
with a header, one row per snapshot: :data:`QUERY` run every N seconds (docs/capture.md,
"PostgreSQL statistics views").

Figures, each a difference of two snapshots over the seconds between them:

* ``phys_read_req_s`` = Δ``blks_read``: blocks the database read from the operating system
  (one ``block_size`` block per read call up to PostgreSQL 16; the OS page cache may have
  served them), ``phys_read_kB_s`` the same in kB, ``single_block_read_s`` the same count
  (every such read is of one block) and ``single_block_read_ms`` = Δ``blk_read_time`` /
  Δ``blks_read`` when ``track_io_timing`` is on;
* ``phys_write_req_s`` = Δ(``buffers_checkpoint`` + ``buffers_clean`` +
  ``buffers_backend``): blocks written by the checkpointer, the background writer and the
  backends, ``phys_write_kB_s`` the same in kB;
* ``log_write_req_s`` = Δ``wal_write``, ``log_write_kB_s`` = Δ``wal_bytes`` / 1024,
  ``log_write_ms`` = Δ``wal_write_time`` / Δ``wal_write`` when ``track_wal_io_timing`` is on,
  ``log_sync_s`` = Δ``wal_sync``;
* ``commits_s`` = Δ``xact_commit``.

A changed ``stats_reset`` of any of the three views, or a counter that went down, is a reset.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.imports.source import Parsed, SourceFile
from sim.imports.views import Counters, ViewFormat, mean_ms, parse_views, per_second

QUERY = """SELECT now() AS ts, d.datname,
       d.xact_commit, d.blks_read, d.blk_read_time,
       w.wal_bytes, w.wal_write, w.wal_sync, w.wal_write_time,
       b.buffers_checkpoint, b.buffers_clean, b.buffers_backend,
       current_setting('block_size') AS block_size,
       current_setting('track_io_timing') AS track_io_timing,
       current_setting('track_wal_io_timing') AS track_wal_io_timing,
       d.stats_reset AS database_stats_reset, w.stats_reset AS wal_stats_reset,
       b.stats_reset AS bgwriter_stats_reset
  FROM pg_stat_database AS d, pg_stat_wal AS w, pg_stat_bgwriter AS b
 WHERE d.datname = current_database()"""
"""One row of the current database's cumulative counters (PostgreSQL 14, 15, 16)."""

RATES = {
    "phys_read_req_s": ("blks_read", 1.0),
    "single_block_read_s": ("blks_read", 1.0),
    "log_write_req_s": ("wal_write", 1.0),
    "log_write_kB_s": ("wal_bytes", 1 / 1024),
    "log_sync_s": ("wal_sync", 1.0),
    "commits_s": ("xact_commit", 1.0),
}
WRITERS = ("buffers_checkpoint", "buffers_clean", "buffers_backend")


def figures(delta: Counters, seconds: float, row: Mapping[str, str]) -> dict[str, float]:
    out = per_second(delta, seconds, RATES)
    block_kb = float(row["block_size"]) / 1024  # checked a positive number (VIEW.numbers)
    if "blks_read" in delta:
        out["phys_read_kB_s"] = delta["blks_read"] * block_kb / seconds
    if all(name in delta for name in WRITERS):
        written = sum(delta[name] for name in WRITERS)
        out["phys_write_req_s"] = written / seconds
        out["phys_write_kB_s"] = written * block_kb / seconds
    # The times stay 0 while their setting is off: no timing, no figure.
    for setting, figure, time_ms, count in (
        ("track_io_timing", "single_block_read_ms", "blk_read_time", "blks_read"),
        ("track_wal_io_timing", "log_write_ms", "wal_write_time", "wal_write"),
    ):
        ms = mean_ms(delta, time_ms, count)
        if row.get(setting) == "on" and ms is not None:
            out[figure] = ms
    return out


VIEW = ViewFormat(
    name="pg-views",
    time_column="ts",
    entity_column="datname",
    counters=("xact_commit", "blks_read"),
    optional=("blk_read_time", "wal_bytes", "wal_write", "wal_sync", "wal_write_time", *WRITERS),
    resets=("database_stats_reset", "wal_stats_reset", "bgwriter_stats_reset"),
    numbers=("block_size",),
    figures=figures,
)


def parse(files: list[SourceFile]) -> Parsed:
    return parse_views(VIEW, files)
