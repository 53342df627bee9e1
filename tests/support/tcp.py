"""Small socket pieces the tests' own TCP stand-ins share (a proxy in front of a real server,
a fake server): read a message's exact length, relay one direction, close what was opened."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable


def read_exactly(conn: socket.socket, count: int) -> bytes:
    """``count`` bytes from ``conn``; ConnectionError when the peer closes first."""
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return data


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Relay ``source`` to ``sink`` until either side closes, then shut both down (a proxy runs
    one per direction, each on a thread of its own)."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def close_all(sockets: Iterable[socket.socket]) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()
