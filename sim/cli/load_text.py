"""``dbsim load``'s report for people: a few lines instead of the JSON (``--json`` keeps it).

The report (sim.core.dataset.load_and_verify) differs by workload — tables for the SQL ones,
file trees for EDA — so the lines are built from its shape: each list of records is one line
per record (at most :data:`MAX_ITEMS`, then how many more), named by its first text field,
its other plain figures after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.core.cache import size_text

MAX_ITEMS = 4
#: Fields said elsewhere in the lines, or not worth a person's reading.
SKIPPED = frozenset({"lock", "built"})


def _figure(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def _plain(record: Mapping[str, Any], skip: str | None = None) -> str:
    return ", ".join(
        f"{key.replace('_', ' ')} {_figure(value)}"
        for key, value in record.items()
        if key != skip and key not in SKIPPED and isinstance(value, str | int | float)
    )


def _records(section: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in section.items():
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            continue
        for record in value[:MAX_ITEMS]:
            name_key = next((k for k, v in record.items() if isinstance(v, str)), None)
            name = str(record[name_key]) if name_key else key
            built = record.get("built")
            tail = "" if built is None else (" (built)" if built else " (already there)")
            lines.append(f"  {name}: {_plain(record, name_key)}{tail}")
        if len(value) > MAX_ITEMS:
            lines.append(f"  … and {len(value) - MAX_ITEMS:,} more {key}")
    return lines


def load_lines(report: Mapping[str, Any]) -> list[str]:
    """The load report in a few lines: what was built where, what was verified, the data
    against the caches."""
    load = report.get("load") or {}
    verify = report.get("verify") or {}
    target = report.get("target") or {}
    where = target.get("path") or target.get("host") or ""
    built = "built" if load.get("built") else "already there, nothing built"
    lines = [f"loaded on {target.get('kind', '?')} {where}".rstrip() + f": {built}"]
    top = _plain(load)
    if top:
        lines.append(f"  {top}")
    lines += _records(load)
    lines.append("verified:" + ("" if _records(verify) else " " + (_plain(verify) or "ok")))
    lines += _records(verify)
    cache = report.get("cache") or {}
    data = cache.get("data_bytes")
    if isinstance(data, int):
        hidden = cache.get("hidden_by_caches")
        said = (
            "the caches may hold it (the warning above says how to reach the storage)"
            if hidden
            else "at least 4 x the caches"
        )
        lines.append(f"data: {size_text(data)}, {said}")
    lines.append("(--json prints the whole report)")
    return lines
