"""Issue #33: a stop asked while MariaDB sessions connect ends the run promptly.

The server here is a listener of the test's own on a free port: it forwards its first
connections to the live MariaDB (127.0.0.1:3306) and accepts every later one without ever
answering, a server that hangs in the handshake. The stop comes once a connection hangs, so
it is deterministic which connections were made and which were not:

- in the engine's connecting (asyncmy): the session connections already made were lost when
  the gather was cancelled, and asyncmy's pool close waited for them forever (the sweep's
  ``mysql-connect-SIGTERM`` case was killed after 20 s);
- in the native sessions' own connects (Connector/C): those end at the connect timeout.

A stop in the engine's connecting must end the run within the scenario's connect timeout
(0.3 s measured; before the fix it never ended). A native session's connect cannot be
interrupted: Connector/C gives it up at the connect timeout (2.01 s measured for 2 s), so
there the bound is the connect timeout and as much again for the run's teardown (3.3 s
measured for 3 s).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pymysql = pytest.importorskip("pymysql", reason="!!! PyMySQL missing: MariaDB NOT TESTED")

from sim.config.scenario import Load  # noqa: E402 - after the skip above
from sim.core.dataset import drop_objects, load_and_verify  # noqa: E402
from sim.core.engine import Engine  # noqa: E402
from storage.targets.mysql import MysqlTarget  # noqa: E402
from storage.targets.mysql_record import MysqlSettings  # noqa: E402
from tests.support.tcp import close_all, pipe  # noqa: E402
from workloads.slob.parameters import SlobParameters  # noqa: E402
from workloads.slob.workload import SlobWorkload  # noqa: E402

pytestmark = pytest.mark.integration
DSN = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
ROWS = 10_000  # SLOB's minimum
SESSIONS = 4
#: The scenario's connect timeout, from which the bounds on the stop are derived.
CONNECT_TIMEOUT_S = 3.0


class HangingServer:
    """Forwards the first ``forward`` connections to MariaDB; accepts the rest and never
    answers them. ``hung`` is set once one of those is held."""

    def __init__(self, forward: int) -> None:
        self.forward = forward
        self.hung = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        accepted = 0
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the test is over
                return
            self._sockets.append(client)
            accepted += 1
            if accepted > self.forward:
                self.hung.set()  # held open, never answered
                continue
            upstream = socket.create_connection((DSN["host"], DSN["port"]))
            self._sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        close_all(self._sockets)


def slob(prefix: str, port: int = 3306) -> tuple[SlobWorkload, MysqlTarget]:
    target = MysqlTarget(MysqlSettings(port=port, connect_timeout_s=CONNECT_TIMEOUT_S))
    return SlobWorkload(SlobParameters(scale=ROWS, table_prefix=prefix), target), target


@pytest.fixture(scope="module")
def loaded() -> Iterator[str]:
    try:
        pymysql.connect(**DSN).close()
    except pymysql.MySQLError as exc:
        pytest.skip(f"!!! MariaDB on {DSN['host']}:{DSN['port']} is not reachable: {exc}")
    prefix = f"mh{uuid.uuid4().hex[:6]}"
    try:
        load_and_verify(*slob(prefix))
        yield prefix
    finally:
        drop_objects(*slob(prefix))


async def _stop_once_hung(server: HangingServer, prefix: str, bound_s: float) -> Engine:
    workload, target = slob(prefix, server.port)
    load = Load(sessions=SESSIONS, duration_s=30, session_runner="native")
    engine = Engine(workload, target, load, skip_load=True)
    run = asyncio.ensure_future(engine.run())
    while not server.hung.is_set():
        assert not run.done(), engine.result.error  # it must get as far as a hung connect
        await asyncio.sleep(0.01)
    engine.request_stop("SIGTERM")
    try:
        await asyncio.wait_for(asyncio.shield(run), bound_s)
    except TimeoutError:
        pytest.fail(
            f"the run did not end within {bound_s} s (connect timeout {CONNECT_TIMEOUT_S} s) "
            f"of a stop asked in state {engine.result.last_state!r}"
        )
    return engine


def _stopped(server: HangingServer, prefix: str, bound_s: float) -> Any:
    try:
        return asyncio.run(_stop_once_hung(server, prefix, bound_s)).result
    finally:
        server.close()


def test_a_stop_while_the_engine_connects_the_sessions_ends_the_run(loaded: str) -> None:
    # The pool's one connection (opened to read the server's facts, then used by --skip-load's
    # check) goes to the first session; the second session's new connection hangs.
    result = _stopped(HangingServer(forward=1), loaded, CONNECT_TIMEOUT_S)
    assert result.last_state == "connecting", result.last_state
    assert result.outcome == "interrupted", (result.outcome, result.error)


def test_a_stop_while_native_sessions_connect_ends_the_run(loaded: str) -> None:
    from storage.targets import marialoop

    if marialoop.unavailable():
        pytest.skip(f"!!! NOT RUN on the native loop: {marialoop.unavailable()}")
    # The engine's connections (the pool's first, then SESSIONS - 1 new) get through; every
    # native session's own connect hangs in the handshake.
    result = _stopped(HangingServer(forward=SESSIONS), loaded, 2 * CONNECT_TIMEOUT_S)
    assert result.session_runner == "native", result.session_runner_why
    assert result.outcome == "interrupted", (result.outcome, result.error)
