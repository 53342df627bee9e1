"""One compared figure as a row: its change, its threshold and its call.

Apart from :mod:`sim.judge.compare` because every way of comparing (whole runs, repeated runs
pooled by :mod:`sim.judge.compare_pool`, load levels matched by :mod:`sim.judge.compare_levels`)
makes its rows the same way: the thresholds (:class:`Thresholds`), the figures they cover, how a
change is judged against its threshold and its interval, and the row in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.errors import ConfigError, ScenarioError
from sim.judge import noise
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


def judged_row(
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
    # Why a figure without an interval, or with one that includes 1, has its call is said
    # once for all of them (EXPLANATIONS), not here.
    interval = "no interval" if ci is None else f"95 % CI of the ratio {ci[0]:.3g}-{ci[1]:.3g}"
    return (
        f"{row['scope']} {name} {row['delta_pct']:+.1f} % "
        f"(threshold {row['threshold_pct']:g} %, {interval})"
    )


def mean_of_runs(values: Sequence[float | None]) -> float | None:
    """The mean of the runs' figures (repeats of one scenario); None when any run lacks it."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def sum_of_runs(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)
