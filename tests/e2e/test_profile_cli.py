"""``dbsim profile`` on a real run's bundle, as a user runs it: the figures against the
bundle's own rows, the console at 80 columns, ``--json`` and profile.json, the page in
headless Chromium, and the refusals (exit 2, one line).

The run that makes the bundle and the live capture are child processes; so is every
``dbsim profile`` of a FIFO (a hang is bounded only there), which also proves that the process
reports what ``main`` returns. The other ``dbsim profile`` commands run through
``sim.cli.entry.main`` in the test process (``inside``: the same directories and environment,
~0.3 CPU-s of start-up less each), since what they check is what the command prints, writes and
refuses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Dbsim, InProcessDbsim, clean_environment, single_bundle
from tests.e2e.test_report_browser import CHROMIUM_ARGS, _browser_or_skip
from tests.support.profile_bundles import csv_rows

pytestmark = [pytest.mark.e2e]

RUN_SECONDS = "8"
# Paced (issue #25): closed loop with think time, so the bundle is still a closed-loop run's,
# but its sessions no longer take whatever CPU is free for 8 s (the figures are checked
# against the bundle's own rows, not against the machine's utmost); ~250 ops/s, a tenth of
# them updates, still write to the device in every interval.
PACED = ("--set", "load.think.min_ms=5", "--set", "load.think.max_ms=10")
TOP_KEYS = {
    "profile_version", "bundle", "kind", "origin", "format", "status", "start", "timezone",
    "files", "devices", "database", "nfs_client", "peaks", "hours", "daily_shape", "span",
    "not_in_data",
}  # fmt: skip
PEAK_KEYS = {
    "load", "mean", "busiest_minute", "busiest_15min", "busiest_interval", "p95_interval",
    "p95_hour",
}  # fmt: skip
SCREENSHOT = Path("/tmp/dbsim-profile-run-1366x768.png")


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dbsim]:
    base = tmp_path_factory.mktemp("profile")
    (base / "cwd").mkdir()
    (base / "tmp").mkdir()
    dbsim = Dbsim(base / "cwd", clean_environment(base / "tmp"))
    yield dbsim
    dbsim.cleanup()


@pytest.fixture(scope="module")
def inside(runner: Dbsim) -> InProcessDbsim:
    """``runner``'s directories and environment, the command run in this process."""
    return InProcessDbsim(runner.cwd, runner.env)


@pytest.fixture(scope="module")
def run_bundle(runner: Dbsim) -> Path:
    """A real ``dbsim run`` of 8 s (SLOB-like on SQLite, paced): block and, as root,
    blocklatency."""
    out = runner.cwd.parent / "runs"
    done = runner("run", "--duration", RUN_SECONDS, "--warmup", "0", "-o", out, *PACED)
    assert done.rc == 0, done.describe()
    return single_bundle(out)


