"""A fake PostgreSQL server that asks for a cleartext password and records the answer.

It speaks just enough of the v3 protocol for a client to give its password away: refuse
SSL/GSS encryption (``N``), read the StartupMessage, send AuthenticationCleartextPassword
(``R``, code 3), read the PasswordMessage (``p``) and record its text, then end with an
ErrorResponse (``28P01``, the real server's "password authentication failed"). That is what a
server someone else runs can do to any client that connects: asyncpg answers with the
password in the clear.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

from tests.support.tcp import read_exactly

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CLEARTEXT_PASSWORD = 3


def _error_response(code: bytes, message: bytes) -> bytes:
    fields = b"SFATAL\0C" + code + b"\0M" + message + b"\0\0"
    return b"E" + struct.pack("!i", 4 + len(fields)) + fields


class FakePostgres:
    """Listening on ``host`` (any free port) in a thread until closed; ``connections`` counts
    the clients that connected, ``passwords`` holds what each answered."""

    def __init__(self, host: str) -> None:
        self._server = socket.create_server((host, 0))
        self._server.settimeout(0.2)
        self.host = host
        self.port = int(self._server.getsockname()[1])
        self.connections = 0
        self.passwords: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                while True:
                    length, code = struct.unpack("!ii", read_exactly(conn, 8))
                    read_exactly(conn, length - 8)
                    if code not in (SSL_REQUEST, GSS_REQUEST):
                        break  # the StartupMessage
                    conn.sendall(b"N")  # no encryption: the password comes in the clear
                conn.sendall(b"R" + struct.pack("!ii", 8, CLEARTEXT_PASSWORD))
                kind = read_exactly(conn, 1)
                (length,) = struct.unpack("!i", read_exactly(conn, 4))
                payload = read_exactly(conn, length - 4)
                if kind == b"p":
                    with self._lock:
                        self.passwords.append(payload.rstrip(b"\0").decode("utf-8", "replace"))
                conn.sendall(_error_response(b"28P01", b"password authentication failed"))
            except (OSError, ConnectionError, struct.error):
                return

    def close(self) -> None:
        self._done.set()
        self._server.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakePostgres:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
