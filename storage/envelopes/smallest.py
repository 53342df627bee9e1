"""The smallest capacity that fits a workload: never a figure of the page, always *computed*
from the demand and the capacity rule, and labelled so with how (the rule's rate and where it
comes from, the rounding), so it is never read as published."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from storage.envelopes.scaling import (
    Setting,
    pool_requirement,
    resolve_level,
    round_capacity,
    smallest_points_capacity,
)
from storage.envelopes.units import capacity_tib, fmt, fmt_capacity

if TYPE_CHECKING:
    from storage.envelopes.model import Envelope
    from storage.envelopes.sizing import Check, Workload


def smallest_capacity(
    env: Envelope, workload: Workload, checks: list[Check], setting: Setting
) -> tuple[float | None, str]:
    """The smallest capacity (TiB) at which every limit holds, and its text; None with the
    reason when no capacity does or the envelope has no capacity rule."""
    rule = env.spec.capacity
    fixed_over = [c for c in checks if c.limit.scales_with == "none" and c.utilisation > 1]
    if rule.kind == "none":
        return None, "not modelled: the seed gives no capacity rule for this envelope"
    if fixed_over:
        worst = max(fixed_over, key=lambda c: c.utilisation)
        return None, f"none: the {worst.limit.label} binds whatever the capacity"
    if rule.kind == "independent":
        return None, pool_requirement(env, workload.total_iops, workload.total_mibps)
    if rule.kind == "per_tib":
        level = resolve_level(env, setting.level)
        assert level is not None and rule.tested is not None
        rounded, text = round_capacity(workload.total_mibps / level.mibps_per_tib, env)
        text += f" at {level.level}"
        tested = capacity_tib(rule.tested.value, rule.tested.unit)
        if rounded > tested:
            text += (
                f" (above the tested {fmt_capacity(tested, 'TiB')}: the tables stay the ceiling)"
            )
        rate = "derived: " + level.derived if level.derived else "stated"
        return rounded, (
            f"{text} — computed: {fmt(workload.total_mibps, 1)} MiB/s ÷ "
            f"{level.mibps_per_tib:g} MiBps per TiB ({rate}), rounded up to a whole "
            f"{_step(text)}"
        )
    needed = smallest_points_capacity(env, workload.total_iops, workload.total_mibps)
    if math.isinf(needed):
        return None, "none: above the largest published volume size"
    rounded, text = round_capacity(needed, env)
    sizes = sorted(capacity_tib(p.capacity.value, p.capacity.unit) for p in rule.points)
    if rounded < sizes[0]:
        text += " (out of range: below the smallest published size, proportional)"
    elif rounded not in sizes:
        text += " (estimate: linear between published sizes)"
    return rounded, (
        f"{text} — computed: the demand against the published sizes' IOPS and bandwidth, "
        f"rounded up to a whole {_step(text)}"
    )


def _step(text: str) -> str:
    """The unit a capacity text was rounded to (its first unit: ``GiB`` or ``GB``)."""
    return text.split()[1]


__all__ = ["smallest_capacity"]
