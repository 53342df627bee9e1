"""dbsim issue #24, item 1: a web page cannot make ``dbsim ui`` send a secret to its host.

Before, any page open in a browser on the UI's machine could POST ``/dbsim/start`` to
127.0.0.1 with ``target.host`` set to its own server and ``target.password_env`` naming any
variable of the UI's environment; dbsim connected there and answered the server's
cleartext-password request with the variable's value.

Here the "attacker's server" is real: :class:`~tests.support.fake_postgres.FakePostgres` on
127.0.0.3 (a host the UI does not allow), and the UI allows 127.0.0.2 (``--allow-host``), where
a second fake server stands for a host the operator chose. The UI is ``dbsim ui`` as a child
process with a secret variable in its environment. Every way a page (or a hand without the
page's token) can send the request is refused — cross-origin JSON, ``text/plain`` and form
posts, a Referer from elsewhere, no Origin at all, no token, a DNS-rebinding Host, Locust's own
``/swarm``, ``/stop`` and ``/stats/reset`` — with 403, or 400 naming the field for a variable or
a host the operator did not allow; no run starts, neither server is ever connected to, and the
secret's value never reaches one. The positive control: the same request from the UI's own
origin with its token, an allowed variable and an allowed host starts the run, and the allowed
server receives the allowed password (and only it).

With ``--web-login``, every page and route needs the login (moved here from test_web_ui.py to
share this module's login UI), a login POST from another site is refused, and the login's
variable can never be allowed. Each UI is started once per module (module-scoped fixtures).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import InProcessDbsim, bundle_dirs, clean_environment
from tests.support.fake_postgres import FakePostgres
from tests.support.ui_child import UiChild

pytestmark = [pytest.mark.e2e]

SECRET_VAR = "DBSIM_TEST_EXFIL_SECRET"
ALLOWED_VAR = "DBSIM_TEST_PG_PASSWORD"
ALLOWED_HOST = "127.0.0.2"
ATTACKER_HOST = "127.0.0.3"
EVIL = "http://evil.example"
JSON_TYPE = {"Content-Type": "application/json"}
SCENARIO = f"""\
name: operator
target:
  kind: postgres
  host: 127.0.0.1
  port: 5432
  database: test
  user: postgres
  password_env: {ALLOWED_VAR}
workload:
  name: slob
load:
  sessions: 1
  warmup_s: 0
  duration_s: 2
"""


class World:
    """The UI, the allowed server, the attacker's server and the two variables' values."""

    def __init__(
        self, ui: UiChild, allowed: FakePostgres, attacker: FakePostgres, secret: str, password: str
    ) -> None:
        self.ui, self.allowed, self.attacker = ui, allowed, attacker
        self.secret, self.password = secret, password

    def form(self, host: FakePostgres, variable: str) -> dict[str, str]:
        return {
            "target.host": host.host,
            "target.port": str(host.port),
            "target.password_env": variable,
            "load.duration_s": "2",
            "load.warmup_s": "0",
            "load.sessions": "1",
        }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One UI and its two servers for the module's two tests (one ``dbsim ui`` start, ~1.5
    CPU-s, fewer): the CORS test first (it starts nothing), then the exfiltration test, which
    ends with the positive control's run and stops the UI to read its stderr."""
    tmp_path = tmp_path_factory.mktemp("operator")
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    secret, password = (f"{what}-{secrets.token_hex(8)}" for what in ("exfil", "allowed"))
    env = clean_environment(tmp_path)
    env[SECRET_VAR], env[ALLOWED_VAR] = secret, password
    with FakePostgres(ALLOWED_HOST) as allowed, FakePostgres(ATTACKER_HOST) as attacker:
        ui = UiChild(tmp_path, env, ["scenario.yaml", "--allow-host", ALLOWED_HOST])
        try:
            yield World(ui, allowed, attacker, secret, password)
        finally:
            ui.stop()


