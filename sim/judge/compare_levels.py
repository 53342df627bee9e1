"""Runs compared at load levels matched by delivered load instead of refused.

Apart from :mod:`sim.judge.compare` because it is a comparison of its own: when the sides' load
shapes differ (other sessions or rates) or a run has load steps, each side is cut into load
levels (a step, or runs of one shape), levels of the two sides whose delivered load (device
IOPS, or ops/s when a run has no block device or did not exercise it) is within
:data:`MATCH_FRACTION` are paired, and each pair gives latency rows with intervals from the
levels' own intervals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.judge import caveats as caveats_mod
from sim.judge import noise
from sim.judge.compare_pool import device_scope
from sim.judge.compare_rows import (
    DEVICE_METRICS,
    OP_METRICS,
    Thresholds,
    judged_row,
    mean_of_runs,
    sum_of_runs,
)

#: Context keys that make the load level: runs that differ only in these are compared at
#: load levels matched by delivered IOPS instead of refused.
LOAD_KEYS = ("sessions", "mode", "rate_ops_s", "think", "steps")
#: Two levels are matched when their delivered IOPS differ by at most this fraction.
MATCH_FRACTION = 0.15
#: Figures compared at a matched level: latency per operation and the device's await.
LEVEL_OP_METRICS = ("p50_us", "p99_us")


def load_key(figs: Mapping[str, Any]) -> str:
    context = figs["context"]
    return repr([context.get(k) for k in LOAD_KEYS])


def _levels(runs: list[dict[str, Any]], by_device: bool) -> list[dict[str, Any]]:
    """A side's load levels: runs of one load shape together (repeats), each load step of a
    stepped run its own level; per level the runs and the intervals of each. ``by_device``:
    a level's load is its device IOPS (every run of both sides has a device), else its
    ops/s — one unit for both sides, never IOPS matched against ops/s."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in runs:
        groups.setdefault(load_key(f), []).append(f)
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
    iops = mean_of_runs([_weighted(s["device"].get("device_iops")) for s in samples])
    if not by_device:  # a run without a device: the load is all operations' ops/s
        iops = mean_of_runs(
            [
                sum_of_runs([_weighted(o.get("ops_s")) for o in s["ops"].values()])
                if s["ops"]
                else None
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


def level_rows(
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
    values = (
        mean_of_runs([_weighted(x) for x in base]),
        mean_of_runs([_weighted(x) for x in cand]),
    )
    row = judged_row(
        metric, scope, values, better_when, threshold, noise.combined_ratio_ci(base, cand)
    )
    row["level"] = {"baseline": b["label"], "candidate": c["label"]}
    return row


# --------------------------------------------------------------------------- comparison


#: The caveat names (:data:`sim.judge.caveats.CONTEXT`) of the load shape.
LOAD_WORDS = frozenset(caveats_mod.CONTEXT[k][0] for k in LOAD_KEYS)


def _level_json(level: Mapping[str, Any]) -> dict[str, Any]:
    return {k: level[k] for k in ("label", "runs", "load", "load_unit")}


def compare_levels(
    bases: list[dict[str, Any]],
    cands: list[dict[str, Any]],
    found: list[dict[str, Any]],
    limits: Thresholds,
    notes: list[str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The rows of both sides at matched load levels, the caveats as they stand then (a load
    shape that differs on purpose no longer invalidates; no matched level does) and the
    levels as JSON; a level left unmatched goes to ``notes``."""
    found = [
        {
            **c,
            "invalidates": False,
            "text": c["text"].split(":")[0] + ": compared at load levels matched by delivered load",
        }
        if c["what"] in LOAD_WORDS or c["what"] == "measured time (s)"
        else c
        for c in found
    ]
    # A run that did not exercise its storage (its data cached) has no device load to match:
    # its device IOPS are its commits' and journal's, ~1/s whatever it ran (a rehearsal
    # matched a closed loop delivering 65 ops/s with an open one at 45 at "1 IOPS" each, and
    # compared them). Its delivered load is its operations'.
    by_device = all(
        f["device"] and f["samples"].device and not f.get("not_exercised") for f in bases + cands
    )
    b_levels, c_levels = _levels(bases, by_device), _levels(cands, by_device)
    pairs, level_notes = match_levels(b_levels, c_levels)
    notes.extend(level_notes)
    rows = level_rows(pairs, limits, device_scope(bases, cands))
    levels = {
        "baseline": [_level_json(v) for v in b_levels],
        "candidate": [_level_json(v) for v in c_levels],
        "matched": len(pairs),
        "within": MATCH_FRACTION,
    }
    if not pairs:
        found.append(_unmatched(found, b_levels, c_levels))
    return rows, found, levels


def _unmatched(
    found: list[dict[str, Any]], b_levels: list[dict[str, Any]], c_levels: list[dict[str, Any]]
) -> dict[str, Any]:
    """The caveat that invalidates a comparison with no pair of levels."""
    shape = "; ".join(c["text"].split(":")[0] for c in found if c["what"] in LOAD_WORDS)
    return {
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
