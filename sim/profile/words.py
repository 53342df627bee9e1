"""The profile's first lines: sentences a DBA can paste into a ticket ("Peak: 41,200 IOPS,
78 % reads of 8.0 KiB, device read latency 1.9 ms …"), each figure from the document."""

from __future__ import annotations

from datetime import datetime
from typing import Any

NBSP = "\u00a0"  # between a number and its unit: a wrapped line never strands the unit


def value(record: Any) -> float | None:
    """A figure record's value (or a bare number)."""
    if isinstance(record, dict):
        record = record.get("value")
    return float(record) if isinstance(record, int | float) else None


def show(record: Any, unit: str | None = None) -> str:
    """A figure as a person reads it: 41,200 IOPS, 1.93 ms, 8.0 KiB, 78 %."""
    number = value(record)
    if number is None:
        return "-"
    unit = (
        unit if unit is not None else (record.get("unit", "") if isinstance(record, dict) else "")
    )
    if unit == "%":
        text = f"{number:.3g}"
    elif unit in ("ms", "KiB", "requests", "kB"):
        text = f"{number:.3g}" if number < 100 else f"{number:,.0f}"
    else:
        text = f"{number:,.0f}" if number >= 100 else f"{number:.3g}"
    shown = {"1/s": "", "requests": ""}.get(unit, unit)
    return f"{text}{NBSP}{shown}" if shown else text


def when(stamp: str | None, zone: str) -> str:
    if not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    shown = f"{moment:%Y-%m-%d %H:%M:%S}"
    if zone.startswith(("+", "-")):
        return f"{shown} UTC{zone}"
    return f"{shown} {zone}" if zone.startswith("UTC") else f"{shown}, {zone}"


