"""What every collector's reset tests check: no rate a device could not have made.

A cumulative counter grows from zero, so over an interval of ``age_s`` seconds it can never
have grown by more than its larger reading; a rate above ``factor`` times that bound can only
come from differencing across a reset (the wrapped difference of a counter that went down, or
a new counter read against an old baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sim.protocols import Sample

DEFAULT_FACTOR = 10.0


def impossible_rates(
    rates: Mapping[str, float],
    totals: Mapping[str, tuple[float, float]],
    age_s: float,
    factor: float = DEFAULT_FACTOR,
) -> dict[str, float]:
    """The rates of ``rates`` above ``factor * max(total_before, total_after) / age_s``.

    ``totals`` maps a rate's key to the two readings of the counter (or sum of counters) it is
    computed from; rates without an entry are not judged.
    """
    out = {}
    for key, (before, after) in totals.items():
        if key in rates and abs(rates[key]) > factor * max(before, after, 0.0) / age_s:
            out[key] = rates[key]
    return out


def by_entity(samples: Iterable[Sample]) -> dict[str, Sample]:
    """Samples keyed by entity (one interval's samples of one collector)."""
    return {s.entity: s for s in samples}
