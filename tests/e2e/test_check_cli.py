"""``dbsim check`` on the servers here, as a child process: every check ✓ on PostgreSQL, MariaDB
and SQLite as they are set up here; each ✗ from a real cause — a PostgreSQL role created
without CREATE on its schema (the printed GRANT, run as given, then lets the load pass), and a
table that fits in the engine's cache (SQLite with a page cache larger than the table, a cache
no other test shares). Every run leaves no table of its scratch prefix behind.

The reads line holds physical reads per read against half of WORK_UNIT − 1 with the table four
times the server's cache: other tests sharing the server's cache only add misses, so the ✓
holds beside them (a count ratio, not a rate: no timing marker)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import CliResult, Dbsim

pytestmark = pytest.mark.e2e
PG = ["-h", "127.0.0.1", "-U", "postgres"]
CHECKS = [
    "connect",
    "load",
    "one row per block",
    "statistics views",
    "reads reach the storage",
    "drop",
]
LINE = re.compile(r"^(?P<mark>[\u2713\u2717]) (?P<name>[^:]+): (?P<text>.*)$")


def psql(database: str, sql: str) -> str:
    done = subprocess.run(
        ["psql", *PG, "-d", database, "-AtXqc", sql], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"!!! NOT RUN: PostgreSQL on 127.0.0.1:5432 refused: {done.stderr.strip()}")
    return done.stdout


def mariadb(sql: str) -> str:
    done = subprocess.run(
        ["mysql", "-h127.0.0.1", "-uroot", "-N", "-e", sql], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"!!! NOT RUN: MariaDB refused: {done.stderr.strip()}")
    return done.stdout


def lines_of(result: CliResult) -> dict[str, tuple[bool, str]]:
    """Each line's check name → (✓, the rest); every stdout line must be a check line."""
    found: dict[str, tuple[bool, str]] = {}
    for line in result.stdout.splitlines():
        match = LINE.match(line)
        assert match, f"not a check line: {line!r}\n{result.describe()}"
        found[match["name"]] = (match["mark"] == "\u2713", match["text"])
    return found


def prefix_of(lines: dict[str, tuple[bool, str]]) -> str:
    match = re.search(r"into (chk[0-9a-f]{8})_1_cf1", lines["load"][1])
    assert match, lines["load"]
    return match[1]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def pg_scenario(tmp_path: Path, user: str = "postgres", database: str = "test") -> Path:
    return write(
        tmp_path / "pg.yaml",
        "name: check-pg\ntarget:\n  kind: postgres\n  host: 127.0.0.1\n  port: 5432\n"
        f"  user: {user}\n  database: {database}\nworkload:\n  name: slob\n",
    )


