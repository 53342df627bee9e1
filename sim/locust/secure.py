"""A shared secret on the master's worker port: ZeroMQ CURVE with keys derived from it.

Locust's master/worker protocol has no authentication: anyone who reaches the port can join
as a worker (and receive the scenario) or feed the master reports. With a secret, every
Locust socket of this process is a CURVE socket (libzmq's CurveZMQ: Curve25519 key exchange,
then every message encrypted and authenticated):

* the master's ROUTER socket is a CURVE server whose key pair is derived from the secret
  (SHA-256 of a fixed label and the secret as the secret key);
* a worker's DEALER socket is a CURVE client of the server public key derived the same way,
  with a fresh key pair of its own.

A worker that does not know the secret cannot build the handshake's first message (it is
boxed to the server's public key, which only the secret yields, and is never sent), so the
master never sees it; the worker gives up after Locust's connect timeout. The secret itself
never travels and is never logged; it comes from an environment variable whose *name* is on
the command line (``--master-secret NAME``), as ``--web-login`` does for the web UI.

Only :mod:`sim.locust` imports this (it patches Locust's socket class for the process).
"""

from __future__ import annotations

import hashlib
from typing import Any

import zmq
from locust.rpc import zmqrpc
from zmq.utils import z85

from sim.secrets import remember

KEY_LABEL = b"dbsim master worker port v1\x00"

_installed: list[str] = []


def server_keys(secret: str) -> tuple[bytes, bytes]:
    """``(public, secret)`` CURVE keys of the master, Z85-encoded, derived from ``secret``."""
    secret_key = z85.encode(hashlib.sha256(KEY_LABEL + secret.encode("utf-8")).digest())
    return zmq.curve_public(secret_key), secret_key


def curve_client(sock: zmq.Socket[Any], secret: str) -> None:
    """Make ``sock`` (before it connects) a CURVE client of the master keyed by ``secret``,
    with a fresh key pair of its own."""
    own_public, own_secret = zmq.curve_keypair()
    sock.curve_serverkey = server_keys(secret)[0]
    sock.curve_publickey = own_public
    sock.curve_secretkey = own_secret


def install(secret: str) -> None:
    """Make every Locust socket this process creates from now on a CURVE socket keyed by
    ``secret`` (see the module docstring). Call before the master or worker runner exists;
    installing twice with the same secret is a no-op."""
    if _installed:
        if _installed[0] != secret:
            raise RuntimeError("a different master secret is already installed")
        return
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq has no CURVE support")
    remember(secret)  # masked wherever it might surface (sim.secrets)
    public, private = server_keys(secret)
    original = zmqrpc.BaseSocket.__init__

    def init(self: Any, sock_type: int, ipv4_only: bool) -> None:
        original(self, sock_type, ipv4_only)
        # Before bind()/connect(), which Server/Client call next: libzmq fixes a
        # connection's security mechanism when the listener or the connection is made.
        if sock_type == zmq.ROUTER:
            self.socket.curve_secretkey = private
            self.socket.curve_publickey = public
            self.socket.curve_server = True
        else:
            curve_client(self.socket, secret)

    zmqrpc.BaseSocket.__init__ = init  # type: ignore[method-assign]
    _installed.append(secret)
