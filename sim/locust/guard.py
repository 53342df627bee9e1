"""Only the UI's operator changes what ``dbsim ui`` does; a web page someone else wrote cannot.

Any page a browser on the UI's machine opens can send a POST to ``127.0.0.1:8089`` (a form it
submits, a ``fetch`` in ``no-cors`` mode, a ``text/plain`` body): the browser sends it, only
the answer stays hidden. Before this guard that was enough to start a run against a host the
page chose, with a password read from any variable of the UI's environment. So every request
that can change state (any method but GET, HEAD and OPTIONS — Locust's ``/swarm``, ``/stop``,
``/stats/reset``, ``/user``, dbsim's ``/dbsim/start`` and ``/dbsim/login``) must:

1. come from the UI's own page: its ``Origin`` header (else its ``Referer``) is the request's
   own origin, ``http://<Host header>``; a request with neither is refused (browsers send
   ``Origin`` with every POST, scripts set it);
2. carry the page's token in the ``X-Dbsim-Token`` header: random per process, written into
   the pages the UI serves (``<meta name="dbsim-token">``, read by ``static/token.js``, which
   adds the header to the page's own POSTs) and answered by ``GET /dbsim/token``; a
   cross-site request cannot read a page of the UI (see below), so it cannot know the token.
   The login form is the exception: there is no page before the login, its POST is only
   checked for its origin;
3. send JSON or a URL-encoded form, or nothing (``text/plain`` and ``multipart/form-data``,
   what a cross-site form or ``fetch`` can send without asking, are refused), of at most
   :data:`MAX_BODY_BYTES` (Flask's ``MAX_CONTENT_LENGTH``: HTTP 413 beyond, a chunked body
   too); JSON for Locust's routes must parse (too deep, or a 5,000-digit number, was an
   HTTP 500 in ``/user``), the start form reads its own (sim.live.form_body).

A refusal is HTTP 403 (origin, token, Host) or 400/413 (the body) with
``{"ok": false, "errors": {"(request)": [line]}}``, and one warning line in the log; the
token itself is never logged. The login (``--web-login``) is still required on top, by each
route.

Reading is guarded too: Locust answers every request with ``Access-Control-Allow-Origin: *``
(``flask_cors``), which let any site read every page — the token with them; those headers
are removed. And a UI bound to loopback answers only requests whose ``Host`` names loopback,
so a name an attacker re-points at 127.0.0.1 (DNS rebinding) gets no page either.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from flask import Response, request
from werkzeug.exceptions import RequestEntityTooLarge

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-Dbsim-Token"
#: The start form sends 8 to 15 fields: 200 to 450 bytes as JSON (the default scenario's 316).
MAX_BODY_BYTES = 64 << 10
BODY_TYPES = frozenset({"application/json", "application/x-www-form-urlencoded"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Posted before there is a page (and so a token): checked for its origin only.
LOGIN_PATH = "/dbsim/login"
START_PATH = "/dbsim/start"
REQUEST_FIELD = "(request)"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback_name(name: str) -> bool:
    """Whether a Host header's name is this machine's loopback (``[::1]`` too)."""
    name = name.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The name part of a Host header value (``[::1]:8089`` -> ``[::1]``)."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def refusal(status: int, line: str) -> Response:
    body = json.dumps({"ok": False, "errors": {REQUEST_FIELD: [line]}})
    return Response(body, status=status, mimetype="application/json")


@dataclass
class PageGuard:
    """The checks of the module docstring for one web UI; ``loopback``: it is bound to a
    loopback address (so only loopback Host names are answered)."""

    loopback: bool
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def problem(self) -> tuple[int, str] | None:
        """Why the current request is refused (status, line), or None."""
        if self.loopback and not is_loopback_name(host_name(request.host)):
            return 403, f"Host {request.host}: this web UI answers only its loopback address"
        if request.method in SAFE_METHODS:
            return None
        own = f"{request.scheme}://{request.host}".lower()
        origin = request.headers.get("Origin")
        referer = request.headers.get("Referer")
        if origin is not None:
            if origin.lower() != own:
                return 403, f"Origin {origin[:100]}: not this web UI's page ({own})"
        elif referer is not None:
            parts = urlsplit(referer)
            if f"{parts.scheme}://{parts.netloc}".lower() != own:
                return 403, f"Referer {referer[:100]}: not this web UI's page ({own})"
        else:
            return 403, "no Origin or Referer header: send Origin: " + own
        if request.path != LOGIN_PATH:
            given = request.headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
                return 403, f"{TOKEN_HEADER}: missing or wrong (GET /dbsim/token gives it)"
        return self._body_problem()

    def _body_problem(self) -> tuple[int, str] | None:
        length = request.content_length
        if length is not None and length > MAX_BODY_BYTES:
            return 413, f"body: {length} bytes; at most {MAX_BODY_BYTES} are read"
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        if (length or chunked) and request.mimetype not in BODY_TYPES:
            kind = request.mimetype or "none"
            return 400, f"Content-Type {kind[:60]}: send application/json or a form"
        if request.mimetype == "application/json" and request.path != START_PATH:
            return _json_problem()
        return None

    def page_head(self) -> str:
        """What a page of the UI gets in its ``<head>``: the token and the script that sends it
        (a plain script: it runs while the page is parsed, before the page's deferred and
        module scripts, so their first POST has it)."""
        return (
            f'<meta name="dbsim-token" content="{self.token}">'
            '<script src="/dbsim/static/token.js"></script>'
        )

    def with_token(self, html: str) -> str:
        """``html`` with :meth:`page_head` at the end of its head."""
        return html.replace("</head>", self.page_head() + "</head>", 1)


def _json_problem() -> tuple[int, str] | None:
    """Whether a JSON body parses as Locust's ``/user`` parses it (``json.loads``), where JSON
    nested some thousands deep was a RecursionError and a 5,000-digit number a ValueError:
    HTTP 500s. (The start form reads its own body, sim.live.form_body.)"""
    try:
        json.loads(read_body() or b"null")
    except RecursionError:
        return 400, "body: JSON nested too deep"
    except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
        return 400, f"body: not valid JSON: {str(exc).splitlines()[0][:120]}"
    return None


def read_body() -> bytes:
    """The request's body, at most :data:`MAX_BODY_BYTES`; HTTP 413 (RequestEntityTooLarge)
    when it goes on past them. A chunked body has no Content-Length to refuse up front, and
    Werkzeug's stream then just stops at the limit: one more byte says whether there was
    more (Werkzeug raises on reading past a maximum)."""
    data = request.get_data(cache=True)  # kept for the route (Flask's request.data too)
    if len(data) >= MAX_BODY_BYTES:
        request.stream.read(1)
    return data


def _without_cors(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """A WSGI wrapper dropping every ``Access-Control-*`` header an answer carries."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *exc_info)

        return app(environ, start)

    return wrapped


