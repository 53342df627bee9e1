"""Little's law's "sessions inside operations N % of the time" (the verdict's IOPS-plateau
evidence, the analysis' littles_law section, the report): never a share of time above 100 %.

On the recorded three-host bundle tests/data/netns_hosts/quota_h2 (an open loop paced at
600 ops/s over 2 + 2 sessions, h2's worker held to 0.1 core; see its README) the evidence
once said "sessions inside operations 12790 % of the time". The counts were right (the merged
run's operations, 4 sessions, the intervals' lengths): an open loop's latency counts from each
operation's intended start, so L = X · R also counts the operations queued behind their
schedule, and L / sessions is no share of session time there. A closed loop's ratio is one,
and is printed as a percentage only up to 100 %."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sim.analysis import analyze_bundle
from sim.analysis.sections import sessions_busy
from sim.report import render_report
from tests.unit.test_analysis import device, op, write_bundle

RECORDED = Path(__file__).resolve().parents[1] / "data" / "netns_hosts" / "quota_h2"
SHARE = re.compile(r"inside operations (\d+) % of the time")


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(RECORDED, copy, ignore=shutil.ignore_patterns("README.md"))
    return copy


def _meanings(analysis: dict) -> list[str]:
    verdicts = [analysis["verdict"], *(s["verdict"] for s in analysis["segments"])]
    return [e["meaning"] for v in verdicts for e in v["evidence"]]


def test_an_open_loop_on_three_hosts_claims_no_share_of_session_time(bundle: Path) -> None:
    analysis = analyze_bundle(bundle)
    summary = json.loads((bundle / "summary.json").read_text())
    # The figures behind the ratio are the merged run's: 4 sessions (2 per worker), L from
    # every worker's operations over the measured intervals' lengths (16.016 s).
    workers = summary["distributed"]["workers"]
    law = analysis["littles_law"]
    assert law["sessions"] == sum(w["sessions"] for w in workers) == 4
    ops = summary["operations"].values()
    latency_s = sum(o["count"] * o["mean_us"] for o in ops) / 1e6
    assert law["concurrency_measured"] == pytest.approx(latency_s / 16.016, rel=1e-3)
    assert law["ratio"] == pytest.approx(law["concurrency_measured"] / 4, rel=1e-3)
    assert law["ratio"] > 100  # operations queued behind h2's schedule: no share of time
    assert law["note"].startswith("open loop: latency counts from each operation's intended")
    # No view says the sessions were inside operations more than 100 % of the time (the old
    # evidence: 12790 %, 10674 % and 14906 % in the halves).
    meanings = _meanings(analysis)
    plateau = [m for m in meanings if m.startswith("IOPS varied by")]
    assert len(plateau) == 3, meanings
    assert all("in an open loop, whose IOPS follow the rate asked" in m for m in plateau)
    assert not [m for m in meanings if SHARE.search(m)], meanings
    checks = {e["check"] for e in analysis["verdict"]["evidence"]}
    assert "Little's law L / sessions" not in checks  # not a gate of an open loop
    html = render_report(bundle, analysis).read_text()
    assert not SHARE.search(html)
    assert "12790" not in html and "127.9" in html  # the ratio itself, with its note


def test_a_closed_loop_prints_its_ratio_as_the_share_of_session_time(tmp_path: Path) -> None:
    # 4 sessions, 2000 ops/s at 1 ms: L = 2, half of the sessions' time inside operations.
    n = 12
    path = write_bundle(
        tmp_path / "b",
        ops={"read": op([2000.0] * n, [3000.0] * n, mean=[1000.0] * n)},
        block={"sdb": device([4000.0 + (i % 2) for i in range(n)], util=[50.0] * n)},
        sessions=4,
    )
    analysis = analyze_bundle(path)
    assert analysis["littles_law"]["ratio"] == pytest.approx(0.5)
    plateau = [m for m in _meanings(analysis) if m.startswith("IOPS varied by")]
    assert plateau and all(
        m.endswith("with the sessions inside operations 50 % of the time") for m in plateau
    )
    little = [e for e in analysis["verdict"]["evidence"] if e["check"].startswith("Little")]
    assert [e["value"] for e in little] == [pytest.approx(0.5)]


def test_the_share_is_never_printed_above_100_percent() -> None:
    assert sessions_busy(0.994, open_loop=False).endswith("99 % of the time")
    assert sessions_busy(1.0, open_loop=False).endswith("100 % of the time")
    assert sessions_busy(1.05, open_loop=False) == (
        "with the sessions inside operations all the time (Little's L / sessions 1.05)"
    )
    wrong = sessions_busy(127.9, open_loop=False)
    assert "%" not in wrong and "the latency clock or the session count is wrong" in wrong
    assert "%" not in sessions_busy(0.5, open_loop=True)
    assert "unknown" in sessions_busy(None, open_loop=False)
