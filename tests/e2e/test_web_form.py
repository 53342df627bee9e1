"""dbsim's own start form (``/dbsim/live``) in Debian's headless Chromium via Playwright.

The web UI (``dbsim ui`` as a child process, on a free loopback port) starts with the default
scenario (SLOB-like on SQLite). The browser fills dbsim's form with two bad values:
each field shows, inline, exactly the line ``dbsim validate`` prints for the same scenario
(``--set`` of the same values), and nothing starts. Filled right, the run starts; the phase
indicator goes through ``loading`` (with the load's progress) to ``measuring`` (elapsed and
remaining), the Run tab says so too; a second live page sees every chart grow and reads the
Storage chart's device IOPS, which equal block.csv's for that second within 5 %; Stop ends the
run ``completed (stopped early)``, which the indicator then shows, the live page gives the
final verdict, and the bundle zip downloaded from the Run tab holds the run's report.html,
which opens. Screenshots (the form with its errors, the run measuring, every live tab, the
end, the report from the zip) are left in the test's tmp directory for a person to look at.
"""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import InProcessDbsim, bundle_dirs, clean_environment
from tests.e2e.test_web_ui import (
    CHROMIUM_ARGS,
    _browser_or_skip,
    _check_downloads,
    _free_port,
    _get_json,
    _watch_live_page,
)

pytestmark = [pytest.mark.e2e]

SESSIONS = 2
WORK_UNIT = 8
# ~2 s of loading (9,000-11,500 rows/s seen): the indicator, polled every 500 ms while the run
# loads, is seen loading with its progress (60,000 rows: 4-8 s, and 1.4 CPU-s more of the UI).
SCALE_ROWS = 20_000
BAD = {"load.duration_s": "-5", "workload.parameters.work_unit": "1"}
UI_COMMAND = (sys.executable, "-m", "sim.locust", "ui")  # = `dbsim ui` (docs/ui.md)
START_TIMEOUT_S = 90.0  # dbsim ui's start (Locust, gevent) at nice 19 beside 8 workers: >30 s seen
STEP_TIMEOUT_MS = 30_000
STOP_TIMEOUT_MS = 90_000
#: Records every phase the indicator shows (with its text), in order, as the page changes it.
RECORD_PHASES = """() => {
  window.__phases = [];
  const box = document.getElementById("phase");
  const note = () => {
    const last = window.__phases[window.__phases.length - 1];
    const text = document.getElementById("phase-text").textContent;
    if (!last || last.phase !== box.dataset.phase || last.text !== text)
      window.__phases.push({ phase: box.dataset.phase, text: text });
  };
  new MutationObserver(note).observe(box, { attributes: true, subtree: true, characterData: true, childList: true });
}"""


@dataclass
class Ui:
    url: str
    out: Path
    proc: subprocess.Popen[str]
    stderr: Path


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[Ui]:
    """``dbsim ui`` on a free loopback port with ``-o runs``; its stderr goes to a file, not a
    pipe: a pipe nobody reads fills up, and the web UI then blocks writing to it."""
    port, child_tmp = _free_port(), tmp_path / "tmp"
    child_tmp.mkdir()
    stderr = tmp_path / "ui-stderr.txt"
    with stderr.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            [*UI_COMMAND, "--port", str(port), "-o", "runs"],
            cwd=tmp_path,
            env=clean_environment(child_tmp),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            _get_json(f"{url}/dbsim/status")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"dbsim ui did not come up: {stderr.read_text()[-3000:]}")
            time.sleep(0.2)
    try:
        yield Ui(url, tmp_path / "runs", proc, stderr)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _fail(ui: Ui, what: str) -> None:
    """Fail with where the run stood (/dbsim/status) and the web UI's stderr."""
    try:
        status: Any = _get_json(f"{ui.url}/dbsim/status")
    except OSError as exc:
        status = f"unreachable: {exc}"
    pytest.fail(f"{what}; /dbsim/status: {status}; stderr: {ui.stderr.read_text()[-4000:]}")


def _fill(page: Any, values: dict[str, str]) -> None:
    for name, value in values.items():
        page.fill(f"[name='{name}']", value)


def _validate_lines(cwd: Path, values: dict[str, str]) -> list[str]:
    """What ``dbsim validate`` says of the default scenario with ``values`` set (through
    ``sim.cli.entry.main`` in this process, with a child's environment and directory: the
    command's own lines; its binary is run in tests/e2e/test_cli_errors.py and others)."""
    sets = [arg for name, value in values.items() for arg in ("--set", f"{name}={value}")]
    cwd.mkdir()
    done = InProcessDbsim(cwd, clean_environment(cwd))("validate", *sets)
    assert done.rc == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), done.stderr
    return [line[len("error: ") :] for line in lines]


