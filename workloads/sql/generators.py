"""Parameter generators of the ``sql`` workload: each draws one bind value per call.

The random ones follow pgbench's definitions (its documentation, "Built-in Functions"), so a
scenario and a pgbench script with the same parameters draw from the same distribution:

* ``uniform: [lo, hi]``: every integer of lo..hi alike (pgbench ``random``).
* ``gaussian: [lo, hi], stddevs: p``: a standard normal drawn until it falls in [-p, p),
  mapped linearly onto lo..hi (pgbench ``random_gaussian``; p ≥ 2).
* ``exponential: [lo, hi], parameter: p``: value lo+i with probability
  (e^(-p·i/n) - e^(-p·(i+1)/n)) / (1 - e^(-p)), n = hi-lo+1 (pgbench ``random_exponential``).
* ``zipfian: [lo, hi], s: s``: value lo+k-1 with probability ∝ 1/k^s, by the rejection method
  pgbench uses (Devroye, "Non-Uniform Random Variate Generation", p. 550; 1 < s ≤ 1000).

Then ``sequence: {start, step}`` (each session counts from ``start``), ``list: [...]`` and
``file: path`` (a value drawn from them alike), and ``sample: {table, column, rows}`` (a value
drawn alike from the rows read once before the measured window).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

#: pgbench's MIN_GAUSSIAN_PARAM and its zipfian bounds.
MIN_GAUSSIAN_STDDEVS = 2.0
MIN_ZIPFIAN_S = 1.001
MAX_ZIPFIAN_S = 1000.0
INT64 = 2**63 - 1

Draw = Callable[[], Any]


def uniform(rng: random.Random, lo: int, hi: int) -> Draw:
    span, rand = hi - lo + 1, rng.random
    return lambda: lo + int(rand() * span)


def gaussian(rng: random.Random, lo: int, hi: int, stddevs: float) -> Draw:
    span, gauss = hi - lo + 1, rng.gauss

    def draw() -> int:
        while True:
            z = gauss(0.0, 1.0)
            if -stddevs <= z < stddevs:
                return lo + int(span * (z + stddevs) / (2.0 * stddevs))

    return draw


def exponential(rng: random.Random, lo: int, hi: int, parameter: float) -> Draw:
    span, rand = hi - lo + 1, rng.random
    cut = math.exp(-parameter)

    def draw() -> int:
        u = 1.0 - rand()  # in (0, 1]
        value = -math.log(cut + (1.0 - cut) * u) / parameter
        return lo + min(int(span * value), span - 1)

    return draw


def zipfian(rng: random.Random, lo: int, hi: int, s: float) -> Draw:
    n, rand = hi - lo + 1, rng.random
    b = 2.0 ** (s - 1.0)

    def draw() -> int:
        while True:
            u, v = 1.0 - rand(), rand()
            x = math.floor(u ** (-1.0 / (s - 1.0)))
            t = (1.0 + 1.0 / x) ** (s - 1.0)
            if v * x * (t - 1.0) / (b - 1.0) <= t / b and x <= n:
                return lo + int(x) - 1

    return draw


def sequence(start: int, step: int) -> Draw:
    state = [start - step]

    def draw() -> int:
        state[0] += step
        return state[0]

    return draw


def choice(rng: random.Random, values: Sequence[Any]) -> Draw:
    count, rand = len(values), rng.random
    return lambda: values[int(rand() * count)]


def range_problem(lo: int, hi: int) -> str | None:
    """Why lo..hi cannot be drawn from (None: it can)."""
    if lo > hi:
        return f"impossible range [{lo}, {hi}]: the low end is above the high end"
    if abs(lo) > INT64 or abs(hi) > INT64:
        return f"range [{lo}, {hi}] leaves the 64-bit integers"
    return None
