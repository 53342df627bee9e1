"""The shape of a workload over a window of a profile: what a replay reproduces and judges.

Both sides of a replay are read the same way, from ``profile.json``'s device series
(docs/bundle.md, "profile.json"): the production's capture over its chosen window, and the
replay's own capture over the intervals the replay ran in. Rates are time-weighted means over
the window; a mean request size is weighted by the requests of its direction, a share or a
depth by the interval's requests (IOPS × length), an await by its direction's requests, and a
p99 is the mean of the intervals' own p99s weighted the same way (a window's true p99 cannot
be rebuilt from the intervals'). Request-size counts are added up per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.errors import ConfigError
from sim.profile.device import SIZE_BOUNDS

#: Bucket suffixes of the request-size series, in order (``read_size_kib_le_4`` …).
BUCKETS = (*(f"le_{b}" for b in SIZE_BOUNDS), "gt_1024")
#: An interval is part of the production's active span when its IOPS are at least this share
#: of the busiest interval's (a capture's idle head and tail are left out).
ACTIVE_SHARE = 0.10
EPS_S = 0.05  # interval edges are a few ms off the grid


@dataclass(frozen=True)
class Window:
    """The intervals a shape is taken over: ``how`` says how they were chosen."""

    first_t: float  # start of the first interval (s, the bundle's clock)
    last_t: float  # end of the last
    seconds: float
    intervals: int
    how: str


@dataclass(frozen=True)
class Shape:
    window: Window
    read_iops: float
    write_iops: float
    read_kib: float | None
    write_kib: float | None
    read_sizes: dict[str, float] = field(default_factory=dict)  # bucket -> requests
    write_sizes: dict[str, float] = field(default_factory=dict)
    seq_pct: float | None = None
    inflight: float | None = None
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    iops_per_interval: tuple[float, ...] = ()
    read_iops_per_interval: tuple[float, ...] = ()
    write_iops_per_interval: tuple[float, ...] = ()

    @property
    def iops(self) -> float:
        return self.read_iops + self.write_iops

    @property
    def read_pct(self) -> float | None:
        return 100.0 * self.read_iops / self.iops if self.iops > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": vars(self.window),
            "read_iops": self.read_iops,
            "write_iops": self.write_iops,
            "read_pct": self.read_pct,
            "read_kib": self.read_kib,
            "write_kib": self.write_kib,
            "read_sizes": self.read_sizes,
            "write_sizes": self.write_sizes,
            "seq_pct": self.seq_pct,
            "inflight": self.inflight,
            "latency_ms": self.latency_ms,
            "iops_per_interval": list(self.iops_per_interval),
            # Each direction's own, so a replay's writes can be read beside the capture's
            # interval by interval (the flusher's bursts, a checkpoint's spread).
            "read_iops_per_interval": list(self.read_iops_per_interval),
            "write_iops_per_interval": list(self.write_iops_per_interval),
        }


def device_series(profile: dict[str, Any]) -> dict[str, list[Any]]:
    devices = profile.get("devices")
    if not devices or not devices.get("series", {}).get("t"):
        raise ConfigError(
            f"replay: {profile.get('bundle')}: the profile has no block-device figures; a "
            "replay reproduces the devices' requests (capture with --path on the data's "
            "file system)"
        )
    series: dict[str, list[Any]] = devices["series"]
    return series


def _mean(values: Sequence[Any], weights: Sequence[float]) -> float | None:
    pairs = [(float(v), w) for v, w in zip(values, weights, strict=True) if v is not None]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else None


def shape_over(series: dict[str, list[Any]], picked: Sequence[int], how: str) -> Shape:
    """The shape over the intervals ``picked`` (indexes into the series)."""
    if not picked:
        raise ConfigError(f"replay: no interval to take the workload's shape from ({how})")

    def col(key: str) -> list[Any]:
        values = series.get(key) or [None] * len(series["t"])
        return [values[i] for i in picked]

    lengths = [float(series["interval_s"][i]) for i in picked]
    reads = [float(v or 0.0) for v in col("read_iops")]
    writes = [float(v or 0.0) for v in col("write_iops")]
    read_n = [r * s for r, s in zip(reads, lengths, strict=True)]
    write_n = [w * s for w, s in zip(writes, lengths, strict=True)]
    all_n = [r + w for r, w in zip(read_n, write_n, strict=True)]
    seconds = sum(lengths)
    ends = [float(series["t"][i]) for i in picked]
    sizes = {
        direction: {
            b: sum(float(v or 0.0) for v in col(f"{direction}_size_kib_{b}"))
            for b in BUCKETS
            if series.get(f"{direction}_size_kib_{b}") is not None
        }
        for direction in ("read", "write")
    }
    return Shape(
        window=Window(ends[0] - lengths[0], ends[-1], seconds, len(picked), how),
        read_iops=sum(read_n) / seconds,
        write_iops=sum(write_n) / seconds,
        read_kib=_mean(col("read_kib"), read_n),
        write_kib=_mean(col("write_kib"), write_n),
        read_sizes={b: n for b, n in sizes["read"].items() if n > 0},
        write_sizes={b: n for b, n in sizes["write"].items() if n > 0},
        seq_pct=_mean(col("seq_pct"), all_n),
        inflight=_mean(col("inflight_mean"), all_n),
        latency_ms={
            "read_await": _mean(col("read_await_ms"), read_n),
            "write_await": _mean(col("write_await_ms"), write_n),
            "read_p99": _mean(col("read_p99_ms"), read_n),
            "write_p99": _mean(col("write_p99_ms"), write_n),
        },
        iops_per_interval=tuple(r + w for r, w in zip(reads, writes, strict=True)),
        read_iops_per_interval=tuple(reads),
        write_iops_per_interval=tuple(writes),
    )


def between(series: dict[str, list[Any]], start_t: float, end_t: float) -> list[int]:
    """The intervals lying wholly inside ``[start_t, end_t]``."""
    return [
        i
        for i, (t, length) in enumerate(zip(series["t"], series["interval_s"], strict=True))
        if t - length >= start_t - EPS_S and t <= end_t + EPS_S
    ]


def production_window(profile: dict[str, Any]) -> Shape:
    """The production's shape to reproduce: over its busiest minute when the profile resolves
    one, else over its active span (intervals from the first to the last at
    :data:`ACTIVE_SHARE` of the busiest, less the first and last, which fall partly outside
    the workload)."""
    series = device_series(profile)
    minute = (profile.get("peaks") or {}).get("busiest_minute") or {}
    if "start_t" in minute:
        picked = between(series, float(minute["start_t"]), float(minute["end_t"]))
        how = (
            f"the busiest minute (t = {float(minute['start_t']):g} to {float(minute['end_t']):g} s)"
        )
        return shape_over(series, picked, how)
    iops = [float(v or 0.0) for v in series["iops"]]
    top = max(iops, default=0.0)
    active = [i for i, v in enumerate(iops) if top > 0 and v >= ACTIVE_SHARE * top]
    if not active:
        raise ConfigError(f"replay: {profile.get('bundle')}: the capture saw no device I/O")
    picked = list(range(active[0], active[-1] + 1))
    if len(picked) > 2:
        picked = picked[1:-1]
    why = minute.get("unresolved", "no busiest minute")
    how = (
        f"the active span, {len(picked)} intervals with I/O ({why}; intervals under "
        f"{ACTIVE_SHARE:.0%} of the busiest and the span's partial first and last left out)"
    )
    return shape_over(series, picked, how)
