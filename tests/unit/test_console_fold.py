"""Console pieces on recorded figures: folded tables, load progress lines, the mix sentence."""

from __future__ import annotations

import io

from rich.console import Console

from sim.cli.console import mix_line, verdict_lines
from sim.cli.tables import Column, folded
from sim.core.progress import ProgressMeter

COLUMNS = [Column("device", "left"), *(Column(h) for h in ("r/s", "w/s", "IOPS", "rkB/s"))]
COLUMNS += [Column(h) for h in ("wkB/s", "r_await", "w_await", "aqu-sz", "%util")]
ROWS = [["vda", "6.6", "14,065.7", "14,076.0", "90", "249,151", "0.25", "1.32", "18.58", "23"]]


def _printed(width: int) -> tuple[str, int]:
    out = Console(file=io.StringIO(), width=width)
    tables = folded(COLUMNS, ROWS, width, title="block devices (mean per second)")
    for table in tables:
        out.print(table)
    return out.file.getvalue(), len(tables)  # type: ignore[attr-defined]


def test_a_wide_table_folds_at_80_columns_and_keeps_every_figure_whole() -> None:
    text, parts = _printed(80)
    assert parts == 2 and "block devices (continued)" in text
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for cell in ROWS[0]:
        assert cell in text
    assert text.count("vda") == 2  # the key column is in both parts


def test_at_200_columns_it_is_one_table() -> None:
    text, parts = _printed(200)
    assert parts == 1 and "continued" not in text


def test_progress_line_has_rate_and_eta_on_its_clock() -> None:
    now = [100.0]
    meter = ProgressMeter(clock=lambda: now[0])
    meter.update("load slob_1", 0, 10_000)
    now[0] = 102.0
    meter.update("load slob_1", 4_000, 10_000)
    assert meter.line() == "load slob_1: 4,000/10,000 rows (40 %), 2,000 rows/s, ETA 0:00:03"
    now[0] = 105.0
    meter.update("load slob_1", 10_000, 10_000)
    assert meter.line().endswith("(100 %), 2,000 rows/s, took 0:00:05")
    meter.update("build /data/tree", 0, 50)
    assert meter.line() == "build /data/tree: 0/50 files (0 %)"


def test_mix_is_a_sentence() -> None:
    mix = {
        "requested_pct": {"read": 90.0, "update": 10.0},
        "measured": {"read": 54240, "update": 6027},
        "measured_pct": {"read": 90.0, "update": 10.0},
        "exact": True,
    }
    line = mix_line(mix, {"errors": 0})
    assert line is not None and "{" not in line
    assert line.replace("\u00a0", " ").startswith("mix (measured): read 90 %, update 10 %")
    assert "exact over the operations issued (read 54,240, update 6,027)" in line


def test_verdict_lines_give_the_call_then_the_supporting_checks() -> None:
    analysis = {
        "verdict": {
            "call": "storage-bound",
            "summary": "Storage-bound: vda held 500 IOPS.",
            "evidence": [
                {"check": "IOPS plateau", "value": 0.02, "threshold": 0.15, "passed": True,
                 "meaning": "IOPS held flat"},
                {"check": "host CPU busy %", "value": 20.0, "threshold": 90.0, "passed": False,
                 "meaning": "host"},
            ],
        }
    }  # fmt: skip
    lines = verdict_lines(analysis)
    assert lines[0] == "verdict (analysis.json): Storage-bound: vda held 500 IOPS."
    assert lines[1:] == ["  finding: IOPS plateau 0.02 (threshold 0.15, measured): IOPS held flat"]
    assert verdict_lines(None) == []
    # Rows that name their branch: the deciding branch's first, each saying what it fed.
    analysis["verdict"]["evidence"] = [
        {"check": "host CPU busy %", "value": 99.0, "threshold": 90.0, "passed": True,
         "meaning": "host", "branch": "client-bound", "comparison": "≥"},
        {"check": "IOPS plateau", "value": 0.02, "threshold": 0.15, "passed": True,
         "meaning": "flat", "branch": "storage-bound", "comparison": "≤"},
    ]  # fmt: skip
    assert verdict_lines(analysis)[1:] == [
        "  finding: IOPS plateau 0.02 (threshold ≤ 0.15, measured; drove storage-bound): flat",
        "  finding: host CPU busy % 99 (threshold ≥ 90, measured; client-bound): host",
    ]