def peak_window(peaks: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The window the headline speaks of: the busiest minute, else the busiest 15 minutes,
    else the busiest interval; and its name."""
    for key, name in (("busiest_minute", "busiest minute"), ("busiest_15min", "busiest 15 min")):
        window = peaks.get(key) or {}
        if "figures" in window:
            return window, name
    window = peaks.get("busiest_interval")
    if window is None:
        return None, ""
    return window, f"busiest interval ({window['seconds']:g}{NBSP}s)"


def _device_peak(figures: dict[str, Any], total: Any) -> str:
    if "read_pct" not in figures:  # a source without the read/write split (sar -d)
        line = f"Peak: {show(total, 'IOPS')}"
        if "io_kib" in figures:
            line += f" of {show(figures['io_kib'])} (reads and writes together)"
        if "await_ms" in figures:
            line += f", device latency {show(figures['await_ms'])} (mean await of both)"
        return line
    reads = value(figures["read_pct"]) or 0.0
    side, pct = ("read", reads) if reads >= 50 else ("write", 100 - reads)
    size = figures.get(f"{side}_kib")
    line = f"Peak: {show(total, 'IOPS')}, {show(pct, '%')} {side}s"
    if size is not None:
        line += f" of {show(size)}"
    latency = figures.get(f"{side}_await_ms")
    if latency is not None:
        line += f", device {side} latency {show(latency)} (mean await"
        p99 = figures.get(f"{side}_p99_ms")
        line += f"; p99 {show(p99)})" if p99 is not None else ")"
    return line


def _database_peak(figures: dict[str, Any], total: Any) -> str:
    line = f"Peak: {show(total, '')}{NBSP}database I/O requests/s"
    parts = []
    for entity, entry in figures.items():
        bits = [
            f"{label} {show(entry[key], '')}/s"
            for key, label in (
                ("phys_read_req_s", "physical reads"),
                ("phys_write_req_s", "physical writes"),
                ("log_write_req_s", "log writes"),
                ("commits_s", "commits"),
            )
            if key in entry
        ]
        bits += [
            f"{label} {show(entry[key])}"
            for key, label in (
                ("single_block_read_ms", "single-block read wait"),
                ("log_write_ms", "log write wait"),
            )
            if key in entry
        ]
        parts.append(f"{entity}: {', '.join(bits)}" if len(figures) > 1 else ", ".join(bits))
    return line + (f" ({'; '.join(parts)})" if parts else "")


def _nfs_peak(figures: dict[str, Any], total: Any) -> str:
    mounts = "; ".join(
        f"{mount} {show(entry.get('ops_s'), '')}/s"
        + "".join(
            f", {label} {show(entry[key])}"
            for key, label in (("read_kB_s", "READ"), ("write_kB_s", "WRITE"))
            if key in entry
        )
        for mount, entry in figures.items()
    )
    return f"Peak: {show(total, '')}{NBSP}NFS calls/s ({mounts})"


def headline(doc: dict[str, Any]) -> list[str]:
    """The profile's first sentences: the peak, the typical load, the requests' shape."""
    peaks = doc["peaks"]
    load = peaks["load"]
    window, name = peak_window(peaks)
    if window is None:
        return ["No interval with a value: no peak."]
    figures, total = window["figures"], window[load["key"]]
    speak = {"iops": _device_peak, "io_req_s": _database_peak, "ops_s": _nfs_peak}
    first = speak[load["key"]](figures, total)
    first += f" — the {name}, from {when(window['start'], doc['timezone']) or _t(window)}."
    lines = [first, _typical(doc, load)]
    if load["key"] == "iops":
        lines += [line for line in (_requests(figures), *_database_means(doc)) if line]
    return lines


DB_SAID = (
    ("phys_read_req_s", "physical reads", "/s"),
    ("single_block_read_s", "single-block", "/s"),
    ("phys_write_req_s", "physical writes", "/s"),
    ("log_write_req_s", "log writes", "/s"),
    ("commits_s", "commits", "/s"),
    ("single_block_read_ms", "single-block read wait", ""),
    ("log_write_ms", "log write wait", ""),
)


def _database_means(doc: dict[str, Any]) -> list[str]:
    """Beside the storage's peak: each database's own I/O, as means over the data."""
    lines = []
    for entity, entry in ((doc.get("database") or {}).get("entities") or {}).items():
        summary = entry["summary"]
        bits = [
            f"{label} {show(summary[key]['mean'], '' if per else None)}{per}"
            for key, label, per in DB_SAID
            if key in summary
        ]
        if bits:
            lines.append(f"Database {entity} (means): {', '.join(bits)}.")
    return lines


def _t(window: dict[str, Any]) -> str:
    return f"t = {window['start_t']:g}{NBSP}s"


def _typical(doc: dict[str, Any], load: dict[str, Any]) -> str:
    span, peaks = doc["span"], doc["peaks"]
    unit = "IOPS" if load["key"] == "iops" else load["label"]
    mean = peaks["mean"]
    line = f"Typical: {show(mean, unit)} mean over {_duration(span['seconds'])}"
    count = span["intervals"]
    line += f" ({count:,} interval{'s' if count != 1 else ''} of {span['interval_s']:g}{NBSP}s)"
    line += f"; 95 % of intervals at or below {show(peaks['p95_interval'], unit)}"
    hour = peaks.get("p95_hour") or {}
    if load["key"] in hour:
        line += (
            f"; the 95th-percentile hour {show(hour[load['key']], unit)} (of {hour['of_hours']})"
        )
    return line + "."


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f}{NBSP}days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f}{NBSP}h"
    if seconds >= 120:
        return f"{seconds / 60:.1f}{NBSP}min"
    return f"{seconds:.1f}{NBSP}s"


def _requests(figures: dict[str, Any]) -> str:
    """Sizes, sequential share and requests in flight in the peak, where traced."""
    bits = []
    for side in ("read", "write"):
        sizes = figures.get(f"{side}_sizes")
        if sizes:
            top = max(sizes["buckets"], key=lambda b: b["requests"])
            bits.append(f"{show(top['pct'])} of {side}s {top['label'].replace(' ', NBSP)}")
    if "seq_pct" in figures:
        bits.append(f"{show(figures['seq_pct'])} sequential")
    if "inflight_mean" in figures:
        bits.append(f"{show(figures['inflight_mean'], '')} requests in flight at issue (mean)")
    return f"Requests in the peak: {'; '.join(bits)}." if bits else ""


def recorded(doc: dict[str, Any]) -> str:
    """Where the figures come from: the bundle's kind, origin, devices, span and status."""
    kinds = {"run": "dbsim run", "live": "live capture"}
    kind = kinds.get(doc["origin"], f"capture imported from {doc['format']}")
    line = f"From: {kind} {doc['bundle']}, status {doc['status']}"
    devices = doc.get("devices") or {}
    if devices.get("counted"):
        line += f"; devices counted: {', '.join(devices['counted'])}"
        if devices.get("left_out"):
            line += f" (not counted: {', '.join(devices['left_out'])})"
    start = when(doc.get("start"), doc["timezone"])
    if start:
        line += f"; t = 0 at {start}"
    return line + "."
