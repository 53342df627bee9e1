"""Which of gevent's monitor reports are dbsim's (tests/support/gevent_reports.py), on the
report layout gevent prints: the sighting of 2026-12-07 (Locust rendering its own page through
dbsim's guard) is not; dbsim's own route, and dbsim calling a blocking function, are."""

from __future__ import annotations

from tests.support.gevent_reports import _REPO, hub_blocks_in_dbsim

SITE = "/venv/lib/python3.11/site-packages"


def _report(*frames: tuple[str, str]) -> str:
    """A monitor report whose blocked stack is ``frames`` (path, code line), outermost first."""
    lines = [
        "=== appears to be blocked ===",
        "Blocked Stack (for thread id 0x7f790dbccb80):",
        f'  File "{SITE}/gevent/hub.py", line 647, in run',
        "    loop.run()",
    ]
    for number, (path, code) in enumerate(frames, start=10):
        lines += [f'  File "{path}", line {number}, in f', f"    {code}"]
    return "\n".join([*lines, "", "Info:", "  greenlets ..."]) + "\n"


GUARD = (f"{_REPO}/sim/locust/guard.py", "return app(environ, start)")
FLASK = (f"{SITE}/flask/app.py", "rv = self.dispatch_request()")


def test_locust_s_own_page_through_the_guard_is_not_dbsim_s() -> None:
    stderr = _report(
        GUARD,
        FLASK,
        (f"{SITE}/locust/web.py", 'return render_template("index.html")'),
        (f"{SITE}/blinker/base.py", "def receivers_for("),
    )
    assert hub_blocks_in_dbsim(stderr) == []


def test_a_route_of_dbsim_s_own_called_by_flask_is_dbsim_s() -> None:
    stderr = _report(GUARD, FLASK, (f"{_REPO}/sim/locust/routes.py", "rows = list(reader)"))
    assert len(hub_blocks_in_dbsim(stderr)) == 1


def test_dbsim_calling_a_blocking_function_is_dbsim_s() -> None:
    sleeping = _report((f"{_REPO}/sim/core/engine.py", "time.sleep(0.5)"))
    waiting = _report(
        (f"{_REPO}/storage/collectors/iostat.py", "proc.wait()"),
        ("/usr/lib/python3.11/subprocess.py", "(pid, sts) = os.waitpid(self.pid, wait_flags)"),
    )
    assert len(hub_blocks_in_dbsim(sleeping + waiting)) == 2


def test_no_dbsim_frame_is_not_dbsim_s() -> None:
    stderr = _report((f"{SITE}/locust/runners.py", "for frame in inspect.stack():"))
    assert hub_blocks_in_dbsim(stderr) == []
