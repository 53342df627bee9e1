"""A run on several hosts in the analysis and the report (issue #32), on a recorded bundle:
tests/data/netns_hosts/quota_h2 (three netns hosts, h2's worker held to a 0.1-core CPU
quota; see its README). The analysis' ``hosts`` section and ``series.hosts``, the verdict
naming h2, the report's Hosts table and per-host CPU panel; a run on one host has none."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sim.analysis import analyze_bundle
from sim.report import render_report
from sim.report.answer import build_answer
from sim.report.hosts import hosts as hosts_section

RECORDED = Path(__file__).resolve().parents[1] / "data" / "netns_hosts" / "quota_h2"
H1, H2 = "dbs827e2f-h1", "dbs827e2f-h2"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(RECORDED, copy, ignore=shutil.ignore_patterns("README.md"))
    return copy


def test_the_verdict_names_the_host_held_to_its_quota(bundle: Path) -> None:
    analysis = analyze_bundle(bundle)
    verdict = analysis["verdict"]
    assert verdict["call"] == "client-bound", verdict
    assert verdict["summary"].startswith(
        f"Client-bound on host {H2} (CPU 87 % of its 0.10-core quota, throttled in 99 % of its "
        "periods)"
    ), verdict["summary"]


def test_the_hosts_section_holds_each_hosts_own_figures(bundle: Path) -> None:
    analysis = analyze_bundle(bundle)
    section = analysis["hosts"]
    assert section["limiting"] == H2
    rows = {r["host"]: r for r in section["rows"]}
    assert set(rows) == {H1, H2}
    summary = json.loads((bundle / "summary.json").read_text())
    workers = {w["host"]: w for w in summary["distributed"]["workers"]}
    for host, row in rows.items():
        # Each host's operations are its own workers' counts; together the run's totals.
        own = workers[host]["operations"]
        assert row["operations"] == sum(v["count"] for v in own.values())
        assert row["sessions"] == workers[host]["sessions"]
    assert sum(r["operations"] for r in rows.values()) == sum(
        v["count"] for v in summary["operations"].values()
    )
    assert rows[H1]["device"] == f"{H1}/loop8" and rows[H2]["device"] == f"{H2}/loop10"
    # Each device's IOPS mean is that host's block series' mean (the analysis' own series).
    for row in rows.values():
        iops = [v for v in analysis["series"]["device"][row["device"]]["iops"] if v is not None]
        assert row["device_iops"] == pytest.approx(sum(iops) / len(iops), abs=0.01)
    assert rows[H2]["cpu_limit_cores"] == pytest.approx(0.1)
    assert rows[H2]["cpu_of_ceiling_pct"] == pytest.approx(
        rows[H2]["process_cpu_pct"] / 0.1, rel=0.01
    )
    assert rows[H1]["cpu_limit_cores"] is None and rows[H1]["cpu_of_ceiling_pct"] < 20
    assert set(analysis["series"]["hosts"]) == {H1, H2}
    assert len(analysis["series"]["hosts"][H2]["process_cpu_pct"]) == analysis["intervals"]


def test_the_report_has_a_hosts_table_and_a_cpu_line_per_host(bundle: Path) -> None:
    html = render_report(bundle, analyze_bundle(bundle)).read_text()
    table = html[html.index('id="hosts"') : html.index('id="timeseries"')]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    assert f"{H2} ◀ limits" in cells and H1 in cells
    assert "loop10" in cells and "87 % of its 0.10-core quota, throttled 99 %" in cells
    assert "Host CPU busy, per host" in html
    assert "dbsim process CPU per host (% of one CPU)" in html
    legend = re.findall(r'<text[^>]*text-anchor="start">([^<]*)</text>', html)
    assert legend.count(H1) == legend.count(H2) == 2, legend  # each host in both legends
    assert html.index('id="operations"') < html.index('id="hosts"') < html.index('id="timeseries"')


def test_the_answer_names_the_host(bundle: Path) -> None:
    answer = build_answer(json.loads((bundle / "summary.json").read_text()), analyze_bundle(bundle))
    assert f"the limiting layer is the client (dbsim's CPU on host {H2}), not the storage" in (
        answer.sentence
    ), answer.sentence


def test_one_host_has_no_hosts_section() -> None:
    assert hosts_section({"verdict": {}}) == ""
    assert hosts_section(None) == ""
    assert hosts_section({"hosts": {"rows": []}}) == ""
