"""Two runs side by side: a baseline (the old array) and a candidate (the new volume).

:func:`compare` reads two bundles (never writes them) and returns, per operation, the change
in ops/s, p50 and p99, and for each run's main block device (the one with the most IOPS —
the two runs may name different devices) the change in IOPS, await and I/Os per operation;
each as absolute and percent, with the 95 % confidence interval of the ratio candidate /
baseline from each run's per-interval series (:mod:`sim.judge.noise`), judged against
:class:`Thresholds`.

A figure is **worse** (or **better**) only when its change exceeds its threshold *and* the
interval excludes 1 (no change); a change beyond the threshold whose interval includes 1 is
**no significant difference**; a change within the threshold is **within**. The overall call:
*worse* when any judged figure is worse (the rows are named in ``decided_by``), else *better*
when one is better, else *no significant difference* when one moved beyond its threshold
without being significant, else *equivalent*. The call is *invalid* — no verdict — when a run
is invalid or a caveat invalidates the comparison (:mod:`sim.judge.caveats`: workload, target
type, data size, mix, load shape, a much shorter run). A threshold of None leaves its figure
reported but not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.bundle.figures import combined_await_ms, finite, primary_device
from sim.bundle.reader import read_analysis, read_summary
from sim.bundle.reader import read_scenario as bundle_scenario
from sim.core.result import OUTCOME_COMPLETED
from sim.errors import ConfigError, ScenarioError, SimError
from sim.judge import caveats as caveats_mod
from sim.judge import noise
from sim.judge.slo import device_source
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
#: Figures judged by their threshold alone: failures are counted, not sampled.
NO_INTERVAL = frozenset({"error_pct"})
WINDOW = "the measured window (warm-up excluded), as the summary"
NO_SIGNIFICANT = "no significant difference"
#: Beyond its threshold but without an interval to weigh it (too few independent batches, or
#: no per-interval series): not "no significant difference", which would say the change is
#: noise — p99 11 s against 1 ms got that word before.
UNDETERMINED = "undetermined (no interval)"


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
    devices = (summary.get("storage") or {}).get(device_source()) or {}
    device = (analysis or {}).get("primary_device")
    if device not in devices:
        device = primary_device(devices)
    means = devices.get(device) or {}
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
        "context": caveats_mod.run_context(summary, _scenario(bundle)),
        "samples": noise.run_samples(bundle, device),
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


def _change(delta: float | None, baseline: float | None) -> float | None:
    if delta is not None and baseline:
        return 100 * delta / baseline
    return 0.0 if delta == 0 else None


def _judge(
    regression: float | None, threshold: float | None, ci: noise.RatioCI | None, metric: str
) -> str:
    """One figure's verdict: beyond its threshold *and* significant (the interval excludes
    1) on the same side, or no significant difference (the interval includes 1), undetermined
    (no interval), or within the threshold."""
    if threshold is None or regression is None:
        return "not judged"
    if abs(regression) <= threshold:
        return "within"
    if metric not in NO_INTERVAL:
        if ci is None:
            return UNDETERMINED
        if not ci.significant:
            return NO_SIGNIFICANT
    return "worse" if regression > 0 else "better"


def _row(
    metric: str,
    scope: str,
    values: tuple[float | None, float | None],
    better_when: str,
    threshold: float | None,
    ci: noise.RatioCI | None,
) -> dict[str, Any]:
    baseline, candidate = values
    delta = None if baseline is None or candidate is None else candidate - baseline
    pct = _change(delta, baseline)
    # Regression: how much worse, in percent, whichever way "worse" points for this figure;
    # in points for a figure that is a percentage already (POINT_METRICS).
    change_by = delta if metric in POINT_METRICS else pct
    regression = (
        None if change_by is None else (change_by if better_when == "lower" else -change_by)
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
        "ratio": None if ci is None else round(ci.ratio, 4),
        "ci95": None if ci is None else [round(ci.low, 4), round(ci.high, 4)],
        "significant": None if ci is None else ci.significant,
        "batches": None if ci is None else list(ci.batches),
        "change": _judge(regression, threshold, ci, metric),
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
    """A judged row in words: ``read p99 +23.4 % (threshold 10 %, 95 % CI of the ratio
    1.12-1.31)``."""
    name = LABELS.get(row["metric"], row["metric"])
    if row["metric"] in POINT_METRICS:
        return (
            f"{row['scope']} {name} {row['delta']:+.3g} points "
            f"(threshold {row['threshold_pct']:g} points)"
        )
    ci = row.get("ci95")
    interval = (
        "no confidence interval: fewer than 5 independent batches (too few or too correlated "
        "intervals: run longer)"
        if ci is None
        else f"95 % CI of the ratio {ci[0]:.3g}-{ci[1]:.3g}"
        + (" includes 1" if row["change"] == NO_SIGNIFICANT else "")
    )
    return (
        f"{row['scope']} {name} {row['delta_pct']:+.1f} % "
        f"(threshold {row['threshold_pct']:g} %, {interval})"
    )


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
    b_samples, c_samples = base["samples"].ops, cand["samples"].ops
    rows = []
    for op in common:
        for metric, (better_when, field) in OP_METRICS.items():
            threshold = getattr(limits, field) if op in judged_ops else None
            ci = noise.ratio_ci(
                (b_samples.get(op) or {}).get(metric), (c_samples.get(op) or {}).get(metric)
            )
            values = (base["ops"][op][metric], cand["ops"][op][metric])
            rows.append(_row(metric, op, values, better_when, threshold, ci))
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
    b_samples, c_samples = base["samples"].device, cand["samples"].device
    rows = [
        _row(
            metric,
            device_scope,
            (base["storage"][metric], cand["storage"][metric]),
            better_when,
            getattr(limits, field),
            noise.ratio_ci(b_samples.get(metric), c_samples.get(metric)),
        )
        for metric, (better_when, field) in DEVICE_METRICS.items()
    ]
    if base["device"] is None or cand["device"] is None:
        notes.append("a run has no block device figures: storage rows are not compared")
    return rows


def _run_notes(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Runs that did not finish, or have no per-interval series to give an interval."""
    notes = []
    for role, figs in (("baseline", base), ("candidate", cand)):
        if figs["status"] != OUTCOME_COMPLETED:
            notes.append(f"the {role} run did not complete (status {figs['status']})")
        if figs["samples"].intervals is None:
            notes.append(
                f"the {role} has no per-interval series ({figs['samples'].why_none}): "
                "no confidence interval, so no figure is significant"
            )
    return notes


