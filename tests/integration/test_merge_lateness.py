"""The master says when its merge falls behind the run, never silently (issue #32).

The real ``RunMerger`` merges real packets (``interval_packet``) of one worker into a real
bundle; the master's clock is replaced (``sim.locust.merge.time``; the real one is back for
the end, whose waits are bounded by it) so that each interval is merged a chosen time after
the one before: 1 s (on time) or 2 s (a master at half the speed
of the run, as bench/master_scale.py measures past its CPU). Locust and gevent patch the
process that imports them, so the merger runs in a child process, which prints the bundle's
summary messages and the merger's lateness figures as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration]

CHILD = r"""
import sim.locust  # first: gevent's (partial) monkey patching, then Locust
import json, sys
from pathlib import Path
import gevent
import sim.locust.merge as merge
from sim.config.resolve import resolve
from sim.core.metrics import Interval, OpStats
from sim.locust.app import environment_for
from sim.locust.packets import interval_packet

step, out = float(sys.argv[1]), sys.argv[2]
clock = [1000.0]
real_time = merge.time
merge.time = type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])})
scenario = resolve(None, [("output.directory", out), ("output.name", "late")])
merger = merge.RunMerger(environment_for(scenario, 1), scenario, "run", {"w": (0, 1)})
for k in range(12):
    stats = OpStats()
    for value in (100, 200, 300 + k):
        stats.histogram.record_value(value)
    interval = Interval(k, float(k), float(k + 1), "measure", None, {"read": stats})
    clock[0] = 1000.0 + step * k
    merger.on_packet("w", interval_packet(interval, [], wall0=0.0, with_histograms=True))
merge.time = real_time  # the end (its bounded waits) on the real clock
merger.on_final("w", {"packets": 12, "outcome": "completed", "totals": {}})
while not (merger.summary or {}).get("bundle"):
    gevent.sleep(0.05)
summary = json.loads((Path(merger.summary["bundle"]) / "summary.json").read_text())
print(json.dumps({"messages": summary.get("messages", []), **merger.lateness.as_dict()}))
"""


def merged_at(step_s: float, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(step_s), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_master_on_time_says_nothing(tmp_path: Path) -> None:
    result = merged_at(1.0, tmp_path)
    assert result["late_intervals"] == 0 and result["merged_intervals"] == 12
    assert not [m for m in result["messages"] if "master behind" in m]


def test_a_master_behind_says_so_in_the_bundle(tmp_path: Path) -> None:
    # 2 s a merge for 1-s intervals: interval k is k s late; beyond 7 s from k = 8 to 11.
    result = merged_at(2.0, tmp_path)
    assert result["late_intervals"] == 4 and result["lag_max_s"] == 11.0
    said = [m for m in result["messages"] if "master behind" in m]
    assert len(said) == 2, result["messages"]
    assert said[0].startswith("master behind: interval 8 merged 8.0 s after it was due")
    assert said[1].startswith("master behind: 4 of 12 intervals merged more than 7 s late")
