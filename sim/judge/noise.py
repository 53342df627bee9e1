"""Is a change between two runs more than their run-to-run noise?

Each run's measured intervals (warm-up excluded, as the summary; :func:`sim.analysis.load_bundle`
reads them) are the samples of a figure. Neighbouring intervals are autocorrelated (a
checkpoint, a cache warming up, a flush storm spans several seconds), so they are not taken one
by one: they are cut into :data:`BATCHES` contiguous batches and each batch's mean is one sample
(*batch means*); the batch means of a run are close to independent when a batch is longer
than the correlation.

The 95 % confidence interval of the ratio candidate / baseline of the two means is
**Fieller's**: the set of ratios R for which ``mean_c - R * mean_b`` is not significantly
different from 0, with the variance ``se_c² + R² se_b²`` of the two independent means and
Student's t at the Welch–Satterthwaite degrees of freedom. The interval is exact for normal
batch means, is not symmetric around the ratio (as a ratio's uncertainty is not), and is
unbounded when the baseline's mean itself is not distinguishable from 0 — then no interval is
given. A change is *significant* when the interval excludes 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sim.analysis.stats import t975
from sim.errors import SimError

FloatArray = NDArray[np.float64]

#: Batches per run: 8-10 is the usual choice (each batch long enough to absorb the intervals'
#: correlation, enough of them for a variance). A run with fewer intervals has one per batch.
BATCHES = 10
#: Fewer batch means than this in either run: no interval (a variance from fewer is itself
#: too uncertain: two close batch means of a 2-second run "proved" a 44 % change).
MIN_BATCHES = 5
#: A batch spans at least this many correlation times (one leaves neighbouring batch means
#: correlated; measured on AR(1) series, see tests/unit/test_compare_noise.py).
SPAN_FACTOR = 2.0
CONFIDENCE = 0.95
METHOD = (
    f"Fieller 95 % interval of the ratio of means, from up to {BATCHES} batch means per run "
    "(Welch degrees of freedom)"
)


def correlation_time(values: FloatArray) -> float:
    """The integrated autocorrelation time of a series, ``1 + 2 Σ ρ_k``, summed over the
    lags while the autocorrelation stays positive (Geyer's initial positive sequence) and
    up to a quarter of the series: how many intervals make one independent sample (1 for
    independent intervals, (1 + φ) / (1 - φ) for an AR(1) series)."""
    x = values - np.mean(values)
    var = float(np.dot(x, x))
    if x.size < 4 or var <= 0:
        return 1.0
    tau = 1.0
    for lag in range(1, x.size // 4 + 1):
        rho = float(np.dot(x[:-lag], x[lag:])) / var
        if rho <= 0:
            break
        tau += 2 * rho
    return tau


def _finite(values: ArrayLike, weights: ArrayLike | None) -> tuple[FloatArray, FloatArray]:
    x = np.asarray(values, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(w) & (w > 0)
    return x[keep], w[keep]


def _span(tau: float) -> float:
    """Intervals per batch for a correlation time: 1 for independent intervals, about
    :data:`SPAN_FACTOR` correlation times for correlated ones."""
    return 1 + SPAN_FACTOR * (tau - 1)


def batch_means(
    values: ArrayLike,
    weights: ArrayLike | None = None,
    batches: int = BATCHES,
    span: float | None = None,
) -> FloatArray:
    """The weighted means of up to ``batches`` contiguous, near-equal batches of ``values``
    (NaN values and non-positive weights are left out). Each batch spans at least ``span``
    intervals (by default :data:`SPAN_FACTOR` times the series' :func:`correlation_time`),
    so a strongly correlated or short run has fewer batches and a wider interval.
    ``weights`` make a batch's figure the one a whole window would have: seconds for a
    rate, I/Os for an await, operations for I/Os per operation."""
    x, w = _finite(values, weights)
    if x.size == 0:
        return np.zeros(0)
    if span is None:
        span = _span(correlation_time(x))
    k = max(1, min(batches, int(x.size // max(1, math.ceil(span)))))
    out = [
        float(np.sum(xs * ws) / np.sum(ws))
        for xs, ws in zip(np.array_split(x, k), np.array_split(w, k), strict=True)
    ]
    return np.asarray(out, dtype=np.float64)


def paired_batch_means(
    baseline: tuple[ArrayLike, ArrayLike | None], candidate: tuple[ArrayLike, ArrayLike | None]
) -> tuple[FloatArray, FloatArray]:
    """Both runs' batch means, with one batch span for both: :data:`SPAN_FACTOR` times the
    longer of the two runs' correlation times (each is estimated from a short series and
    tends to come out low; the longer is the safer)."""
    runs = [_finite(*baseline), _finite(*candidate)]
    tau = max((correlation_time(x) for x, _ in runs if x.size), default=1.0)
    base, cand = (batch_means(x, w, span=_span(tau)) for x, w in runs)
    return base, cand


@dataclass(frozen=True)
class RatioCI:
    """The ratio candidate / baseline of two means and its confidence interval."""

    ratio: float
    low: float
    high: float
    df: float
    batches: tuple[int, int]  # baseline, candidate

    @property
    def significant(self) -> bool:
        """The interval excludes 1 (no change)."""
        return self.low > 1.0 or self.high < 1.0


def _mean_se(samples: FloatArray) -> tuple[float, float]:
    return float(np.mean(samples)), float(np.std(samples, ddof=1) / math.sqrt(samples.size))


def fieller_ratio(baseline: ArrayLike, candidate: ArrayLike) -> RatioCI | None:
    """Fieller's 95 % interval of mean(candidate) / mean(baseline) for two independent
    samples (batch means); None when either has fewer than :data:`MIN_BATCHES` samples or
    the interval is unbounded (the baseline's mean is not distinguishable from 0)."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if b.size < MIN_BATCHES or c.size < MIN_BATCHES:
        return None
    (mb, sb), (mc, sc) = _mean_se(b), _mean_se(c)
    return fieller_moments((mb, sb, b.size - 1), (mc, sc, c.size - 1), (b.size, c.size))


#: One side's mean, its standard error and the degrees of freedom of that error.
Moments = tuple[float, float, float]


def fieller_moments(
    baseline: Moments, candidate: Moments, batches: tuple[int, int]
) -> RatioCI | None:
    """Fieller's 95 % interval of mean_c / mean_b from each side's mean, standard error and
    degrees of freedom (Welch–Satterthwaite for the pair); None when unbounded."""
    (mb, sb, dfb), (mc, sc, dfc) = baseline, candidate
    if mb == 0 or dfb <= 0 or dfc <= 0:
        return None
    ratio = mc / mb
    var_c, var_b = sc**2 / mb**2, ratio**2 * sb**2 / mb**2  # the delta method's two terms
    denominator = var_c**2 / dfc + var_b**2 / dfb
    df = (var_c + var_b) ** 2 / denominator if denominator > 0 else math.inf
    t = t975(df)
    a = mb**2 - t**2 * sb**2
    if a <= 0:
        return None
    half = math.sqrt(max(mb**2 * mc**2 - a * (mc**2 - t**2 * sc**2), 0.0))
    low, high = (mb * mc - half) / a, (mb * mc + half) / a
    # Every compared figure is a rate, a latency or a count: a ratio below 0 is no value
    # it can take (a wide interval of few degrees of freedom reaches there).
    return RatioCI(ratio, max(low, 0.0), high, df, batches)


def pooled_moments(runs: Sequence[FloatArray]) -> tuple[Moments, int] | None:
    """One side's moments from the batch means of its repeated runs: the mean of all batch
    means, and the larger of two standard errors — the batch means' own (degrees of freedom
    N - 1) and the run means' (k - 1, with k >= 2 runs), so a run-to-run difference (a host
    busier for one whole run) widens the interval instead of hiding in it. None with fewer
    than :data:`MIN_BATCHES` batch means in all."""
    arrays = [a[np.isfinite(a)] for a in runs]
    arrays = [a for a in arrays if a.size]
    pooled = np.concatenate(arrays) if arrays else np.zeros(0)
    if pooled.size < MIN_BATCHES:
        return None
    mean, se = _mean_se(pooled)
    df = float(pooled.size - 1)
    if len(arrays) >= 2:
        run_means = np.asarray([float(np.mean(a)) for a in arrays])
        between = float(np.std(run_means, ddof=1) / math.sqrt(run_means.size))
        if between > se:
            se, df = between, float(run_means.size - 1)
    return (mean, se, df), int(pooled.size)


def combined_ratio_ci(
    baselines: Sequence[Samples | None], candidates: Sequence[Samples | None]
) -> RatioCI | None:
    """The interval of one figure's ratio when each side is one or more runs (repeats of
    one scenario): every run cut into batches of one span (:data:`SPAN_FACTOR` times the
    longest correlation time of all runs), each side's batch means pooled
    (:func:`pooled_moments`); None when a side lacks samples or batches."""
    if not baselines or not candidates or any(s is None for s in [*baselines, *candidates]):
        return None
    if len(baselines) == 1 and len(candidates) == 1:
        return ratio_ci(baselines[0], candidates[0])
    finite = [_finite(*s) for s in [*baselines, *candidates] if s is not None]
    tau = max((correlation_time(x) for x, _ in finite if x.size), default=1.0)
    means = [batch_means(x, w, span=_span(tau)) for x, w in finite]
    base = pooled_moments(means[: len(baselines)])
    cand = pooled_moments(means[len(baselines) :])
    if base is None or cand is None:
        return None
    return fieller_moments(base[0], cand[0], (base[1], cand[1]))


def select(samples: Samples | None, mask: Sequence[bool]) -> Samples | None:
    """The samples of the intervals ``mask`` keeps (one load step's), None without any."""
    if samples is None:
        return None
    keep = np.asarray(mask, dtype=bool)
    if keep.size != samples[0].size or not keep.any():
        return None
    return samples[0][keep], samples[1][keep]


# --------------------------------------------------------------------------- a run's samples

#: One figure's per-interval samples: (values, weights).
Samples = tuple[FloatArray, FloatArray]


@dataclass(frozen=True)
class RunSamples:
    """A run's per-interval samples of every compared figure and how many intervals the
    measured window held (None: the bundle has no readable time series)."""

    intervals: int | None
    ops: dict[str, dict[str, Samples]]
    device: dict[str, Samples]
    why_none: str | None = None
    #: Each measured interval's load step (None: the run has no steps).
    step: tuple[int | None, ...] = ()


def run_samples(bundle: Path, device: str | None) -> RunSamples:
    """The measured intervals of ``bundle`` (warm-up excluded, intervals under half the
    sampling interval dropped, as the analysis reads them) as samples of each operation's
    ops/s (weighted by seconds), p50 and p99 (each interval's own, equally weighted) and of
    ``device``'s IOPS (by seconds), await (by I/Os) and I/Os per operation (by operations)."""
    from sim.analysis import load_bundle
    from sim.analysis.series import device_figures

    try:
        series = load_bundle(bundle)
    except SimError as exc:
        return RunSamples(None, {}, {}, str(exc).splitlines()[0])
    seconds = series.duration_s
    ones = np.ones(series.n)
    ops = {
        op: {
            "ops_s": (figs["ops_s"], seconds),
            "p50_us": (figs["p50_us"], ones),
            "p99_us": (figs["p99_us"], ones),
        }
        for op, figs in series.ops.items()
    }
    figures = device_figures(series).get(device or "") if device else None
    storage: dict[str, Samples] = {}
    if figures is not None:
        iops = figures["iops"]
        ios = iops * seconds
        counts = np.sum([f["count"] for f in series.ops.values()], axis=0) if ops else ones * 0
        with np.errstate(invalid="ignore", divide="ignore"):
            per_op = np.where(counts > 0, ios / np.where(counts > 0, counts, 1.0), np.nan)
        storage = {
            "device_iops": (iops, seconds),
            "await_ms": (figures["await_ms"], ios),
            "ios_per_op": (per_op, counts),
        }
    return RunSamples(series.n, ops, storage, step=tuple(series.step))


def ratio_ci(baseline: Samples | None, candidate: Samples | None) -> RatioCI | None:
    """The interval of one figure's ratio from both runs' samples (None without them)."""
    if baseline is None or candidate is None:
        return None
    return fieller_ratio(*paired_batch_means(baseline, candidate))
