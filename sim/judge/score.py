"""A workload's own scoring of a run (``summary["workload"]["score"]``), said in words.

The EDA workload scores a run as its reference benchmark does (workloads/eda/workload.py,
``score_load_points``): per load point the requested and achieved ops/s, whether it was valid
under the reference's rule, MB/s and mean latency; then the highest valid load point and the
overall response time (the area under the latency-versus-ops/s curve of the valid points over
the highest one's ops/s). Those were in summary.json only; the console's end of run and the
report say them from here, with the rule they were judged by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.bundle.figures import finite


def score_line(score: Mapping[str, Any] | None) -> str | None:
    """One line for the console: the highest valid load point and the overall response time,
    or why there is none; None when the workload keeps no load-point score."""
    if not isinstance(score, Mapping) or not isinstance(score.get("load_points"), list):
        return None
    points = [p for p in score["load_points"] if isinstance(p, Mapping)]
    judged = [p for p in points if p.get("valid") is not None]
    rule = score.get("rule") or "the workload's rule"
    if not judged:
        return (
            f"score: no load point was judged ({len(points)} measured, none at a requested "
            f"rate: validity needs mode: open); rule: {rule}"
        )
    best = score.get("highest_valid")
    if not isinstance(best, Mapping):
        return f"score: no valid load point ({len(judged)} judged); rule: {rule}"
    ort = finite(score.get("overall_response_time_ms"))
    step = best.get("step")
    where = f"step {step + 1}" if isinstance(step, int) else "the run"
    return (
        f"score: highest valid load point {where}: {_n(best.get('achieved_ops_s'))} ops/s, "
        f"{_n(best.get('mb_s'))} MB/s, mean latency {_n(best.get('mean_latency_ms'), 3)} ms; "
        f"overall response time {_n(ort, 3)} ms ({len(judged)} load points judged; "
        f"measured; rule: {rule})"
    )


def _n(value: Any, digits: int = 1) -> str:
    number = finite(value)
    return "n/a" if number is None else f"{number:,.{digits}f}"


def score_rows(score: Mapping[str, Any] | None) -> list[list[str]]:
    """The load points as table rows: step, job sets, requested and achieved ops/s, achieved
    share of requested, valid, MB/s, mean latency ms (empty without a load-point score)."""
    if not isinstance(score, Mapping) or not isinstance(score.get("load_points"), list):
        return []
    rows = []
    for point in score["load_points"]:
        if not isinstance(point, Mapping):
            continue
        step = point.get("step")
        valid = point.get("valid")
        rows.append(
            [
                str(step + 1) if isinstance(step, int) else "—",
                _n(point.get("job_sets"), 2),
                _n(point.get("requested_ops_s")),
                _n(point.get("achieved_ops_s")),
                _n(100 * f, 1) + " %" if (f := finite(point.get("overall_fraction"))) else "—",
                "—" if valid is None else ("valid" if valid else "NOT valid"),
                _n(point.get("mb_s"), 2),
                _n(point.get("mean_latency_ms"), 3),
            ]
        )
    return rows


SCORE_HEADERS = (
    "step", "job sets", "requested ops/s", "achieved ops/s", "achieved", "valid", "MB/s",
    "mean latency (ms)",
)  # fmt: skip
