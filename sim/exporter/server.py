"""``dbsim run --metrics-port``: the exporter's ``/metrics`` on a port of its own.

A threaded WSGI server (the standard library's, serving prometheus_client's exposition app) on
a daemon thread, so a scrape never waits for the engine's loop and the loop never waits for a
scrape. It binds 127.0.0.1 unless told otherwise; beyond loopback the CLI requires a login
(``--metrics-login ENV_VAR``, ``user:password`` in that variable), which the server checks as
HTTP Basic authentication in constant time — what Prometheus' ``basic_auth`` scrape option
sends. Credentials are never logged.
"""

from __future__ import annotations

import base64
import hmac
import socketserver
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from sim.errors import ConfigError

METRICS_PATH = "/metrics"


def basic_auth_ok(header: str | None, login: tuple[str, str]) -> bool:
    """Whether an ``Authorization`` header carries ``login`` (user, password) as Basic auth."""
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    user, _, password = given.partition(":")
    user_ok = hmac.compare_digest(user.encode(), login[0].encode())
    password_ok = hmac.compare_digest(password.encode(), login[1].encode())
    return user_ok and password_ok


class _Threading(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
        return None


def metrics_app(
    registry: CollectorRegistry, login: tuple[str, str] | None
) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
    """The WSGI app: ``/metrics`` (the exposition), 404 elsewhere, 401 without the login."""
    exposition = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if login is not None and not basic_auth_ok(environ.get("HTTP_AUTHORIZATION"), login):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="dbsim"')])
            return [b"login required\n"]
        if environ.get("PATH_INFO") not in (METRICS_PATH, "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"dbsim serves /metrics\n"]
        return exposition(environ, start_response)

    return app


class MetricsServer:
    """The listening server; :meth:`close` stops it."""

    def __init__(
        self, registry: CollectorRegistry, host: str, port: int, login: tuple[str, str] | None
    ) -> None:
        try:
            self._server = make_server(
                host, port, metrics_app(registry, login), _Threading, handler_class=_Quiet
            )
        except OSError as exc:
            raise ConfigError(
                f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self.host, self.port = host, int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="dbsim-metrics", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{METRICS_PATH}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
