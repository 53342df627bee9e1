"""The per-interval series the profile builds, and how each is averaged over a window.

A series' ``weight`` says what its values are *per*, so that a window's figure is the ratio of
sums rather than a mean of ratios: rates are per second (weighted by the interval's length),
a read size or a read latency is per read (weighted by the reads in the interval), a share of
reads per I/O, a sequential share or a queue depth at issue per traced request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim.profile.figures import fig, nearest_rank, present, weighted_mean

#: Weights: the interval's length; none (the highest value); a count per interval (the
#: traced requests); any other weight names the rate series the values are per.
TIME = "time"
MAX = "max"
REQUESTS = "requests"
READS = "read_iops"
WRITES = "write_iops"
IOS = "iops"


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    unit: str
    weight: str
    meaning: str


DEVICE_COLUMNS = (
    Col("iops", "IOPS", "1/s", TIME, "reads plus writes completed per second"),
    Col("read_iops", "read IOPS", "1/s", TIME, "reads completed per second"),
    Col("write_iops", "write IOPS", "1/s", TIME, "writes completed per second"),
    Col("read_pct", "reads", "%", IOS, "reads' share of the reads and writes"),
    Col("mb_s", "MB/s", "MB/s", TIME, "read plus written, MB of 1024 kB per second"),
    Col("read_mb_s", "read MB/s", "MB/s", TIME, "read, MB of 1024 kB per second"),
    Col("write_mb_s", "write MB/s", "MB/s", TIME, "written, MB of 1024 kB per second"),
    Col("read_kib", "read size", "KiB", READS, "mean size of a read request"),
    Col("write_kib", "write size", "KiB", WRITES, "mean size of a write request"),
    Col("read_await_ms", "read await", "ms", READS, "mean time of a read, queue included"),
    Col("write_await_ms", "write await", "ms", WRITES, "mean time of a write, queue included"),
    Col("io_kib", "request size", "KiB", IOS, "mean size of a request, reads and writes"),
    Col("await_ms", "await", "ms", IOS, "mean time of a request, reads and writes, queue included"),
    Col("queue", "queue (aqu-sz)", "requests", TIME, "mean requests queued or in service"),
    Col("inflight_mean", "in flight", "requests", REQUESTS, "requests in flight at each issue"),
    Col("inflight_max", "in flight max", "requests", MAX, "most requests in flight at an issue"),
    Col("seq_pct", "sequential", "%", REQUESTS, "requests starting where the previous ended"),
    Col("read_p99_ms", "read p99", "ms", READS, "99th percentile of read latency"),
    Col("write_p99_ms", "write p99", "ms", WRITES, "99th percentile of write latency"),
)


def weights(
    series: Mapping[str, Sequence[float | None]], lengths: Sequence[float], weight: str
) -> list[float]:
    """Each interval's weight of kind ``weight`` (see :data:`TIME`)."""
    if weight in (TIME, MAX):
        return list(lengths)
    counts = series.get(weight) or [None] * len(lengths)
    if weight == REQUESTS:  # a count per interval already: the traced requests
        return [c or 0.0 for c in counts]
    return [(c or 0.0) * dt for c, dt in zip(counts, lengths, strict=True)]


def window_value(
    series: Mapping[str, Sequence[float | None]],
    lengths: Sequence[float],
    col: Col,
    first: int = 0,
    last: int | None = None,
) -> float | None:
    """Series ``col`` over intervals ``first..last`` as one figure, by its weight."""
    end = len(lengths) if last is None else last + 1
    values = list(series.get(col.key) or [])[first:end]
    if not values:
        return None
    if col.weight == MAX:
        found = present(values)
        return max(found) if found else None
    return weighted_mean(values, weights(series, lengths, col.weight)[first:end])


def summary_figures(
    series: Mapping[str, Sequence[float | None]],
    lengths: Sequence[float],
    info: Mapping[str, Mapping[str, str]],
    cols: Sequence[Col],
) -> dict[str, dict[str, Any]]:
    """Per series: its mean (by weight), the 95th percentile and the highest of its interval
    values, each a figure record."""
    out: dict[str, dict[str, Any]] = {}
    for col in cols:
        values = present(series.get(col.key) or [])
        if not values or col.key not in info:
            continue
        about = info[col.key]
        unit, what, source = about["unit"], about["what"], about["source"]
        out[col.key] = {
            "mean": fig(window_value(series, lengths, col), unit, what, source),
            "p95": fig(nearest_rank(values, 0.95), unit, what, source + "; 95th pct of intervals"),
            "max": fig(max(values), unit, what, source + "; highest interval"),
        }
    return out


def window_figures(
    series: Mapping[str, Sequence[float | None]],
    lengths: Sequence[float],
    info: Mapping[str, Mapping[str, str]],
    cols: Sequence[Col],
    first: int,
    last: int,
) -> dict[str, dict[str, Any]]:
    """Every series over intervals ``first..last``, each one figure record."""
    out: dict[str, dict[str, Any]] = {}
    for col in cols:
        value = window_value(series, lengths, col, first, last)
        if value is not None and col.key in info:
            about = info[col.key]
            out[col.key] = fig(value, about["unit"], about["what"], about["source"])
    return out