def _hostile_requests(w: World) -> list[tuple[str, str, bytes, dict[str, str], int, str]]:
    """(what, path, body, headers, expected status, field the refusal names)."""
    own = w.ui.token_headers()
    steal = w.form(w.attacker, SECRET_VAR)
    as_json = json.dumps(steal).encode()
    as_form = urllib.parse.urlencode(steal).encode()
    rebound = f"evil.example:{w.ui.port}"
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    plain = {"Content-Type": "text/plain"}
    request = "(request)"
    return [
        ("cross-origin JSON", "/dbsim/start", as_json, {**JSON_TYPE, "Origin": EVIL}, 403, request),
        ("cross-origin text/plain", "/dbsim/start", as_json, {**plain, "Origin": EVIL}, 403, request),
        ("cross-origin form", "/dbsim/start", as_form, {**form_type, "Origin": EVIL}, 403, request),
        ("cross-origin with the token", "/dbsim/start", as_json, {**JSON_TYPE, **own, "Origin": EVIL}, 403, request),
        ("Referer from elsewhere", "/dbsim/start", as_json, {**JSON_TYPE, "Referer": f"{EVIL}/x", "X-Dbsim-Token": own["X-Dbsim-Token"]}, 403, request),
        ("neither Origin nor Referer", "/dbsim/start", as_json, {**JSON_TYPE, "X-Dbsim-Token": own["X-Dbsim-Token"]}, 403, request),
        ("same origin without the token", "/dbsim/start", as_json, {**JSON_TYPE, "Origin": w.ui.url}, 403, request),
        ("same origin, token, text/plain", "/dbsim/start", as_json, {**plain, **own}, 400, request),
        ("DNS rebinding", "/dbsim/start", as_json, {**JSON_TYPE, **own, "Host": rebound, "Origin": f"http://{rebound}"}, 403, request),
        ("a variable not allowed", "/dbsim/start", json.dumps(w.form(w.allowed, SECRET_VAR)).encode(), {**JSON_TYPE, **own}, 400, "target.password_env"),
        ("a host not allowed", "/dbsim/start", json.dumps(w.form(w.attacker, ALLOWED_VAR)).encode(), {**JSON_TYPE, **own}, 400, "target.host"),
        ("Locust's /swarm cross-origin", "/swarm", b"user_count=1&spawn_rate=1", {**form_type, "Origin": EVIL}, 403, request),
        ("Locust's /swarm without the token", "/swarm", b"user_count=1&spawn_rate=1", {**form_type, "Origin": w.ui.url}, 403, request),
        ("Locust's /stop cross-origin", "/stop", b"", {"Origin": EVIL}, 403, request),
        ("Locust's /stats/reset cross-origin", "/stats/reset", b"", {"Origin": EVIL}, 403, request),
    ]  # fmt: skip


def test_cors_is_off_and_the_token_is_only_in_the_uis_own_pages(world: World) -> None:
    ui = world.ui
    token = ui.token_headers()["X-Dbsim-Token"]
    for path in ("/", "/dbsim/live", "/dbsim/token", "/dbsim/status"):
        got, page = ui.request("GET", path, None, {"Origin": EVIL})
        assert got == 200, path
        cors = [h for h in ui.last_headers if h.lower().startswith("access-control-")]
        assert cors == [], (path, cors)  # Locust's flask_cors allowed every origin to read
        if path in ("/", "/dbsim/live"):
            assert f'<meta name="dbsim-token" content="{token}">' in page, path
            assert '<script src="/dbsim/static/token.js">' in page, path
    # A preflight gets no permission either: a browser then never sends the request.
    preflight = {"Origin": EVIL, "Access-Control-Request-Method": "POST"}
    ui.request("OPTIONS", "/dbsim/start", None, preflight)
    assert not [h for h in ui.last_headers if h.lower().startswith("access-control-")]
    # A name re-pointed at 127.0.0.1 (DNS rebinding) gets no page, so no token.
    got, answer = ui.request("GET", "/", None, {"Host": f"evil.example:{ui.port}"})
    assert got == 403 and token not in json.dumps(answer), answer


def test_a_web_page_cannot_make_the_ui_send_a_secret_to_its_host(world: World) -> None:
    w = world
    for what, path, body, headers, status, field in _hostile_requests(w):
        got, answer = w.ui.request("POST", path, body, headers)
        assert got == status, (what, got, answer)
        assert field in answer["errors"], (what, answer)
        assert w.ui.run_status() == "idle", what
    time.sleep(1)  # a run started by mistake would have connected by now
    assert (w.allowed.connections, w.attacker.connections) == (0, 0)
    assert bundle_dirs(w.ui.out) == []

    # The positive control: the UI's own page, an allowed variable and host.
    body = json.dumps(w.form(w.allowed, ALLOWED_VAR)).encode()
    got, answer = w.ui.request("POST", "/dbsim/start", body, {**JSON_TYPE, **w.ui.token_headers()})
    assert got == 200 and answer["ok"], answer
    deadline = time.monotonic() + 60
    while not w.allowed.passwords or w.ui.run_status() in ("idle", "running", "finishing"):
        assert time.monotonic() < deadline, (w.allowed.passwords, w.ui.run_status())
        time.sleep(0.3)
    assert set(w.allowed.passwords) == {w.password}
    assert w.attacker.connections == 0 and w.attacker.passwords == []
    stderr = w.ui.stop()
    assert w.secret not in stderr and w.password not in stderr
    assert "Traceback" not in stderr
    assert "refused POST /dbsim/start" in stderr  # each refusal is logged, one line


