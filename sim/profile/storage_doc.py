"""The device part of the profile document: the counted devices' per-interval series with
their summary, the request-size histograms, and one line of means per device."""

from __future__ import annotations

from typing import Any

from sim.profile.columns import DEVICE_COLUMNS, TIME, Col, summary_figures, window_figures
from sim.profile.device import (
    QUEUE,
    READ_AWAIT,
    READS_S,
    SIZE_BOUNDS,
    SIZE_COLUMNS,
    WRITE_AWAIT,
    WRITES_S,
    DeviceData,
)
from sim.profile.figures import DERIVED, fig, number, weighted_mean

#: A bucket holds the sizes above the bound before it, up to and including its own.
SIZE_LABELS = {
    c: f"{lo}–{hi} KiB" if lo else f"≤ {hi} KiB"
    for c, lo, hi in zip(SIZE_COLUMNS, (0, *SIZE_BOUNDS), SIZE_BOUNDS, strict=False)
} | {"size_kib_gt_1024": "> 1024 KiB"}


def size_shares(
    data: DeviceData, direction: str, first: int = 0, last: int | None = None
) -> dict[str, Any] | None:
    """The traced requests of ``direction`` by size bucket over intervals ``first..last``:
    their counts and shares (%), or None when sizes were not traced."""
    columns = data.sizes.get(direction)
    if not columns:
        return None
    end = len(data.lengths) if last is None else last + 1
    counts = {
        c: sum(v for v in values[first:end] if v is not None) for c, values in columns.items()
    }
    total = sum(counts.values())
    if total <= 0:
        return None
    source = f"{data.latency.name if data.latency else ''}: size_kib_* of <device>:{direction}"
    return {
        "requests": int(total),
        "buckets": [
            {
                "bucket": c,
                "label": SIZE_LABELS[c],
                "requests": int(counts[c]),
                "pct": fig(100 * counts[c] / total, "%", DERIVED, source),
            }
            for c in SIZE_COLUMNS
            if c in counts
        ],
    }


def device_window(data: DeviceData, first: int, last: int) -> dict[str, Any]:
    """The counted devices' figures over intervals ``first..last``."""
    out = window_figures(data.series, data.lengths, data.info, DEVICE_COLUMNS, first, last)
    for direction in ("read", "write"):
        shares = size_shares(data, direction, first, last)
        if shares is not None:
            out[f"{direction}_sizes"] = shares
    return out


def per_device(data: DeviceData) -> dict[str, dict[str, Any]]:
    """Each device of the time series (counted or not): its means over the data."""
    return {device: _device_row(data, device) for device in sorted(data.block.values)}


def _device_row(data: DeviceData, device: str) -> dict[str, Any]:
    block, lengths = data.block, data.lengths
    row: dict[str, Any] = {"counted": device in data.counted}
    if device in data.left_out:
        row["why_not_counted"] = data.left_out[device]

    def column(names: tuple[str, ...]) -> tuple[str, list[float | None]]:
        name = next((n for n in names if block.has(n, [device])), names[0])
        return name, block.column(device, name)

    def where(what: str) -> str:
        return f"{block.name}: {what} of {device}"

    (r_name, reads), (w_name, writes) = column(READS_S), column(WRITES_S)
    total = [
        None if r is None and w is None else (r or 0.0) + (w or 0.0)
        for r, w in zip(reads, writes, strict=True)
    ]
    row["iops"] = fig(
        weighted_mean(total, lengths), "1/s", DERIVED, where(f"{r_name} + {w_name}") + ", mean"
    )
    for key, names, counts, count_name in (
        ("read_await_ms", READ_AWAIT, reads, r_name),
        ("write_await_ms", WRITE_AWAIT, writes, w_name),
    ):
        name, values = column(names)
        by_request = [(c or 0.0) * dt for c, dt in zip(counts, lengths, strict=True)]
        source = where(name) + f", weighted by {count_name}"
        row[key] = fig(weighted_mean(values, by_request), "ms", DERIVED, source)
    for key, choices, unit in (("queue", QUEUE, "requests"), ("util_pct", ("util_pct",), "%")):
        name, values = column(choices)
        mean = weighted_mean(values, lengths)
        row[key] = fig(mean, unit, data.column_kind, where(name) + ", mean")
    return row


def device_document(data: DeviceData) -> dict[str, Any]:
    """The device section: series, summary, sizes, devices."""
    keys = [c.key for c in DEVICE_COLUMNS if c.key in data.series]
    series: dict[str, Any] = {
        "t": data.block.times,
        "interval_s": [number(v) for v in data.lengths],
        **{k: [number(v) for v in data.series[k]] for k in keys},
    }
    for direction, columns in data.sizes.items():
        for column, values in columns.items():
            series[f"{direction}_{column}"] = values
    doc: dict[str, Any] = {
        "source": data.block.source,
        "counted": data.counted,
        "left_out": data.left_out,
        "columns": {k: {**data.info[k], "meaning": _meaning(k)} for k in keys},
        "summary": summary_figures(data.series, data.lengths, data.info, DEVICE_COLUMNS),
        "series": series,
        "devices": per_device(data),
    }
    for direction in ("read", "write"):
        shares = size_shares(data, direction)
        if shares is not None:
            doc[f"{direction}_sizes"] = shares
    return doc


def _meaning(key: str) -> str:
    col: Col = next((c for c in DEVICE_COLUMNS if c.key == key), Col(key, key, "", TIME, key))
    return col.meaning
