"""AWR's wait-event histograms as the ``db`` source's ``le_<N>ms_pct`` columns.

AWR prints an event's waits as shares of its waits per time bucket, across several tables
whose buckets differ by release:

* 11.2 ``Wait Event Histogram``: ``<1ms <2ms … <32ms <=1s >1s``; ``Wait Event Histogram
  Detail (64 msec to 2 sec)``: ``<32ms <64ms <1/8s <1/4s <1/2s <1s <2s >=2s``;
* 12.2 and 19c ``Wait Event Histogram``: ``<8us … <512us >=512us``; ``(up to 32 ms)``:
  ``<512us <1ms … <32ms >=32ms``; ``(up to 2 sec)``: as 11.2's detail;
* the RAC report's ``Wait Event Histogram (Global)``: ``<1us … <512ms <1s >=1s``.

The text report cuts each heading to its column's five characters (12.2: ``<128u <256u <512u
>=512`` and ``<512 <1ms … <32ms >=32m``); :func:`completed_labels` gives them back their unit.

Oracle's units: ``s`` is 1024 ms (the reports say so), ``m`` 64 × 1024 ms; a bucket ``<N``
holds the waits shorter than N and at least as long as the previous bucket's bound; the
first column of a table holds every wait below its bound, the last every wait at or above
it (``<=1s`` is "truly <1024ms", ``>1s`` "truly >=1024ms"). So each table cuts [0, ∞) into
intervals, and a bucket the profile reads, (N/2, N] ms as ``le_<N>ms_pct`` and ≥ 1024 ms as
``gt_1024ms_pct``, is the sum of the intervals that tile it exactly; a bucket no set of
printed intervals tiles is left out, never guessed.

A table lists only the events with waits in its middle buckets (``Waits 1ms to 32ms``): an
event the report's main histogram lists but a detail table does not had no waits in that
table's middle buckets, which count as 0. An empty cell is 0 (``value of null is truly 0``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from fractions import Fraction

from sim.imports.awr_tables import Table, normal_title

#: The buckets written, in milliseconds: (low, high) and the column.
BOUNDS_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
INFINITY = Fraction(10**12)
TARGETS: tuple[tuple[Fraction, Fraction, str], ...] = (
    (Fraction(0), Fraction(1), "le_1ms_pct"),
    *(
        (Fraction(low), Fraction(high), f"le_{high}ms_pct")
        for low, high in itertools.pairwise(BOUNDS_MS)
    ),
    (Fraction(1024), INFINITY, "gt_1024ms_pct"),
)
_UNIT_MS = {"us": Fraction(1, 1000), "ms": Fraction(1), "s": Fraction(1024), "m": Fraction(65536)}
_LABEL = re.compile(r"^(?P<op><=|>=|<|>)(?P<num>\d+)(?:/(?P<den>\d+))?(?P<unit>us|ms|s|m)$")
_CUT = re.compile(r"^(?P<op><=|>=|<|>)(?P<num>\d+(?:/\d+)?)(?P<unit>us|ms|s|m|u)?$")
#: The unit below each, for a first heading printed without one (``<512`` before ``<1ms``).
_SMALLER = {"ms": "us", "s": "ms", "m": "s"}
#: The tables whose absence of an event means the event had no waits at all.
MAIN_TITLES = ("wait event histogram", "wait event histogram (global)")

Interval = tuple[Fraction, Fraction]


def label_bound(label: str) -> tuple[str, Fraction] | None:
    """``<1/8s`` -> ("<", 128 ms); ``>=2s`` -> (">", 2048 ms); None if not a bucket."""
    match = _LABEL.match("".join(label.split()))
    if match is None:
        return None
    value = Fraction(int(match["num"]), int(match["den"] or 1)) * _UNIT_MS[match["unit"]]
    return (">" if match["op"].startswith(">") else "<"), value


def completed_labels(header: list[str]) -> list[str]:
    """The headings with the units the text report's five-character columns cut off: ``u``
    is ``us``; a last heading ``>=N`` with the number of the bound before it takes that
    bound's unit (``<32ms >=32m`` is 32 ms, not minutes; ``<512u >=512``); a first heading
    without a unit takes the unit below the next heading's (``<512 <1ms``: µs). Whole
    headings (HTML, 11.2) come back as they are."""
    labels = ["".join(heading.split()) for heading in header]
    cut = [_CUT.match(label) for label in labels]
    units = [(m["unit"] if m["unit"] != "u" else "us") if m and m["unit"] else None for m in cut]
    for index, match in enumerate(cut):
        if match is None:
            continue
        before = next((i for i in range(index - 1, -1, -1) if cut[i] is not None), None)
        after = next((i for i in range(index + 1, len(cut)) if cut[i] is not None), None)
        if match["op"].startswith(">") and before is not None:
            if cut[before]["num"] == match["num"] and units[before]:  # type: ignore[index]
                units[index] = units[before]
        elif units[index] is None and before is None and after is not None:
            units[index] = _SMALLER.get(units[after] or "")
        if units[index] is not None:
            labels[index] = f"{match['op']}{match['num']}{units[index]}"
    return labels


def intervals(table: Table) -> list[tuple[int, Interval]] | None:
    """The table's bucket columns as (column, [low, high)) cutting [0, ∞), or None when the
    headings are not a histogram's (a section printed with no table has the next one's)."""
    columns: list[tuple[int, Interval]] = []
    low = Fraction(0)
    for index, heading in enumerate(completed_labels(table.header)):
        bound = label_bound(heading)
        if bound is None:
            continue
        op, value = bound
        if op == ">":
            columns.append((index, (value, INFINITY)))
            break
        if value <= low and columns:
            return None
        columns.append((index, (low, value)))
        low = value
    if len(columns) < 3 or columns[-1][1][1] != INFINITY:
        return None
    return columns


def _cell_share(text: str) -> float | None:
    if not text:
        return 0.0
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 100.0 else None


def known_shares(tables: Iterable[Table], event: str) -> tuple[dict[Interval, float], list[int]]:
    """Every interval some table gives for ``event`` (the middle ones of tables that leave it
    out as 0), and the lines of rows whose shares were not numbers (left out)."""
    known: dict[Interval, float] = {}
    bad: list[int] = []
    for table in _pages_joined(tables):
        columns = intervals(table)
        event_column = table.column("event")
        if columns is None or event_column is None:
            continue
        row = next(
            ((line, cells) for line, cells in table.rows if _name(cells, event_column) == event),
            None,
        )
        if row is None:
            for _, interval in columns[1:-1]:
                known.setdefault(interval, 0.0)
            continue
        line, cells = row
        shares = [_cell_share(cells[i]) if i < len(cells) else None for i, _ in columns]
        if any(share is None for share in shares):
            bad.append(line)
            continue
        for (_, interval), share in zip(columns, shares, strict=True):
            known.setdefault(interval, share or 0.0)
    return known, bad


def _pages_joined(tables: Iterable[Table]) -> list[Table]:
    """A table the text report continues on the next page (its title and headings printed
    again) as one table."""
    joined: dict[tuple[str, tuple[str, ...]], Table] = {}
    for table in tables:
        key = (normal_title(table.title), tuple(table.header))
        if key in joined:
            joined[key].rows.extend(table.rows)
        else:
            joined[key] = Table(table.title, table.header, list(table.rows), table.line)
    return list(joined.values())


def _name(cells: list[str], column: int) -> str:
    return " ".join(cells[column].split()) if column < len(cells) else ""


def _tile(known: dict[Interval, float], low: Fraction, high: Fraction) -> float | None:
    """The sum of known intervals that exactly tile [low, high), or None."""
    if low == high:
        return 0.0
    for (start, end), share in sorted(known.items(), key=lambda item: -item[0][1]):
        if start == low and end <= high:
            rest = _tile(known, end, high)
            if rest is not None:
                return share + rest
    return None


def event_histogram(tables: list[Table], event: str) -> tuple[dict[str, float], list[int]]:
    """``le_<N>ms_pct`` / ``gt_1024ms_pct`` for ``event`` (empty when the main histogram
    does not list it: no waits), and the lines of rows left out."""
    main = [t for t in tables if normal_title(t.title) in MAIN_TITLES and intervals(t)]
    listed = any(_name(cells, t.column("event") or 0) == event for t in main for _, cells in t.rows)
    if main and not listed:
        return {}, []
    known, bad = known_shares(tables, event)
    figures: dict[str, float] = {}
    for low, high, column in TARGETS:
        share = _tile(known, low, high)
        if share is None and high == INFINITY:
            share = _open_end(known, low)
        if share is not None:
            figures[column] = round(share, 4)
    return figures, bad


def _open_end(known: dict[Interval, float], low: Fraction) -> float | None:
    """[low, ∞) as a wider open bucket less the tiled part below ``low`` (``>=32ms`` less
    32 ms to 1 s), when a table gives one; a difference below -0.5 (more than rounding
    explains) gives nothing."""
    # The narrowest open bucket first: the fewest rounded shares subtracted.
    for (start, end), share in sorted(known.items(), key=lambda item: -item[0][0]):
        if end == INFINITY and start < low:
            below = _tile(known, start, low)
            if below is not None and share - below >= -0.5:
                return max(share - below, 0.0)
    return None