def _call(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The overall call from the rows and the rows that decided it."""
    for call in ("worse", "better", UNDETERMINED, NO_SIGNIFICANT):
        decided = [describe(r) for r in rows if r["change"] == call]
        if decided:
            return call, decided
    return "equivalent", []


def _window(figs: Mapping[str, Any]) -> dict[str, Any]:
    samples = figs["samples"]
    return {
        "figures": "measured",
        "window": WINDOW,
        "measured_s": figs["measured_s"],
        "intervals": samples.intervals,
    }


def compare(
    baseline: Path, candidate: Path, thresholds: Thresholds | None = None
) -> dict[str, Any]:
    """The comparison of two bundles (see the module's docstring); :class:`ConfigError`
    when either is not a readable run bundle."""
    limits = thresholds or Thresholds()
    base, cand = run_figures(Path(baseline), "baseline"), run_figures(Path(candidate), "candidate")
    notes: list[str] = []
    rows = _op_rows(base, cand, limits, notes) + _device_rows(base, cand, limits, notes)
    found = caveats_mod.caveats(base["context"], cand["context"])
    notes.extend(c["text"] for c in found if not c["invalidates"])
    notes.extend(_run_notes(base, cand))
    call, decided_by = _call(rows)
    invalid = [
        f"the {role} run is invalid: {f['invalid']}"
        for role, f in (("baseline", base), ("candidate", cand))
        if f["invalid"]
    ]
    # Figures of failed operations say nothing of either storage, nor do runs that differ
    # in more than the storage: no call is made.
    invalid += [c["text"] for c in found if c["invalidates"]]
    if invalid:
        call, decided_by = "invalid", invalid
    hidden = ("ops", "samples")
    return {
        "baseline": {**{k: v for k, v in base.items() if k not in hidden}, **_window(base)},
        "candidate": {**{k: v for k, v in cand.items() if k not in hidden}, **_window(cand)},
        "rows": rows,
        "verdict": {
            "call": call,
            "decided_by": decided_by,
            "thresholds": limits.model_dump(),
            "interval": noise.METHOD,
        },
        "caveats": found,
        "notes": notes,
    }
