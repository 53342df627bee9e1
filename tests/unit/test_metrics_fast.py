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
    snapshot = histogram_snapshot(histogram)
    # hdrh's percentile, mean and recorded walks read only the counts, the total and the
    # histogram's geometry (hdrh/histogram.py, hdrh/iterators.py: never min or max). A snapshot
    # with the same counts and total therefore has the source's hdrh figures: they are walked
    # once (in Python, ~47,000 sub-buckets up to an hour: most of this module's CPU) and both
    # histograms' figures must equal them.
    assert snapshot.total_count == histogram.total_count
    assert (snapshot.counts_len, snapshot.unit_magnitude) == (
        histogram.counts_len,
        histogram.unit_magnitude,
    )
    assert np.array_equal(
        np.ctypeslib.as_array(snapshot.counts)[: snapshot.counts_len],
        np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len],
    )
    expected_percentiles = histogram.get_percentile_to_value_dict(PERCENTILES)
    expected_mean = histogram.get_mean_value()
    expected_walk = [
        (i.value_iterated_to, i.count_added_in_this_iter_step)
        for i in histogram.get_recorded_iterator()
    ]
    for h in (histogram, snapshot):
        assert percentile_values(h, PERCENTILES) == expected_percentiles
        assert mean_value(h) == expected_mean
        assert recorded_values(h) == expected_walk


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
