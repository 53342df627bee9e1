"""Native sessions connect before the stage clock starts, as the Python path's do.

A native session (libpq here; Connector/C and unixODBC take the same path) used to connect in
its thread at its first batch, inside the first stage: on a host 95 % busy two psqlODBC
sessions of a 2 s run with no warm-up spent the whole measured window connecting (0
operations, exit 3). Now every session thread connects first and waits at a gate that the
engine opens when it starts the first stage (sim.core.session_threads ``_gate``).

The connects are made slow for real: the sessions reach the live PostgreSQL (127.0.0.1:5432)
through a TCP proxy of the test's own that holds each new connection ``DELAY_S`` before it
forwards a byte (libpq's startup message waits unread). With no warm-up, the measured window
must hold operations from its first interval, every held connection must have been let
through before the sessions started, and a stop while the native sessions connect must end
the run in its ``connecting`` state. Each case runs once with the sessions grouped on one
thread (``run_group``) and once with a thread each (the MariaDB and ODBC loops' way).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core import engine as engine_module
from sim.core.dataset import drop_objects, load_and_verify
from sim.core.engine import Engine
from storage.targets import pgloop
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from tests.support.native_loops import require_native
from tests.support.postgres import DATABASE, HOST, PORT, require_postgres
from tests.support.tcp import close_all, pipe, read_exactly
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

pytestmark = pytest.mark.integration
RUN = secrets.token_hex(3)
ROWS = 10_000  # SLOB's minimum
SESSIONS = 2
#: How long the proxy holds each new connection: a slow connect, below libpq's
#: connect_timeout (10 s here) and asyncpg's.
DELAY_S = 1.0
DURATION_S = 2.0
INTERVAL_S = 0.5
#: Paced: the check is when operations ran, not how many the host allows.
RATE_OPS_S = 200.0


@pytest.fixture(params=["4", "1"], ids=["grouped", "thread-each"])
def group(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    require_native(pgloop)
    monkeypatch.setenv("DBSIM_PGLOOP_GROUP", request.param)
    return str(request.param)


def workload(prefix: str, port: int = PORT) -> tuple[SlobWorkload, PostgresTarget]:
    target = PostgresTarget(PostgresSettings(host=HOST, port=port, database=DATABASE))
    params = SlobParameters(scale=ROWS, table_prefix=prefix, update_pct=0)
    return SlobWorkload(params, target), target


@pytest.fixture(scope="module")
def loaded() -> Iterator[str]:
    require_postgres()
    prefix = f"nc{RUN}"
    try:
        load_and_verify(*workload(prefix))
        yield prefix
    finally:
        drop_objects(*workload(prefix))


class DelayingProxy:
    """Forwards each connection to the live server ``delay_s`` after accepting it; ``armed``,
    refuses the next ``refuse`` connections instead, as a server at max_connections does."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.refuse = 0
        self.armed = False
        #: Wall time (time.time) at which each forwarded connection was let through.
        self.forwarded: list[float] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the test is over
                return
            self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        time.sleep(self.delay_s)
        with self._lock:
            refuse = self.armed and self.refused < self.refuse
            if refuse:
                self.refused += 1
            else:
                self.forwarded.append(time.time())
        if refuse:
            with contextlib.suppress(OSError), client:
                _refuse(client)
            return
        upstream = socket.create_connection((HOST, PORT))
        self._sockets.append(upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        close_all(self._sockets)


#: The protocol's requests before a startup message (SSLRequest, GSSENCRequest): answered "N".
ENCRYPTION_REQUESTS = {80877103, 80877104}
#: What PostgreSQL answers a startup at max_connections (an ErrorResponse; libpq's connect
#: fails on it, with no second try, where a socket closed during the SSL request may be tried
#: again without SSL under sslmode=prefer).
TOO_MANY = b"".join(
    code + text + b"\0"
    for code, text in ((b"S", b"FATAL"), (b"V", b"FATAL"), (b"C", b"53300"),
                       (b"M", b"sorry, too many clients already"))
) + b"\0"  # fmt: skip


def _refuse(client: socket.socket) -> None:
    while True:
        length = int.from_bytes(read_exactly(client, 4), "big")
        body = read_exactly(client, length - 4)
        if int.from_bytes(body[:4], "big") not in ENCRYPTION_REQUESTS:
            break  # the startup message
        client.sendall(b"N")
    client.sendall(b"E" + (4 + len(TOO_MANY)).to_bytes(4, "big") + TOO_MANY)


@pytest.fixture
def proxy() -> Iterator[DelayingProxy]:
    made = DelayingProxy(DELAY_S)
    try:
        yield made
    finally:
        made.close()


def new_engine(prefix: str, proxy: DelayingProxy) -> tuple[Engine, list[Any]]:
    slob, target = workload(prefix, proxy.port)
    load = Load(sessions=SESSIONS, duration_s=DURATION_S, warmup_s=0, mode="open",
                rate_ops_s=RATE_OPS_S, seed=3, session_runner="native")  # fmt: skip
    engine = Engine(slob, target, load, skip_load=True, interval_s=INTERVAL_S)
    intervals: list[Any] = []
    engine.events.interval.add_listener(lambda interval, samples: intervals.append(interval))
    return engine, intervals


def arm_when_sessions_start(monkeypatch: pytest.MonkeyPatch, proxy: DelayingProxy) -> None:
    """Arm the proxy as the engine starts the session threads: the engine's own connections
    are all made by then, so every connection it holds from then on is a native session's."""
    started = engine_module.Engine._start_sessions

    def arm_and_start(self: Any, sessions: list[Any]) -> Any:
        proxy.armed = True
        return started(self, sessions)

    monkeypatch.setattr(engine_module.Engine, "_start_sessions", arm_and_start)


def ops(interval: Any) -> int:
    return sum(stats.count for stats in interval.ops.values())


def test_slow_native_connects_are_outside_the_measured_window(
    loaded: str, group: str, proxy: DelayingProxy
) -> None:
    engine, intervals = new_engine(loaded, proxy)
    asyncio.run(engine.run())
    result = engine.result
    assert result.outcome == "completed", result.error
    assert result.session_runner == "native", result.session_runner_why
    # Every connection the proxy held (the engine's own, then the native sessions') was let
    # through before the sessions started: no connect was timed in the window.
    assert len(proxy.forwarded) >= 2 * SESSIONS, proxy.forwarded
    assert max(proxy.forwarded) < result.sessions_started_wall, (
        proxy.forwarded,
        result.sessions_started_wall,
    )
    assert engine._threaded is not None and engine._threaded.connect_s is not None
    assert engine._threaded.connect_s >= DELAY_S, engine._threaded.connect_s
    assert [s["phase"] for s in result.stage_log] == ["measure"] and result.warmup_s == 0
    assert "connect" not in engine.recorder.totals, engine.recorder.totals["connect"].errors
    # Operations from the window's very first interval: before, the first stage spent
    # >= DELAY_S (the group: DELAY_S per session, one after another) connecting, so the
    # first two intervals of 0.5 s held none. (Only the first is asserted: a later interval
    # a loaded host stalls says nothing about when the sessions connected.)
    measured = [i for i in intervals if i.measured]
    assert measured and measured[0].t_start == 0, [(i.t_start, i.t_end) for i in measured]
    first = measured[0]
    assert first.t_end - first.t_start >= INTERVAL_S / 2, (first.t_start, first.t_end)
    assert ops(first), f"the first measured interval ({first.t_start}-{first.t_end} s) is empty"


def test_a_refused_first_connect_is_counted_and_retried_in_the_stage(
    loaded: str, group: str, proxy: DelayingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native connect refused before the clock does not hold the run (a server that keeps
    refusing would hold it for ever): it is a ``connect`` error, and that session connects in
    the stage with the engine's backoff, as after a lost connection."""
    proxy.refuse = 1
    arm_when_sessions_start(monkeypatch, proxy)
    engine, _ = new_engine(loaded, proxy)
    asyncio.run(engine.run())
    result = engine.result
    assert result.outcome == "completed", result.error
    assert result.session_runner == "native", result.session_runner_why
    assert proxy.refused == 1
    connect = engine.recorder.totals.get("connect")
    assert connect is not None and connect.error_count == 1, engine.recorder.totals
    assert result.outages == []  # a first connection: no outage to log
    done = sum(stats.count for stats in engine.recorder.totals.values())
    assert done > 0


async def _stop_while_native_sessions_connect(engine: Engine, proxy: DelayingProxy) -> float:
    run = asyncio.ensure_future(engine.run())
    while engine._threaded is None:  # the engine's connections are made; the native ones held
        assert not run.done(), engine.result.error
        await asyncio.sleep(0.01)
    engine.request_stop("SIGTERM")
    asked = time.monotonic()
    await run
    return time.monotonic() - asked


def test_a_stop_while_native_sessions_connect_ends_the_run_connecting(
    loaded: str, group: str, proxy: DelayingProxy
) -> None:
    engine, intervals = new_engine(loaded, proxy)
    took = asyncio.run(_stop_while_native_sessions_connect(engine, proxy))
    result = engine.result
    print(f"the run ended {took:.3f} s after the stop")
    assert result.outcome == "interrupted", (result.outcome, result.error)
    assert result.last_state == "connecting", result.last_state
    assert result.stage_log == [] and result.sessions_started_wall is None
    assert intervals == []
    # Every session thread returned on its own once its held connect was through (none was
    # left behind when the stop's grace ran out).
    assert engine._threaded is not None
    assert all(done.done() for done in engine._threaded._finished)
