"""The intervals of one side of a replay's comparison with its capture, per figure.

A figure over a window is a weighted mean of its intervals' values (:mod:`sim.replay.shape`:
a rate weighted by the intervals' seconds, a mean size or an await by its direction's
requests, a share by all the requests). Each side gets two intervals from those values:

- the **spread**: the lowest and the highest interval's value (min-max, so a reader finds
  both intervals in the series; a percentile of a 10-interval replay would be one of them);
- the **95 % interval of the mean**: the intervals cut into up to
  :data:`sim.judge.noise.BATCHES` contiguous batches, each batch's weighted mean one sample
  (:func:`sim.judge.noise.batch_means`, which lengthens the batches of a correlated series),
  and ``mean ± t(k-1) × sd / sqrt(k)`` over the ``k`` batch means (Student's t,
  :func:`sim.analysis.stats.t975`), its low end held at 0 and a share's high end at 100 %
  (every figure here is a rate, a share, a size or a latency; a wide interval of few batches
  reaches beyond what the figure can be); none with fewer
  than :data:`sim.judge.noise.MIN_BATCHES` batch means, as the run comparison gives none.

A side asked "times the scale" multiplies every value (the capture's IOPS as the replay was
asked them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.analysis.stats import t975
from sim.judge.noise import MIN_BATCHES, batch_means


@dataclass(frozen=True)
class Side:
    """One side's intervals of one figure."""

    intervals: int  # the intervals with a value
    low: float | None  # the lowest interval's value
    high: float | None
    mean_low: float | None  # the 95 % interval of the mean
    mean_high: float | None
    batches: int

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def spread(values: Sequence[float | None]) -> tuple[float, float] | None:
    """The lowest and the highest finite value; None without one."""
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return (min(kept), max(kept)) if kept else None


def mean_interval(
    values: Sequence[float | None], weights: Sequence[float], ceiling: float | None = None
) -> tuple[float, float, int] | None:
    """The 95 % interval of the weighted mean from batch means (module docstring): its low
    and high ends (the high held at ``ceiling``, a share's 100 %) and the batches; None with
    fewer than ``MIN_BATCHES`` of them."""
    x = np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    means = batch_means(x, np.asarray(weights, dtype=np.float64))
    k = int(means.size)
    if k < MIN_BATCHES:
        return None
    centre = float(np.mean(means))
    half = t975(k - 1) * float(np.std(means, ddof=1)) / math.sqrt(k)
    high = centre + half if ceiling is None else min(ceiling, centre + half)
    return max(0.0, centre - half), high, k


def side(
    values: Sequence[float | None],
    weights: Sequence[float],
    factor: float = 1.0,
    ceiling: float | None = None,
) -> Side:
    """One side's :class:`Side` of ``values`` (weighted as the window's figure is), each
    times ``factor``; ``ceiling``: the most the figure can be (100 for a share)."""
    scaled = [None if v is None else float(v) * factor for v in values]
    kept = [w for v, w in zip(scaled, weights, strict=True) if v is not None and w > 0]
    ends = spread(scaled)
    ci = mean_interval(scaled, weights, ceiling)
    return Side(
        intervals=len(kept),
        low=ends[0] if ends else None,
        high=ends[1] if ends else None,
        mean_low=ci[0] if ci else None,
        mean_high=ci[1] if ci else None,
        batches=ci[2] if ci else 0,
    )


#: A figure's per-interval column in a profile's device series, and its weight: "s" the
#: interval's seconds, "r"/"w"/"all" its read, write or all requests (IOPS × seconds).
DEVICE_COLUMNS = {
    "read_iops": ("read_iops", "s"),
    "write_iops": ("write_iops", "s"),
    "read_kib": ("read_kib", "r"),
    "write_kib": ("write_kib", "w"),
    "seq_pct": ("seq_pct", "all"),
    "read_await": ("read_await_ms", "r"),
    "write_await": ("write_await_ms", "w"),
    "read_p99": ("read_p99_ms", "r"),
    "write_p99": ("write_p99_ms", "w"),
}


def device_values(
    series: dict[str, list[Any]], picked: Sequence[int], key: str
) -> tuple[list[float | None], list[float]]:
    """A device figure's per-interval values over ``picked`` and their weights, as
    :func:`sim.replay.shape.shape_over` weighs them (``read_pct``: each interval's reads of
    its requests, weighted by its requests)."""
    seconds = [float(series["interval_s"][i]) for i in picked]
    reads = [float(_at(series, "read_iops", i) or 0.0) for i in picked]
    writes = [float(_at(series, "write_iops", i) or 0.0) for i in picked]
    weights = {
        "s": seconds,
        "r": [r * s for r, s in zip(reads, seconds, strict=True)],
        "w": [w * s for w, s in zip(writes, seconds, strict=True)],
        "all": [(r + w) * s for r, w, s in zip(reads, writes, seconds, strict=True)],
    }
    if key == "read_pct":
        shares = [
            100.0 * r / (r + w) if r + w > 0 else None for r, w in zip(reads, writes, strict=True)
        ]
        return shares, weights["all"]
    column, weight = DEVICE_COLUMNS[key]
    values = [_at(series, column, i) for i in picked]
    return [None if v is None else float(v) for v in values], weights[weight]


def _at(series: dict[str, list[Any]], column: str, index: int) -> Any:
    values = series.get(column)
    return values[index] if values is not None and index < len(values) else None


def file_values(
    rows: Sequence[dict[str, float]], key: str, reproduced: Sequence[str]
) -> tuple[list[float | None], list[float]]:
    """A file figure's per-interval values over a window's ``fileops`` rows and their
    weights, as :func:`sim.replay.filejob.shape_over` weighs them: ``calls_s`` (the
    reproduced classes' calls per second, each interval alike), ``<CLASS>_share`` (weighted
    by the interval's reproduced calls), ``read_kib`` and ``write_kib`` (by its calls)."""
    calls = [sum(r.get(f"{c.lower()}_s", 0.0) for c in reproduced) for r in rows]
    if key == "calls_s":
        return list(calls), [1.0] * len(rows)
    if key.endswith("_share"):
        cls = key.removesuffix("_share").lower()
        shares = [
            100.0 * r.get(f"{cls}_s", 0.0) / n if n > 0 else None
            for r, n in zip(rows, calls, strict=True)
        ]
        return shares, calls
    name = key.removesuffix("_kib")
    n = [r.get(f"{name}_s", 0.0) for r in rows]
    sizes = [
        r.get(f"_{name}_b", 0.0) / k / 1024 if k > 0 else None for r, k in zip(rows, n, strict=True)
    ]
    return sizes, n
