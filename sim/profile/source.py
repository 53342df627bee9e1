"""What the profile reads of a bundle: its summary (kind, origin, clock) and, per source found
by its role, the measured rows of its time series lined up by interval.

Everything is read through :mod:`sim.bundle.reader`; the time series from whole lines only,
so a capture that is still being written is read up to its last whole interval.

An interval's row at time ``t`` covers ``(t - length, t]``. Its length is the time since the
source's previous interval (any phase, any entity), at most the capture's interval
(``summary.capture.interval_s``, or the interval it coarsened to): a longer step is a gap
between two files or two sittings, not an interval, as the importers' writer counts it. The
first interval's length is the capture's interval when it states one, else its ``t`` (a run's
clock starts at zero with the sessions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sim.bundle import reader
from sim.errors import ConfigError
from sim.profile.figures import IMPORTED, MEASURED

MEASURE = "measure"
TIMESERIES = "timeseries"
ZONE_UNKNOWN = "as written in the file (zone unknown)"


@dataclass(frozen=True)
class BundleInfo:
    """The bundle as a whole: what kind of record it is and when it starts."""

    path: Path
    summary: dict[str, Any]
    kind: str  # "capture" or "run"
    origin: str  # "live", "import" or "run"
    format: str
    #: What a figure copied from one column is: measured (live, run) or imported.
    column_kind: str
    start: datetime | None
    zone: str
    status: str
    capture: dict[str, Any]

    @property
    def running(self) -> bool:
        return self.status == "running"

    def wall(self, t: float) -> datetime | None:
        """The wall-clock time of ``t`` seconds on the bundle's clock."""
        return None if self.start is None else self.start + timedelta(seconds=t)


@dataclass
class Table:
    """One source's measured rows: ``values[entity][column]`` lined up with ``times``."""

    source: str
    name: str  # "timeseries/<source>.csv", as the document cites it
    times: list[float]
    lengths: list[float]
    values: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def column(self, entity: str, name: str) -> list[float | None]:
        return self.values.get(entity, {}).get(name) or [None] * len(self.times)

    def has(self, name: str, entities: list[str] | None = None) -> bool:
        """Whether any of ``entities`` (all: None) has a value of ``name`` in any interval."""
        chosen = self.values if entities is None else {e: self.values.get(e, {}) for e in entities}
        return any(v is not None for cols in chosen.values() for v in cols.get(name, ()))


def open_bundle(path: Path) -> BundleInfo:
    """The bundle's summary, checked (exit 2 with one line when it is not a bundle)."""
    summary = reader.read_summary(path, label="profile: ")
    kind = summary.get("kind") or "run"
    if kind not in ("capture", "run"):
        where = f"profile: {path / reader.SUMMARY_NAME}: kind"
        raise ConfigError(f"{where}: {kind!r} is neither capture nor run")
    capture = summary.get("capture") or {}
    if not isinstance(capture, dict):
        raise ConfigError(f"profile: {path / reader.SUMMARY_NAME}: capture: not an object")
    origin = str(capture.get("origin") or "live") if kind == "capture" else "run"
    start, zone = _clock(summary, capture, path)
    return BundleInfo(
        path=path,
        summary=summary,
        kind=kind,
        origin=origin,
        format=str(capture.get("format") or ("live" if origin == "live" else origin)),
        column_kind=IMPORTED if origin == "import" else MEASURED,
        start=start,
        zone=zone,
        status=str(summary.get("status") or "unknown"),
        capture=capture,
    )


def _clock(
    summary: dict[str, Any], capture: dict[str, Any], path: Path
) -> tuple[datetime | None, str]:
    """When ``t = 0`` is on the wall clock, and how its zone is known."""
    stamp = (summary.get("timing") or {}).get("sessions_started_at")
    if not stamp:
        return None, "no start time in summary.json"
    try:
        start = datetime.fromisoformat(stamp)
    except ValueError:
        where = f"profile: {path / reader.SUMMARY_NAME}: timing.sessions_started_at"
        raise ConfigError(f"{where}: {stamp!r} is not an ISO 8601 time") from None
    said = capture.get("timezone")
    if isinstance(said, str) and said:
        return start, said
    offset = start.utcoffset()
    if offset is None:
        return start, ZONE_UNKNOWN
    if not offset:
        return start, "UTC"
    return start, start.isoformat()[-6:]


