"""What the report reads from a bundle: summary, scenario text, time series and histograms.

The time series normally come from the analysis (``analysis["series"]``); when a bundle has
no analysis, :func:`series_from_bundle` builds the same shape from the CSVs so the report
still shows its plots.
"""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path
from typing import Any

from sim import registry
from sim.bundle import reader as bundle_files
from sim.bundle.reader import read_analysis, read_rows_if_readable, read_summary
from sim.errors import ConfigError

DEVICE_FIGURES = ("iops", "r_await_ms", "w_await_ms", "aqu_sz", "util_pct")
HOST_FIGURES = ("cpu_busy_pct", "process_cpu_pct")
MEASURED_PHASE = "measure"
SHORT_FRACTION = 0.5
Column = list[float | None]  # one figure per measured interval, None for a gap


def load_summary(bundle: Path) -> dict[str, Any]:
    """The bundle's summary.json, read bounded and checked against its schema
    (:func:`sim.bundle.reader.read_summary`); anything else is a :class:`ConfigError`."""
    return read_summary(bundle)


def load_analysis_file(bundle: Path) -> dict[str, Any] | None:
    """``analysis.json`` when the bundle has a readable, well-typed one, else None."""
    return read_analysis(bundle)


def read_text(path: Path) -> str | None:
    """A bundle's text file (bounded, regular files only); None when it cannot be read."""
    return bundle_files.read_text(path, what=path.name)