def test_postgres_every_check_passes(dbsim: Dbsim, tmp_path: Path) -> None:
    psql("test", "SELECT 1")
    done = dbsim("check", pg_scenario(tmp_path), "--duration", "5")
    lines = lines_of(done)
    assert done.rc == 0, done.describe()
    assert set(CHECKS) <= set(lines) and all(ok for ok, _ in lines.values()), done.stdout
    # validate --connect's privileges (sim.connect_check), then the check's own.
    assert "privilege CREATE on the schema" in lines
    assert "privilege SELECT, INSERT, UPDATE, DELETE on public.dbsim_registry" in lines
    assert lines["connect"][1].startswith("postgres at 127.0.0.1:5432/test as postgres: SELECT 1")
    # Sized from shared_buffers: four times it, in 8 KiB rows, one per block by ctid.
    buffers = int(psql("test", "SELECT pg_size_bytes(current_setting('shared_buffers'))"))
    rows = max(4 * buffers // 8192, 10_000)
    assert (
        f"{rows:,} rows on {rows:,} pages, at most 1 a page, by ctid"
        in (lines["one row per block"][1])
    )
    per_read = float(lines["reads reach the storage"][1].split()[0])
    reads = int(lines["reads reach the storage"][1].split(", ")[1].split()[0].replace(",", ""))
    # At most WORK_UNIT - 1 a read, plus the check's own verify scan (one read of each page)
    # when its counters land in the window: PostgreSQL publishes an idle backend's counters
    # up to 10 s late (PGSTAT_IDLE_INTERVAL after a report that came too soon). Seen in a CI
    # run's parallel phase: 71.5 a read, 5,634 reads, 65,536 pages (63 + 11.6); 10 % more
    # for the index's blocks. (dbsim check should settle them before its window: not yet.)
    assert 31.5 <= per_read <= 1.1 * (63 + rows / reads), lines["reads reach the storage"]
    prefix = prefix_of(lines)
    assert psql("test", f"SELECT count(*) FROM pg_class WHERE relname LIKE '{prefix}%'") == "0\n"
    assert done.stderr == ""


def test_mariadb_every_check_passes(dbsim: Dbsim, tmp_path: Path) -> None:
    mariadb("SELECT 1")
    scenario = write(
        tmp_path / "my.yaml",
        "name: check-my\ntarget:\n  kind: mysql\n  host: 127.0.0.1\n  port: 3306\n"
        "  user: root\n  database: test\nworkload:\n  name: slob\n",
    )
    done = dbsim("check", scenario, "--duration", "5", timeout=300)
    lines = lines_of(done)
    assert done.rc == 0, done.describe()
    assert all(ok for ok, _ in lines.values()), done.stdout
    assert "privilege SELECT on mysql.innodb_index_stats" in lines
    assert "at most 2 a page" in lines["one row per block"][1]  # InnoDB's least, 16 KiB
    prefix = prefix_of(lines)
    left = mariadb(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
        f"AND TABLE_NAME LIKE '{prefix}%'"
    )
    assert left.strip() == "0"


def test_sqlite_default_every_check_passes(dbsim: Dbsim, child_tmp: Path) -> None:
    done = dbsim("check", "--duration", "3")
    lines = lines_of(done)
    assert done.rc == 0, done.describe()
    assert all(ok for ok, _ in lines.values()), done.stdout
    assert lines["privileges"][1].startswith("none: SQLite has no accounts")
    assert "by dbstat" in lines["one row per block"][1]
    assert list(child_tmp.iterdir()) == []  # the temporary database went with the run


def test_sqlite_table_in_the_cache_is_a_cross_with_the_fix(dbsim: Dbsim, tmp_path: Path) -> None:
    # 256 MiB of SQLite page cache per connection against a 78 MiB table: after each
    # session's first touch of a page (at most 10,000 + the index's), every read is served
    # from memory; one session doing at least ~320 reads (it does thousands a second) brings
    # the ratio under 31.5.
    database = tmp_path / "check.sqlite"
    scenario = write(
        tmp_path / "lite.yaml",
        f"name: check-lite\ntarget:\n  kind: sqlite\n  path: {database}\n"
        "  cache_size_kib: 262144\nworkload:\n  name: slob\n",
    )
    args = ("check", scenario, "--rows", "10000", "--sessions", "1", "--duration", "5")
    done = dbsim(*args)
    lines = lines_of(done)
    assert done.rc == 2, done.describe()
    failed = [name for name, (ok, _) in lines.items() if not ok]
    assert failed == ["reads reach the storage"], done.stdout
    text = lines["reads reach the storage"][1]
    assert "the cache served them: the table (78 MiB) is under 4 x cache_size (256 MiB)" in text
    assert text.endswith("fix: --rows 131072 (or a smaller cache)")
    assert lines["drop"][0]


@pytest.fixture
def pg_role() -> Iterator[tuple[str, str]]:
    """A login role with no privilege beyond PUBLIC's, and a scratch database of postgres's
    (PostgreSQL 15+: PUBLIC may use its public schema, not create in it)."""
    suffix = uuid.uuid4().hex[:8]
    role, database = f"check_role_{suffix}", f"check_db_{suffix}"
    psql("postgres", f"CREATE ROLE {role} LOGIN")
    psql("postgres", f"CREATE DATABASE {database}")
    try:
        yield role, database
    finally:
        psql("postgres", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        psql("postgres", f"DROP ROLE IF EXISTS {role}")


def test_postgres_role_without_create_gets_the_grant(
    dbsim: Dbsim, tmp_path: Path, pg_role: tuple[str, str]
) -> None:
    role, database = pg_role
    scenario = pg_scenario(tmp_path, role, database)
    refused = dbsim("check", scenario, "--set", f"target.user={role}", "--rows", "10000")
    lines = lines_of(refused)
    assert refused.rc == 2, refused.describe()
    ok, text = lines["privilege CREATE on the schema"]
    assert not ok and text.endswith(f"fix: GRANT CREATE ON SCHEMA public TO {role}"), text
    grant = text.split("fix: ", 1)[1]
    assert lines["privilege USAGE on schema public"][0]
    # An optional one is a tick with its GRANT, and does not fail the check.
    ok, text = lines["privilege reading server settings"]
    assert ok and text.endswith(f"to have it: GRANT pg_read_all_settings TO {role}"), text
    failed = [name for name, (ok, _) in lines.items() if not ok]
    assert failed == ["privilege CREATE on the schema", *CHECKS[1:-1]], refused.stdout
    for name in CHECKS[1:-1]:
        assert lines[name] == (False, "not run: grant the missing privileges first")
    assert lines["drop"] == (True, "nothing was created")
    assert psql(database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0\n"
    # The fix as printed, run by the database's owner, is all the role lacked.
    psql(database, grant)
    done = dbsim("check", scenario, "--rows", "10000", "--duration", "2")
    lines = lines_of(done)
    for name in ("connect", "privilege CREATE on the schema", "load", "one row per block"):
        assert lines[name][0], done.describe()
    assert lines["drop"] == (True, "dropped " + prefix_of(lines) + "_1_cf1, dbsim_registry")
    assert psql(database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0\n"


def test_a_file_tree_target_is_refused_in_one_line(dbsim: Dbsim, tmp_path: Path) -> None:
    scenario = write(
        tmp_path / "tree.yaml",
        f"name: tree\ntarget:\n  kind: filetree\n  path: {tmp_path / 'tree'}\n"
        "workload:\n  name: eda\n",
    )
    done = dbsim("check", scenario)
    assert done.rc == 2, done.describe()
    assert done.stdout == ""
    assert done.stderr.startswith("error: dbsim check: no first-contact checks for a filetree")
    assert len(done.stderr.splitlines()) == 1


def test_ctrl_c_drops_what_was_loaded(dbsim: Dbsim, tmp_path: Path) -> None:
    psql("test", "SELECT 1")
    proc = dbsim.start("check", pg_scenario(tmp_path), "--rows", "10000", "--duration", "60")
    assert proc.stdout is not None
    seen = []
    while not seen or not seen[-1].startswith("\u2713 one row per block"):
        line = proc.stdout.readline()
        assert line, f"the check ended before its reads: {seen}"
        seen.append(line.rstrip("\n"))
    proc.send_signal(signal.SIGINT)  # during the 60 s of reads
    done = dbsim.finish(proc, timeout=60)
    assert done.rc == 130, done.describe()
    lines = lines_of(CliResult(done.args, done.rc, "\n".join(seen) + "\n" + done.stdout, ""))
    assert lines["drop"] == (True, f"dropped {prefix_of(lines)}_1_cf1"), done.stdout
    assert "statistics views" not in lines  # cut short: no verdict on the reads
    assert done.stderr.splitlines() == [
        "error: interrupted: what the check had loaded was dropped (see the drop line)"
    ]
    prefix = prefix_of(lines)
    assert psql("test", f"SELECT count(*) FROM pg_class WHERE relname LIKE '{prefix}%'") == "0\n"


def test_a_closed_port_is_the_connect_cross_and_nothing_else_runs(
    dbsim: Dbsim, tmp_path: Path
) -> None:
    with socket.socket() as probe:  # a port nothing listens on: taken free, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = dbsim("check", pg_scenario(tmp_path), "--set", f"target.port={port}")
    lines = lines_of(done)
    assert done.rc == 2, done.describe()
    ok, text = lines["connect"]
    assert not ok and f"127.0.0.1:{port}" in text and "Connection refused" in text, text
    for name in ("privileges", *CHECKS[1:-1]):
        assert lines[name] == (False, "not run: no connection")
    assert lines["drop"] == (True, "nothing was created")
