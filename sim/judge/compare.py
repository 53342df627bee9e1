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

from sim.bundle.figures import combined_await_ms, finite, primary_device
from sim.bundle.reader import read_analysis, read_summary
from sim.bundle.reader import read_scenario as bundle_scenario
from sim.core.cache import not_exercised
from sim.core.result import OUTCOME_COMPLETED
from sim.errors import ConfigError, SimError
from sim.judge import caveats as caveats_mod
from sim.judge import noise
from sim.judge.compare_levels import LOAD_WORDS, compare_levels, load_key
from sim.judge.compare_pool import device_rows, op_rows, side_json
from sim.judge.compare_rows import (
    NO_SIGNIFICANT,
    UNDETERMINED,
    Thresholds,
    describe,
    load_thresholds,
)
from sim.judge.slo import device_source

#: What callers import from here: the comparison, its thresholds and how they are read.
__all__ = ["Thresholds", "compare", "compare_runs", "load_thresholds", "run_figures"]


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
    (:func:`sim.judge.compare_levels.match_levels`) instead of refused."""
    limits = thresholds or Thresholds()
    if not baselines or not candidates:
        raise ConfigError("compare needs at least one baseline and one candidate bundle")
    bases = [run_figures(Path(p), "baseline") for p in baselines]
    cands = [run_figures(Path(p), "candidate") for p in candidates]
    notes: list[str] = []
    found = _context_caveats(bases, cands)
    levels: dict[str, Any] | None = None
    if _by_level(bases, cands):
        # The load shape differs on purpose: compared at matched levels, not refused.
        rows, found, levels = compare_levels(bases, cands, found, limits, notes)
    else:
        rows = op_rows(bases, cands, limits, notes) + device_rows(bases, cands, limits, notes)
    found = run_caveats({"baseline": bases, "candidate": cands}) + sorted(
        found, key=lambda item: not item["invalidates"]
    )
    notes.extend(c["text"] for c in found if not c["invalidates"] and "run" not in c)
    notes.extend(_run_notes([("baseline", f) for f in bases] + [("candidate", f) for f in cands]))
    result: dict[str, Any] = {
        "baseline": side_json(bases),
        "candidate": side_json(cands),
        "rows": rows,
        "verdict": _verdict(rows, found, limits),
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


def _context_caveats(
    bases: list[dict[str, Any]], cands: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """How the sides' first runs differ, and how runs of one side differ in more than their
    load shape (they must not)."""
    found = caveats_mod.caveats(bases[0]["context"], cands[0]["context"])
    for role, runs in (("baseline", bases), ("candidate", cands)):
        for f in runs[1:]:
            for c in caveats_mod.caveats(runs[0]["context"], f["context"]):
                if c["what"] not in LOAD_WORDS and c["invalidates"]:
                    found.append({**c, "text": f"the {role} runs differ: {c['text']}"})
    return found


def _by_level(bases: list[dict[str, Any]], cands: list[dict[str, Any]]) -> bool:
    """Whether the runs are compared at matched load levels: a run has load steps, or the
    load shapes differ between the sides or within one."""
    stepped = any(len({s for s in f["samples"].step if s is not None}) > 1 for f in bases + cands)
    shapes = {load_key(f) for f in bases} != {load_key(f) for f in cands} or any(
        len({load_key(f) for f in runs}) > 1 for runs in (bases, cands)
    )
    return stepped or shapes


def _verdict(
    rows: list[dict[str, Any]], found: list[dict[str, Any]], limits: Thresholds
) -> dict[str, Any]:
    """The overall call, what decided it, the rows by what they say, each reason once."""
    call, decided_by = _call(rows)
    invalid = [c["text"] for c in found if c["invalidates"]]
    if invalid:
        # Figures of failed operations say nothing of either storage, nor do runs that
        # differ in more than the storage: no call is made.
        call, decided_by = "invalid", invalid
    return {
        "call": call,
        "decided_by": decided_by,
        **_groups(rows),
        "explanations": {
            GROUPS[k]: v for k, v in EXPLANATIONS.items() if any(r["change"] == k for r in rows)
        },
        "thresholds": limits.model_dump(),
        "interval": noise.METHOD,
    }
