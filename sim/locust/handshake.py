"""Before ``dbsim worker`` joins: does the master's worker port take this worker's handshake?

Locust's worker sends ``client_ready`` and waits for the master's answer, 5 s at a time, 60
times. A worker whose ZeroMQ security does not match the master's never gets one and never
learns why: a CURVE master drops a worker without the secret, or with another, during
libzmq's handshake, before any message reaches Locust, and a plain master drops a worker with
a secret the same way. The worker gave up after ~20 s with ``RPCSendError`` (exit 3) or kept
knocking for 5 minutes (issue #24).

So the worker asks first, in two steps, each decided by what the master's libzmq says:

1. **Which security the port speaks.** ZeroMQ's greeting (ZMTP 3, rfc.zeromq.org/spec/23)
   names the mechanism, ``NULL`` (no secret) or ``CURVE`` (``--master-secret``). A plain TCP
   connection sends our signature and major version, reads the master's 64-byte greeting and
   hangs up before any handshake, so the master's Locust never sees it. (libzmq's own
   socket monitor is no substitute: on a mismatch the side that detects it first closes, and
   the other side reports a bare hang-up about half of the time.)
2. **With CURVE and a secret, whether the master takes this secret.** A DEALER socket keyed
   as Locust's will be (:func:`sim.locust.secure.curve_client`) connects and libzmq's
   monitor reports the handshake: succeeded, or the master hung up, which is all a CURVE
   server does with a hello boxed to another public key (another secret). Two hang-ups in a
   row decide (libzmq connects again every ~0.1-0.2 s), so one connection cut short, by a
   master stopping say, does not.

A master not there yet (connection refused) is waited for as long as Locust's own connect
would, then "no master answered". Every verdict is bad input: one ``error:`` line, exit 2.
"""

from __future__ import annotations

import socket
import time

import gevent
import zmq.green as zmq
from locust.runners import CONNECT_RETRY_COUNT, CONNECT_TIMEOUT
from zmq.utils.monitor import recv_monitor_message

from sim.errors import ConfigError
from sim.locust import secure

#: How long Locust's worker tries to connect before it gives up (5 s x 60).
JOIN_TIMEOUT_S = float(CONNECT_TIMEOUT * CONNECT_RETRY_COUNT)
#: libzmq greets from its own I/O thread, at once; this only bounds a peer that says nothing.
GREETING_TIMEOUT_S = 10.0
RETRY_S = 1.0
#: ZMTP's signature (0xFF, 8 bytes of padding, 0x7F) and major version 3: what makes the
#: master send the rest of its greeting, the mechanism included.
GREETING_START = b"\xff" + bytes(8) + b"\x7f" + b"\x03"
GREETING_BYTES = 64
MECHANISM = slice(12, 32)
REFUSALS_TO_DECIDE = 2
_HANDSHAKE_EVENTS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def check_master(host: str, port: int, secret: str | None, timeout: float = JOIN_TIMEOUT_S) -> None:
    """Return when a worker with ``secret`` (None: without) can join the master at
    ``host:port``; else raise :class:`~sim.errors.ConfigError` saying why not."""
    deadline = time.monotonic() + timeout
    address = f"{host}:{port}"
    mechanism = master_mechanism(host, port, deadline)
    if mechanism is None:
        raise ConfigError(f"--master: no master answered at {address} within {timeout:g} s")
    if mechanism not in ("NULL", "CURVE"):
        raise ConfigError(
            f"--master: {address} is not a dbsim master's worker port "
            f"(it answers ZeroMQ with the {mechanism!r} mechanism)"
        )
    if mechanism == "CURVE" and secret is None:
        raise ConfigError(
            f"--master-secret: the master at {address} has a secret (its worker port speaks "
            "CURVE) and this worker none: give it the master's with --master-secret ENV_VAR"
        )
    if mechanism == "NULL" and secret is not None:
        raise ConfigError(
            f"--master-secret: the master at {address} has no secret (its worker port is "
            "plain ZeroMQ): start both with --master-secret, or neither"
        )
    accepted = True if secret is None else curve_accepted(host, port, secret, deadline)
    if accepted is None:
        raise ConfigError(f"--master: no master answered at {address} within {timeout:g} s")
    if not accepted:
        raise ConfigError(
            f"--master-secret: the master at {address} refused this worker's CURVE "
            "handshake: its secret is not this one"
        )


def master_mechanism(host: str, port: int, deadline: float) -> str | None:
    """The security mechanism the master's greeting names (``NULL``, ``CURVE``); None when
    nothing answered there until ``deadline``; ConfigError when what answers is not ZeroMQ."""
    while True:
        greeting = _greeting(host, port)
        if greeting is not None:
            if len(greeting) < GREETING_BYTES or greeting[0] != 0xFF or greeting[10] < 3:
                raise ConfigError(
                    f"--master: {host}:{port} is not a dbsim master's worker port "
                    "(no ZeroMQ 3 greeting)"
                )
            return greeting[MECHANISM].rstrip(b"\x00").decode("ascii", "replace")
        if time.monotonic() + RETRY_S > deadline:
            return None
        gevent.sleep(RETRY_S)


def _greeting(host: str, port: int) -> bytes | None:
    """What the peer greets with (b"" for silence), or None when no connection was made."""
    try:
        conn = socket.create_connection((host, port), timeout=GREETING_TIMEOUT_S)
    except OSError:  # not listening yet, unreachable for now: Locust would keep trying too
        return None
    with conn:
        try:
            conn.sendall(GREETING_START)
            return _read(conn, GREETING_BYTES)
        except TimeoutError:  # connected, and silent: not ZeroMQ
            return b""
        except OSError:  # reset mid-greeting: a master stopping or rebinding its port
            return None


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := conn.recv(size - len(data))):
        data += chunk
    return data


def curve_accepted(host: str, port: int, secret: str, deadline: float) -> bool | None:
    """Whether the CURVE master at ``host:port`` completes a handshake keyed by ``secret``
    (None: no handshake ended before ``deadline``)."""
    context = zmq.Context()
    probe = context.socket(zmq.DEALER)
    if socket.has_dualstack_ipv6():  # as Locust's own socket: an IPv6 master too
        probe.setsockopt(zmq.IPV6, 1)
    secure.curve_client(probe, secret)
    monitor = probe.get_monitor_socket(_HANDSHAKE_EVENTS)
    try:
        probe.connect(f"tcp://{host}:{port}")
        refusals = 0
        while (left := deadline - time.monotonic()) > 0:
            if not monitor.poll(timeout=int(min(left, 1.0) * 1000) + 1):
                continue
            if recv_monitor_message(monitor)["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                return True
            refusals += 1
            if refusals == REFUSALS_TO_DECIDE:
                return False
        return None
    finally:
        probe.disable_monitor()
        monitor.close(linger=0)
        probe.close(linger=0)
        context.term()
