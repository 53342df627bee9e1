"""The sql workload's generators draw from pgbench's distributions: each is held by a
chi-square test against the probabilities pgbench's documentation gives ("Built-in
Functions": random, random_gaussian, random_exponential, random_zipfian).

Seeds are fixed, so each test is deterministic; the bound is the chi-square's 99.9th
percentile (Wilson–Hilferty), which a correct generator exceeds once in a thousand seeds and
a generator off by a few percent in any bucket exceeds at these sample sizes."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Callable

import pytest

from workloads.sql import generators as gen

DRAWS = 100_000
LO, HI = 11, 30  # 20 values, away from 0 so an off-by-lo shows
N = HI - LO + 1


def chi2_bound(df: int, z: float = 3.09) -> float:
    """The chi-square distribution's quantile at the normal quantile ``z`` (3.09: 99.9 %)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2(draw: gen.Draw, expected: list[float]) -> float:
    counts = Counter(draw() for _ in range(DRAWS))
    assert set(counts) <= set(range(LO, HI + 1)), sorted(set(counts) - set(range(LO, HI + 1)))
    return sum(
        (counts.get(LO + i, 0) - DRAWS * p) ** 2 / (DRAWS * p) for i, p in enumerate(expected)
    )


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def gaussian_p(p: float) -> list[float]:
    """pgbench: a standard normal kept in [-p, p), mapped linearly: value i takes the slice
    [-p + 2p·i/n, -p + 2p·(i+1)/n)."""
    mass = normal_cdf(p) - normal_cdf(-p)
    edges = [-p + 2 * p * i / N for i in range(N + 1)]
    return [(normal_cdf(b) - normal_cdf(a)) / mass for a, b in itertools.pairwise(edges)]


def exponential_p(p: float) -> list[float]:
    """pgbench: (exp(-p·i/n) - exp(-p·(i+1)/n)) / (1 - exp(-p))."""
    return [(math.exp(-p * i / N) - math.exp(-p * (i + 1) / N)) / (1 - math.exp(-p)) for i in
            range(N)]  # fmt: skip


def zipfian_p(s: float) -> list[float]:
    """pgbench: value lo+k-1 with probability ∝ 1/k^s over k = 1..n."""
    weights = [k**-s for k in range(1, N + 1)]
    return [w / sum(weights) for w in weights]


CASES: dict[str, tuple[Callable[[random.Random], gen.Draw], list[float]]] = {
    "uniform": (lambda r: gen.uniform(r, LO, HI), [1 / N] * N),
    "gaussian 2.5": (lambda r: gen.gaussian(r, LO, HI, 2.5), gaussian_p(2.5)),
    "gaussian 5": (lambda r: gen.gaussian(r, LO, HI, 5.0), gaussian_p(5.0)),
    "exponential 5": (lambda r: gen.exponential(r, LO, HI, 5.0), exponential_p(5.0)),
    "exponential 0.5": (lambda r: gen.exponential(r, LO, HI, 0.5), exponential_p(0.5)),
    "zipfian 1.1": (lambda r: gen.zipfian(r, LO, HI, 1.1), zipfian_p(1.1)),
    "zipfian 2.5": (lambda r: gen.zipfian(r, LO, HI, 2.5), zipfian_p(2.5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_distribution_is_pgbench_s(name: str) -> None:
    make, expected = CASES[name]
    assert math.isclose(sum(expected), 1.0)
    statistic = chi2(make(random.Random(20261205)), expected)
    assert statistic < chi2_bound(N - 1), f"{name}: chi-square {statistic:.1f}"


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("gaussian 2.5", gaussian_p(4.0)),  # another stddevs
        ("exponential 5", exponential_p(4.0)),  # another parameter
        ("zipfian 1.1", zipfian_p(1.3)),  # another exponent
        ("uniform", exponential_p(0.2)),  # a mild skew
    ],
)
def test_the_test_tells_a_neighbouring_distribution(name: str, wrong: list[float]) -> None:
    """The chi-square bound is tight enough to refuse a close but different distribution."""
    make, _ = CASES[name]
    assert chi2(make(random.Random(7)), wrong) > chi2_bound(N - 1)


def test_sequence_list_and_ranges() -> None:
    draw = gen.sequence(5, 3)
    assert [draw() for _ in range(4)] == [5, 8, 11, 14]
    pick = gen.choice(random.Random(1), ["a", "b", "c"])
    counts = Counter(pick() for _ in range(30_000))
    assert set(counts) == {"a", "b", "c"} and min(counts.values()) > 9_000
    assert gen.range_problem(5, 4) is not None and "impossible" in str(gen.range_problem(5, 4))
    assert gen.range_problem(0, 2**63) is not None
    assert gen.range_problem(7, 7) is None
    assert {gen.uniform(random.Random(2), 7, 7)() for _ in range(10)} == {7}
