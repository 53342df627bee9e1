"""``dbsim import ontap-qos``: the text ONTAP's CLI prints for ``qos statistics volume
characteristics show``, ``qos statistics volume latency show`` and their kin (``qos
statistics [volume|workload] performance show``, ``qos statistics performance show``), as
the ``ontap`` source (docs/capture.md, "ONTAP qos statistics").

The CLI prints no time. Each iteration (a table whose first row is ``-total-``) takes the
time of the ISO 8601 line written before it (``date -u +%Y-%m-%dT%H:%M:%SZ`` in the loop of
docs/capture.md); an iteration with no time line since the previous one is dropped. A file
with no time line at all needs ``--start`` and ``--interval``: iteration *i* (from 1) then
ends at start + *i* × interval. Its figures are ONTAP's own averages for that
iteration, written as printed, per row:

* the entity: ``workload:<Workload>`` or ``policy-group:<Policy Group>``, ``total`` for the
  ``-total-`` row (ONTAP's totals or averages across the workloads);
* ``total_iops`` (IOPS), ``total_bps`` (Throughput in bytes per second; ONTAP's CLI units
  are binary: KB = 1024 bytes), ``total_latency_us`` (Latency);
* ``request_size_bytes``, ``read_pct``, ``concurrency`` (characteristics);
* ``<component>_latency_us`` for the latency breakdown (``network``, ``cluster``, ``data``,
  ``disk``, ``qos_max``, ``qos_min``, ``nvram``, ``cloud``, ``flexcache``, ``sm_sync``,
  ``va``, ``avscan`` …, as the headings name them).

Layouts checked against public output: ``qos statistics performance show`` and ``qos
statistics workload performance show`` (NetApp's ONTAP documentation, tests/data/ontap-qos).
The ``characteristics`` and ``latency`` tables were written from the columns the ONTAP
command reference lists, not from a printed sample.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

from sim.errors import ConfigError
from sim.imports.source import ImportClock, Parsed, Row, SourceFile
from sim.imports.views import parse_time
from storage.collectors.ontap import SOURCE

_DASHES = re.compile(r"^ *-+( +-+)+ *$")
_TIME = re.compile(
    r"^\s*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}:?\d{2})?\s*$"
)
_VALUE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>[A-Za-z/%]*)$")
_BYTES = {"B": 1.0, "KB": 2.0**10, "MB": 2.0**20, "GB": 2.0**30, "TB": 2.0**40}
_MICROSECONDS = {"us": 1.0, "ms": 1e3, "s": 1e6}
#: Heading -> figure; headings not listed are latency components (``<name>_latency_us``).
FIGURES = {
    "iops": "total_iops",
    "throughput": "total_bps",
    "latency": "total_latency_us",
    "request size": "request_size_bytes",
    "read": "read_pct",
    "concurrency": "concurrency",
}
NAMES = {"workload": "workload", "policy group": "policy-group"}
#: ``dbsim import`` passes ``--start`` / ``--interval`` (a file without time lines needs them).
USES_CLOCK = True
TOTAL = "-total-"


@dataclass
class Iteration:
    time: datetime | None
    line: int
    rows: list[tuple[int, str, dict[str, float]]] = field(default_factory=list)


def value_of(heading: str, text: str) -> float | None:
    """A cell as its figure's unit: bytes/s, bytes, µs, percent or a plain number."""
    match = _VALUE.match(text.strip())
    if match is None:
        return None
    amount, unit = float(match["num"]), match["unit"]
    if heading == "throughput":
        factor = _BYTES.get(unit.removesuffix("/s"))
        return None if factor is None or not unit.endswith("/s") else amount * factor
    if heading == "request size":
        factor = _BYTES.get(unit)
        return None if factor is None else amount * factor
    if heading in ("iops", "concurrency"):
        return amount if unit == "" else None
    if heading == "read":
        return amount if unit == "%" else None
    scale = _MICROSECONDS.get(unit)  # every other column is a latency
    return None if scale is None else amount * scale


def figure_name(heading: str) -> str:
    return FIGURES.get(heading) or "_".join(heading.replace("-", " ").split()) + "_latency_us"


def _is_heading(line: str) -> bool:
    return line.lstrip().lower().startswith(tuple(NAMES))


def _headings(header: str, dashes: str) -> list[str]:
    """The column headings over the dashes' columns; when a heading straddles them (text
    indented with tabs) and there are as many words as columns, the words."""
    starts = [m.start() for m in re.finditer(r"-+", dashes)]
    ends = [*starts[1:], 10_000]
    spans = [" ".join(header[s:e].split()).lower() for s, e in zip(starts, ends, strict=True)]
    words = header.lower().split()
    if spans[0] not in NAMES and len(words) == len(spans):
        return words
    return spans


