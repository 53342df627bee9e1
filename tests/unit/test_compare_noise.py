"""The statistics of ``dbsim compare`` (sim.judge.noise) on synthetic series with known
answers: Student's t, batch means, the correlation time of an AR(1) series, Fieller's interval
of a ratio, and how often two runs of the same distribution are called significantly
different (about 5 %) against a 30 % shift (nearly always)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.analysis.stats import t975
from sim.judge.noise import (
    batch_means,
    correlation_time,
    fieller_ratio,
    paired_batch_means,
)

TRIALS = 400


def ar1(rng: np.random.Generator, n: int, phi: float, mean: float, sd: float) -> np.ndarray:
    noise = rng.normal(0.0, sd, n)
    x = np.empty(n)
    x[0] = noise[0] / math.sqrt(1 - phi**2)  # started in its stationary distribution
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    return mean + x


def significant_share(phi: float, n: int, shift: float, seed: int) -> float:
    """Share of TRIALS pairs (baseline mean 100, candidate 100 × (1 + shift)) whose 95 %
    interval of the ratio excludes 1."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(TRIALS):
        base = ar1(rng, n, phi, 100.0, 10.0)
        cand = ar1(rng, n, phi, 100.0 * (1 + shift), 10.0)
        ci = fieller_ratio(*paired_batch_means((base, None), (cand, None)))
        hits += ci is not None and ci.significant
    return hits / TRIALS


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 12.706), (9, 2.262), (30, 2.042), (1e9, 1.960), (14.5, 2.138)]
)
def test_students_t(df: float, expected: float) -> None:
    assert t975(df) == pytest.approx(expected, abs=2e-3)


def test_batch_means_are_weighted_and_contiguous() -> None:
    values = [1.0, 3.0, np.nan, 5.0, 7.0, 9.0]
    weights = [1.0, 3.0, 1.0, 1.0, 0.0, 1.0]  # the NaN and the zero weight drop out
    # Independent (alternating) by construction: no span forced.
    assert list(batch_means(values, weights, batches=2, span=1)) == [
        pytest.approx((1 + 9) / 4),
        pytest.approx((5 + 9) / 2),
    ]
    assert list(batch_means([2.0, 4.0], batches=10, span=1)) == [2.0, 4.0]
    assert batch_means([np.nan]).size == 0


def test_correlation_time_of_ar1() -> None:
    rng = np.random.default_rng(7)
    assert correlation_time(rng.normal(size=20_000)) == pytest.approx(1.0, abs=0.1)
    phi = 0.6
    expected = (1 + phi) / (1 - phi)  # 4
    assert correlation_time(ar1(rng, 20_000, phi, 0.0, 1.0)) == pytest.approx(expected, rel=0.1)


def test_correlated_intervals_make_fewer_batches() -> None:
    rng = np.random.default_rng(3)
    assert batch_means(rng.normal(size=60)).size == 10
    assert batch_means(ar1(rng, 60, 0.9, 0.0, 1.0)).size < 10


def test_fieller_known_answer() -> None:
    base = np.array([8.0, 9.0, 10.0, 11.0, 12.0])
    cand = 2 * base
    ci = fieller_ratio(base, cand)
    assert ci is not None and ci.ratio == 2.0 and ci.significant
    # The interval's ends are the ratios where |c̄ − R b̄| = t · sqrt(se_c² + R² se_b²).
    se_b, se_c = math.sqrt(0.5), 2 * math.sqrt(0.5)
    t = t975(ci.df)
    for r in (ci.low, ci.high):
        assert abs(20 - r * 10) == pytest.approx(t * math.sqrt(se_c**2 + r**2 * se_b**2))
    assert ci.df == pytest.approx(8.0)  # two equal relative variances, 4 df each
    constant = fieller_ratio([5.0] * 5, [6.0] * 5)
    assert constant is not None and constant.low == constant.high == pytest.approx(1.2)


def test_fieller_gives_no_interval_without_a_bounded_one() -> None:
    few = [1.0, 2.0, 3.0, 4.0]  # under MIN_BATCHES: the variance itself is too uncertain
    assert fieller_ratio(few, [*few, 5.0]) is None
    around_0 = [-2.0, -1.0, 0.0, 1.0, 2.5]  # baseline mean ~ 0: unbounded
    assert fieller_ratio(around_0, [1.0, 2.0, 3.0, 4.0, 5.0]) is None


@pytest.mark.parametrize(("phi", "n"), [(0.0, 30), (0.0, 60), (0.5, 60)])
def test_the_same_distribution_is_no_significant_difference_about_95_percent(
    phi: float, n: int
) -> None:
    share = significant_share(phi, n, 0.0, seed=11)
    # 5 % expected for independent batch means; correlated intervals measured 8-10 %
    # (the correlation time is estimated from a short series).
    assert 0.01 <= share <= (0.08 if phi == 0 else 0.12), share


@pytest.mark.parametrize(("phi", "n"), [(0.0, 30), (0.5, 60)])
def test_a_30_percent_shift_is_significant(phi: float, n: int) -> None:
    assert significant_share(phi, n, 0.30, seed=12) >= 0.95
