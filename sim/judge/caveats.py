"""What differs between two runs besides the storage, and which differences make their
comparison invalid.

A comparison judges the storage only when everything else was the same. A different workload
or target type, a different amount of data (the cache then holds a different share of it), a
different operation mix, a different load shape (sessions, mode, rate, think time, steps) or a
run much shorter than the other (:data:`SHORTER_FRACTION`) changes the figures by itself: each
is a caveat that **invalidates** the comparison, and so does any other workload parameter
(but :data:`QUIET_PARAMETERS`). Durations within a factor of two are a caveat that is named
but does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.bundle.figures import finite

#: A run measured for less than this fraction of the other's time is "much shorter".
SHORTER_FRACTION = 0.5
#: Durations that differ by more than this fraction (but less than the above) get a note.
DURATION_NOTE_FRACTION = 0.1

#: context key → (what it is in words, invalidates the comparison when it differs)
CONTEXT = {
    "workload": ("workload", True),
    "target": ("target type", True),
    "data_bytes": ("data size (bytes)", True),
    "rows_per_schema": ("data size (rows per schema)", True),
    "schemas": ("data size (schemas)", True),
    "mix": ("operation mix (requested %)", True),
    "sessions": ("sessions", True),
    "mode": ("load mode", True),
    "rate_ops_s": ("rate (ops/s)", True),
    "think": ("think time", True),
    "steps": ("load steps", True),
}
#: Workload parameters that do not change what runs: no caveat of their own.
QUIET_PARAMETERS = frozenset({"load_batch_rows", "load_seed", "table_prefix"})


def run_context(summary: Mapping[str, Any], scenario: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison checks is the same in both runs: workload, target type, data size,
    operation mix, load shape, measured time and the workload's parameters."""
    load = _mapping(scenario.get("load"))
    names = _mapping(summary.get("scenario"))
    workload = _mapping(summary.get("workload"))
    mix = _mapping(_mapping(summary.get("mix")).get("requested_pct"))
    steps = load.get("steps") or []
    return {
        "workload": names.get("workload"),
        "target": names.get("target"),
        "data_bytes": finite(_mapping(summary.get("cache")).get("data_bytes")),
        "rows_per_schema": finite(workload.get("rows_per_schema")),
        "schemas": finite(workload.get("schemas")),
        "mix": {op: pct for op, pct in sorted(mix.items()) if finite(pct)} or None,
        "sessions": summary.get("sessions"),
        "mode": load.get("mode"),
        "rate_ops_s": load.get("rate_ops_s"),
        "think": load.get("think"),
        "steps": steps if isinstance(steps, list) else None,
        "measured_s": finite(_mapping(summary.get("timing")).get("measured_s")),
        "parameters": _mapping(_mapping(scenario.get("workload")).get("parameters")),
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return f"{len(value)} steps"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in value.items())  # fmt: skip
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.4g}"
    return str(value)


def caveat(what: str, b: Any, c: Any, invalidates: bool, why: str) -> dict[str, Any]:
    return {
        "what": what,
        "baseline": b,
        "candidate": c,
        "invalidates": invalidates,
        "text": f"{what} differs ({_shown(b)} → {_shown(c)}): {why}",
    }


def caveats(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every difference between the two contexts (:func:`run_context`), invalidating first."""
    out = []
    for key, (what, invalidates) in CONTEXT.items():
        b, c = base.get(key), cand.get(key)
        if b != c:
            why = "the figures differ for that reason too" if invalidates else "noted"
            out.append(caveat(what, b, c, invalidates, why))
    out.extend(_duration(base.get("measured_s"), cand.get("measured_s")))
    out.extend(_parameters(base.get("parameters") or {}, cand.get("parameters") or {}))
    return sorted(out, key=lambda item: not item["invalidates"])


def _duration(b: float | None, c: float | None) -> list[dict[str, Any]]:
    if not b or not c or b == c:
        return []
    shorter = min(b, c) / max(b, c)
    if shorter < SHORTER_FRACTION:
        role = "candidate" if c < b else "baseline"
        why = (
            f"the {role} measured under {SHORTER_FRACTION:.0%} of the other's time, "
            "so its caches and flushes were at another stage"
        )
        return [caveat("measured time (s)", b, c, True, why)]
    if 1 - shorter > DURATION_NOTE_FRACTION:
        return [caveat("measured time (s)", b, c, False, "the shorter run's figures are noisier")]
    return []


def _parameters(b: Mapping[str, Any], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in sorted(set(b) | set(c)):
        if key in QUIET_PARAMETERS or b.get(key) == c.get(key):
            continue
        out.append(
            caveat(
                f"workload parameter {key}",
                b.get(key),
                c.get(key),
                True,
                "what ran differs",
            )
        )
    return out
