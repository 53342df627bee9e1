"""Issue #24, item 7: leftovers of the command line, each now exit 2 with one ``error:`` line
naming the field, and nothing created or changed.

* ``target.path`` of SQLite: an empty file someone else made is not adopted as a database; a
  directory, a FIFO, a symbolic link (looping, dangling, or to a real database) and a file
  that is not a database are refused before SQLite opens them (they were exit 3 with the
  driver's line, and the empty file became a database); ``drop`` on a database file that
  does not exist creates none, and no command leaves an empty one.
* ``target.schema_name`` on the PostgreSQL here: a system schema (``pg_toast``,
  ``pg_catalog``, ``information_schema`` — where a load used to succeed) or one that does not
  exist (``PUBLIC``: quoted, so not ``public``) is refused; nothing is created in it.
* a 5,000-character ``-o`` or ``target.path`` names its field (it was "unexpected OSError",
  exit 3); ``password_env: "X\\n"`` is refused on one line.

The FIFO case runs the real binary under a hang bound; the others run in process
(``dbsim_in_process``), with the CLI's exit code and lines.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_BAD_INPUT = 0, 2
HANG_TIMEOUT_S = 60.0
PG = "target: {kind: postgres, host: 127.0.0.1, port: 5432, database: test, user: postgres}\n"
NOT_A_DATABASE = b"name,value\nnot,sqlite\n"


def assert_refused(result: CliResult, field: str) -> str:
    """Exit 2 and exactly one line, ``error: <field>: …``; returns it."""
    text = result.stdout + result.stderr
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in text and "unexpected" not in text, result.describe()
    lines = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), result.describe()
    return lines[0]


def _entries(directory: Path) -> dict[str, tuple[int, int, int, bytes | str | None]]:
    found = {}
    for entry in sorted(directory.iterdir()):
        info = entry.lstat()
        content: bytes | str | None = None
        if stat.S_ISLNK(info.st_mode):
            content = os.readlink(entry)
        elif stat.S_ISREG(info.st_mode):
            content = entry.read_bytes()
        found[entry.name] = (info.st_mode, info.st_ino, info.st_size, content)
    return found


# --------------------------------------------------------------------------- SQLite target.path


def _empty(path: Path) -> Path:
    path.touch()
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


def _loop(path: Path) -> Path:
    path.symlink_to(path.name)
    return path


def _dangling(path: Path) -> Path:
    path.symlink_to(path.parent / "created-through-the-link.db")
    return path


def _link_to_database(path: Path) -> Path:
    real = path.parent / "real.db"
    with sqlite3.connect(real) as db:
        db.execute("CREATE TABLE mine (x)")
    db.close()
    path.symlink_to(real)
    return path


def _not_a_database(path: Path) -> Path:
    path.write_bytes(NOT_A_DATABASE)
    return path


SQLITE_CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty": (_empty, "is an empty file dbsim did not create"),
    "directory": (_directory, "is a directory, not a SQLite database"),
    "loop": (_loop, "is a symbolic link that loops"),
    "dangling": (_dangling, "is a symbolic link to nothing"),
    "link-to-database": (_link_to_database, "is a symbolic link; dbsim opens no database"),
    "not-a-database": (_not_a_database, "is not a SQLite database"),
}


@pytest.mark.parametrize("command", ["load", "run", "validate"])
@pytest.mark.parametrize("case", sorted(SQLITE_CASES))
def test_a_bad_sqlite_path_is_refused_naming_it(
    dbsim_in_process: InProcessDbsim, tmp_path: Path, case: str, command: str
) -> None:
    place = tmp_path / "place"
    place.mkdir()
    make, says = SQLITE_CASES[case]
    path = make(place / "db.sqlite")
    before = _entries(place)
    extra = ["--duration", "1", "-o", tmp_path / "runs"] if command == "run" else []
    result = dbsim_in_process(command, "--set", f"target.path={path}", *extra)
    line = assert_refused(result, "target.path")
    assert str(path) in line and says in line, line
    assert _entries(place) == before  # nothing created, nothing written
    assert not (tmp_path / "runs").exists()  # refused before a bundle


def test_a_fifo_as_the_sqlite_path_neither_blocks_nor_is_opened(
    dbsim: Dbsim, tmp_path: Path
) -> None:
    fifo = tmp_path / "db.sqlite"
    os.mkfifo(fifo)
    result = dbsim("load", "--set", f"target.path={fifo}", timeout=HANG_TIMEOUT_S)
    line = assert_refused(result, "target.path")
    assert line.endswith(f"{fifo} is a fifo, not a SQLite database"), line
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_drop_creates_no_database_file(dbsim_in_process: InProcessDbsim, tmp_path: Path) -> None:
    place = tmp_path / "place"
    place.mkdir()
    missing = place / "never.db"
    result = dbsim_in_process("drop", "--set", f"target.path={missing}")
    assert result.rc == EXIT_OK, result.describe()
    assert result.stdout == f"nothing to drop: target.path: {missing} does not exist\n"
    assert list(place.iterdir()) == []


def test_skip_load_never_leaves_an_empty_file_that_load_would_refuse(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    """``run --skip-load`` connects to say which tables are missing, which creates the file;
    with ``journal_mode: delete`` SQLite left it empty, and the next ``load`` refused it as
    someone else's. dbsim now creates a database with its header, under another name first."""
    place = tmp_path / "place"
    place.mkdir()
    path = place / "later.db"
    sets = ["--set", f"target.path={path}", "--set", "target.journal_mode=delete"]
    result = dbsim_in_process("run", "--skip-load", "--duration", "1", "-o", tmp_path / "r", *sets)
    assert "missing slob_1_cf1" in assert_refused(result, "--skip-load")
    with path.open("rb") as db:
        assert db.read(16) == b"SQLite format 3\x00"
    result = dbsim_in_process("load", *sets)
    assert result.rc == EXIT_OK, result.describe()


