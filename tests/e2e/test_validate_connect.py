"""``dbsim validate --connect`` connects, for every kind (issue #28): exit 0 only after a real
round trip where a server answers (PostgreSQL, MariaDB, SQLite, ODBC to PostgreSQL here), exit
2 with host, port and the driver's own message, never the password, where none does: Oracle
and ODBC at a closed port, SQL Server with a driver that does not exist, and a listener that
speaks no TNS/TDS (it accepts and closes, or sends garbage). Each failing kind runs once in
process and once through the binary; the listener is a thread of this test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim

PASSWORD_ENV = "DBSIM_TEST_CONNECT_PASSWORD"
PASSWORD = "pw-4Kq9-never-shown"
POSTGRES = {"kind": "postgres", "host": "127.0.0.1", "port": 5432, "database": "test"}
MARIADB = {"kind": "mysql", "host": "127.0.0.1", "port": 3306, "database": "test", "user": "root"}
ODBC_PG = {"kind": "odbc", "driver": "PostgreSQL Unicode", "database": "test", "port": 5432}
EXIT_OK, EXIT_BAD_INPUT = 0, 2


def closed_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A TCP listener that accepts and then says nothing, holding every connection open."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@contextlib.contextmanager
def mute_listener(reply: bytes) -> Iterator[int]:
    """A TCP listener that speaks neither TNS nor TDS: each connection gets ``reply`` (maybe
    nothing) and is closed."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def scenario(directory: Path, name: str, target: dict[str, Any]) -> Path:
    path = directory / f"{name}.yaml"
    data = {"name": name, "target": target, "workload": {"name": "slob"}}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def connect(runner: Dbsim, name: str, target: dict[str, Any]) -> CliResult:
    path = scenario(runner.cwd, name, {**target, "password_env": PASSWORD_ENV})
    return runner("validate", path, "--connect", env={PASSWORD_ENV: PASSWORD}, timeout=120)


def refused(result: CliResult, *named: str) -> str:
    """Exit 2, one error line naming everything in ``named``, no password, no traceback."""
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    for word in named:
        assert word in errors[0], (word, result.describe())
    assert PASSWORD not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == "", result.describe()
    return errors[0]


# --------------------------------------------------------------------------- no server answers


@pytest.mark.parametrize("runner_kind", ["in_process", "binary"])
def test_oracle_at_a_closed_port(
    runner_kind: str, dbsim: Dbsim, dbsim_in_process: InProcessDbsim
) -> None:
    runner = dbsim if runner_kind == "binary" else dbsim_in_process
    port = closed_port()
    line = refused(connect(runner, "ora", {"kind": "oracle", "port": port}), f"127.0.0.1:{port}")
    # python-oracledb's own words: DPY-6005 wrapping the refusal.
    assert "DPY-6005" in line and "refused" in line.lower(), line


@pytest.mark.parametrize("runner_kind", ["in_process", "binary"])
def test_sqlserver_with_a_driver_that_does_not_exist(
    runner_kind: str, dbsim: Dbsim, dbsim_in_process: InProcessDbsim
) -> None:
    runner = dbsim if runner_kind == "binary" else dbsim_in_process
    target = {"kind": "sqlserver", "driver": "No Such Driver 99", "port": 14333}
    line = refused(connect(runner, "mssql", target), "127.0.0.1:14333", "No Such Driver 99")
    assert "Can't open lib" in line and "odbcinst -q -d" in line, line


@pytest.mark.parametrize("runner_kind", ["in_process", "binary"])
def test_odbc_at_a_closed_port(
    runner_kind: str, dbsim: Dbsim, dbsim_in_process: InProcessDbsim
) -> None:
    runner = dbsim if runner_kind == "binary" else dbsim_in_process
    port = closed_port()
    line = refused(connect(runner, "odbc", {**ODBC_PG, "port": port}), f"127.0.0.1:{port}")
    assert "SQLSTATE 08001" in line and "Connection refused" in line, line


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.0 400 Bad Request\r\n\r\n" * 8])
def test_oracle_at_a_listener_that_speaks_no_tns(
    reply: bytes, dbsim_in_process: InProcessDbsim
) -> None:
    with mute_listener(reply) as port:
        result = connect(dbsim_in_process, "mute", {"kind": "oracle", "port": port})
    line = refused(result, f"127.0.0.1:{port}")
    assert "DPY-" in line, line


def test_oracle_at_a_listener_that_never_answers_is_bounded(dbsim: Dbsim) -> None:
    """A thin-mode login to a listener that accepts and says nothing waited forever (the
    pool's close waited on it): now the pool's wait ends it and the close is bounded."""
    with silent_listener() as port:
        target = {"kind": "oracle", "port": port, "connect_timeout_s": 1}
        line = refused(connect(dbsim, "silent", target), f"127.0.0.1:{port}")
    assert "DPY-4005" in line and "login did not complete" in line, line