def _positive(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def stated_interval(info: BundleInfo) -> float | None:
    """The capture's interval: ``summary.capture.interval_s``, or the longer one it
    coarsened to when it reached its size limit (``capture.limits.coarsened_to_s``)."""
    stated = _positive(info.capture.get("interval_s"))
    limits = info.capture.get("limits")
    coarsened = _positive(limits.get("coarsened_to_s")) if isinstance(limits, dict) else None
    found = [v for v in (stated, coarsened) if v is not None]
    return max(found) if found else None


def _number(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


#: A row's time (seconds on the bundle's clock) beyond a century either way is damage, not a
#: capture: read as no time (the row is skipped, as one whose time is not a number), since no
#: clock holds it (a time of 1e308 s overflowed the wall-clock arithmetic).
MAX_TIME_S = 100 * 365.25 * 86400


def _time(text: str | None) -> float | None:
    t = _number(text)
    return t if t is not None and abs(t) <= MAX_TIME_S else None


def read_table(info: BundleInfo, source: str, keep: Callable[[str], bool]) -> Table | None:
    """The measured rows of ``source``'s time series, only the columns ``keep`` accepts;
    None when the bundle has no such file or not one measured row in it. Streamed into one
    list per entity and column (a week of one-second rows is millions of cells)."""
    name = f"{TIMESERIES}/{source}.csv"
    path = info.path / TIMESERIES / f"{source}.csv"
    if not path.exists() and not path.is_symlink():
        return None
    every_t: set[float] = set()
    times: list[float] = []
    position: dict[float, int] = {}
    values: dict[str, dict[str, list[float | None]]] = {}
    kept: list[str] | None = None
    for row in reader.iter_whole_rows(path):
        t = _time(row.get("t"))
        entity = row.get("entity") or ""
        if t is None or not entity:
            continue
        every_t.add(t)
        if row.get("phase") != MEASURE:
            continue
        if kept is None:  # every row has the header's columns
            kept = [c for c in row if keep(c)]
        i = position.setdefault(t, len(times))
        if i == len(times):
            times.append(t)
        _put(values.setdefault(entity, {}), kept, row, i)
    if not times:
        return None
    return _ordered(source, name, times, every_t, values, stated_interval(info))


def _put(
    columns: dict[str, list[float | None]], kept: list[str], row: dict[str, str], i: int
) -> None:
    """One row's kept figures at interval ``i`` of its entity's columns."""
    for column in kept:
        value = _number(row.get(column))
        if value is None:
            continue
        series = columns.get(column)
        if series is None:
            series = columns[column] = []
        if len(series) <= i:
            series.extend([None] * (i + 1 - len(series)))
        series[i] = value


def _ordered(
    source: str,
    name: str,
    times: list[float],
    every_t: set[float],
    values: dict[str, dict[str, list[float | None]]],
    stated: float | None,
) -> Table:
    """The table in time order (rows are appended in order; a file edited out of order is
    sorted), every column as long as the times."""
    order = sorted(range(len(times)), key=times.__getitem__)
    in_order = order == list(range(len(times)))
    for columns in values.values():
        for column, series in columns.items():
            series.extend([None] * (len(times) - len(series)))
            if not in_order:
                columns[column] = [series[k] for k in order]
    times = [times[k] for k in order]
    table = Table(source, name, times, _lengths(times, every_t, stated))
    table.values = values
    return table


def _lengths(times: list[float], every_t: set[float], stated: float | None) -> list[float]:
    """Each measured interval's length: the time since the previous interval of any phase."""
    ordered = sorted(every_t)
    position = {t: i for i, t in enumerate(ordered)}
    lengths = []
    for t in times:
        i = position[t]
        if i > 0:
            step = t - ordered[i - 1]
            lengths.append(min(step, stated) if stated is not None else step)
        elif stated is not None:
            lengths.append(stated)
        elif t > 0:
            lengths.append(t)
        else:  # t = 0 and nothing said: as long as the next one
            lengths.append(ordered[1] - t if len(ordered) > 1 else 1.0)
    return lengths