def _number(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _iostat_await(row: dict[str, str]) -> float | None:
    """iostat's combined await: reads' and writes' awaits weighted by their rates."""
    r_s, w_s = _number(row.get("r_s")) or 0.0, _number(row.get("w_s")) or 0.0
    r_await, w_await = _number(row.get("r_await_ms")), _number(row.get("w_await_ms"))
    if r_s + w_s <= 0:
        return None
    return ((r_await or 0.0) * r_s + (w_await or 0.0) * w_s) / (r_s + w_s)


def _full_intervals(keys: list[str]) -> list[str]:
    """Drop intervals shorter than half the typical one, as the analysis does: a step
    boundary's leftover holds a handful of operations and rates extrapolated from
    milliseconds, which would draw spikes that never happened."""
    times = [float(k) for k in keys]
    lengths = [b - a for a, b in itertools.pairwise(times)]
    if len(lengths) < 2:
        return keys
    typical = statistics.median(lengths)
    kept = [keys[0]] + [
        k for k, length in zip(keys[1:], lengths, strict=True) if length >= typical * SHORT_FRACTION
    ]
    return kept


def series_from_bundle(bundle: Path) -> dict[str, Any]:
    """The measured intervals' series in the analysis' ``series`` shape, from the CSVs.

    Rows of one interval share ``t`` across files (docs/bundle.md), so ``t`` is the key that
    aligns application and storage figures; a figure missing at some ``t`` is None (a gap).
    """
    ops_rows = _measured_rows(bundle, "ops")
    block_rows = _measured_rows(bundle, registry.collector_with_role(registry.ROLE_DEVICE))
    host_rows = _measured_rows(bundle, registry.collector_with_role(registry.ROLE_HOST_CPU))
    keys = _full_intervals(
        sorted(
            {
                r["t"]
                for r in (*ops_rows, *block_rows, *host_rows)
                if _number(r.get("t")) is not None
            },
            key=float,
        )
    )
    index = {key: i for i, key in enumerate(keys)}
    steps, ops_s, p50, p99 = _operation_series(ops_rows, index)
    return {
        "t": [float(k) for k in keys],
        "step": steps,
        "ops_s": ops_s,
        "p50_us": p50,
        "p99_us": p99,
        "device": _device_series(block_rows, index),
        "host": _host_series(host_rows, index),
    }


def _measured_rows(bundle: Path, series: str | None) -> list[dict[str, str]]:
    """The measured rows of ``timeseries/<series>.csv`` ([] for None: no collector plays the
    role the report asked for)."""
    if series is None:
        return []
    rows = read_rows_if_readable(bundle / "timeseries" / f"{series}.csv")
    return [r for r in rows if r.get("phase") == MEASURED_PHASE]


def _operation_series(
    rows: list[dict[str, str]], index: dict[str, int]
) -> tuple[list[int | None], dict[str, Column], dict[str, Column], dict[str, Column]]:
    """Per interval: the load step, and per operation its ops/s, p50 and p99."""
    n = len(index)
    steps: list[int | None] = [None] * n
    ops_s: dict[str, Column] = {}
    p50: dict[str, Column] = {}
    p99: dict[str, Column] = {}
    for row in rows:
        i, op = index.get(row["t"]), row.get("op") or "?"
        if i is None:
            continue
        step = _number(row.get("step"))
        steps[i] = None if step is None else int(step)
        for target, column in ((ops_s, "ops_s"), (p50, "p50_us"), (p99, "p99_us")):
            target.setdefault(op, [None] * n)[i] = _number(row.get(column))
    return steps, ops_s, p50, p99


def _device_series(
    rows: list[dict[str, str]], index: dict[str, int]
) -> dict[str, dict[str, Column]]:
    """Per block device, its figures per interval, with iostat's combined await."""
    n = len(index)
    device: dict[str, dict[str, Column]] = {}
    for row in rows:
        i = index.get(row["t"])
        if i is None:
            continue
        figures = device.setdefault(
            row.get("entity") or "?",
            {name: [None] * n for name in (*DEVICE_FIGURES, "await_ms")},
        )
        for name in DEVICE_FIGURES:
            figures[name][i] = _number(row.get(name))
        figures["await_ms"][i] = _iostat_await(row)
    return device


def _host_series(rows: list[dict[str, str]], index: dict[str, int]) -> dict[str, Column]:
    """The host's CPU figures per interval."""
    n = len(index)
    host: dict[str, Column] = {}
    for row in rows:
        i = index.get(row["t"])
        if i is None:
            continue
        for name in HOST_FIGURES:
            host.setdefault(name, [None] * n)[i] = _number(row.get(name))
    return host


def log_buckets(per_decade: int = 5, lo_us: float = 1.0, hi_us: float = 1e8) -> list[float]:
    """Bucket edges spaced evenly on a log scale (``per_decade`` per factor of ten)."""
    count = round(math.log10(hi_us / lo_us) * per_decade)
    return [lo_us * 10 ** (k / per_decade) for k in range(count + 1)]


def latency_buckets(encoded: str, per_decade: int = 5) -> list[tuple[float, float, int]]:
    """Counts per log-spaced µs bucket, ``(lo_us, hi_us, count)``, of an encoded HdrHistogram,
    trimmed to the buckets between the first and the last one holding operations."""
    from hdrh.histogram import HdrHistogram

    from sim.core.metrics import recorded_values

    histogram = HdrHistogram.decode(encoded)
    edges = log_buckets(per_decade)
    counts = [0] * (len(edges) - 1)
    for value_us, count in recorded_values(histogram):
        value = max(float(value_us), edges[0])
        slot = min(int(math.log10(value / edges[0]) * per_decade + 1e-9), len(counts) - 1)
        counts[slot] += count
    used = [i for i, c in enumerate(counts) if c]
    if not used:
        return []
    return [(edges[i], edges[i + 1], counts[i]) for i in range(used[0], used[-1] + 1)]


def measured_histograms(bundle: Path) -> dict[str, list[tuple[float, float, int]]]:
    """Per operation, the measured window's latency buckets (empty without measured.json)."""
    path = bundle / "histograms" / "measured.json"
    if not path.exists():
        return {}
    try:
        data = bundle_files.read_json_file(path, what="histograms/measured.json")
    except ConfigError:
        return {}
    out: dict[str, list[tuple[float, float, int]]] = {}
    for op, entry in sorted(data.items()) if isinstance(data, dict) else []:
        encoded = entry.get("hdr") if isinstance(entry, dict) else None
        if isinstance(encoded, str):
            try:
                out[op] = latency_buckets(encoded)
            except Exception:  # hdrh raises bare errors (zlib, struct, base64) on a damaged blob
                out[op] = []
    return out
