"""sim.core.validity: when a run's errors make it invalid, and what its error line says; and the
bundle's record of collector gaps (sim.bundle.writer: resets and unreadable entities)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.bundle.writer import BundleWriter
from sim.core.metrics import Interval, OpStats
from sim.core.validity import error_section, failure_line, verdict_sentence
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample, gap_sample

OPS = {"read": 90.0, "update": 10.0}


def stats(completed: int, **errors: int) -> OpStats:
    out = OpStats()
    for i in range(completed):
        out.histogram.record_value(100 + i % 50)
    out.errors = dict(errors)
    return out


def judge(totals: dict[str, OpStats], budget: float = 1.0, by_slo: bool = False) -> dict:
    examples = {
        op: {cls: f"{op}: {cls}: example text" for cls in s.errors} for op, s in totals.items()
    }
    return error_section(
        totals, examples, judged_ops=set(OPS), budget_pct=budget, budget_by_slo=by_slo
    )


def test_an_operation_that_never_succeeded_makes_the_run_invalid_whatever_the_budget() -> None:
    totals = {"read": stats(900), "update": stats(0, LockNotAvailableError=7)}
    for by_slo in (False, True):
        section = judge(totals, budget=100.0, by_slo=by_slo)
        assert section["invalid"] is True
        assert section["operations"]["update"]["dominant"] == "LockNotAvailableError"
    line = failure_line(section)
    assert line is not None and line.startswith("invalid run: 100 % of update failed (7 of 7;")
    assert "update: LockNotAvailableError: example text" in line
    assert verdict_sentence(section).startswith("invalid: 100 % of update failed")


def test_the_budget_is_judged_per_operation_and_both_ways() -> None:
    # 2 % of updates failed, 0.2 % of everything: over a 1 % budget for update.
    totals = {"read": stats(9000), "update": stats(980, TimeoutError=20)}
    section = judge(totals, budget=1.0)
    assert section["operations"]["update"]["error_pct"] == 2.0
    assert section["error_pct"] == pytest.approx(100 * 20 / 10000, abs=1e-3)
    assert section["invalid"] is True and section["over_budget"] is True
    assert "2 % of update failed (20 of 1,000, budget 1 %" in section["reason"]
    within = judge(totals, budget=2.0)
    assert within["invalid"] is False and within["over_budget"] is False
    assert failure_line(within) is None


def test_an_error_slo_takes_over_the_share_but_not_the_never_succeeded_rule() -> None:
    totals = {"read": stats(9000), "update": stats(980, TimeoutError=20)}
    section = judge(totals, budget=1.0, by_slo=True)
    assert section["invalid"] is False
    assert section["over_budget"] is True
    assert section["budget_from"].startswith("slos")


def test_failed_reconnections_are_reported_but_not_judged() -> None:
    totals = {"read": stats(500), "update": stats(50), "connect": stats(0, ConnectionError=30)}
    section = judge(totals)
    assert section["invalid"] is False
    assert section["operations"]["connect"]["judged"] is False
    assert section["issued"] == 550 and section["errors"] == 0


def test_a_run_that_issued_nothing_is_invalid() -> None:
    section = judge({})
    assert section["invalid"] is True
    assert section["reason"] == "no operation completed or failed in the measured window"


def _interval(index: int) -> Interval:
    return Interval(index, float(index), float(index + 1), "measure", None, {})


def test_the_bundle_counts_gaps_and_writes_no_row_for_them(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    bundle = BundleWriter(tmp_path / "run", {"name": "t"})
    good = Sample("block", "vda", {"r_s": 10.0, "iops": 10.0})
    bundle.on_interval(_interval(0), [good])
    bundle.on_interval(
        _interval(1),
        [gap_sample("block", "vda", GAP_RESET, "reads: 500 -> 3"), good],
    )
    bundle.on_interval(_interval(2), [gap_sample("nfs", "/mnt", GAP_UNREADABLE, "bad line")])
    bundle.on_interval(_interval(3), [gap_sample("block", "vda", GAP_RESET, "again")])
    bundle.close()
    summary = bundle.write_summary("completed")
    assert summary["resets"] == {"block": {"vda": {"count": 2, "intervals": [1, 3]}}}
    assert summary["unreadable"] == {"nfs": {"/mnt": {"count": 1, "intervals": [2]}}}
    # Said once per entity and kind, with what was seen.
    resets = [m for m in summary["messages"] if "reset" in m]
    assert resets == ["block vda: reset at interval 1, no rate for that interval (reads: 500 -> 3)"]
    rows = (tmp_path / "run" / "timeseries" / "block.csv").read_text().splitlines()
    assert [r.split(",")[1] for r in rows[1:]] == ["0", "1"]  # interval 3: only the gap
    assert summary["storage"]["block"]["vda"]["samples"] == 2
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["resets"]


#: A worker's side and the master's, in a child process: importing sim.locust monkey-patches
#: sockets with gevent, which the test process must never be (tests/conftest.py).
GAPS_CHILD = r"""
import json
import sim.locust
from sim.locust.packets import interval_packet, packet_samples
from sim.live.worker_samples import merge_samples
from tests.unit.test_validity import GAP_RESET, Sample, _interval, gap_sample

samples = [
    gap_sample("block", "vda", GAP_RESET, "reads: 500 -> 3"),
    Sample("host", "node", {"cpu_busy_pct": 50.0, "process_cpu_pct": 10.0}),
]
packet = interval_packet(_interval(4), samples, wall0=0.0, with_histograms=False)
back = packet_samples(json.loads(json.dumps(packet)))
merged = merge_samples([(0, "h", back), (1, "h", back)])
print(json.dumps({
    "back": [[s.source, s.gap, s.detail] for s in back],
    "merged": sorted([s.source, s.gap] for s in merged),
}))
"""


def test_gaps_travel_from_workers_to_the_master() -> None:
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", GAPS_CHILD], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["back"] == [["block", GAP_RESET, "reads: 500 -> 3"], ["host", "", ""]]
    assert got["merged"] == [["block", GAP_RESET], ["host", ""]]
