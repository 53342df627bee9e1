"""The report's Hosts section: a run on several hosts, one row per worker host (issue #32).

Drawn from ``analysis.json``'s ``hosts`` (sim.analysis.hosts.hosts_section): each host's
operations as its own workers' engines counted them (the run's totals are their exact sum),
its busiest block device over the measured window (its own /proc/diskstats, per host in the
bundle), how the primary operation's latency followed that device's await, its CPU against
its ceiling (one core, or its cgroup's CPU quota) and its clock offset. Nothing for a run on
one host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.report.markup import DASH, Safe, num, para, section, table

HEADERS = (
    "host",
    "sessions",
    "operations",
    "device",
    "IOPS",
    "await ms",
    "%util",
    "latency r",
    "dbsim CPU",
    "host busy %",
    "clock offset s",
)


def _cpu(row: Mapping[str, Any]) -> str:
    """dbsim's CPU there: of one core, or of its cgroup's quota when lower and how often the
    quota throttled it."""
    process, limit = row.get("process_cpu_pct"), row.get("cpu_limit_cores")
    if not isinstance(process, (int, float)):
        return DASH
    if not (isinstance(limit, (int, float)) and limit < 1):
        return f"{process:.1f} % of one core"
    said = f"{num(row.get('cpu_of_ceiling_pct'), 0)} % of its {limit:.2f}-core quota"
    if isinstance(row.get("cpu_throttled_pct"), (int, float)):
        said += f", throttled {row['cpu_throttled_pct']:.0f} %"
    return said


def _row(row: Mapping[str, Any], limiting: str | None) -> list[object]:
    host = str(row.get("host") or DASH)
    status = str(row.get("status") or "")
    errors = int(row.get("errors") or 0)
    operations = f"{num(row.get('operations'), 0)} ({num(row.get('ops_s'))}/s)"
    offset = row.get("clock_offset_s")
    return [
        host
        + (f" ({status})" if status and status != "completed" else "")
        + (" ◀ limits" if host == limiting else ""),
        num(row.get("sessions"), 0),
        operations + (f", {errors:,} failed" if errors else ""),
        str(row.get("device") or DASH).removeprefix(f"{host}/"),
        num(row.get("device_iops")),
        num(row.get("await_ms"), 2),
        num(row.get("util_pct")),
        num(row.get("latency_r"), 2),
        _cpu(row),
        num(row.get("cpu_busy_pct"), 0),
        f"{offset:+.3f}" if isinstance(offset, (int, float)) else DASH,
    ]


def hosts(analysis: Mapping[str, Any] | None) -> Safe:
    """The section, or nothing for a run on one host (or without an analysis)."""
    data = (analysis or {}).get("hosts")
    if not isinstance(data, dict) or not data.get("rows"):
        return Safe("")
    limiting = data.get("limiting")
    rows = [_row(r, limiting) for r in data["rows"] if isinstance(r, dict)]
    caption = (
        "Per worker host, measured window: operations counted by its own workers, its "
        "busiest block device (its own iostat figures, named without the host), its CPU"
    )
    notes = para(
        "Operations are each host's workers' own counts (the run's totals are their exact "
        "sum), with their rate; IOPS and %util are means and await the median of the device's intervals; "
        "'latency r' is the best of Pearson and Spearman of the run's primary "
        "operation's p99 or p50 with that device's await or queue size; the CPU ceiling is "
        "one core (the interpreter lock) or the host's cgroup CPU quota when lower; the "
        "clock offset is the worker's as the master measured it (removed from its samples). "
        + (
            f"◀ marks {limiting}, the host closest to its CPU ceiling, whose figures are the "
            "verdict's client checks."
            if limiting
            else ""
        ),
        "note",
    )
    return section(
        "hosts",
        "Hosts (measured window)",
        table(HEADERS, rows, left=(0, 3, 8), caption=caption),
        notes,
    )
