"""Prometheus names for dbsim's figures: the latency buckets and collector keys in base units.

Prometheus' conventions (https://prometheus.io/docs/practices/naming/): a ``dbsim_`` prefix,
base units in the name (seconds, bytes, ratios), ``_total`` on counters. A collector key
carries its unit in its suffix (``r_await_ms``, ``rkB_s``, ``util_pct``, sim.protocols.Sample),
so each is renamed and scaled by :data:`UNIT_SUFFIXES`: ``block`` ``r_await_ms`` becomes
``dbsim_block_r_await_seconds`` (× 0.001), ``rkB_s`` ``dbsim_block_r_bytes_per_second``
(× 1024), ``util_pct`` ``dbsim_block_util_ratio`` (× 0.01), ``r_s`` ``dbsim_block_r_per_second``.
"""

from __future__ import annotations

import re
from decimal import Decimal

PREFIX = "dbsim"

#: The latency histogram's upper bounds: the Renard R10 series (ISO 3: ten steps a decade,
#: each at most 1.28 × the one below) from 1 µs to 100 s. 81 finite buckets plus +Inf per
#: operation and phase; a p99 read from them lies in the bucket that holds the true p99, so it
#: is off by at most that bucket's width: 25 % of its lower bound (28 % between 1.25 and 1.6).
R10 = ("1", "1.25", "1.6", "2", "2.5", "3.15", "4", "5", "6.3", "8")
DECADES_US = range(0, 8)  # 1 µs … 80 s, then 100 s


def _bounds() -> tuple[tuple[float, ...], tuple[float, ...]]:
    exact = [Decimal(m).scaleb(n) for n in DECADES_US for m in R10]
    exact.append(Decimal(1).scaleb(8))  # 100 s
    return tuple(float(d) for d in exact), tuple(float(d.scaleb(-6)) for d in exact)


#: The bounds in µs (what the HDR histograms hold) and in seconds (the ``le`` labels).
BOUNDS_US, BOUNDS_S = _bounds()

#: Unit suffix of a collector key -> (suffix of the Prometheus name, factor to base units).
#: Tried in order: the longest suffixes first, so ``_ms_s`` is not read as ``_s``.
UNIT_SUFFIXES: tuple[tuple[str, str, float], ...] = (
    ("ms_s", "seconds_per_second", 1e-3),
    ("kB_s", "bytes_per_second", 1024.0),
    ("bytes_s", "bytes_per_second", 1.0),
    ("sz_kB", "size_bytes", 1024.0),
    ("kB_per_op", "bytes_per_op", 1024.0),
    ("kB", "bytes", 1024.0),
    ("bps", "bytes_per_second", 1.0),
    ("pct", "ratio", 0.01),
    ("ms", "seconds", 1e-3),
    ("us", "seconds", 1e-6),
    ("s", "per_second", 1.0),
)
#: Keys whose ``_s`` is seconds, not "per second".
SECONDS_KEYS = frozenset({"interval_s"})

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(name: str) -> str:
    """A valid metric or label name: anything but letters, digits and ``_`` becomes ``_``."""
    clean = _INVALID.sub("_", name)
    return f"_{clean}" if clean[:1].isdigit() else clean


def figure_name(source: str, key: str) -> tuple[str, float]:
    """The metric name of collector ``source``'s figure ``key`` and its factor to base units:
    ``("block", "r_await_ms")`` -> ``("dbsim_block_r_await_seconds", 0.001)``."""
    if key in SECONDS_KEYS:
        stem, unit, factor = key[: -len("_s")], "seconds", 1.0
    else:
        stem, unit, factor = key, "", 1.0
        for suffix, base, scale in UNIT_SUFFIXES:
            # ``rkB_s``: iostat glues kB to the direction; any other unit follows an ``_``.
            glued = suffix.startswith("kB") and key.endswith(suffix)
            if key == suffix or key.endswith("_" + suffix) or glued:
                stem, unit, factor = key[: -len(suffix)].rstrip("_"), base, scale
                break
    parts = [PREFIX, source, stem.lower(), unit]
    return sanitize("_".join(p for p in parts if p)), factor