def install_guard(app: Any, loopback: bool, protect: Callable[..., Any]) -> PageGuard:
    """Guard ``app`` (Locust's Flask app, routes already added or not): the checks, the body
    limit, the CORS headers removed, and ``GET /dbsim/token`` (behind ``protect``, the login)
    for scripts. Returns the guard (its token goes into the pages)."""
    guard = PageGuard(loopback)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.wsgi_app = _without_cors(app.wsgi_app)

    def check() -> Response | None:
        found = guard.problem()
        if found is None:
            return None
        status, line = found
        log.warning(
            "web UI: refused %s %s from %s: %s",
            request.method,
            request.path[:100],
            request.remote_addr,
            line,
        )
        return refusal(status, line)

    def too_large(_: RequestEntityTooLarge) -> Response:
        return refusal(413, f"body: larger than {MAX_BODY_BYTES} bytes, the most read")

    # First of the app's before_request functions: nothing runs for a refused request.
    app.before_request_funcs.setdefault(None, []).insert(0, check)
    app.register_error_handler(RequestEntityTooLarge, too_large)

    @app.route("/dbsim/token")
    @protect
    def dbsim_token() -> Response:
        body = json.dumps({"header": TOKEN_HEADER, "token": guard.token})
        return Response(body, mimetype="application/json", headers={"Cache-Control": "no-store"})

    return guard
