"""The peaks and the daily shape of the profile's load series (the storage's IOPS, or the
database's I/O requests, or the NFS calls when the bundle has nothing below them).

Each peak is a window of the series (:mod:`sim.profile.windows`) with every figure of the
profile over that window; a window the intervals cannot resolve (hourly AWR snapshots have no
busiest minute) says so instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sim.profile import windows
from sim.profile.figures import DERIVED, fig, nearest_rank, present
from sim.profile.source import BundleInfo

WINDOWS = (("busiest_minute", 60.0, "minute"), ("busiest_15min", 900.0, "15 minutes"))

#: The profile's figures over intervals ``first..last`` of the load series.
WindowFigures = Callable[[int, int], dict[str, Any]]


@dataclass(frozen=True)
class Load:
    """The series the peaks are found on."""

    key: str  # "iops", "io_req_s", "ops_s"
    label: str  # "IOPS", "database I/O requests/s" …
    unit: str
    source: str
    what: str
    times: list[float]
    lengths: list[float]
    rates: list[float | None]
    figures: WindowFigures


def _stamp(info: BundleInfo, t: float) -> str | None:
    wall = info.wall(t)
    return None if wall is None else wall.isoformat(timespec="seconds")


def window_document(info: BundleInfo, load: Load, first: int, last: int) -> dict[str, Any]:
    start_t = load.times[first] - load.lengths[first]
    end_t = load.times[last]
    return {
        "start": _stamp(info, start_t),
        "end": _stamp(info, end_t),
        "start_t": round(start_t, 3),
        "end_t": round(end_t, 3),
        "seconds": round(end_t - start_t, 3),
        "intervals": last - first + 1,
        load.key: fig(
            windows.weighted_window(load.rates, load.lengths, first, last),
            load.unit,
            load.what,
            load.source,
        ),
        "figures": load.figures(first, last),
    }


def peaks_document(info: BundleInfo, load: Load) -> dict[str, Any]:
    """The busiest minute and 15 minutes, the busiest interval, the 95th percentile of the
    intervals and of the hours."""
    out: dict[str, Any] = {
        "load": {"key": load.key, "label": load.label, "unit": load.unit, "source": load.source},
        "mean": fig(
            windows.weighted_window(load.rates, load.lengths, 0, len(load.rates) - 1),
            load.unit,
            load.what,
            f"{load.source}; mean over the data",
        ),
    }
    for name, seconds, label in WINDOWS:
        found = windows.busiest(load.times, load.lengths, load.rates, seconds, label)
        out[name] = (
            {"unresolved": found}
            if isinstance(found, str)
            else window_document(info, load, found.first, found.last)
        )
    known = [(r, i) for i, r in enumerate(load.rates) if r is not None]
    top = max(known)[1] if known else None
    out["busiest_interval"] = None if top is None else window_document(info, load, top, top)
    value = nearest_rank(present(load.rates), 0.95)
    out["p95_interval"] = fig(
        value, load.unit, load.what, f"{load.source}; 95th percentile of the intervals"
    )
    out["p95_hour"] = _hour_document(info, load)
    return out


def _hour_document(info: BundleInfo, load: Load) -> dict[str, Any]:
    hours = windows.clock_hours(load.times, load.lengths, load.rates, info.wall)
    chosen = windows.percentile_hour(hours)
    if isinstance(chosen, str):
        return {"unresolved": chosen}
    hour, count = chosen
    return {
        "hour": _hour_label(hour.key),
        "of_hours": count,
        "seconds_sampled": round(hour.seconds, 3),
        load.key: fig(
            hour.mean, load.unit, DERIVED, f"{load.source}; the 95th percentile of hourly means"
        ),
    }


def _hour_label(key: datetime | int) -> str:
    return key.isoformat(timespec="minutes") if isinstance(key, datetime) else f"hour {key}"


def hours_document(info: BundleInfo, load: Load) -> list[dict[str, Any]]:
    """Every clock hour of the data: its mean and highest interval, how long it was sampled."""
    hours = windows.clock_hours(load.times, load.lengths, load.rates, info.wall)
    return [
        {
            "hour": _hour_label(h.key),
            "seconds_sampled": round(h.seconds, 3),
            "mean": fig(h.mean, load.unit, load.what, load.source),
            "max": fig(h.peak, load.unit, load.what, f"{load.source}; highest interval"),
        }
        for h in hours
    ]


def daily_document(info: BundleInfo, load: Load) -> dict[str, Any]:
    """Per hour of the day, every day together: the mean, the highest interval and how many
    days it was seen on; or why there is no daily shape."""
    shape = windows.daily_shape(load.times, load.lengths, load.rates, info.wall)
    if isinstance(shape, str):
        return {"unresolved": shape}
    zone = info.zone if info.start is not None else "hours since the start (no start time)"
    return {
        "zone": zone,
        "hours": [
            {
                "hour": h.key,
                "days": len(h.days),
                "mean": fig(h.mean, load.unit, load.what, load.source),
                "max": fig(h.peak, load.unit, load.what, f"{load.source}; highest interval"),
            }
            for h in shape
        ],
    }
