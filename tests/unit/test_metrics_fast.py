"""sim.core.metrics' percentile and mean walks give exactly hdrh's own figures
(``get_percentile_to_value_dict``, ``get_mean_value``), on recorded shapes and random ones."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core.metrics import (
    REPORTED_PERCENTILES,
    histogram_snapshot,
    mean_value,
    new_histogram,
    percentile_values,
    recorded_values,
)

PERCENTILES = [0.0, *REPORTED_PERCENTILES, 99.99, 100.0]


def _check(values: list[int]) -> None:
    histogram = new_histogram()
    for value in values:
        histogram.record_value(value)
    for h in (histogram, histogram_snapshot(histogram)):
        assert percentile_values(h, PERCENTILES) == h.get_percentile_to_value_dict(PERCENTILES)
        assert mean_value(h) == h.get_mean_value()
        walked = [
            (i.value_iterated_to, i.count_added_in_this_iter_step)
            for i in h.get_recorded_iterator()
        ]
        assert recorded_values(h) == walked


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=3_600_000_000), min_size=1, max_size=200))
def test_random_latencies_give_hdrhs_figures(values: list[int]) -> None:
    _check(values)


def test_a_run_shaped_histogram_with_an_outlier_gives_hdrhs_figures() -> None:
    rng = np.random.default_rng(7)
    values = [int(v) for v in rng.lognormal(mean=6.0, sigma=0.8, size=5_000)]
    _check([*values, 2_500_000_000, 1])


def test_an_empty_histogram_has_no_percentile_and_a_zero_mean() -> None:
    histogram = new_histogram()
    assert percentile_values(histogram, PERCENTILES) == {}
    assert mean_value(histogram) == 0.0
