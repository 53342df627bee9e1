"""SLOB-like rules that need no database: the 100-operation mix and the key ranges."""

from __future__ import annotations

import pytest

from workloads.slob.parameters import SlobParameters, parse_scale
from workloads.slob.workload import takes_this_op


@pytest.mark.parametrize("pct", [0, 1, 7, 10, 33, 50, 100])
def test_exactly_pct_in_every_block_of_100(pct: int) -> None:
    for block in range(5):
        picked = sum(takes_this_op(i, pct) for i in range(block * 100, block * 100 + 100))
        assert picked == pct


def test_any_prefix_is_within_one_of_the_share() -> None:
    for n in range(1, 400):
        picked = sum(takes_this_op(i, 10) for i in range(n))
        assert abs(picked - n * 10 / 100) < 1


@pytest.mark.parametrize("value", [51, 99, -1, 101])
def test_pct_outside_the_slob_rule_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="0-50 or 100"):
        SlobParameters(update_pct=value)


def test_scale_units() -> None:
    assert parse_scale("80M", 8192) == 10240
    assert parse_scale("2G", 8192) == 262144
    assert parse_scale(50000, 8192) == 50000
    assert parse_scale("50000", 8192) == 50000


def test_hotspot_must_fit_in_the_data() -> None:
    with pytest.raises(ValueError, match="hotspot"):
        SlobParameters(do_hotspot=True, hotspot_offset_mb=100, scale="80M")
    ok = SlobParameters(do_hotspot=True, scale="80M")
    assert ok.hotspot_rows == (2049, 3072)