LOGIN_ENV = {"DBSIM_TEST_LOGIN": "alice:correct horse"}


@pytest.fixture(scope="module")
def login_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiChild]:
    """``dbsim ui --web-login DBSIM_TEST_LOGIN`` for the module's two login tests (one start):
    the last of them stops it and checks its exit and its stderr."""
    tmp_path = tmp_path_factory.mktemp("login")
    env = {**clean_environment(tmp_path), **LOGIN_ENV}
    ui = UiChild(tmp_path, env, ["--web-login", "DBSIM_TEST_LOGIN"])
    try:
        yield ui
    finally:
        ui.stop()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # surface the 302 instead of following it


def test_web_login_protects_every_page_and_route(login_ui: UiChild) -> None:
    url = login_ui.url
    jar = urllib.request.HTTPCookieProcessor()
    plain = urllib.request.build_opener(_NoRedirect())
    session = urllib.request.build_opener(jar, _NoRedirect())

    def status(opener: Any, path: str, data: bytes | None = None) -> int:
        request = urllib.request.Request(url + path, data=data, headers={"Origin": url})
        try:
            with opener.open(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status(plain, "/login") == 200
    for path in ("/", "/dbsim/status", "/stats/requests", "/dbsim/run/summary.json"):
        assert status(plain, path) == 302, path  # to the login page
    wrong = urllib.parse.urlencode({"username": "alice", "password": "wrong"}).encode()
    assert status(session, "/dbsim/login", wrong) == 302
    assert status(session, "/dbsim/status") == 302
    right = urllib.parse.urlencode({"username": "alice", "password": "correct horse"})
    assert status(session, "/dbsim/login", right.encode()) == 302
    assert status(session, "/dbsim/status") == 200
    assert status(session, "/") == 200


def test_with_a_login_the_login_post_is_checked_and_its_variable_never_allowed(
    tmp_path: Path, login_ui: UiChild
) -> None:
    # In this process (sim.cli.entry.main; refused in sim.cli.ui before Locust is imported):
    # test_allow_options_are_checked_before_the_ui_listens runs such a refusal on the binary.
    env = {**clean_environment(tmp_path), **LOGIN_ENV}
    refused = InProcessDbsim(tmp_path, env)(
        "ui", "--web-login", "DBSIM_TEST_LOGIN", "--allow-env", "DBSIM_TEST_LOGIN"
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.rc == 2 and len(lines) == 1, refused.stderr
    assert lines[0].startswith("error: --allow-env DBSIM_TEST_LOGIN: "), lines
    assert "correct horse" not in refused.stderr

    ui = login_ui
    try:
        login = urllib.parse.urlencode({"username": "alice", "password": "correct horse"})
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        got, _ = ui.request("POST", "/dbsim/login", login.encode(), {**form_type, "Origin": EVIL})
        assert got == 403  # a login from another site (login CSRF) is refused
        got, _ = ui.request("GET", "/dbsim/token")
        assert got == 302  # to the login page: the token is behind the login too
    finally:
        stderr = ui.stop()
    assert ui.proc.returncode == 0, stderr[-3000:]
    assert "correct horse" not in stderr and "Traceback" not in stderr  # never logged


def test_allow_options_are_checked_before_the_ui_listens(tmp_path: Path) -> None:
    """The first case on the real binary (``python -m sim.locust ui``), the second through
    ``sim.cli.entry.main`` in this process (the same check, before Locust is imported)."""
    env = clean_environment(tmp_path)
    for args, message, real in (
        (["--allow-env", "not a name"], "--allow-env: 'not a name' is not", True),
        (["--allow-host", "bad host"], "--allow-host: 'bad host' is not", False),
    ):
        if real:
            done = subprocess.run(
                [sys.executable, "-m", "sim.locust", "ui", *args],
                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=60, check=False,
            )  # fmt: skip
            rc, stderr = done.returncode, done.stderr
        else:
            result = InProcessDbsim(tmp_path, env)("ui", *args)
            rc, stderr = result.rc, result.stderr
        lines = stderr.strip().splitlines()
        assert rc == 2 and len(lines) == 1, stderr
        assert lines[0].startswith("error: " + message), lines
