"""The Storage table: collector samples as rows, the way the web UI's Storage tab shows them.

Pure functions of the samples and the collectors' declarations (``Display.ui`` in
:mod:`sim.registry`), so they are tested in the test process: they live outside
:mod:`sim.locust`, whose import monkey-patches the process's sockets with gevent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim import registry
from sim.protocols import Sample
from sim.registry import UiFigure

#: The columns that say which row it is, not a figure.
IDENTITY = frozenset({"state", "age_s", "source", "entity"})


def _num(value: Any, digits: int = 2) -> Any:
    return "" if value is None else round(float(value), digits)


def storage_columns() -> list[tuple[str, str]]:
    """The Storage table's columns: source and entity, then every column a registered
    collector fills, in registry order (a column two sources fill appears once)."""
    columns = {"state": "State", "age_s": "Age s", "source": "Source", "entity": "Entity"}
    for entry in registry.collectors().values():
        for figure in entry.display.ui if entry.display else ():
            columns.setdefault(figure.column, figure.title)
    return list(columns.items())


def _ui_value(figure: UiFigure, values: Mapping[str, float]) -> float | None:
    if figure.key in values:
        return values[figure.key] * figure.scale
    if figure.or_sum:
        return sum(values.get(key) or 0 for key in figure.or_sum) * figure.scale
    return None


def storage_row(sample: Sample, columns: list[tuple[str, str]]) -> dict[str, Any]:
    """One sample as a Storage-tab row: the figures its collector declares; blank elsewhere."""
    entry = registry.collector(sample.source)
    shown = entry.display if entry is not None else None
    row: dict[str, Any] = {"source": (shown and shown.ui_source) or sample.source}
    row["entity"] = sample.entity
    for figure in shown.ui if shown else ():
        row[figure.column] = _ui_value(figure, sample.values)
    return {
        key: row.get(key) if key in ("source", "entity") else _num(row.get(key))
        for key, _ in columns
        if key not in ("state", "age_s")
    }


def storage_rows(
    samples: list[Sample], *, live: bool = True, age_s: float | None = None
) -> list[dict[str, Any]]:
    """The Storage tab: one row per sample, each saying ``live`` while the run goes or
    ``stopped (last sample)`` after it, and the sample's age in seconds."""
    columns = storage_columns()
    state = "live" if live else "stopped (last sample)"
    rows = [
        {"state": state, "age_s": _num(age_s, 1), **storage_row(s, columns)}
        for s in sorted(samples, key=lambda s: (s.source, s.entity))
    ]
    # A sample none of whose figures has a column here (a database's counters, shown on the
    # live page's charts) would be a row of blanks: left out.
    return [r for r in rows if any(v != "" for k, v in r.items() if k not in IDENTITY)]
