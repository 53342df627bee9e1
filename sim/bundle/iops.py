"""One definition of a device's IOPS for a run, used by every sentence, table and chart.

**A device's IOPS over a window is the mean over that window's measured intervals, each
interval weighted by its length** — the device's I/Os over the window's seconds. For the whole
run it is the block collector's mean in summary.json (the bundle writer weights every
measured interval by its length, see :meth:`sim.bundle.writer.BundleWriter.storage_summary`),
the figure the block table shows; for a part of the run (a step, a half) the same mean over
that part's intervals.

Medians are never quoted as "the IOPS": with a neighbour's burst in a few intervals a median
and a mean of one device differed by a factor of three in one report (1,486 against 4,239),
and a reader comparing a sentence with a table cannot tell which is right.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sim import registry
from sim.bundle.figures import device_iops, finite

#: How the figure is named wherever it is shown beside another kind of IOPS.
IOPS_DEFINITION = "mean over the measured window"


def window_iops(rates: Iterable[Any], seconds: Iterable[Any] | None = None) -> float | None:
    """The mean of per-interval IOPS, weighted by each interval's length (``seconds``; equal
    weights when None); None when no interval has a finite figure."""
    values = list(rates)
    weights = [1.0] * len(values) if seconds is None else list(seconds)
    total = span = 0.0
    for value, weight in zip(values, weights, strict=False):
        v, w = finite(value), finite(weight)
        if v is None or w is None or w <= 0:
            continue
        total += v * w
        span += w
    return total / span if span > 0 else None


def run_iops(summary: Mapping[str, Any], device: str | None) -> float | None:
    """``device``'s IOPS over the run's measured window: the block collector's mean in
    summary.json (reads plus writes where an older bundle lacks ``iops``)."""
    if not device:
        return None
    source = registry.collector_with_role(registry.ROLE_DEVICE) or ""
    storage = summary.get("storage")
    means = (storage.get(source) if isinstance(storage, Mapping) else None) or {}
    figures = means.get(device) if isinstance(means, Mapping) else None
    return device_iops(figures) if isinstance(figures, Mapping) else None


def same_iops(a: float | None, b: float | None, digits: int = 0) -> bool:
    """Whether two IOPS figures read the same once rounded to ``digits`` (what a sentence
    and a table print)."""
    if a is None or b is None:
        return a is b
    return math.isclose(round(a, digits), round(b, digits), abs_tol=10.0**-digits)
