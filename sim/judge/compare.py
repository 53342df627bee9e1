"""Two runs side by side: a baseline (the old array) and a candidate (the new volume).

:func:`compare` reads two bundles (never writes them) and returns, per operation, the change
in ops/s, p50 and p99, and for each run's main block device (the one with the most IOPS —
the two runs may name different devices) the change in IOPS, await and I/Os per operation;
each as absolute and percent, judged against :class:`Thresholds`.

The verdict: **worse** when any judged figure regressed by more than its threshold (the rows
that did are named in ``decided_by``); **better** when none did and at least one improved by
more than its threshold; **equivalent** otherwise. A threshold of None leaves its figure
reported but not judged. Runs that differ in workload, sessions or pacing get a note: their
difference is then not the storage's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.bundle.figures import combined_await_ms, finite, primary_device
from sim.bundle.reader import read_analysis, read_summary
from sim.bundle.reader import read_scenario as bundle_scenario
from sim.errors import ConfigError, ScenarioError, SimError
from sim.safeio import MAX_SCENARIO_BYTES, InputLimitError, read_text_file
from sim.safeyaml import load_yaml

#: metric → (scope kind, which direction is better, threshold field, unit)
OP_METRICS = {
    "ops_s": ("higher", "max_ops_s_regression_pct"),
    "p50_us": ("lower", "max_p50_regression_pct"),
    "p99_us": ("lower", "max_p99_regression_pct"),
    # Judged in points of percent, not relative to the baseline: 0 → 0.2 % failed is a change
    # a relative threshold could never weigh.
    "error_pct": ("lower", "max_error_pct_increase"),
}
DEVICE_METRICS = {
    "device_iops": ("higher", "max_iops_regression_pct"),
    "await_ms": ("lower", "max_await_regression_pct"),
    "ios_per_op": ("lower", "max_ios_per_op_regression_pct"),
}
CONTEXT_KEYS = ("workload", "target", "sessions", "mode", "rate_ops_s", "steps")


class Thresholds(BaseModel):
    """How much worse the candidate may be, in percent of the baseline, before it is worse
    (and how much better before it is better). None: report, do not judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_p50_regression_pct: float | None = Field(default=10.0, ge=0)
    max_p99_regression_pct: float | None = Field(default=10.0, ge=0)
    max_ops_s_regression_pct: float | None = Field(default=5.0, ge=0)
    max_await_regression_pct: float | None = Field(default=20.0, ge=0)
    max_iops_regression_pct: float | None = Field(default=None, ge=0)
    max_ios_per_op_regression_pct: float | None = Field(default=None, ge=0)
    max_error_pct_increase: float | None = Field(
        default=0.5,
        ge=0,
        description="Points of percent by which an operation's error share may rise.",
    )
    ops: list[str] | None = Field(
        default=None, description="Judge only these operations (default: every common one)."
    )


def load_thresholds(path: Path | None, overrides: Mapping[str, Any] | None = None) -> Thresholds:
    """Thresholds from a YAML file (keys as in :class:`Thresholds`) with ``overrides`` (the
    command-line options) on top; a bad file or value is a :class:`ConfigError`."""
    data: dict[str, Any] = {}
    if path is not None:
        # Bounded (sim.safeio): /dev/zero here ran out of memory, a FIFO blocked.
        text = read_text_file(path, what="thresholds file", max_bytes=MAX_SCENARIO_BYTES)
        try:
            loaded = load_yaml(text, what=str(path))
        except InputLimitError:
            raise
        except ConfigError as exc:
            where = str(exc).removeprefix(f"{path}:")
            raise ConfigError(f"{path}: not valid YAML: line {where.lstrip()}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: thresholds are a mapping, got {type(loaded).__name__}")
        data.update(loaded or {})
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return Thresholds.model_validate(data)
    except ValidationError as exc:
        from sim.field_errors import error_lines

        where = f"{path}: " if path is not None else ""
        raise ScenarioError([where + line for line in error_lines(exc)]) from None


# --------------------------------------------------------------------------- one run


