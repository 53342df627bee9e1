"""The analysis's pure statistics on arrays with known answers (sim.analysis.stats)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.analysis import stats

# --------------------------------------------------------------------------- Pearson, Spearman


def test_pearson_matches_a_hand_computed_value() -> None:
    # dx = -2..2, dy = (-2, 0, 1, 0, 1): Σdxdy = 6, Σdx² = 10, Σdy² = 6 → r = 6/√60.
    r = stats.pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
    assert r == pytest.approx(6 / math.sqrt(60), abs=1e-12)


def test_pearson_matches_numpy_corrcoef() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=200)
    y = 0.3 * x + rng.normal(size=200)
    assert stats.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)


def test_spearman_without_ties_matches_the_rank_difference_formula() -> None:
    # ranks of y: 1 2 4 3 5 → Σd² = 2 → rho = 1 − 6·2 / (5·24) = 0.9
    assert stats.spearman([1, 2, 3, 4, 5], [10, 20, 40, 30, 50]) == pytest.approx(0.9)


def test_spearman_gives_ties_their_average_rank() -> None:
    # y = 2 4 5 4 5 ranks 1 2.5 4.5 2.5 4.5; Σdxdy = 7, Σdx² = 10, Σdy² = 9 → 7/√90.
    assert stats.spearman([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(7 / math.sqrt(90))
    assert stats.rankdata([30, 10, 30, 20, 30]).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


def test_spearman_is_one_for_any_monotonic_relation() -> None:
    x = np.linspace(0.1, 5, 40)
    assert stats.spearman(x, np.exp(3 * x)) == pytest.approx(1.0)
    r = stats.pearson(x, np.exp(3 * x))
    assert r is not None and r < 0.9  # Pearson sees the curvature


def test_correlation_is_none_for_constant_or_short_series_and_skips_nan_pairs() -> None:
    assert stats.pearson([1, 2, 3, 4], [5, 5, 5, 5]) is None
    assert stats.spearman([1, 1, 1, 1], [1, 2, 3, 4]) is None
    assert stats.pearson([1, 2], [3, 4]) is None  # two points always lie on a line
    result = stats.correlation([1, 2, np.nan, 4, 5], [2, 4, 9, np.nan, 10])
    assert result["n"] == 3
    assert result["pearson"] == pytest.approx(np.corrcoef([1, 2, 5], [2, 4, 10])[0, 1], abs=1e-4)
    empty = stats.correlation([], [])
    assert empty == {"pearson": None, "spearman": None, "n": 0}


series = st.lists(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    min_size=3,
    max_size=40,
)


def _spread(values: list[float]) -> bool:
    return max(values) - min(values) > 1e-3 * max(1.0, max(abs(v) for v in values))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), xs=series)
def test_correlations_stay_in_range_and_are_symmetric(data: st.DataObject, xs: list[float]) -> None:
    ys = data.draw(st.lists(st.floats(-1e6, 1e6), min_size=len(xs), max_size=len(xs)))
    for fn in (stats.pearson, stats.spearman):
        r = fn(xs, ys)
        assert r is None or -1.0 <= r <= 1.0
        back = fn(ys, xs)
        assert (r is None) == (back is None)
        if r is not None and back is not None:
            assert r == pytest.approx(back, abs=1e-9)


#: Whole numbers as floats: an affine map of them loses no order to rounding (a shift of 1
#: would merge 0 and 1e-66 into one value and so change the ranks, not a property of ours).
grid = st.lists(st.integers(-1000, 1000).map(float), min_size=3, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    xs=grid,
    scale=st.floats(min_value=1e-3, max_value=1e3),
    shift=st.floats(min_value=-1e6, max_value=1e6),
)
def test_correlations_are_invariant_to_positive_affine_maps(
    data: st.DataObject, xs: list[float], scale: float, shift: float
) -> None:
    ys = data.draw(
        st.lists(st.integers(-1000, 1000).map(float), min_size=len(xs), max_size=len(xs))
    )
    assume(_spread(xs) and _spread(ys))
    mapped = [scale * x + shift for x in xs]
    for fn in (stats.pearson, stats.spearman):
        before, after = fn(xs, ys), fn(mapped, ys)
        assert before is not None and after is not None
        assert after == pytest.approx(before, abs=1e-6)


@settings(max_examples=100, deadline=None)
@given(xs=series)
def test_correlation_of_a_series_with_itself_is_one(xs: list[float]) -> None:
    assume(_spread(xs))
    assert stats.pearson(xs, xs) == pytest.approx(1.0)
    assert stats.spearman(xs, xs) == pytest.approx(1.0)
    assert stats.pearson(xs, [-x for x in xs]) == pytest.approx(-1.0)


# --------------------------------------------------------------------------- lag


@pytest.mark.parametrize("k", [-3, -1, 0, 2, 4])
def test_best_lag_finds_a_known_shift(k: int) -> None:
    rng = np.random.default_rng(11)
    storage = rng.normal(size=120)
    # application[t] = storage[t - k]: storage leads by k (k < 0: the application leads).
    application = np.roll(storage, k) + 0.05 * rng.normal(size=120)
    found = stats.best_lag(storage, application)
    assert found is not None
    lag, r = found
    assert lag == k
    assert r > 0.95


def test_lag_needs_enough_overlap_and_prefers_zero_on_near_ties() -> None:
    rs = stats.lagged_correlations(np.arange(6.0), np.arange(6.0) ** 2, max_lag=5)
    assert rs[5] is None and rs[-5] is None  # one or two leftover points
    flat = stats.best_lag(np.ones(20), np.arange(20.0))
    assert flat is None  # a constant leader correlates with nothing


# --------------------------------------------------------------------------- regression


def test_linear_fit_recovers_slope_and_r2() -> None:
    rng = np.random.default_rng(3)
    x = np.linspace(0, 100, 500)
    y = 3 * x + 7 + rng.normal(scale=10, size=x.size)
    fit = stats.linear_fit(x, y)
    assert fit is not None
    assert fit.slope == pytest.approx(3, rel=0.02)
    assert fit.intercept == pytest.approx(7, abs=3)
    # R² = var(3x) / (var(3x) + var(noise)) = 7508 / (7508 + 100)
    expected = 9 * np.var(x) / (9 * np.var(x) + 100)
    assert fit.r2 == pytest.approx(expected, abs=0.01)
    assert stats.linear_fit([1, 1, 1], [1, 2, 3]) is None
    exact = stats.linear_fit([1, 2, 3, 4], [3, 6, 9, 12])
    assert exact is not None and exact.r2 == pytest.approx(1.0)


# --------------------------------------------------------------------------- knee


def test_hinge_knee_finds_the_corner_of_a_hockey_stick() -> None:
    rng = np.random.default_rng(5)
    x = np.linspace(50, 1000, 40)
    y = 1000 + np.where(x < 500, 0.0, 40.0 * (x - 500)) + rng.normal(scale=100, size=x.size)
    knee = stats.hinge_knee(x, y)
    assert knee is not None
    assert abs(knee.x - 500) <= 50  # within ±10 %
    assert knee.method == "hinge-regression"
    assert knee.y == pytest.approx(1000, abs=300)


def test_hinge_knee_rejects_straight_and_flat_curves() -> None:
    x = np.linspace(0, 100, 20)
    assert stats.hinge_knee(x, 5 * x + 10) is None
    assert stats.hinge_knee(x, np.full(20, 42.0)) is None
    assert stats.hinge_knee([1, 2, 3], [1, 1, 9]) is None  # too few points


def test_plateau_knee_finds_where_throughput_stops_growing() -> None:
    iops = [100, 200, 300, 305, 298]
    p99 = [10, 11, 12, 25, 50]
    assert stats.plateau_knee(iops, p99, tolerance=0.15, min_rise=0.5) == 2
    # Throughput kept up with the load: no plateau.
    assert stats.plateau_knee([100, 200, 400], [10, 11, 12], tolerance=0.15, min_rise=0.5) is None
    # Flat throughput but latency did not rise: the load did not grow either.
    assert stats.plateau_knee([300, 301, 299], [10, 10, 11], tolerance=0.15, min_rise=0.5) is None


def test_equal_count_bins_cover_every_finite_point_once() -> None:
    x = np.array([5, 1, np.nan, 3, 2, 4, 6, 9, 8, 7])
    bins = stats.equal_count_bins(x, 3)
    assert len(bins) == 3
    flat = sorted(int(i) for b in bins for i in b)
    assert flat == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    assert sorted(x[bins[0]].tolist()) == [1, 2, 3]


# --------------------------------------------------------------------------- Little's law


def test_littles_law_arithmetic() -> None:
    # 1000 ops at 2 ms and 1000 at 6 ms over 2 s: X = 1000/s, R = 4 ms, L = 4.
    law = stats.littles_law([600, 400, 1000], [2000, 2000, 6000], seconds=2.0, sessions=8)
    assert law is not None
    assert law.throughput_ops_s == pytest.approx(1000)
    assert law.mean_latency_s == pytest.approx(0.004)
    assert law.concurrency == pytest.approx(4.0)
    assert law.ratio == pytest.approx(0.5)
    assert stats.littles_law([0, 0], [np.nan, np.nan], seconds=2.0, sessions=1) is None
    unknown = stats.littles_law([10], [1000], seconds=1.0, sessions=None)
    assert unknown is not None and unknown.ratio is None


def test_summary_helpers_ignore_nan() -> None:
    assert stats.nan_median([np.nan, 1, 3, 2]) == 2
    assert stats.nan_median([np.nan]) is None
    assert stats.nan_mean([1, 3, np.nan], [1, 3, 5]) == pytest.approx(2.5)
    assert stats.coefficient_of_variation([300, 300, 300]) == 0
    assert stats.coefficient_of_variation([0, 0]) is None
