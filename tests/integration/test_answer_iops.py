"""One IOPS per device per run (issue #27): every sentence of the answer quotes the figure the
tables show — over many real bundles, made here by short ``dbsim run``s on SQLite and on the
live PostgreSQL (closed loop, steps, open loop, an SLO met and one missed).

What is held, per bundle:

* the answer's sentence (report.html's first screen, the console's end, the ticket text) quotes
  the block table's IOPS (summary.json's mean over the measured window, the figure the console
  and report.html's Storage table print);
* any IOPS the whole run's verdict sentence quotes is that same figure;
* any IOPS a part's verdict sentence quotes is the per-part table's ``device IOPS``, and that
  is the length-weighted mean of the part's intervals in ``timeseries/block.csv``;
* report.html carries the answer block before the verdict, and the evidence table shows no
  database row for a run without database statistics nor Little's law for an open loop;
* the exit code and the answer agree: exit 1 says "SLO MISSED", exit 0 never does.

The runs are paced, as what is checked is that the figures agree, not how high they are: the
closed loops think 10-20 ms between transactions and the open loop asks 100 ops/s (unpaced,
each session took a CPU for the whole run); the three SQLite runs share one database file, so
only the first loads it (the others verify it). The runs are child processes (``python -m
sim.cli run``); the ticket formats' ``dbsim report``
and the closing ``dbsim drop`` run through ``sim.cli.entry.main`` in this process
(``InProcessDbsim``: the same working directory and environment, ~0.6 CPU-s of start-up less
each), since what is checked is what the command writes and prints.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import sys
from pathlib import Path

import pytest

from sim.bundle.iops import run_iops, same_iops
from sim.report.answer import build_answer, fmt_iops
from sim.report.data import load_analysis_file
from tests.e2e.conftest import InProcessDbsim
from tests.support import forked_dbsim

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PREFIX = f"ans{secrets.token_hex(3)}"
IOPS_IN_TEXT = re.compile(r"(\d[\d,]*(?:\.\d+)?) IOPS")
PG = "target: {kind: postgres, host: 127.0.0.1, database: test, user: postgres}"
SLOB = "workload: {name: slob, parameters: {scale: 80M%s}}"
#: One file for the SQLite runs (``{root}``: the module's directory): loaded once, then verified.
SQLITE = "target: {kind: sqlite, path: {root}/slob.sqlite}"
#: Closed-loop pacing: a few hundred transactions a second, not a CPU per session.
THINK = "think: {min_ms: 10, max_ms: 20}"
SCENARIOS = {
    "sqlite-closed": (SQLITE, SLOB % "", f"load: {{sessions: 2, duration_s: 2, {THINK}}}"),
    "sqlite-steps": (
        SQLITE,
        SLOB % "",
        "load: {steps: [{sessions: 1, duration_s: 1.5}, {sessions: 3, duration_s: 1.5}], "
        f"{THINK}}}",
    ),
    "sqlite-open": (
        SQLITE,
        SLOB % "",
        "load: {sessions: 2, mode: open, rate_ops_s: 100, duration_s: 2}",
    ),
    "pg-missed": (
        PG,
        SLOB % f", table_prefix: {PREFIX}",
        f"load: {{sessions: 2, duration_s: 2.5, {THINK}}}",
        "slos: [{name: tight, op: read, p99_us_max: 1}]",
    ),
    "pg-steps-met": (
        PG,
        SLOB % f", table_prefix: {PREFIX}",
        "load: {steps: [{sessions: 1, duration_s: 1.5}, {sessions: 2, duration_s: 1.5}], "
        f"{THINK}}}",
        "slos: [{op: read, p99_us_max: 60000000}, {ops_s_min: 1}]",
    ),
}


def _run(name: str, root: Path) -> tuple[Path, int, str]:
    path = root / f"{name}.yaml"
    body = [line.replace("{root}", str(root)) for line in SCENARIOS[name]]
    lines = [f"name: {name}", *body, f"output: {{directory: {root / 'runs'}}}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = set((root / "runs").glob("*")) if (root / "runs").exists() else set()
    done = forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", "run", str(path), "--warmup", "0.5"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    made = sorted(set((root / "runs").glob("*")) - before)
    assert len(made) == 1, f"{name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return made[0], done.returncode, done.stdout


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    root = tmp_path_factory.mktemp("answer")
    try:
        return {name: _run(name, root) for name in SCENARIOS}
    finally:
        _drop_pg_tables(root)


def _drop_pg_tables(root: Path) -> None:
    """``dbsim drop`` of what the PostgreSQL runs loaded (their own table prefix)."""
    for name in ("pg-missed", "pg-steps-met"):
        path = root / f"{name}.yaml"
        if path.exists():
            InProcessDbsim(REPO, dict(os.environ))("drop", path)
            return  # both share the prefix: one drop removes the data


def _quoted(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in IOPS_IN_TEXT.findall(text)]


def _part_means(bundle: Path, device: str, analysis: dict) -> list[float | None]:
    """Per part (step, or half) the mean IOPS of its measured intervals from block.csv, each
    weighted by its length (its ``t`` less the one before), on the intervals the analysis
    kept."""
    lengths: dict[float, tuple[float, float]] = {}
    previous: float | None = None
    with (bundle / "timeseries" / "block.csv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["entity"] != device:
                continue
            t = float(row["t"])
            if previous is not None and row["phase"] == "measure" and row.get("iops"):
                lengths[round(t, 3)] = (float(row["iops"]), t - previous)
            previous = t
    kept = [round(float(t), 3) for t in analysis["series"]["t"]]
    steps = analysis["series"]["step"]
    if any(s is not None for s in steps):
        keys: list[object] = list(steps)
    else:
        first = (len(kept) + 1) // 2
        keys = [*(["first"] * first), *(["second"] * (len(kept) - first))]
    parts: dict[object, list[tuple[float, float]]] = {key: [] for key in keys}
    for key, t in zip(keys, kept, strict=True):
        if t in lengths:
            parts[key].append(lengths[t])
    means: list[float | None] = []
    for pairs in parts.values():
        span = sum(w for _, w in pairs)
        means.append(sum(v * w for v, w in pairs) / span if span > 0 else None)
    return means


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_sentence_quotes_the_block_tables_iops(
    name: str, bundles: dict[str, tuple[Path, int, str]]
) -> None:
    bundle, code, stdout = bundles[name]
    assert code in (0, 1), stdout
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    analysis = load_analysis_file(bundle)
    assert analysis is not None
    answer = build_answer(summary, analysis)
    device = analysis["primary_device"]
    if device is None:
        pytest.skip(f"{name}: no block device measured on this host")
    table = run_iops(summary, device)
    assert table is not None
    # The answer's sentence: the block table's figure, whole I/Os.
    assert answer.device == device and same_iops(answer.iops, table)
    assert f"at {fmt_iops(table)} IOPS on {device} (mean over the measured window)" in (
        answer.sentence
    )
    # The whole run's verdict sentence, when it quotes an IOPS.
    for quoted in _quoted(analysis["verdict"]["summary"]):
        assert same_iops(quoted, table), (quoted, table, analysis["verdict"]["summary"])
    # Per part: its sentence quotes its table row, and the row is the mean of its intervals.
    means = _part_means(bundle, device, analysis)
    assert len(means) == len(analysis["segments"])
    for segment in analysis["segments"]:
        for quoted in _quoted(segment["verdict"]["summary"]):
            assert same_iops(quoted, segment["device_iops"]), segment
    # A stepped run's curve has a point per step: its IOPS is the step's row of the table.
    if any(s is not None for s in analysis["series"]["step"]):
        xs = [p["x"] for p in analysis["curve"]["points"]]
        rows = [s["device_iops"] for s in analysis["segments"]]
        assert xs == pytest.approx(rows, rel=1e-3)
    # The console's end and report.html say the same sentence.
    flat = " ".join(stdout.split())
    assert f"{fmt_iops(table)} IOPS on {device} (mean over the measured window)" in flat
    html = (bundle / "report.html").read_text(encoding="utf-8")
    assert html.index('id="answer"') < html.index('id="verdict"')
    assert f"at {fmt_iops(table)} IOPS on {device}" in html


def test_part_tables_are_the_mean_of_their_intervals(
    bundles: dict[str, tuple[Path, int, str]],
) -> None:
    for name, (bundle, _, _) in bundles.items():
        analysis = load_analysis_file(bundle)
        assert analysis is not None
        device = analysis["primary_device"]
        if device is None:
            continue
        means = _part_means(bundle, device, analysis)
        for segment, mean in zip(analysis["segments"], means, strict=True):
            if mean is None or segment["device_iops"] is None:
                continue
            # block.csv rounds t to the millisecond: a relative 1e-3 of the weights.
            assert segment["device_iops"] == pytest.approx(mean, rel=2e-3), (name, segment)


def test_exit_code_and_answer_agree(bundles: dict[str, tuple[Path, int, str]]) -> None:
    assert bundles["pg-missed"][1] == 1
    assert "answer: SLO MISSED (1 of 1 missed): exit 1" in bundles["pg-missed"][2]
    assert "missed by" in " ".join(bundles["pg-missed"][2].split())
    assert bundles["pg-steps-met"][1] == 0
    assert "answer: SLOs met (2 of 2)" in bundles["pg-steps-met"][2]
    for name, (_, code, stdout) in bundles.items():
        assert ("SLO MISSED" in stdout) == (code == 1), name


def test_checks_that_do_not_apply_are_not_shown(
    bundles: dict[str, tuple[Path, int, str]],
) -> None:
    open_loop = load_analysis_file(bundles["sqlite-open"][0])
    assert open_loop is not None
    checks = {e["check"] for e in open_loop["verdict"]["evidence"]}
    assert "Little's law L / sessions" not in checks
    closed = load_analysis_file(bundles["pg-missed"][0])
    assert closed is not None
    rows = {e["check"]: e for e in closed["verdict"]["evidence"]}
    assert "Little's law L / sessions" in rows
    # A "met" threshold is really met: the row's value passes its comparison.
    for row in closed["verdict"]["evidence"]:
        value, threshold = row["value"], row["threshold"]
        if row["passed"] and value is not None and threshold is not None:
            ok = {"≥": value >= threshold, "<": value < threshold, "≤": value <= threshold}
            assert ok[row["comparison"]], row


def test_the_ticket_formats_quote_the_same_iops(bundles: dict[str, tuple[Path, int, str]]) -> None:
    bundle = bundles["pg-missed"][0]
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    analysis = load_analysis_file(bundle)
    assert analysis is not None
    device = analysis["primary_device"]
    if device is None:
        pytest.skip("no block device measured on this host")
    quoted = f"{fmt_iops(run_iops(summary, device))} IOPS on {device}"
    inside = InProcessDbsim(REPO, dict(os.environ))
    for fmt, name in (("markdown", "report.md"), ("text", "report.txt"), ("pdf", "report.pdf")):
        done = inside("report", bundle, "--format", fmt)
        assert done.returncode == 0, done.describe()
        assert str(bundle / name) in done.stdout.split()
        assert "answer: SLO MISSED" in done.stderr  # the answer, on stderr
        if fmt == "pdf":
            data = (bundle / name).read_bytes()
            assert data.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", data)) == 1
        else:
            assert quoted in " ".join((bundle / name).read_text(encoding="utf-8").split())