def _measured(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [r for r in rows if r["phase"] == "measure"]


def test_the_figures_are_the_bundles_rows(inside: InProcessDbsim, run_bundle: Path) -> None:
    done = inside("profile", run_bundle, "--json")
    assert done.rc == 0, done.describe()
    doc = json.loads(done.stdout)
    assert doc == json.loads((run_bundle / "profile.json").read_text())
    assert set(doc) == TOP_KEYS and set(doc["peaks"]) == PEAK_KEYS
    assert (doc["profile_version"], doc["kind"], doc["origin"]) == (1, "run", "run")
    # By hand from timeseries/block.csv: each interval as long as the time since the one
    # before (the first since t = 0, when the sessions started), rates weighted by it.
    rows = _measured(csv_rows(run_bundle, "block"))
    device = doc["devices"]["counted"][0]
    mine = [r for r in rows if r["entity"] == device]
    assert doc["devices"]["counted"] == sorted({r["entity"] for r in rows})
    times = [float(r["t"]) for r in mine]
    lengths = [t - p for t, p in zip(times, [0.0, *times[:-1]], strict=True)]
    iops = [float(r["r_s"]) + float(r["w_s"]) for r in mine]
    mean = sum(v * dt for v, dt in zip(iops, lengths, strict=True)) / sum(lengths)
    summary = doc["devices"]["summary"]
    assert summary["iops"]["mean"]["value"] == pytest.approx(mean, rel=1e-5)
    assert summary["iops"]["max"]["value"] == pytest.approx(max(iops), rel=1e-5)
    writes = [float(r["w_s"]) * dt for r, dt in zip(mine, lengths, strict=True)]
    await_w = sum(float(r["w_await_ms"]) * w for r, w in zip(mine, writes, strict=True))
    assert summary["write_await_ms"]["mean"]["value"] == pytest.approx(
        await_w / sum(writes), rel=1e-5
    )
    top = max(range(len(iops)), key=iops.__getitem__)
    busiest = doc["peaks"]["busiest_interval"]
    assert busiest["end_t"] == pytest.approx(times[top])
    assert busiest["iops"]["value"] == pytest.approx(iops[top], rel=1e-5)
    assert doc["peaks"]["busiest_minute"]["unresolved"].startswith("the data spans 8")


def _p99_of(bundle: Path, entity: str) -> list[float]:
    rows = (
        _measured(csv_rows(bundle, "blocklatency"))
        if (bundle / "timeseries" / "blocklatency.csv").is_file()
        else []
    )
    return [float(r["p99_ms"]) for r in rows if r["entity"] == entity and r["p99_ms"]]


def test_traced_figures_where_traced(inside: InProcessDbsim, run_bundle: Path) -> None:
    done = inside("profile", run_bundle, "--json")
    doc = json.loads(done.stdout)
    device = doc["devices"]["counted"][0]
    p99 = _p99_of(run_bundle, f"{device}:write")
    if not p99:
        pytest.skip("!!! no blocklatency rows (not root, or no bpftrace): p99 NOT checked !!!")
    summary = doc["devices"]["summary"]
    assert summary["write_p99_ms"]["max"]["value"] == pytest.approx(max(p99))
    rows = _measured(csv_rows(run_bundle, "blocklatency"))
    reads = [r for r in rows if r["entity"] == f"{device}:read" and r.get("size_kib_le_8")]
    if not reads:
        pytest.skip("!!! blocklatency without request sizes: the size histogram NOT checked !!!")
    # By hand: the reads' size counts added over the intervals, as shares of all of them.
    buckets = [c for c in reads[0] if c.startswith("size_kib_")]
    counts = {c: sum(float(r[c]) for r in reads) for c in buckets}
    shares = {b["bucket"]: b["pct"]["value"] for b in doc["devices"]["read_sizes"]["buckets"]}
    for column, count in counts.items():
        assert shares[column] == pytest.approx(100 * count / sum(counts.values()), rel=1e-5)
    every = [r for r in rows if r["entity"] == device and r.get("seq_pct")]
    weighted = sum(float(r["seq_pct"]) * float(r["n"]) for r in every)
    assert summary["seq_pct"]["mean"]["value"] == pytest.approx(
        weighted / sum(float(r["n"]) for r in every), rel=1e-5
    )


def test_the_console_at_80_columns(inside: InProcessDbsim, run_bundle: Path) -> None:
    done = inside("profile", run_bundle, env={"COLUMNS": "80"})
    assert done.rc == 0, done.describe()
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Peak: "), lines[:3]
    assert "\u00a0IOPS, " in lines[0] and "latency" in done.stdout.split("Typical:")[0]
    # Only a path longer than the line may pass it, whole on a line of its own (to copy).
    too_wide = [line for line in lines if len(line) > 80 and " " in line.strip()]
    assert not too_wide, done.stdout
    assert "…" not in done.stdout and "{" not in done.stdout, done.stdout
    assert "Not in the data:" in lines
    assert str(run_bundle / "profile.html") in [line.split()[-1] for line in lines]
    wide = inside("profile", run_bundle, env={"COLUMNS": "200"})
    assert max(len(line) for line in wide.stdout.splitlines()) <= 200


def test_the_page_in_a_browser(inside: InProcessDbsim, run_bundle: Path, tmp_path: Path) -> None:
    sync_playwright, _, executable = _browser_or_skip()
    page_path = tmp_path / "profile.html"
    done = inside("profile", run_bundle, "--html", page_path)
    assert done.rc == 0, done.describe()
    text = page_path.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org", "")
    console: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.route("**/*", lambda route: _only_files(route, requests))
        page.goto(page_path.as_uri())
        drawn = page.evaluate(
            "() => Array.from(document.querySelectorAll('svg path')).filter("
            "p => (p.getAttribute('d') || '').split(/[ML]/).length > 3).length"
        )
        first = page.inner_text("section#peak p.verdict")
        page.screenshot(path=str(SCREENSHOT), full_page=False)
        browser.close()
    assert not requests and not [m for m in console if m.startswith(("error", "warning"))]
    assert drawn >= 4, drawn  # reads, writes, sizes, latency, queue lines
    assert first.startswith("Peak: ")
    assert SCREENSHOT.stat().st_size > 10_000


def _only_files(route: Any, requests: list[str]) -> None:
    if route.request.url.startswith("file://"):
        route.continue_()
    else:
        requests.append(route.request.url)
        route.abort()


def _one_error(done: Any, *parts: str) -> None:
    assert done.rc == 2, done.describe()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def test_refusals(runner: Dbsim, inside: InProcessDbsim, run_bundle: Path, tmp_path: Path) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("not a bundle\n")
    _one_error(inside("profile", plain), "is not a run bundle (not a directory)")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_error(runner("profile", fifo), "is not a run bundle")
    planted = tmp_path / "planted"
    planted.mkdir()
    os.mkfifo(planted / "summary.json")
    _one_error(runner("profile", planted, timeout=60), "summary.json")
    _one_error(inside("profile", tmp_path / "missing"), "no such directory")
    # A run's bundle without its device figures (and nothing else to profile).
    bare = tmp_path / "bare"
    shutil.copytree(run_bundle, bare)
    for name in ("block.csv", "blocklatency.csv"):
        (bare / "timeseries" / name).unlink(missing_ok=True)
    _one_error(inside("profile", bare), "no storage figures to profile")
    # A time series planted as a FIFO: refused, never blocked on.
    fifo_series = tmp_path / "fifo-series"
    shutil.copytree(run_bundle, fifo_series)
    (fifo_series / "timeseries" / "block.csv").unlink()
    os.mkfifo(fifo_series / "timeseries" / "block.csv")
    _one_error(runner("profile", fifo_series, timeout=60), "block.csv", "not a regular file")


def test_html_over_a_link_is_refused_and_the_target_kept(
    inside: InProcessDbsim, run_bundle: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious.html"
    precious.write_text("mine\n")
    link = tmp_path / "page.html"
    link.symlink_to(precious)
    _one_error(inside("profile", run_bundle, "--html", link), "--html", str(link))
    assert precious.read_text() == "mine\n" and link.is_symlink()


def test_a_live_capture_still_running(
    runner: Dbsim, inside: InProcessDbsim, tmp_path: Path
) -> None:
    """dbsim capture of the devices under a directory, profiled while it writes: read to its
    last whole interval, said to be running; then stopped with SIGTERM."""
    out = tmp_path / "captures"
    capture = runner.start("capture", "--path", tmp_path, "--duration", "60", "-o", out)
    deadline = time.monotonic() + 60
    series: Path | None = None
    while time.monotonic() < deadline and capture.poll() is None:
        found = list(out.glob("*/timeseries/block.csv"))
        if found and len(found[0].read_text().splitlines()) >= 4:  # header and 3 intervals
            series = found[0]
            break
        time.sleep(0.2)
    assert series is not None, runner.finish(capture, 30).describe()
    done = inside("profile", series.parent.parent, "--json")
    capture.send_signal(signal.SIGTERM)
    stopped = runner.finish(capture, 30)
    assert done.rc == 0, done.describe()
    doc = json.loads(done.stdout)
    assert (doc["kind"], doc["origin"], doc["status"]) == ("capture", "live", "running")
    assert doc["span"]["intervals"] >= 3
    assert any("still running" in item["what"] for item in doc["not_in_data"])
    assert stopped.rc == 143, stopped.describe()


def test_a_link_planted_at_profile_json_is_refused_after_the_profile_is_printed(
    inside: InProcessDbsim, run_bundle: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "copy"
    shutil.copytree(run_bundle, bundle)
    precious = tmp_path / "precious.json"
    precious.write_text("{}\n")
    (bundle / "profile.json").unlink(missing_ok=True)
    (bundle / "profile.json").symlink_to(precious)
    done = inside("profile", bundle, "--json")
    _one_error(done, "profile.json", str(bundle / "profile.json"))
    assert json.loads(done.stdout)["profile_version"] == 1  # printed all the same
    assert precious.read_text() == "{}\n" and (bundle / "profile.json").is_symlink()
