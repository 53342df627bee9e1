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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.bundle.figures import combined_await_ms, finite, primary_device
from sim.bundle.reader import read_analysis, read_summary
from sim.bundle.reader import read_scenario as bundle_scenario
from sim.core.cache import not_exercised
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
        "not_exercised": not_exercised(summary),
        "score": (summary.get("workload") or {}).get("score"),
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
    # Why a figure without an interval, or with one that includes 1, has its call is said
    # once for all of them (EXPLANATIONS), not here.
    interval = "no interval" if ci is None else f"95 % CI of the ratio {ci[0]:.3g}-{ci[1]:.3g}"
    return (
        f"{row['scope']} {name} {row['delta_pct']:+.1f} % "
        f"(threshold {row['threshold_pct']:g} %, {interval})"
    )


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean of the runs' figures (repeats of one scenario); None when any run lacks it."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _op_rows(
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
                _mean([f["ops"][op][metric] for f in bases]),
                _mean([f["ops"][op][metric] for f in cands]),
            )
            rows.append(_row(metric, op, values, better_when, threshold, ci))
    return rows


def _device_scope(bases: list[dict[str, Any]], cands: list[dict[str, Any]]) -> str:
    b = "/".join(sorted({str(f["device"] or "no device") for f in bases}))
    c = "/".join(sorted({str(f["device"] or "no device") for f in cands}))
    return b if b == c else f"{b} → {c}"