def run_figures(bundle: Path, role: str) -> dict[str, Any]:
    """What a comparison needs of one bundle; :class:`ConfigError` when it is not a run
    bundle or holds no measured operations (a failed run)."""
    summary = read_summary(bundle, label=f"{role}: ")  # bounded, checked against its schema
    operations = summary.get("operations")
    if not isinstance(operations, dict) or not operations:
        raise ConfigError(
            f"{role}: {bundle} has no measured operations (status {summary.get('status')!r})"
        )
    analysis = read_analysis(bundle)
    if analysis is None or analysis.get("schema") != 1:
        try:
            from sim.analysis import analyze_bundle

            analysis = analyze_bundle(bundle)
        except SimError:
            analysis = None
    block = (summary.get("storage") or {}).get("block") or {}
    device = (analysis or {}).get("primary_device")
    if device not in block:
        device = primary_device(block)
    means = block.get(device) or {}
    measured_s = finite((summary.get("timing") or {}).get("measured_s"))
    total_ops = sum(finite(s.get("count")) or 0.0 for s in operations.values())
    ios_per_op = finite(((analysis or {}).get("io_per_op") or {}).get("device_ios_per_op"))
    errors = summary.get("errors")
    errors = errors if isinstance(errors, dict) else {}
    iops = finite(means.get("iops"))
    if ios_per_op is None and iops is not None and measured_s and total_ops:
        ios_per_op = iops * measured_s / total_ops  # from the means when there is no analysis
    return {
        "path": str(bundle),
        "run": summary.get("run") or bundle.name,
        "status": summary.get("status"),
        "measured_s": measured_s,
        "ops": {
            op: {
                **{k: finite(stats.get(k)) for k in ("ops_s", "p50_us", "p99_us", "count")},
                "error_pct": _error_pct(stats),
            }
            for op, stats in operations.items()
            if isinstance(stats, dict)
        },
        "invalid": errors.get("reason") if errors.get("invalid") else _never_succeeded(operations),
        "device": device,
        "storage": {
            "device_iops": iops,
            "await_ms": combined_await_ms(means) if means else None,
            "ios_per_op": ios_per_op,
        },
        "context": _context(bundle, summary),
    }


