"""report.html in a real browser: Debian's headless Chromium through Playwright, offline.

A real ``dbsim run`` makes the bundle; the report is rendered and opened from a file:// URL
with every non-file request aborted and recorded. The page must make no request, log no
console message of level error or warning, and draw its charts; a full-page screenshot and
an A4 PDF are left in the bundle for a person to look at.

Needs ``chromium`` (apt) and ``playwright`` (pip); never ``playwright install``: the browser
is Debian's, launched by path.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sim.report import write_report
from tests.e2e.conftest import Dbsim, single_bundle

pytestmark = [pytest.mark.e2e]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RUN_SECONDS = 5
RATE_OPS_S = 400
CANARY_URL = "http://192.0.2.1/"  # TEST-NET-1: never routed, and aborted by the guard anyway
# A chart "is drawn" when it has at least this many plotted coordinates.
MIN_POINTS_PER_CHART = 3
COUNT_DRAWN_CHARTS = """
(least) => Array.from(document.querySelectorAll('svg')).filter(svg => {
  const vertices = Array.from(svg.querySelectorAll('path'))
    .map(p => (p.getAttribute('d') || '').split(/[ML]/).length - 1)
    .reduce((a, b) => a + b, 0);
  // dots, and histogram bars (the only rects with a tooltip); frames and bands do not count
  const marks = svg.querySelectorAll('circle').length + svg.querySelectorAll('rect > title').length;
  return vertices + marks >= least;
}).length
"""


def _browser_or_skip() -> tuple[Any, type[Exception], str]:
    """Playwright's sync API, its error class and Debian's chromium, or a loud skip."""
    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    if executable is None:
        pytest.skip(
            "!!! chromium is not installed (apt-get install -y chromium): report.html NOT "
            "checked in a browser !!!"
        )
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip(
            "!!! the playwright Python package is not installed (pip install playwright; never "
            "`playwright install`): report.html NOT checked in a browser !!!"
        )
    return sync_playwright, Error, executable


def test_report_opens_offline_without_errors_and_draws_its_charts(
    dbsim: Dbsim, out_dir: Path
) -> None:
    sync_playwright, PlaywrightError, executable = _browser_or_skip()
    # Paced (open loop): the report's charts need a few seconds of samples, not the machine's
    # utmost (closed loop, two sessions took ~1.4 CPUs for the run's 5 s).
    pace = ("--set", "load.mode=open", "--set", f"load.rate_ops_s={RATE_OPS_S}")
    result = dbsim("run", "--duration", str(RUN_SECONDS), *pace, "-o", out_dir)
    assert result.rc == 0, result.describe()
    bundle = single_bundle(out_dir)
    report, problem = write_report(bundle)  # what `dbsim report RUN_DIR` does
    assert problem is None or "not installed" in problem, problem

    console: list[str] = []
    failed: list[str] = []
    blocked: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 900})

            def guard(route: Any) -> None:
                url = route.request.url
                if url.startswith("file://"):
                    route.continue_()
                else:
                    blocked.append(url)
                    route.abort()

            context.route("**/*", guard)
            context.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}"))
            page = context.new_page()
            page.on(
                "console",
                lambda m: (
                    console.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_load_state("networkidle")
            title = page.title()
            charts = page.evaluate(COUNT_DRAWN_CHARTS, MIN_POINTS_PER_CHART)
            svgs = page.locator("svg").count()
            headings = page.locator("h2").all_inner_texts()
            page.screenshot(path=str(bundle / "report.png"), full_page=True)
            page.emulate_media(media="print")
            page.pdf(path=str(bundle / "report.pdf"), format="A4", print_background=True)
            report_blocked, report_failed = list(blocked), list(failed)
            # The guard itself must work, or "nothing blocked" would prove nothing.
            canary = context.new_page()
            with pytest.raises(PlaywrightError):
                canary.goto(CANARY_URL)
        finally:
            browser.close()

    print(f"report: {report}\nscreenshot: {bundle / 'report.png'}")
    assert blocked[len(report_blocked) :] == [CANARY_URL], "the request guard is not working"
    assert report_blocked == [], f"the report tried to load: {report_blocked}"
    assert report_failed == [], f"failed requests: {report_failed}"
    assert console == [], f"console messages: {console}"
    assert title.startswith("dbsim report: ")
    # Time series, latency versus load, one histogram per operation (read and update).
    assert svgs >= 4 and charts == svgs, f"{charts} of {svgs} charts have data drawn"
    for heading in ("Operations", "Time series", "Latency versus load", "Scenario as run"):
        assert any(h.startswith(heading) for h in headings), (heading, headings)
    assert (bundle / "report.png").stat().st_size > 50_000
    assert (bundle / "report.pdf").read_bytes().startswith(b"%PDF")