def _device_rows(
    bases: list[dict[str, Any]],
    cands: list[dict[str, Any]],
    limits: Thresholds,
    notes: list[str],
) -> list[dict[str, Any]]:
    """One row per storage figure of each run's primary device."""
    rows = [
        _row(
            metric,
            _device_scope(bases, cands),
            (
                _mean([f["storage"][metric] for f in bases]),
                _mean([f["storage"][metric] for f in cands]),
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


def _run_notes(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Runs that did not finish, or have no per-interval series to give an interval."""
    notes = []
    for role, figs in runs:
        if figs["status"] != OUTCOME_COMPLETED:
            notes.append(f"the {role} run did not complete (status {figs['status']})")
        if figs["samples"].intervals is None:
            notes.append(
                f"the {role} has no per-interval series ({figs['samples'].why_none}): "
                "no confidence interval, so no figure is significant"
            )
    return notes


#: The calls a row can have that say something, in the order the overall call weighs them,
#: with the heading each gets in the verdict (improvements apart from regressions).
CALL_ORDER = ("worse", "better", UNDETERMINED, NO_SIGNIFICANT)
GROUPS = {
    "worse": "regressions",
    "better": "improvements",
    UNDETERMINED: "undetermined",
    NO_SIGNIFICANT: "within the noise",
}
#: Why a row has its call, said once per reason (not once per figure).
EXPLANATIONS = {
    UNDETERMINED: "no 95 % interval: fewer than 5 independent batches in a run (too few or "
    "too correlated intervals), no per-interval series, or repeated runs that disagree more "
    "than their number can weigh; run longer, or repeat more",
    NO_SIGNIFICANT: "beyond the threshold, but the ratio's 95 % interval includes 1 "
    "(run-to-run noise)",
}


def _call(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The overall call from the rows and the rows that decided it."""
    for call in CALL_ORDER:
        decided = [describe(r) for r in rows if r["change"] == call]
        if decided:
            return call, decided
    return "equivalent", []


def _groups(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The judged rows by what they say: regressions, improvements, undetermined, within
    the noise (each a list of short descriptions; empty groups left out)."""
    out: dict[str, list[str]] = {}
    for call in CALL_ORDER:
        found = [describe(r) for r in rows if r["change"] == call]
        if found:
            out[GROUPS[call]] = found
    return out


def _window(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What a side's figures are: measured, over which window, how many intervals."""
    intervals = [f["samples"].intervals for f in runs]
    return {
        "figures": "measured",
        "window": WINDOW,
        "measured_s": _sum([f["measured_s"] for f in runs]),
        "intervals": None if any(n is None for n in intervals) else sum(intervals),
    }


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A side of the comparison as JSON: its first run's fields (compatible with one run),
    the runs when there are several, and its window."""
    hidden = ("ops", "samples", "series")
    first = {k: v for k, v in runs[0].items() if k not in hidden}
    side = {**first, **_window(runs)}
    if len(runs) > 1:
        side["run"] = f"{runs[0]['run']} (+{len(runs) - 1} repeats)"
        side["runs"] = [{k: v for k, v in f.items() if k not in hidden} for f in runs]
    return side


# --------------------------------------------------------------------------- caveats of runs


def run_caveats(sides: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """What each run says of itself, before any figure: a run that is invalid (its operations
    failed: invalidates), a run that did not exercise the storage (its figures are the
    caches'; said once for both sides when both did not)."""
    out: list[dict[str, Any]] = []
    cached = {role: [f for f in runs if f.get("not_exercised")] for role, runs in sides.items()}
    if all(cached.values()):
        reasons = "; ".join(f"{role}: {runs[0]['not_exercised']}" for role, runs in cached.items())
        out.append(
            _run_caveat(
                "storage not exercised",
                "both",
                False,
                "both runs: storage not exercised, so the figures compare caches, not "
                f"storage ({reasons})",
            )
        )
    else:
        for role, runs in cached.items():
            for f in runs:
                out.append(
                    _run_caveat(
                        "storage not exercised",
                        role,
                        False,
                        f"the {role} run {f['run']}: storage not exercised, its figures are "
                        f"the caches' ({f['not_exercised']})",
                    )
                )
    for role, runs in sides.items():
        for f in runs:
            if f["invalid"]:
                out.append(
                    _run_caveat(
                        "invalid run", role, True, f"the {role} run is invalid: {f['invalid']}"
                    )
                )
    return out


def _run_caveat(what: str, run: str, invalidates: bool, text: str) -> dict[str, Any]:
    return {"what": what, "run": run, "invalidates": invalidates, "text": text}


# --------------------------------------------------------------------------- load levels

#: Context keys that make the load level: runs that differ only in these are compared at
#: load levels matched by delivered IOPS instead of refused.
LOAD_KEYS = ("sessions", "mode", "rate_ops_s", "think", "steps")
#: Two levels are matched when their delivered IOPS differ by at most this fraction.
MATCH_FRACTION = 0.15
#: Figures compared at a matched level: latency per operation and the device's await.
LEVEL_OP_METRICS = ("p50_us", "p99_us")


def _load_key(figs: Mapping[str, Any]) -> str:
    context = figs["context"]
    return repr([context.get(k) for k in LOAD_KEYS])


def _levels(runs: list[dict[str, Any]], by_device: bool) -> list[dict[str, Any]]:
    """A side's load levels: runs of one load shape together (repeats), each load step of a
    stepped run its own level; per level the runs and the intervals of each. ``by_device``:
    a level's load is its device IOPS (every run of both sides has a device), else its
    ops/s — one unit for both sides, never IOPS matched against ops/s."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in runs:
        groups.setdefault(_load_key(f), []).append(f)
    levels = []
    for members in groups.values():
        steps = sorted({s for s in members[0]["samples"].step if s is not None})
        for step in steps or [None]:
            masks = [
                [step is None or s == step for s in f["samples"].step]
                if f["samples"].step
                else [True] * (f["samples"].intervals or 0)
                for f in members
            ]
            levels.append(_level(members, step, masks, by_device))
    return levels


def _level(
    members: list[dict[str, Any]], step: int | None, masks: list[list[bool]], by_device: bool
) -> dict[str, Any]:
    context = members[0]["context"]
    label = ", ".join(
        f"sessions {context['sessions']}" if k == "sessions" else f"rate {context[k]:g} ops/s"
        for k in ("sessions", "rate_ops_s")
        if isinstance(context.get(k), int | float) and not isinstance(context.get(k), bool)
    )
    if step is not None:
        # A step names its own sessions or rate (a sweep's steps do), not the run's.
        steps = context.get("steps") or []
        spec = steps[step] if 0 <= step < len(steps) and isinstance(steps[step], dict) else {}
        own = ", ".join(
            f"sessions {spec['sessions']}" if k == "sessions" else f"rate {spec[k]:g} {unit}"
            for k, unit in (("sessions", ""), ("rate_ops_s", "ops/s"), ("rate_iops", "IOPS"))
            if isinstance(spec.get(k), int | float) and not isinstance(spec.get(k), bool)
        )
        label = f"step {step + 1}" + (f", {own}" if own else f" of {label}" if label else "")
    samples: list[dict[str, Any]] = [
        {
            "ops": {
                op: {m: noise.select(v, mask) for m, v in figs.items()}
                for op, figs in f["samples"].ops.items()
            },
            "device": {m: noise.select(v, mask) for m, v in f["samples"].device.items()},
        }
        for f, mask in zip(members, masks, strict=True)
    ]
    iops = _mean([_weighted(s["device"].get("device_iops")) for s in samples])
    if not by_device:  # a run without a device: the load is all operations' ops/s
        iops = _mean(
            [
                _sum([_weighted(o.get("ops_s")) for o in s["ops"].values()]) if s["ops"] else None
                for s in samples
            ]
        )
    return {
        "label": label or "the run",
        "runs": [f["run"] for f in members],
        "load": iops,
        "load_unit": "IOPS" if by_device else "ops/s",
        "samples": samples,
    }


def _weighted(samples: noise.Samples | None) -> float | None:
    """The window's figure from its interval samples (weighted mean)."""
    if samples is None:
        return None
    values, weights = samples
    keep = [
        (v, w)
        for v, w in zip(values.tolist(), weights.tolist(), strict=True)
        if v == v and w == w and w > 0  # NaN-free
    ]
    total = sum(w for _, w in keep)
    return sum(v * w for v, w in keep) / total if total else None


def match_levels(
    base: list[dict[str, Any]], cand: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[str]]:
    """Pairs of levels whose delivered load differs by at most :data:`MATCH_FRACTION`,
    closest first, each level in at most one pair; and a note per level left unmatched."""
    distances = sorted(
        (abs(c["load"] - b["load"]) / b["load"], i, j)
        for i, b in enumerate(base)
        for j, c in enumerate(cand)
        if b["load"] and c["load"] is not None
    )
    used_b: set[int] = set()
    used_c: set[int] = set()
    pairs = []
    for distance, i, j in distances:
        if distance <= MATCH_FRACTION and i not in used_b and j not in used_c:
            used_b.add(i)
            used_c.add(j)
            pairs.append((i, j))
    notes = [
        f"the {role} level {level['label']} ({_load_text(level)}) has no level of the other "
        f"side within {MATCH_FRACTION * 100:g} % of its load: not compared"
        for role, levels, used in (("baseline", base, used_b), ("candidate", cand, used_c))
        for k, level in enumerate(levels)
        if k not in used
    ]
    pairs.sort(key=lambda p: base[p[0]]["load"] or 0.0)
    return [(base[i], cand[j]) for i, j in pairs], notes


def _load_text(level: Mapping[str, Any]) -> str:
    load = level["load"]
    return "no load figure" if load is None else f"{load:,.0f} {level['load_unit']}"


def _level_rows(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]], limits: Thresholds, device: str
) -> list[dict[str, Any]]:
    """Per matched pair: the delivered load (reported), each common operation's p50 and p99
    and the device's await, with the interval of each ratio from the levels' intervals."""
    rows = []
    for b, c in pairs:
        scope = f"@ {_load_text(b)}"
        if b["load_unit"] == "IOPS":
            rows.append(
                _level_row(
                    "device_iops", f"{scope} {device}", b, c, ("device", None, "device_iops"),
                    "higher", None,
                )
            )  # fmt: skip
        ops = sorted(set.intersection(*(set(s["ops"]) for s in [*b["samples"], *c["samples"]])))
        for op in ops:
            for metric in LEVEL_OP_METRICS:
                better_when, field = OP_METRICS[metric]
                rows.append(
                    _level_row(
                        metric,
                        f"{scope} {op}",
                        b,
                        c,
                        ("ops", op, metric),
                        better_when,
                        getattr(limits, field),
                    )
                )
        if b["load_unit"] == "IOPS":
            better_when, field = DEVICE_METRICS["await_ms"]
            rows.append(
                _level_row(
                    "await_ms",
                    f"{scope} {device}",
                    b,
                    c,
                    ("device", None, "await_ms"),
                    better_when,
                    getattr(limits, field),
                )
            )
    return rows


def _level_row(
    metric: str,
    scope: str,
    b: Mapping[str, Any],
    c: Mapping[str, Any],
    where: tuple[str, str | None, str],
    better_when: str,
    threshold: float | None,
) -> dict[str, Any]:
    kind, op, name = where

    def pick(s: Mapping[str, Any]) -> noise.Samples | None:
        figs = s["ops"].get(op) or {} if kind == "ops" else s["device"]
        return figs.get(name)

    base = [pick(s) for s in b["samples"]]
    cand = [pick(s) for s in c["samples"]]
    values = (_mean([_weighted(x) for x in base]), _mean([_weighted(x) for x in cand]))
    row = _row(metric, scope, values, better_when, threshold, noise.combined_ratio_ci(base, cand))
    row["level"] = {"baseline": b["label"], "candidate": c["label"]}
    return row


# --------------------------------------------------------------------------- comparison


def compare(
    baseline: Path, candidate: Path, thresholds: Thresholds | None = None
) -> dict[str, Any]:
    """The comparison of two bundles (see the module's docstring); :class:`ConfigError`
    when either is not a readable run bundle."""
    return compare_runs([Path(baseline)], [Path(candidate)], thresholds)


def compare_runs(
    baselines: Sequence[Path], candidates: Sequence[Path], thresholds: Thresholds | None = None
) -> dict[str, Any]:
    """The comparison of one or more baseline bundles with one or more candidate bundles.

    Runs of one side with the same load shape are repeats: their figures are averaged and
    their batch means pooled into one interval (:func:`sim.judge.noise.combined_ratio_ci`).
    When the sides' load shapes differ (other sessions or rates) or a run has load steps,
    the figures are compared at load levels matched by delivered IOPS
    (:func:`match_levels`) instead of refused."""
    limits = thresholds or Thresholds()
    if not baselines or not candidates:
        raise ConfigError("compare needs at least one baseline and one candidate bundle")
    bases = [run_figures(Path(p), "baseline") for p in baselines]
    cands = [run_figures(Path(p), "candidate") for p in candidates]
    notes: list[str] = []
    found = caveats_mod.caveats(bases[0]["context"], cands[0]["context"])
    # Runs of one side must differ in nothing but their load shape.
    for role, runs in (("baseline", bases), ("candidate", cands)):
        for f in runs[1:]:
            for c in caveats_mod.caveats(runs[0]["context"], f["context"]):
                if c["what"] not in LOAD_WORDS and c["invalidates"]:
                    found.append({**c, "text": f"the {role} runs differ: {c['text']}"})
    stepped = any(len({s for s in f["samples"].step if s is not None}) > 1 for f in bases + cands)
    shapes = {_load_key(f) for f in bases} != {_load_key(f) for f in cands} or any(
        len({_load_key(f) for f in runs}) > 1 for runs in (bases, cands)
    )
    by_level = stepped or shapes
    levels: dict[str, Any] | None = None
    if by_level:
        # The load shape differs on purpose: compared at matched levels, not refused.
        found = [
            {
                **c,
                "invalidates": False,
                "text": c["text"].split(":")[0]
                + ": compared at load levels matched by delivered load",
            }
            if c["what"] in LOAD_WORDS or c["what"] == "measured time (s)"
            else c
            for c in found
        ]
        by_device = all(f["device"] and f["samples"].device for f in bases + cands)
        b_levels, c_levels = _levels(bases, by_device), _levels(cands, by_device)
        pairs, level_notes = match_levels(b_levels, c_levels)
        notes.extend(level_notes)
        rows = _level_rows(pairs, limits, _device_scope(bases, cands))
        levels = {
            "baseline": [_level_json(v) for v in b_levels],
            "candidate": [_level_json(v) for v in c_levels],
            "matched": len(pairs),
            "within": MATCH_FRACTION,
        }
        if not pairs:
            shape = "; ".join(c["text"].split(":")[0] for c in found if c["what"] in LOAD_WORDS)
            found.append(
                {
                    "what": "load levels",
                    "baseline": [_load_text(v) for v in b_levels],
                    "candidate": [_load_text(v) for v in c_levels],
                    "invalidates": True,
                    "text": (f"{shape}: " if shape else "")
                    + f"no load level of one side delivered within {MATCH_FRACTION * 100:g} % of "
                    "the load of one of the other (baseline "
                    + ", ".join(_load_text(v) for v in b_levels)
                    + "; candidate "
                    + ", ".join(_load_text(v) for v in c_levels)
                    + ")",
                }
            )
    else:
        rows = _op_rows(bases, cands, limits, notes) + _device_rows(bases, cands, limits, notes)
    found = run_caveats({"baseline": bases, "candidate": cands}) + sorted(
        found, key=lambda item: not item["invalidates"]
    )
    notes.extend(c["text"] for c in found if not c["invalidates"] and "run" not in c)
    notes.extend(_run_notes([("baseline", f) for f in bases] + [("candidate", f) for f in cands]))
    call, decided_by = _call(rows)
    invalid = [c["text"] for c in found if c["invalidates"]]
    if invalid:
        # Figures of failed operations say nothing of either storage, nor do runs that
        # differ in more than the storage: no call is made.
        call, decided_by = "invalid", invalid
    result: dict[str, Any] = {
        "baseline": _side(bases),
        "candidate": _side(cands),
        "rows": rows,
        "verdict": {
            "call": call,
            "decided_by": decided_by,
            **_groups(rows),
            "explanations": {
                GROUPS[k]: v for k, v in EXPLANATIONS.items() if any(r["change"] == k for r in rows)
            },
            "thresholds": limits.model_dump(),
            "interval": noise.METHOD,
        },
        "caveats": found,
        "notes": notes,
        "scores": {
            "baseline": [f.get("score") for f in bases],
            "candidate": [f.get("score") for f in cands],
        },
    }
    if levels is not None:
        result["levels"] = levels
    return result


#: The caveat names (:data:`sim.judge.caveats.CONTEXT`) of the load shape.
LOAD_WORDS = frozenset(caveats_mod.CONTEXT[k][0] for k in LOAD_KEYS)


def _level_json(level: Mapping[str, Any]) -> dict[str, Any]:
    return {k: level[k] for k in ("label", "runs", "load", "load_unit")}