def _context(bundle: Path, summary: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison says differs besides the storage: workload, target, load shape."""
    load = _scenario(bundle).get("load") or {}
    return {
        "workload": (summary.get("scenario") or {}).get("workload"),
        "target": (summary.get("scenario") or {}).get("target"),
        "sessions": summary.get("sessions"),
        "mode": load.get("mode"),
        "rate_ops_s": load.get("rate_ops_s"),
        "steps": len(load.get("steps") or []),
    }


def _error_pct(stats: Mapping[str, Any]) -> float | None:
    """Failed operations in percent of those issued (completed + failed)."""
    count, errors = finite(stats.get("count")) or 0.0, finite(stats.get("errors")) or 0.0
    return round(100 * errors / (count + errors), 3) if count + errors else None


def _never_succeeded(operations: Mapping[str, Any]) -> str | None:
    """For bundles written before the summary had an ``errors`` section: an operation that
    only failed makes the run invalid (sim.core.validity's first rule)."""
    failed = [
        op
        for op, stats in sorted(operations.items())
        if isinstance(stats, dict) and not stats.get("count") and stats.get("errors")
    ]
    return "; ".join(f"100 % of {op} failed" for op in failed) or None


def _scenario(bundle: Path) -> dict[str, Any]:
    try:
        return bundle_scenario(bundle) or {}
    except ConfigError:
        return {}


# --------------------------------------------------------------------------- comparison


def _row(
    metric: str,
    scope: str,
    baseline: float | None,
    candidate: float | None,
    better_when: str,
    threshold: float | None,
) -> dict[str, Any]:
    delta = None if baseline is None or candidate is None else candidate - baseline
    pct = None
    if delta is not None and baseline:
        pct = 100 * delta / baseline
    elif delta == 0:
        pct = 0.0
    # Regression: how much worse, in percent, whichever way "worse" points for this figure;
    # in points for a figure that is a percentage already (POINT_METRICS).
    change_by = delta if metric in POINT_METRICS else pct
    regression = (
        None if change_by is None else (change_by if better_when == "lower" else -change_by)
    )
    judged = threshold is not None and regression is not None
    change = "not judged"
    if judged:
        assert regression is not None and threshold is not None
        change = (
            "worse" if regression > threshold else "better" if -regression > threshold else "within"
        )
    return {
        "metric": metric,
        "scope": scope,
        "baseline": baseline,
        "candidate": candidate,
        "delta": None if delta is None else round(delta, 4),
        "delta_pct": None if pct is None else round(pct, 2),
        "better_when": better_when,
        "threshold_pct": threshold,
        "change": change,
    }


LABELS = {
    "ops_s": "ops/s",
    "p50_us": "p50",
    "p99_us": "p99",
    "device_iops": "IOPS",
    "await_ms": "await",
    "ios_per_op": "I/Os per op",
    "error_pct": "errors %",
}
#: Figures that are percentages: changes and thresholds in points, not relative.
POINT_METRICS = frozenset({"error_pct"})


def describe(row: Mapping[str, Any]) -> str:
    """A judged row in words: ``read p99 +23.4 % (threshold 10 %)``."""
    name = LABELS.get(row["metric"], row["metric"])
    if row["metric"] in POINT_METRICS:
        return (
            f"{row['scope']} {name} {row['delta']:+.3g} points "
            f"(threshold {row['threshold_pct']:g} points)"
        )
    return f"{row['scope']} {name} {row['delta_pct']:+.1f} % (threshold {row['threshold_pct']:g} %)"


def _op_rows(
    base: dict[str, Any], cand: dict[str, Any], limits: Thresholds, notes: list[str]
) -> list[dict[str, Any]]:
    """One row per figure of each operation both runs measured (judged where the thresholds
    cover the operation); what is not compared goes to ``notes``."""
    common = sorted(set(base["ops"]) & set(cand["ops"]))
    for role, figs in (("baseline", base), ("candidate", cand)):
        only = sorted(set(figs["ops"]) - set(common))
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
            rows.append(
                _row(
                    metric,
                    op,
                    base["ops"][op][metric],
                    cand["ops"][op][metric],
                    better_when,
                    threshold,
                )
            )
    return rows


def _device_rows(
    base: dict[str, Any], cand: dict[str, Any], limits: Thresholds, notes: list[str]
) -> list[dict[str, Any]]:
    """One row per storage figure of each run's primary device."""
    device_scope = (
        f"{base['device'] or '?'}"
        if base["device"] == cand["device"]
        else f"{base['device'] or '?'} → {cand['device'] or '?'}"
    )
    rows = [
        _row(
            metric,
            device_scope,
            base["storage"][metric],
            cand["storage"][metric],
            better_when,
            getattr(limits, field),
        )
        for metric, (better_when, field) in DEVICE_METRICS.items()
    ]
    if base["device"] is None or cand["device"] is None:
        notes.append("a run has no block device figures: storage rows are not compared")
    return rows


def _context_notes(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """What else differs between the runs, so the difference is not read as the storage's."""
    notes = []
    for key in CONTEXT_KEYS:
        b, c = base["context"].get(key), cand["context"].get(key)
        if b != c:
            notes.append(f"{key} differs ({b} → {c}): the difference is not the storage's alone")
    for role, figs in (("baseline", base), ("candidate", cand)):
        if figs["status"] != "completed":
            notes.append(f"the {role} run did not complete (status {figs['status']})")
    return notes


def compare(
    baseline: Path, candidate: Path, thresholds: Thresholds | None = None
) -> dict[str, Any]:
    """The comparison of two bundles (see the module's docstring); :class:`ConfigError`
    when either is not a readable run bundle."""
    limits = thresholds or Thresholds()
    base, cand = run_figures(Path(baseline), "baseline"), run_figures(Path(candidate), "candidate")
    notes: list[str] = []
    rows = _op_rows(base, cand, limits, notes) + _device_rows(base, cand, limits, notes)
    notes.extend(_context_notes(base, cand))
    worse = [r for r in rows if r["change"] == "worse"]
    better = [r for r in rows if r["change"] == "better"]
    call = "worse" if worse else "better" if better else "equivalent"
    decided_by = [describe(r) for r in (worse or better)]
    invalid = [(role, f["invalid"]) for role, f in (("baseline", base), ("candidate", cand))]
    if any(reason for _, reason in invalid):
        # Figures of failed operations say nothing of either storage: no call is made.
        call = "invalid"
        decided_by = [f"the {role} run is invalid: {reason}" for role, reason in invalid if reason]
    return {
        "baseline": {k: v for k, v in base.items() if k != "ops"},
        "candidate": {k: v for k, v in cand.items() if k != "ops"},
        "rows": rows,
        "verdict": {
            "call": call,
            "decided_by": decided_by,
            "thresholds": limits.model_dump(),
        },
        "notes": notes,
    }


# --------------------------------------------------------------------------- formatting