def test_start_form_validates_like_the_cli_and_runs_through_its_phases(
    ui: Ui, tmp_path: Path
) -> None:
    sync_playwright, executable = _browser_or_skip()
    url = ui.url
    shots = tmp_path / "screenshots"
    shots.mkdir()
    good = {
        "workload.parameters.scale": str(SCALE_ROWS),
        "workload.parameters.work_unit": str(WORK_UNIT),
        "load.sessions": str(SESSIONS),
        "load.warmup_s": "1",
        "load.duration_s": "300",  # stopped by hand below
        # Paced (open loop): closed loop, the two sessions took ~1.4 CPUs while the pages were
        # watched; 400 ops/s still writes the device every second (its IOPS are compared below)
        "load.rate_ops_s": "400",
    }
    expected = _validate_lines(tmp_path / "cli", {**good, **BAD})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(STEP_TIMEOUT_MS)
            page.goto(f"{url}/dbsim/live")
            page.locator("[name='load.duration_s']").wait_for()
            assert page.locator("[name='target.kind']").input_value() == "sqlite"
            assert page.locator("input[type=password], [name='target.password']").count() == 0
            page.evaluate(RECORD_PHASES)

            # Bad values: each field says what `dbsim validate` says, and nothing starts.
            _fill(page, {**good, **BAD})
            page.get_by_role("button", name="Start", exact=True).click()
            for name in BAD:
                page.locator(f".field-error[data-for='{name}']:not(:empty)").wait_for()
            shown = [page.locator(f".field-error[data-for='{name}']").inner_text() for name in BAD]
            assert sorted(shown) == sorted(expected), (shown, expected)
            assert page.locator("#form-errors").inner_text() == ""
            page.screenshot(path=str(shots / "form-errors.png"), full_page=True)
            assert _get_json(f"{url}/dbsim/status")["run"]["status"] == "idle"
            assert bundle_dirs(ui.out) == []

            # Right values: the run starts and the indicator moves through its phases.
            _fill(page, good)
            page.get_by_role("button", name="Start", exact=True).click()
            try:
                page.locator("#phase[data-phase=measuring]").wait_for()
            except Exception:  # Playwright's TimeoutError: say where the run stood
                _fail(ui, "the phase indicator never showed measuring")
            assert page.locator(".field-error:not(:empty)").count() == 0  # errors cleared
            # A second or more measured (remaining under 5 minutes), for the window and the shot.
            page.locator("#phase-text", has_text=re.compile(r"0:04:5\d remaining")).wait_for()
            text = page.locator("#phase-text").inner_text()
            assert re.fullmatch(r"measuring: 0:00:0\d elapsed, 0:04:5\d remaining", text), text
            page.get_by_role("button", name="Run", exact=True).click()
            run_tab = page.locator("#run-table tr", has_text="phase").first
            assert "measuring" in run_tab.inner_text()
            # Locust's own Run tab (the rows its page polls) says the same.
            tabs = _get_json(f"{url}/stats/requests")["extended_stats"]
            locust_run = next(t["data"] for t in tabs if t["key"] == "run")
            assert locust_run[0]["figure"] == "phase", locust_run
            assert locust_run[0]["value"] in ("measuring", "finishing"), locust_run
            page.screenshot(path=str(shots / "form-measuring.png"), full_page=True)
            status = _get_json(f"{url}/dbsim/status")
            bundle = ui.out.parent / status["run"]["bundle"]
            # The run the form started, on a second live page: every chart grows, and the
            # Storage chart's device IOPS is read off it (checked against block.csv below).
            live = browser.new_page(viewport={"width": 1400, "height": 900})
            live.set_default_timeout(STEP_TIMEOUT_MS)
            reading = _watch_live_page(live, url, shots)

            page.locator("#stop").click()
            try:  # a loaded machine has taken tens of seconds to stop (sim.locust.host)
                page.locator("#phase[data-phase=finished]").wait_for(timeout=STOP_TIMEOUT_MS)
            except Exception:  # Playwright's TimeoutError: say where the run stood
                _fail(ui, "the phase indicator never showed finished")
            page.locator("#phase-text", has_text="completed (stopped early)").wait_for()
            page.screenshot(path=str(shots / "form-finished.png"), full_page=True)
            phases: list[dict[str, str]] = page.evaluate("window.__phases")
            # The final verdict, then the bundle downloaded from the Run tab and its report.
            live.locator("#verdict-kind", has_text="final verdict").wait_for()
            live.screenshot(path=str(shots / "live-final.png"), full_page=True)
            page.get_by_role("button", name="Run", exact=True).click()
            _check_downloads(url, bundle, page, browser, shots)
        finally:
            browser.close()

    assert "Traceback" not in ui.stderr.read_text(encoding="utf-8")
    order = [p["phase"] for p in phases]
    assert "loading" in order and "measuring" in order, phases
    assert order.index("loading") < order.index("measuring") < order.index("finished"), phases
    loading = [p["text"] for p in phases if p["phase"] == "loading"]
    progress = re.compile(rf"\d+/{SCALE_ROWS:,} rows \(\d+ %\)")
    assert any(progress.search(t) for t in loading), loading
    assert "warm-up" in order, phases
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "completed" and summary["stopped_early"] is True, summary
    assert summary["reason"] == "stopped from Locust"
    assert summary["sessions"] == SESSIONS
    assert summary["timing"]["measured_s"] > 1
    scenario = (bundle / "scenario.yaml").read_text(encoding="utf-8")
    assert f"work_unit: {WORK_UNIT}" in scenario and f"scale: {SCALE_ROWS}" in scenario
    # The live Storage chart's IOPS is block.csv's for the same interval (within 5 %).
    with (bundle / "timeseries" / "block.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    same = [r for r in rows if r["entity"] == reading["entity"] and float(r["t"]) == reading["t"]]
    assert same, (reading, rows[-3:])
    assert reading["iops"] == pytest.approx(float(same[0]["iops"]), rel=0.05), (reading, same)