def test_a_new_database_is_created_and_dropped_as_before(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    place = tmp_path / "place"
    place.mkdir()
    path = place / "mine.db"
    result = dbsim_in_process("load", "--set", f"target.path={path}")
    assert result.rc == EXIT_OK, result.describe()
    with path.open("rb") as db:
        assert db.read(16) == b"SQLite format 3\x00"
    assert [p.name for p in place.iterdir()] == ["mine.db"]  # no temporary name left
    result = dbsim_in_process("drop", "--set", f"target.path={path}")
    assert result.rc == EXIT_OK and result.stdout.startswith("dropped: "), result.describe()


# --------------------------------------------------------------------------- PostgreSQL schema


async def _tables_named_dbsim(schema: str) -> list[str]:
    conn = await asyncpg.connect(host="127.0.0.1", port=5432, user="postgres", database="test")
    try:
        rows = await conn.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = $1 AND (c.relname LIKE 'dbsim%' OR c.relname LIKE 'slob%')",
            schema,
        )
    finally:
        await conn.close()
    return sorted(row[0] for row in rows)


SCHEMAS = {
    "pg_toast": "pg_toast is a PostgreSQL system schema",
    "pg_catalog": "pg_catalog is a PostgreSQL system schema",
    "information_schema": "information_schema is a PostgreSQL system schema",
    "PUBLIC": "schema PUBLIC does not exist in database test (dbsim quotes the name, so "
    "PostgreSQL does not fold its case: public exists)",
    "dbsim_no_such_schema": "schema dbsim_no_such_schema does not exist in database test",
}


@pytest.mark.parametrize("command", ["load", "drop", "run"])
@pytest.mark.parametrize("schema", sorted(SCHEMAS))
def test_a_system_or_missing_schema_is_refused_naming_it(
    dbsim_in_process: InProcessDbsim, tmp_path: Path, schema: str, command: str
) -> None:
    scenario = tmp_path / "pg.yaml"
    scenario.write_text(PG + "workload: {name: slob}\n", encoding="utf-8")
    extra = ["--duration", "1", "-o", tmp_path / "runs"] if command == "run" else []
    before = asyncio.run(_tables_named_dbsim(schema))
    result = dbsim_in_process(command, scenario, "--set", f"target.schema_name={schema}", *extra)
    line = assert_refused(result, "target.schema_name")
    assert SCHEMAS[schema] in line, line
    assert asyncio.run(_tables_named_dbsim(schema)) == before == []
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- lengths, names


LONG = "a" * 5000


def test_a_5000_character_output_path_names_its_field(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    place = tmp_path / "place"
    place.mkdir()
    for args in (["run", "--duration", "1", "-o"], ["validate", "-o"]):
        result = dbsim_in_process(*args, f"{place}/{LONG}")
        line = assert_refused(result, "output.directory")
        assert "a path of 5,0" in line and "the system takes at most 4,095" in line, line
    result = dbsim_in_process("load", "--set", f"target.path={place}/{LONG}")
    assert "the system takes at most 4,095" in assert_refused(result, "target.path")
    result = dbsim_in_process("validate", "--set", f"target.path={place}/{'b' * 300}.db")
    assert "a name of 303 bytes" in assert_refused(result, "target.path")
    assert list(place.iterdir()) == []


def test_a_password_env_with_a_newline_is_one_line(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    scenario = tmp_path / "pg.yaml"
    scenario.write_text(
        PG.replace("user: postgres}", 'user: postgres, password_env: "X\\n"}')
        + "workload: {name: slob}\n",
        encoding="utf-8",
    )
    for command in ("validate", "load"):
        line = assert_refused(dbsim_in_process(command, scenario), "target.password_env")
        assert "must be the NAME of an environment variable" in line, line
