"""``dbsim lab up --pg-cache-cap``'s checks and settings, without root: the cap goes with
``--postgres``, not with ``--memory-limit``, within the lab's memory range, and makes
shared_buffers a quarter of it (the memory group's limit is the cap itself)."""

from __future__ import annotations

import pytest

from sim.errors import ConfigError
from storage.lab import checks, limits
from storage.lab.pgcluster import cache_cap_settings

MiB = 1 << 20


def test_the_cap_is_the_limit_and_a_quarter_of_it_is_shared_buffers() -> None:
    assert cache_cap_settings(None) == {}
    assert cache_cap_settings(40 * MiB) == {"shared_buffers": "10MB"}
    assert cache_cap_settings(64 * MiB) == {"shared_buffers": "16MB"}
    assert cache_cap_settings(limits.MIN_MEMORY) == {"shared_buffers": "8MB"}


@pytest.mark.parametrize(
    ("cap", "postgres", "memory_limit", "says"),
    [
        (64 * MiB, False, None, "--pg-cache-cap caps the lab's PostgreSQL: give --postgres too"),
        (64 * MiB, True, 128 * MiB, "give it or --memory-limit"),
        (MiB, True, None, "--pg-cache-cap 1,048,576: must be from 32 MiB"),
        (1 << 60, True, None, "to the host's memory"),
    ],
)
def test_refusals_name_the_option(
    cap: int, postgres: bool, memory_limit: int | None, says: str
) -> None:
    with pytest.raises(ConfigError, match="--pg-cache-cap") as caught:
        checks.cache_cap(cap, postgres, memory_limit)
    assert says in str(caught.value)


def test_no_cap_or_a_good_one_passes() -> None:
    checks.cache_cap(None, False, 128 * MiB)
    checks.cache_cap(64 * MiB, True, None)
