"""One figure of the profile as the document carries it: its value, its unit, what it is and
where it comes from, so a number pasted into a ticket can be traced back to its column.

*What it is* (``what``):

- ``measured``: one column of a live capture or of a dbsim run, or a statistic (a mean, a
  maximum, a percentile) of that one column over intervals;
- ``imported``: the same, of a capture imported from a file a DBA already had (iostat, AWR …);
- ``derived``: computed from several columns or entities (reads plus writes, a share, a
  quantity divided by a count, a sum over devices).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MEASURED = "measured"
IMPORTED = "imported"
DERIVED = "derived"

#: Significant digits kept in the document: at least what a source column carries. The
#: bundle's CSVs keep 4 decimals (sim/bundle/writer.py), so a p99 of 142.6063 ms has 7 and an
#: IOPS figure of 12,345.6789 has 9: six digits dropped the last of them (a profile said
#: 142.606 ms where the run's blocklatency.csv said 142.6063).
DIGITS = 10


def number(value: float | None) -> float | None:
    """``value`` to :data:`DIGITS` significant digits; None for a missing or non-finite one."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{DIGITS}g}")


def fig(value: float | None, unit: str, what: str, source: str) -> dict[str, Any]:
    """A figure record: ``{"value", "unit", "what", "source"}``."""
    return {"value": number(value), "unit": unit, "what": what, "source": source}


def column_info(unit: str, what: str, source: str) -> dict[str, str]:
    """How a per-interval series reads: its unit, what it is and where it comes from."""
    return {"unit": unit, "what": what, "source": source}


def weighted_mean(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """The mean of the values present, each weighted (an interval's length, a request count);
    None when none is present or the weights add up to nothing."""
    total = weight = 0.0
    for value, w in zip(values, weights, strict=True):
        if value is not None and w > 0:
            total += value * w
            weight += w
    return total / weight if weight > 0 else None


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; None without values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q * len(ordered) - 1e-9))
    return ordered[rank - 1]


def present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole
