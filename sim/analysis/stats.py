"""Pure statistics on numpy arrays: correlation, lag, regression, knee, binning, Little's law.

Every function takes plain arrays (NaN marks a missing observation) and returns plain Python
numbers or ``None`` when the answer is undefined (too few points, a constant series), never
NaN: the results go straight into JSON. Nothing here knows about bundles.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Fewer paired observations than this and a correlation or fit is not reported: two points
#: always lie on a line, so r = ±1 from two intervals would be noise dressed as certainty.
MIN_POINTS = 3
#: Relative spread below which a series counts as constant (float round-off, not signal).
CONSTANT_RTOL = 1e-12
#: Lags tried by :func:`best_lag`, in intervals (the report's "−5..+5").
DEFAULT_MAX_LAG = 5
#: A non-zero lag must beat the zero-lag correlation by this much to be called a lead:
#: per-second percentiles are noisy (lags of 2 s "won" by 0.1 on the throttled lab runs,
#: where the throttle has no memory), and "simultaneous" is the honest default.
LAG_MIN_GAIN = 0.1
#: A lag is tried only if the shifted series still overlap on this share of the intervals:
#: correlations over a few leftover points are large by chance and would win the argmax.
LAG_MIN_OVERLAP = 2 / 3
#: The hinge fit needs this many curve points (two per line segment).
KNEE_MIN_POINTS = 4
#: After the knee the latency slope must be this many times the slope before it ...
KNEE_SLOPE_RATIO = 3.0
#: ... and latency must rise by at least this fraction of its value at the knee, so a
#: gently bending but flat curve has no knee.
KNEE_MIN_RISE = 0.5
#: Candidate knee positions tried between the second and the second-to-last point.
KNEE_GRID = 200

FloatArray = NDArray[np.float64]


def as_array(values: ArrayLike) -> FloatArray:
    """``values`` as a 1-D float array (None becomes NaN)."""
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(-1)


def finite_pairs(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The observations where both ``x`` and ``y`` are finite (pairwise deletion)."""
    xa, ya = as_array(x), as_array(y)
    if xa.shape != ya.shape:
        raise ValueError(f"series differ in length: {xa.size} and {ya.size}")
    keep = np.isfinite(xa) & np.isfinite(ya)
    return xa[keep], ya[keep]


def is_constant(values: FloatArray) -> bool:
    """Whether a (finite) series has no spread beyond float round-off."""
    if values.size == 0:
        return True
    spread = float(np.max(values) - np.min(values))
    scale = max(float(np.max(np.abs(values))), 1e-300)
    return spread <= CONSTANT_RTOL * scale


def rankdata(values: ArrayLike) -> FloatArray:
    """Ranks 1..n with ties given their average rank (as ``scipy.stats.rankdata``)."""
    arr = as_array(values)
    n = arr.size
    order = np.argsort(arr, kind="mergesort")
    sorted_vals = arr[order]
    # Start of each run of equal values; every member of a run gets the run's mean rank.
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], n]
    mean_rank = (starts + ends + 1) / 2.0  # mean of (start+1 .. end), 1-based
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def _pearson_finite(x: FloatArray, y: FloatArray) -> float | None:
    if x.size < MIN_POINTS or is_constant(x) or is_constant(y):
        return None
    # Scale first so huge microsecond values cannot overflow the sums of squares.
    with np.errstate(all="ignore"):  # sub-normal inputs underflow; caught below
        dx = (x - x.mean()) / np.max(np.abs(x))
        dy = (y - y.mean()) / np.max(np.abs(y))
        denom = float(np.sqrt(np.dot(dx, dx) * np.dot(dy, dy)))
        r = float(np.dot(dx, dy)) / denom if denom > 0 else math.nan
    if not math.isfinite(r):
        return None
    return float(np.clip(r, -1.0, 1.0))


def pearson(x: ArrayLike, y: ArrayLike) -> float | None:
    """Pearson's r over the pairs where both are finite; None when undefined."""
    return _pearson_finite(*finite_pairs(x, y))


def spearman(x: ArrayLike, y: ArrayLike) -> float | None:
    """Spearman's rho: Pearson's r of the ranks (average ranks for ties); None when undefined."""
    xf, yf = finite_pairs(x, y)
    if xf.size < MIN_POINTS:
        return None
    return _pearson_finite(rankdata(xf), rankdata(yf))


def correlation(x: ArrayLike, y: ArrayLike) -> dict[str, Any]:
    """``{"pearson": r, "spearman": rho, "n": pairs}`` with None for an undefined value."""
    xf, yf = finite_pairs(x, y)
    return {
        "pearson": _round(_pearson_finite(xf, yf)),
        "spearman": _round(
            _pearson_finite(rankdata(xf), rankdata(yf)) if xf.size >= MIN_POINTS else None
        ),
        "n": int(xf.size),
    }


def lagged_correlations(
    leader: ArrayLike, follower: ArrayLike, max_lag: int = DEFAULT_MAX_LAG
) -> dict[int, float | None]:
    """Pearson's r of ``leader[t]`` with ``follower[t + k]`` for k in −max_lag..max_lag.

    A positive k where r peaks means the leader moves first: with storage await as the
    leader and application latency as the follower, positive lag = storage leads. Lags whose
    overlap is below :data:`LAG_MIN_OVERLAP` of the series are None.
    """
    a, b = as_array(leader), as_array(follower)
    n = min(a.size, b.size)
    need = max(MIN_POINTS, int(np.ceil(LAG_MIN_OVERLAP * n)))
    out: dict[int, float | None] = {}
    for k in range(-max_lag, max_lag + 1):
        if n - abs(k) < need:
            out[k] = None
        elif k >= 0:
            out[k] = pearson(a[: n - k], b[k:n])
        else:
            out[k] = pearson(a[-k:n], b[: n + k])
    return out


def best_lag(
    leader: ArrayLike, follower: ArrayLike, max_lag: int = DEFAULT_MAX_LAG
) -> tuple[int, float] | None:
    """The lag (in intervals) with the highest correlation, and that r; None if none defined.

    Ties go to the smaller |lag|, and a non-zero lag must beat lag 0 by :data:`LAG_MIN_GAIN`.
    """
    by_lag = {
        k: r for k, r in lagged_correlations(leader, follower, max_lag).items() if r is not None
    }
    if not by_lag:
        return None
    k_best = min(by_lag, key=lambda k: (-by_lag[k], abs(k), k))
    if k_best != 0 and 0 in by_lag and by_lag[k_best] - by_lag[0] < LAG_MIN_GAIN:
        k_best = 0
    return k_best, by_lag[k_best]


@dataclass(frozen=True)
class LinearFit:
    """``y = slope * x + intercept`` by least squares, with its coefficient of determination."""

    slope: float
    intercept: float
    r2: float
    n: int


def linear_fit(x: ArrayLike, y: ArrayLike) -> LinearFit | None:
    """Ordinary least squares over the finite pairs; None with too few points or constant x."""
    xf, yf = finite_pairs(x, y)
    if xf.size < MIN_POINTS or is_constant(xf):
        return None
    # Closed form on centred data; errstate because sub-normal spreads underflow to 0,
    # which is then caught below rather than warned about.
    with np.errstate(all="ignore"):
        dx, dy = xf - xf.mean(), yf - yf.mean()
        sxx = float(np.dot(dx, dx))
        slope = float(np.dot(dx, dy)) / sxx if sxx > 0 else math.nan
        intercept = float(yf.mean() - slope * xf.mean())
        ss_res = float(np.sum((dy - slope * dx) ** 2))
        ss_tot = float(np.dot(dy, dy))
    if not (math.isfinite(slope) and math.isfinite(intercept) and math.isfinite(ss_res)):
        return None
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(slope, intercept, max(0.0, min(1.0, r2)), int(xf.size))


@dataclass(frozen=True)
class Knee:
    """Where latency turns upward: the load ``x`` and the latency there."""

    x: float
    y: float
    method: str


def hinge_knee(x: ArrayLike, y: ArrayLike) -> Knee | None:
    """The knee of a latency-versus-load curve by a continuous two-segment (hinge) fit.

    Fits ``y = a + b·x + c·max(0, x − k)`` for candidate k and keeps the k with the least
    squared error. The knee is reported only if the curve really turns upward there: the
    slope after it is ≥ :data:`KNEE_SLOPE_RATIO` times the slope before (or the slope before
    is ≤ 0) and the fitted latency at the largest x is ≥ (1 + :data:`KNEE_MIN_RISE`) times
    the latency at the knee. A straight or flat curve has no knee (None).
    """
    xf, yf = finite_pairs(x, y)
    if xf.size < KNEE_MIN_POINTS or is_constant(xf):
        return None
    order = np.argsort(xf, kind="mergesort")
    xs, ys = xf[order], yf[order]
    candidates = np.unique(np.r_[np.linspace(xs[1], xs[-2], KNEE_GRID), xs[1:-1]])
    best: tuple[float, float, FloatArray] | None = None
    with np.errstate(all="ignore"):
        for k in candidates:
            design = np.column_stack([np.ones_like(xs), xs, np.maximum(0.0, xs - k)])
            coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
            sse = float(np.sum((design @ coef - ys) ** 2))
            if not math.isfinite(sse):
                continue
            if best is None or sse < best[0] - 1e-12 * max(best[0], 1.0):
                best = (sse, float(k), coef)
    if best is None:
        return None
    _, k, (a, b, c) = best
    before, after = float(b), float(b + c)
    at_knee = float(a + b * k)
    at_end = float(a + b * xs[-1] + c * (xs[-1] - k))
    steeper = after > 0 and (before <= 0 or after >= KNEE_SLOPE_RATIO * before)
    rises = at_end - at_knee >= KNEE_MIN_RISE * max(abs(at_knee), 1e-9)
    if not (steeper and rises):
        return None
    return Knee(x=k, y=at_knee, method="hinge-regression")


def plateau_knee(
    x: Sequence[float], y: Sequence[float], *, tolerance: float, min_rise: float
) -> int | None:
    """The first point (in load order) after which ``x`` stops growing while ``y`` climbs.

    Points are load points in the order the load was raised (steps). Returns the index j of
    the first point such that every later x is within ``tolerance`` (relative) of x[j] or
    below it, and the last y is at least ``(1 + min_rise)`` times y[j]: throughput hit a
    ceiling and the extra load only queued. None when there is no such point.

    "Or below it" matters when the ceiling itself comes down during the run: on the storage
    lab, 8 sessions throughout with the read ceiling stepped from 2000 to 500 IOPS gave
    points (1999, 306 ms) then (501, 1098 ms) — the device delivered less and latency rose
    3.6×, which is the same finding as a plateau under rising load (tests/integration/
    test_ground_truth.py, docs/ground-truth.md). Only an x *above* x[j] by more than
    ``tolerance`` shows that the throughput was still growing.
    """
    xa, ya = as_array(x), as_array(y)
    n = xa.size
    for j in range(n - 1):
        if not (np.isfinite(xa[j]) and np.isfinite(ya[j]) and xa[j] > 0 and ya[j] > 0):
            continue
        later_x = xa[j + 1 :]
        later_x = later_x[np.isfinite(later_x)]
        later_y = ya[j + 1 :]
        later_y = later_y[np.isfinite(later_y)]
        if later_x.size == 0 or later_y.size == 0:
            continue
        flat = bool(np.all(later_x - xa[j] <= tolerance * xa[j]))
        if flat and later_y[-1] >= (1.0 + min_rise) * ya[j]:
            return j
    return None


def equal_count_bins(x: ArrayLike, bins: int) -> list[NDArray[np.intp]]:
    """Indices of the finite ``x`` split, in ascending order of x, into ``bins`` groups of
    (nearly) equal size. Equal counts rather than equal widths: no bin is ever empty, and
    every point on the curve rests on the same number of intervals."""
    xa = as_array(x)
    idx = np.flatnonzero(np.isfinite(xa))
    if idx.size == 0 or bins <= 0:
        return []
    ordered = idx[np.argsort(xa[idx], kind="mergesort")]
    return [chunk for chunk in np.array_split(ordered, min(bins, ordered.size)) if chunk.size]


def nan_median(values: ArrayLike) -> float | None:
    """Median of the finite values, or None."""
    arr = as_array(values)
    arr = arr[np.isfinite(arr)]
    return float(np.median(arr)) if arr.size else None


def nan_mean(values: ArrayLike, weights: ArrayLike | None = None) -> float | None:
    """(Weighted) mean of the finite values, or None."""
    arr = as_array(values)
    w = np.ones_like(arr) if weights is None else as_array(weights)
    keep = np.isfinite(arr) & np.isfinite(w) & (w > 0)
    if not np.any(keep):
        return None
    return float(np.average(arr[keep], weights=w[keep]))


def coefficient_of_variation(values: ArrayLike) -> float | None:
    """Standard deviation over mean of the finite values; None when undefined."""
    arr = as_array(values)
    arr = arr[np.isfinite(arr)]
    if arr.size < 2 or arr.mean() <= 0:
        return None
    with np.errstate(all="ignore"):
        cv = float(arr.std() / arr.mean())
    return cv if math.isfinite(cv) else None


@dataclass(frozen=True)
class LittlesLaw:
    """Little's law over a window: concurrency L = X · R against the sessions that ran."""

    throughput_ops_s: float
    mean_latency_s: float
    concurrency: float
    sessions: float | None
    ratio: float | None


def littles_law(
    counts: ArrayLike, mean_latency_us: ArrayLike, seconds: float, sessions: float | None
) -> LittlesLaw | None:
    """L = X·R with X = Σcount / seconds and R = the count-weighted mean latency.

    ``counts`` and ``mean_latency_us`` are per (interval, op) observations; ``ratio`` is
    L / sessions: 1 when every session was always inside a timed operation, below 1 when
    sessions spent time elsewhere (think time, pacing, client CPU). None without operations.
    """
    c, m = as_array(counts), as_array(mean_latency_us)
    keep = np.isfinite(c) & np.isfinite(m) & (c > 0)
    total = float(np.sum(c[keep]))
    if total <= 0 or seconds <= 0:
        return None
    throughput = total / seconds
    mean_s = float(np.sum(c[keep] * m[keep]) / total) / 1e6
    concurrency = throughput * mean_s
    ratio = concurrency / sessions if sessions else None
    return LittlesLaw(throughput, mean_s, concurrency, sessions, ratio)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


#: Student's t, two-sided 95 % (the 0.975 quantile), by degrees of freedom.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
    9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
    17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 22: 2.074, 24: 2.064, 26: 2.056, 28: 2.048,
    30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip
_Z975 = 1.959964


def t975(df: float) -> float:
    """Student's t 0.975 quantile at ``df`` degrees of freedom (df >= 1; fractional df are
    interpolated in 1/df between the tabulated ones, which is accurate to 0.1 %)."""
    df = max(1.0, df)
    points = sorted(_T975.items())
    if df >= points[-1][0]:
        lo_df, lo_t = points[-1]
        frac = (1 / lo_df - 1 / df) / (1 / lo_df)
        return lo_t + frac * (_Z975 - lo_t)
    for (lo_df, lo_t), (hi_df, hi_t) in itertools.pairwise(points):
        if lo_df <= df <= hi_df:
            frac = (1 / lo_df - 1 / df) / (1 / lo_df - 1 / hi_df)
            return lo_t + frac * (hi_t - lo_t)
    return points[0][1]
