"""Repeated runs of one scenario combined into one side of a comparison.

Apart from :mod:`sim.judge.compare` because combining is its own step: a side of several runs
(``BASELINE... vs CANDIDATE...``) has per figure the mean of its runs' values and one interval
pooled from all their batch means (:func:`sim.judge.noise.combined_ratio_ci`), and is written as
JSON as its first run with the runs listed; one run is the case of a single repeat.
"""

from __future__ import annotations

from typing import Any

from sim.judge import noise
from sim.judge.compare_rows import (
    DEVICE_METRICS,
    OP_METRICS,
    WINDOW,
    Thresholds,
    judged_row,
    mean_of_runs,
    sum_of_runs,
)


def op_rows(
    bases: list[dict[str, Any]],
    cands: list[dict[str, Any]],
    limits: Thresholds,
    notes: list[str],
) -> list[dict[str, Any]]:
    """One row per figure of each operation every run measured (judged where the thresholds
    cover the operation); what is not compared goes to ``notes``. With repeated runs a value
    is the mean of the runs' and the interval pools their batch means."""
    sides = (("baseline", bases), ("candidate", cands))
    common = sorted(set.intersection(*(set(f["ops"]) for _, runs in sides for f in runs)))
    for role, runs in sides:
        only = sorted(set().union(*(set(f["ops"]) for f in runs)) - set(common))
        if only:
            notes.append(f"only the {role} measured {', '.join(only)}: not compared")
    judged_ops = common if limits.ops is None else [op for op in common if op in limits.ops]
    if limits.ops is not None:
        missing = sorted(set(limits.ops) - set(common))
        if missing:
            notes.append(f"thresholds name {', '.join(missing)}, not measured in both runs")
    rows = []
    for op in common:
        for metric, (better_when, field) in OP_METRICS.items():
            threshold = getattr(limits, field) if op in judged_ops else None
            ci = noise.combined_ratio_ci(
                [(f["samples"].ops.get(op) or {}).get(metric) for f in bases],
                [(f["samples"].ops.get(op) or {}).get(metric) for f in cands],
            )
            values = (
                mean_of_runs([f["ops"][op][metric] for f in bases]),
                mean_of_runs([f["ops"][op][metric] for f in cands]),
            )
            rows.append(judged_row(metric, op, values, better_when, threshold, ci))
    return rows


def device_scope(bases: list[dict[str, Any]], cands: list[dict[str, Any]]) -> str:
    b = "/".join(sorted({str(f["device"] or "no device") for f in bases}))
    c = "/".join(sorted({str(f["device"] or "no device") for f in cands}))
    return b if b == c else f"{b} → {c}"


def device_rows(
    bases: list[dict[str, Any]],
    cands: list[dict[str, Any]],
    limits: Thresholds,
    notes: list[str],
) -> list[dict[str, Any]]:
    """One row per storage figure of each run's primary device."""
    rows = [
        judged_row(
            metric,
            device_scope(bases, cands),
            (
                mean_of_runs([f["storage"][metric] for f in bases]),
                mean_of_runs([f["storage"][metric] for f in cands]),
            ),
            better_when,
            getattr(limits, field),
            noise.combined_ratio_ci(
                [f["samples"].device.get(metric) for f in bases],
                [f["samples"].device.get(metric) for f in cands],
            ),
        )
        for metric, (better_when, field) in DEVICE_METRICS.items()
    ]
    if any(f["device"] is None for f in [*bases, *cands]):
        notes.append("a run has no block device figures: storage rows are not compared")
    return rows


def window_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What a side's figures are: measured, over which window, how many intervals."""
    intervals = [f["samples"].intervals for f in runs]
    return {
        "figures": "measured",
        "window": WINDOW,
        "measured_s": sum_of_runs([f["measured_s"] for f in runs]),
        "intervals": None if any(n is None for n in intervals) else sum(intervals),
    }


def side_json(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A side of the comparison as JSON: its first run's fields (compatible with one run),
    the runs when there are several, and its window."""
    hidden = ("ops", "samples", "series")
    first = {k: v for k, v in runs[0].items() if k not in hidden}
    side = {**first, **window_of(runs)}
    if len(runs) > 1:
        side["run"] = f"{runs[0]['run']} (+{len(runs) - 1} repeats)"
        side["runs"] = [{k: v for k, v in f.items() if k not in hidden} for f in runs]
    return side


# --------------------------------------------------------------------------- caveats of runs
