"""The run's answer (sim.report.answer), the verdict's evidence rows, the ticket formats and the
CSV export (issue #27): one IOPS, SLOs in words, checks that apply, nothing overwritten."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sim.analysis.verdict import Findings, decide
from sim.bundle.iops import run_iops, same_iops, window_iops
from sim.cli import main
from sim.errors import ConfigError
from sim.report import write_report
from sim.report.answer import build_answer, text_lines
from sim.report.export import export_csv
from sim.report.ticket import build_ticket, render_markdown, render_text
from tests.unit.test_report import HOSTILE, synthetic_bundle

MISSED = {
    "met": False,
    "window": "measured window",
    "verdicts": [
        {"slo": "p99_us_max", "op": "read", "limit": 5000, "measured": 5900.0, "met": False,
         "margin_pct": -18.0, "name": "read latency"},
        {"slo": "ops_s_min", "op": "*", "limit": 10, "measured": 1100.0, "met": True,
         "margin_pct": 10900.0},
    ],
}  # fmt: skip


def _bundle(tmp_path: Path, slos: dict[str, Any] | None = None) -> Path:
    bundle = synthetic_bundle(tmp_path)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    summary["storage"] = {"block": {"vda": {"iops": 4239.3, "r_s": 4000.0, "samples": 10}}}
    if slos is not None:
        summary["slos"] = slos
    (bundle / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return bundle


def _summary(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    return data


def test_window_iops_is_the_length_weighted_mean() -> None:
    assert window_iops([100.0, 300.0], [1.0, 3.0]) == pytest.approx(250.0)
    assert window_iops([100.0, float("nan"), None], [1.0, 1.0, 1.0]) == 100.0
    assert window_iops([], []) is None
    assert same_iops(4239.3, 4239.4) and not same_iops(4239.3, 1486.0)


def test_a_missed_slo_is_said_plainly_with_the_block_tables_iops(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, MISSED)
    path, _ = write_report(bundle)
    summary = _summary(bundle)
    answer = build_answer(summary, json.loads((bundle / "analysis.json").read_text()))
    assert answer.slo_state == "missed" and answer.headline.startswith("SLO MISSED (1 of 2")
    assert same_iops(answer.iops, run_iops(summary, "vda")) and answer.device == "vda"
    assert "at 4,239 IOPS on vda (mean over the measured window)" in answer.sentence
    assert "SLO read p99 ≤ 5.00 ms missed by 18.0 %" in answer.sentence
    row = answer.slos[0]
    assert (row.measured, row.target, row.margin, row.met) == (
        "5.90 ms", "≤ 5.00 ms", "missed by 18.0 %", False
    )  # fmt: skip
    lines = text_lines(answer)
    assert lines[0] == "answer: SLO MISSED (1 of 2 missed): exit 1"
    assert "SLO MISSED [read latency]: read p99 ≤ 5.00 ms: 5.90 ms" in lines[1]
    html = path.read_text(encoding="utf-8")
    # The answer is on the first screen: before the facts grid and the verdict.
    assert html.index('id="answer"') < html.index('class="facts"') < html.index('id="verdict"')
    assert "missed by 18.0 %" in html and HOSTILE not in html


def test_a_run_without_slos_says_so_and_names_its_caveats(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    summary = _summary(bundle)
    summary["cache"] = {"exercised": {"exercised": False, "reason": "vda read 0 blocks"}}
    summary["mix"]["exact"] = False
    answer = build_answer(summary, None)
    assert answer.slo_state == "none" and answer.headline == "No SLO declared"
    assert answer.caveats[0].startswith("STORAGE NOT EXERCISED: vda read 0 blocks")
    assert any("mix NOT exact" in c for c in answer.caveats)
    assert "no analysis, so no limiting layer" in answer.sentence


def test_storage_idle_by_the_cache_shows_the_cache_not_a_false_met() -> None:
    findings = Findings(op="read", device="vda", util_pct=10.0, ios_per_op=0.29,
                        cache_hit_pct=99.8, db_reads_per_op=0.01)  # fmt: skip
    verdict = decide(findings)
    idle = next(e for e in verdict["evidence"] if e["check"] == "storage idle")
    assert idle["passed"] and idle["value"] == 99.8 and idle["threshold"] == 99.0
    assert idle["branch"] == "database-bound" and "0.29" in idle["meaning"]
    for row in verdict["evidence"]:
        if row["passed"] and row["value"] is not None and row["threshold"] is not None:
            v, t = row["value"], row["threshold"]
            assert {"≥": v >= t, "<": v < t, "≤": v <= t}[row["comparison"]], row


def test_checks_that_do_not_apply_are_left_out() -> None:
    file_run = decide(Findings(op="write", device="vda", util_pct=5.0, ios_per_op=2.0,
                               open_loop=True, littles_ratio=0.9))  # fmt: skip
    checks = {e["check"] for e in file_run["evidence"]}
    assert "database cache hit %" not in checks and "Little's law L / sessions" not in checks
    closed = decide(Findings(op="read", device="vda", cache_hit_pct=50.0, littles_ratio=0.9))
    checks = {e["check"] for e in closed["evidence"]}
    assert {"database cache hit %", "Little's law L / sessions"} <= checks


def test_the_ticket_in_text_and_markdown(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, MISSED)
    write_report(bundle)
    analysis = json.loads((bundle / "analysis.json").read_text(encoding="utf-8"))
    ticket = build_ticket(bundle, _summary(bundle), analysis)
    text = render_text(ticket, "report-chart.svg")
    assert "SLO MISSED (1 of 2 missed): exit 1" in text
    assert "4,239 IOPS on vda" in " ".join(text.split())
    assert "Key chart: report-chart.svg" in text and ticket.chart_svg is not None
    markdown = render_markdown(ticket, "report-chart.svg")
    assert "| read p99 \\[read latency\\] | 5.90 ms | ≤ 5.00 ms | missed by 18.0 % | MISSED |" in (
        markdown
    )
    assert "![Latency versus load](report-chart.svg)" in markdown
    assert "<script>" not in markdown  # user input is escaped


def test_report_formats_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path, MISSED)
    assert main(["report", str(bundle), "--format", "markdown"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == [str(bundle / "report.md"), str(bundle / "report-chart.svg")]
    assert "answer: SLO MISSED" in err
    assert (bundle / "report-chart.svg").read_text().startswith("<svg xmlns=")
    assert main(["report", str(bundle), "--format", "docx"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith("error: report: --format 'docx': choose one of html, markdown, text, pdf, csv")
    )


def test_csv_export_writes_new_files_only(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    write_report(bundle)
    out = tmp_path / "export"
    written = export_csv(bundle, out, _summary(bundle), None)
    assert [p.name for p in written] == ["timeseries.csv", "slos.csv"]
    header = (out / "timeseries.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("t_s,step,") and "read ops_s" in header and "vda iops" in header
    (out / "slos.csv").write_text("mine\n", encoding="utf-8")
    (out / "timeseries.csv").unlink()
    with pytest.raises(ConfigError, match="exists; dbsim writes new files only"):
        export_csv(bundle, out, _summary(bundle), None)
    assert (out / "slos.csv").read_text() == "mine\n" and not (out / "timeseries.csv").exists()
    link = tmp_path / "link"
    os.symlink(out, link)
    with pytest.raises(ConfigError, match="--csv"):
        export_csv(bundle, link, _summary(bundle), None)


def test_a_baseline_has_no_ticket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "baseline.json").write_text("{}", encoding="utf-8")
    assert main(["report", str(bundle), "--format", "text"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: report: {bundle} is a storage baseline (dbsim baseline): its page is HTML "
        "only, --format and --csv are for run bundles"
    ]
    assert not (bundle / "report.txt").exists()