@pytest.mark.parametrize("reply", [b"", b"\x04\x01\x00\x2b garbage, not a pre-login" * 4])
def test_odbc_at_a_listener_that_speaks_nothing_it_knows(
    reply: bytes, dbsim_in_process: InProcessDbsim
) -> None:
    with mute_listener(reply) as port:
        result = connect(dbsim_in_process, "mute", {**ODBC_PG, "port": port})
    line = refused(result, f"127.0.0.1:{port}")
    assert "SQLSTATE 08001" in line, line


def test_oracle_thick_mode_without_client_libraries(dbsim: Dbsim, tmp_path: Path) -> None:
    """Through the binary: the client libraries load once per process, and a failed load
    must not touch the thin-mode tests beside it."""
    target = {"kind": "oracle", "port": closed_port(), "driver_mode": "thick"}
    line = refused(connect(dbsim, "thick", {**target, "lib_dir": str(tmp_path)}), "DPI-1047")
    assert "install Oracle Instant Client" in line and "127.0.0.1:" in line, line


def test_a_wrong_password_is_refused_without_showing_it(dbsim_in_process: InProcessDbsim) -> None:
    """MariaDB checks the password (root here has none, so any is wrong over TCP)."""
    line = refused(connect(dbsim_in_process, "badpw", MARIADB), "127.0.0.1:3306")
    assert "Access denied" in line, line


# --------------------------------------------------------------------------- a server answers


@pytest.mark.parametrize(
    ("target", "version_word"),
    [(POSTGRES, "server "), (ODBC_PG, "server "), ({"kind": "sqlite"}, "server 3.")],
    ids=["postgres", "odbc-postgres", "sqlite"],
)
def test_exit_0_after_a_round_trip_and_the_privileges(
    target: dict[str, Any], version_word: str, dbsim_in_process: InProcessDbsim
) -> None:
    path = scenario(dbsim_in_process.cwd, "ok", target)
    result = dbsim_in_process("validate", path, "--connect")
    assert result.rc == EXIT_OK, result.describe()
    assert "SELECT 1 answered" in result.stderr and version_word in result.stderr
    if target["kind"] != "sqlite":
        assert "✓ CREATE on the schema" in result.stderr, result.describe()
    assert "✗" not in result.stderr, result.describe()


def test_mariadb_round_trip_and_privileges(dbsim_in_process: InProcessDbsim) -> None:
    target = {k: v for k, v in MARIADB.items()}
    result = dbsim_in_process(
        "validate", scenario(dbsim_in_process.cwd, "maria", target), "--connect"
    )
    assert result.rc == EXIT_OK, result.describe()
    for privilege in ("CREATE", "DROP", "ALTER", "INDEX", "SELECT", "INSERT", "UPDATE"):
        assert f"✓ {privilege} (" in result.stderr, result.describe()
    assert "MariaDB" in result.stderr, result.describe()


@pytest.fixture
def role_without_create() -> Iterator[str]:
    """A PostgreSQL login of its own with no CREATE on ``test``'s public schema (PostgreSQL 15
    grants it to nobody but the owner by default; revoked from PUBLIC as well, to be sure)."""
    name = f"dbsim_ut_noprivs_{os.getpid()}"

    async def admin(*sql: str) -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=5432, user="postgres", database="test")
        try:
            for statement in sql:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(admin(f"DROP ROLE IF EXISTS {name}", f"CREATE ROLE {name} LOGIN"))
    try:
        yield name
    finally:
        asyncio.run(admin(f"DROP ROLE IF EXISTS {name}"))


def test_a_missing_privilege_is_exit_2_with_its_grant(
    role_without_create: str, dbsim_in_process: InProcessDbsim
) -> None:
    target = {**POSTGRES, "user": role_without_create}
    result = dbsim_in_process("validate", scenario(dbsim_in_process.cwd, "np", target), "--connect")
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "✗ CREATE on the schema" in result.stderr, result.describe()
    fix = f"GRANT CREATE ON SCHEMA public TO {role_without_create}"
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1 and fix in errors[0], result.describe()


def test_a_file_tree_opens_a_session(dbsim_in_process: InProcessDbsim, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    path = dbsim_in_process.cwd / "tree.yaml"
    data = {"name": "tree", "target": {"kind": "filetree", "path": str(tree)}}
    path.write_text(yaml.safe_dump({**data, "workload": {"name": "eda"}}), encoding="utf-8")
    result = dbsim_in_process("validate", path, "--connect")
    assert result.rc == EXIT_OK, result.describe()
    assert f"✓ filetree at {tree}: a session opened and closed" in result.stderr
    assert list(tree.iterdir()) == [], "validate --connect wrote into the tree"