def _row(line: str, headings: list[str]) -> list[str] | None:
    """A row's cells: names and values never hold spaces, so whitespace splits them when
    the count is the headings'."""
    cells = line.split()
    return cells if len(cells) == len(headings) else None


def _table(source: SourceFile, index: int, time: datetime | None) -> tuple[Iteration, int]:
    """The table whose dashes are on ``index``: one iteration; returns where it ended."""
    lines = source.lines
    headings = _headings(lines[index - 1].expandtabs(), lines[index])
    kind = NAMES.get(headings[0])
    iteration = Iteration(time, index)
    at = index + 1
    while at < len(lines) and lines[at].strip() and not _TIME.match(lines[at]):
        cells = _row(lines[at], headings)
        if cells is None or kind is None:
            source.drop(
                at + 1, f"{len(lines[at].split())} cells where the headings have {len(headings)}"
            )
            at += 1
            continue
        name = cells[0]
        entity = "total" if name == TOTAL else f"{kind}:{name}"
        figures: dict[str, float] = {}
        for heading, cell in zip(headings[1:], cells[1:], strict=True):
            if heading == "id":
                continue
            value = value_of(heading, cell)
            if value is None:
                source.drop(at + 1, f"{heading}: {cell[:30]!r} is not a {heading} ONTAP prints")
                figures = {}
                break
            figures[figure_name(heading)] = value
        if figures:
            iteration.rows.append((at + 1, entity, figures))
        at += 1
    totals = sum(1 for _, entity, _ in iteration.rows if entity == "total")
    if totals > 1:  # several iterations under one heading: no time for each
        source.drop(index, f"{totals} iterations under one heading: each needs its own time line")
        iteration.rows = []
    return iteration, at


def iterations(source: SourceFile) -> list[Iteration]:
    """Every table in the file with the time line written before it (None: no time)."""
    found: list[Iteration] = []
    time: datetime | None = None
    lines = source.lines
    at = 0
    while at < len(lines):
        line = lines[at]
        if _TIME.match(line):
            time = parse_time(line)
        elif _DASHES.match(line) and at > 0 and _is_heading(lines[at - 1]):
            iteration, at = _table(source, at, time)
            found.append(iteration)
            time = None  # each iteration needs a time line of its own
            continue
        at += 1
    return found


def _clocked(found: list[Iteration], source: SourceFile, given: ImportClock) -> None:
    """Times for a file without time lines, from ``--start`` and ``--interval``."""
    if given.start is None or given.interval_s is None:
        raise source.refuse(
            found[0].line,
            "time",
            "no time line before any iteration: ONTAP prints none; write one before each "
            "(date -u +%Y-%m-%dT%H:%M:%SZ, docs/capture.md) or give --start and --interval",
        )
    for index, iteration in enumerate(found, start=1):
        iteration.time = given.start + timedelta(seconds=given.interval_s * index)


def parse_one(source: SourceFile, given: ImportClock) -> tuple[list[Row], list[datetime]]:
    found = iterations(source)
    if not found:
        raise source.refuse(0, "table", "no qos statistics table (headings over a dashes line)")
    if all(iteration.time is None for iteration in found):
        _clocked(found, source, given)
    elif given.start is not None or given.interval_s is not None:
        raise ConfigError(f"--start/--interval: {source.path} has time lines of its own")
    rows: list[Row] = []
    times: list[datetime] = []
    for iteration in found:
        if iteration.time is None:
            source.drop(iteration.line, "an iteration with no time line of its own before it")
            continue
        if times and iteration.time <= times[-1]:
            source.drop(
                iteration.line, f"time {iteration.time} is not after the previous iteration's"
            )
            continue
        times.append(iteration.time)
        rows.extend(
            (iteration.time, SOURCE, entity, figures) for _, entity, figures in iteration.rows
        )
    return rows, times


def parse(files: list[SourceFile], given: ImportClock | None = None) -> Parsed:
    given = given or ImportClock()
    rows: list[Row] = []
    times: list[datetime] = []
    for source in files:
        found, seen = parse_one(source, given)
        if not found:
            raise source.nothing_left("iterations")
        rows.extend(found)
        times.extend(seen)
    times.sort()
    spacing = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    interval = given.interval_s or (median(spacing) if spacing else None)
    means = [
        "ontap: qos statistics prints ONTAP's averages per iteration: no distribution, and "
        "bursts shorter than an iteration are invisible"
    ]
    return Parsed(rows, interval, means_only=means, started=given.start)
