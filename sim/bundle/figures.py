"""The storage figures every reader of a bundle derives the same way: a finite number or None,
a device's IOPS and combined await from its block means, and the primary device — the one with
the most IOPS — which SLOs, sweeps, the analysis, the comparison and the baseline all judge."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Block rates a window keeps per device (besides await): what sizing needs.
RATES = ("iops", "r_s", "w_s", "rkB_s", "wkB_s")


def finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def device_figures(means: Mapping[str, Any]) -> dict[str, float | None]:
    """A device's window figures from its block means: IOPS, await and the read/write rates."""
    out = {k: finite(means.get(k)) for k in RATES}
    out.update(iops=device_iops(means), await_ms=combined_await_ms(means))
    return out


def device_iops(means: Mapping[str, Any]) -> float | None:
    """The block collector's ``iops``; reads plus writes where an older bundle lacks it."""
    iops = finite(means.get("iops"))
    r_s, w_s = finite(means.get("r_s")), finite(means.get("w_s"))
    if iops is None and (r_s is not None or w_s is not None):
        iops = (r_s or 0.0) + (w_s or 0.0)
    return iops


def combined_await_ms(means: Mapping[str, Any]) -> float | None:
    """Reads' and writes' awaits weighted by their rates (iostat's ``await``); 0 without I/O."""
    r_s, w_s = finite(means.get("r_s")), finite(means.get("w_s"))
    if r_s is None and w_s is None:
        return finite(means.get("await_ms"))
    r_s, w_s = r_s or 0.0, w_s or 0.0
    if r_s + w_s <= 0:
        return 0.0
    r_await, w_await = finite(means.get("r_await_ms")) or 0.0, finite(means.get("w_await_ms"))
    return (r_s * r_await + w_s * (w_await or 0.0)) / (r_s + w_s)


def primary_device(devices: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The device with the most IOPS (ties: alphabetical), or None when no device has a
    figure. ``devices`` maps a device name to its figures or block means."""
    known = {
        name: iops
        for name, figures in devices.items()
        if isinstance(figures, Mapping) and (iops := device_iops(figures)) is not None
    }
    return min(known, key=lambda d: (-known[d], d)) if known else None


def primary_device_figures(devices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float]:
    """The primary device's figures (empty when there is none)."""
    name = primary_device(devices)
    return devices[name] if name is not None else {}
