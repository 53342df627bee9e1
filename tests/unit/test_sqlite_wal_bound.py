"""The SQLite target keeps its write-ahead log near ``target.wal_limit_bytes``.

Sessions that read all the time starve SQLite's passive checkpoint: the log never starts
again and grows without end (1.35 GB in 14 s on a netns test host, until its disk was full).
These tests drive the mechanism step by step on real SQLite files, in one thread: a reader
that holds an old snapshot makes the log outgrow the bound (nothing can prevent that while it
reads); once it is gone, the next commit past the bound restarts the log, and the one after
cuts the file back to the bound."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from storage.targets.settings import SqliteSettings
from storage.targets.sqlite import SqliteTarget, WalBound

LIMIT = 256 * 1024
ROW = b"x" * 6000


def _open(path: Path, limit: int) -> sqlite3.Connection:
    raw = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    settings = SqliteSettings(path=path, wal_limit_bytes=limit, busy_timeout_ms=100)
    SqliteTarget(settings)._prepare(raw)
    return raw


def _write(raw: sqlite3.Connection, rows: int, bound: WalBound | None) -> None:
    for _ in range(rows):
        raw.execute("BEGIN")
        raw.execute("INSERT INTO t(b) VALUES (?)", (ROW,))
        raw.execute("COMMIT")
        if bound is not None:
            bound.after_commit(raw)


def _wal_size(path: Path) -> int:
    return os.stat(path.with_name(path.name + "-wal")).st_size


def _grown_past_the_bound(tmp_path: Path, limit: int) -> tuple[Path, sqlite3.Connection, WalBound]:
    path = tmp_path / "db.sqlite"
    writer = _open(path, limit)
    writer.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)")
    bound = WalBound(path.with_name(path.name + "-wal"), LIMIT, check_every_s=0.0)
    reader = _open(path, limit)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()  # holds the snapshot of frame 0..n
    _write(writer, 200, None)  # ~1.2 MB of frames the reader may still need
    assert _wal_size(path) > 4 * LIMIT
    _write(writer, 1, bound)  # past the bound, but the reader holds the log: busy, no restart
    assert bound.restarts == 0
    reader.execute("COMMIT")
    reader.close()
    return path, writer, bound


def test_the_log_starts_again_and_is_cut_back_once_no_reader_needs_it(tmp_path: Path) -> None:
    path, writer, bound = _grown_past_the_bound(tmp_path, LIMIT)
    _write(writer, 1, bound)  # past the bound, no reader: RESTART backfills the whole log
    assert bound.restarts == 1
    _write(writer, 1, bound)  # the next writer starts the log again, cut to journal_size_limit
    assert _wal_size(path) <= LIMIT
    assert writer.execute("SELECT count(*) FROM t").fetchone()[0] == 203
    writer.close()


def test_without_the_bound_the_file_keeps_its_high_water_mark(tmp_path: Path) -> None:
    """The control: SQLite's own behaviour (wal_limit_bytes 0) reuses the log from its start
    but never gives the space back; with readers that never pause it never even reuses it."""
    path, writer, _ = _grown_past_the_bound(tmp_path, 0)
    high = _wal_size(path)
    _write(writer, 2, None)
    assert _wal_size(path) >= high
    writer.close()


def test_no_bound_for_a_rollback_journal_or_a_zero_limit(tmp_path: Path) -> None:
    delete = SqliteTarget(SqliteSettings(path=tmp_path / "a.sqlite", journal_mode="delete"))
    zero = SqliteTarget(SqliteSettings(path=tmp_path / "b.sqlite", wal_limit_bytes=0))
    wal = SqliteTarget(SqliteSettings(path=tmp_path / "c.sqlite"))
    assert delete._wal_bound() is None and zero._wal_bound() is None
    shared = wal._wal_bound()
    assert shared is not None and shared is wal._wal_bound()  # one log, one bound
    assert shared.wal == tmp_path / "c.sqlite-wal" and shared.limit_bytes == 64 * 2**20
