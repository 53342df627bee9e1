"""``iostat -x -t`` text logs (sysstat) as the block collector's figures.

What a log looks like (sysstat 12; older versions differ in the device columns only)::

    Linux 5.15.0-91-generic (db01)  01/15/2024  _x86_64_  (8 CPU)      <- header: one run
                                                                          of iostat
    01/15/2024 10:00:00 AM                                              <- -t: a report
    avg-cpu:  %user   %nice %system %iowait  %steal   %idle
               1.00    0.00    0.50    0.10    0.00   98.40
    Device            r/s     rkB/s ... %util
    sda              0.50     10.00 ...  0.10

Each report gives one interval ending at its time. The first report after a header holds
averages since boot (unless iostat ran with ``-y``), not an interval: it is dropped, and its
time is when the capture started. Columns are read by name (:data:`COLUMNS`): the
``r/s w/s rkB/s … r_await w_await aqu-sz rareq-sz wareq-sz %util`` of sysstat 11.5+, the
``rrqm/s … avgrq-sz avgqu-sz await r_await w_await svctm`` of older ones, ``rsec/s`` and
``rMB/s`` scaled to kB/s (iostat's kB and MB are 1024 bytes and 1024 kB, a sector 512 bytes).
``avgrq-sz``/``areq-sz`` and ``await`` (reads and writes together) become ``areq_sz_kB`` and
``await_ms``, which the block collector does not have: listed under ``means_only``. ``iops``
is ``r/s + w/s + d/s`` when the file has no ``tps`` (the block collector's definition).
The avg-cpu line gives the host collector's ``cpu_*_pct`` figures.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from sim import registry
from sim.imports import clock
from sim.imports.source import Parsed, Row, SourceFile, Timeline, combine, number, source_of

#: iostat column -> (block figure, factor to the block collector's unit).
COLUMNS: dict[str, tuple[str, float]] = {
    "r/s": ("r_s", 1),
    "w/s": ("w_s", 1),
    "d/s": ("d_s", 1),
    "f/s": ("f_s", 1),
    "tps": ("iops", 1),
    "rkB/s": ("rkB_s", 1),
    "wkB/s": ("wkB_s", 1),
    "dkB/s": ("dkB_s", 1),
    "rMB/s": ("rkB_s", 1024),
    "wMB/s": ("wkB_s", 1024),
    "dMB/s": ("dkB_s", 1024),
    "rsec/s": ("rkB_s", 0.5),
    "wsec/s": ("wkB_s", 0.5),
    "kB_read/s": ("rkB_s", 1),
    "kB_wrtn/s": ("wkB_s", 1),
    "kB_dscd/s": ("dkB_s", 1),
    "MB_read/s": ("rkB_s", 1024),
    "MB_wrtn/s": ("wkB_s", 1024),
    "MB_dscd/s": ("dkB_s", 1024),
    "Blk_read/s": ("rkB_s", 0.5),
    "Blk_wrtn/s": ("wkB_s", 0.5),
    "rrqm/s": ("rrqm_s", 1),
    "wrqm/s": ("wrqm_s", 1),
    "drqm/s": ("drqm_s", 1),
    "%rrqm": ("rrqm_pct", 1),
    "%wrqm": ("wrqm_pct", 1),
    "%drqm": ("drqm_pct", 1),
    "r_await": ("r_await_ms", 1),
    "w_await": ("w_await_ms", 1),
    "d_await": ("d_await_ms", 1),
    "f_await": ("f_await_ms", 1),
    "rareq-sz": ("rareq_sz_kB", 1),
    "wareq-sz": ("wareq_sz_kB", 1),
    "dareq-sz": ("dareq_sz_kB", 1),
    "aqu-sz": ("aqu_sz", 1),
    "avgqu-sz": ("aqu_sz", 1),
    "%util": ("util_pct", 1),
    "avgrq-sz": ("areq_sz_kB", 0.5),
    "areq-sz": ("areq_sz_kB", 1),
    "await": ("await_ms", 1),
}
#: Figures that say what the collector says separately for reads and writes, together.
COMBINED = {"areq_sz_kB": "request size", "await_ms": "await"}
CPU_COLUMNS = {
    "%user": "cpu_user_pct",
    "%nice": "cpu_user_pct",  # the host collector counts nice as user, as mpstat's %usr+%nice
    "%system": "cpu_system_pct",
    "%iowait": "cpu_iowait_pct",
    "%steal": "cpu_steal_pct",
    "%idle": "cpu_idle_pct",
}
_HEADER = re.compile(r"(\S+)\s+(\S+)\s+\(([^)]*)\)\s+(.*?)(?:\((\d+) CPU\))?\s*$")
FIRST_REPORT = "first report of an iostat run: averages since boot, not an interval"


@dataclass
class Report:
    line: int
    stamp: clock.Stamp
    first: bool
    cpu: dict[str, float] | None = None
    devices: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    has_devices: bool = False


@dataclass
class _State:
    """Where the reader is in the file."""

    source: SourceFile
    reports: list[Report] = field(default_factory=list)
    columns: list[str] | None = None
    cpu_columns: list[str] | None = None
    decimal_comma: bool | None = None
    run_started: bool = True
    header_stamp: clock.Stamp | None = None
    header_broken: bool = False
    host: dict[str, object] = field(default_factory=dict)
    ignored: set[str] = field(default_factory=set)
    seen_columns: set[str] = field(default_factory=set)

    @property
    def report(self) -> Report | None:
        return self.reports[-1] if self.reports else None


def parse(files: list[SourceFile]) -> Parsed:
    return combine(files, parse_file)


def parse_file(source: SourceFile) -> Parsed:
    state = _State(source)
    lines = source.lines
    last_cut = bool(source.text) and not source.text.endswith("\n")
    for number_, line in enumerate(lines, start=1):
        if last_cut and number_ == len(lines):
            source.drop(
                number_,
                f"last line has no end of line (iostat ends every line): cut short? {line[:40]!r}",
            )
            break
        _read_line(state, number_, line)
    if not any(r.has_devices for r in state.reports):
        first = source.dropped.first_from(source.path)
        at = int(first["line"]) if first else 0
        why = f"; line {at}: {first['why']}" if first else ""
        raise source.refuse(at, "Device", f"no device report (iostat -x -t output){why}")
    return _parsed(state)


def _read_line(state: _State, line_no: int, line: str) -> None:
    text = line.strip()
    if not text:
        state.columns = state.cpu_columns = None
        return
    if text.startswith("Linux ") and "(" in text:
        _header(state, line_no, text)
        return
    stamp = clock.parse_stamp(text)
    if stamp is not None:
        state.reports.append(Report(line_no, stamp, state.run_started))
        state.run_started = False
        state.columns = state.cpu_columns = None
        return
    if text.startswith("avg-cpu:"):
        state.cpu_columns = text.split()[1:]
        state.columns = None
        return
    if text.split()[0] in ("Device", "Device:"):
        _device_header(state, line_no, text)
        return
    if state.cpu_columns is not None:
        _cpu_row(state, line_no, text)
    elif state.columns is not None:
        _device_row(state, line_no, text)
    else:
        state.source.drop(line_no, f"not a line of an iostat report: {text[:60]!r}")
        if not state.reports and not state.host:
            state.header_broken = True  # the header naming the host may be this line


def _header(state: _State, line_no: int, text: str) -> None:
    match = _HEADER.match(text)
    state.run_started = True
    if not match:
        state.header_broken = True
        state.source.drop(line_no, "header not read as iostat writes it: avg-cpu not imported")
        return
    state.host = {"hostname": match.group(3), "kernel": match.group(2)}
    if match.group(5):
        state.host["cpus"] = int(match.group(5))
    found = clock.header_date(match.group(4))
    if found is not None:
        state.header_stamp = found


def _device_header(state: _State, line_no: int, text: str) -> None:
    columns = text.split()[1:]
    known = [c for c in columns if c in COLUMNS]
    if not known:
        raise state.source.refuse(line_no, "Device", f"no iostat column known here: {columns}")
    report = state.report
    if report is None:
        raise state.source.refuse(
            line_no, "time", "a device report before any time line (run iostat with -t)"
        )
    if report.has_devices:  # a second device block: its time line is missing or garbled
        state.columns = []
        state.source.drop(line_no, "device report without its own time line")
        return
    report.has_devices = True
    state.columns = columns
    state.ignored.update(c for c in columns if c not in COLUMNS)
    state.seen_columns.update(known)


def _values(state: _State, fields: list[str]) -> list[float] | None:
    if state.decimal_comma is None:
        state.decimal_comma = any("," in f and "." not in f for f in fields)
    mark = "," if state.decimal_comma else "."
    out: list[float] = []
    for text in fields:
        if ("." if state.decimal_comma else ",") in text:
            return None
        value = number(text.replace(mark, ".") if mark == "," else text)
        if value is None or value < 0:  # iostat prints no negative figure
            return None
        out.append(value)
    return out


def _device_row(state: _State, line_no: int, text: str) -> None:
    report, columns = state.report, state.columns
    if not columns or report is None:
        state.source.drop(line_no, "device line of a report that was dropped")
        return
    fields = text.split()
    if len(fields) != len(columns) + 1:
        state.source.drop(line_no, f"{len(fields)} fields, the header has {len(columns) + 1}")
        return
    values = _values(state, fields[1:])
    if values is None:
        state.source.drop(line_no, f"a field of {fields[0]} is not a number")
        return
    figures: dict[str, float] = {}
    for column, value in zip(columns, values, strict=True):
        if column in COLUMNS:
            key, factor = COLUMNS[column]
            figures[key] = value * factor
    if "iops" not in figures and "r_s" in figures and "w_s" in figures:
        figures["iops"] = figures["r_s"] + figures["w_s"] + figures.get("d_s", 0.0)
    if any(name == fields[0] for name, _ in report.devices):
        state.source.drop(line_no, f"{fields[0]} listed twice in one report")
        return
    report.devices.append((fields[0], figures))


def _cpu_row(state: _State, line_no: int, text: str) -> None:
    columns, report = state.cpu_columns or [], state.report
    state.cpu_columns = None
    fields = text.split()
    values = _values(state, fields) if len(fields) == len(columns) else None
    if report is None or values is None or report.cpu is not None:
        state.source.drop(line_no, "avg-cpu line not read (fields missing, not numbers or twice)")
        return
    cpu: dict[str, float] = {}
    for column, value in zip(columns, values, strict=True):
        key = CPU_COLUMNS.get(column)
        if key:
            cpu[key] = cpu.get(key, 0.0) + value
    if "cpu_idle_pct" in cpu and "cpu_iowait_pct" in cpu:
        cpu["cpu_busy_pct"] = 100.0 - cpu["cpu_idle_pct"] - cpu["cpu_iowait_pct"]
    report.cpu = cpu


def _times(state: _State) -> list[datetime | None]:
    """Each report's moment; a clock alone moves a day on when it goes back past midnight."""
    stamps = [r.stamp for r in state.reports]
    dayfirst = clock.day_first([*stamps, *filter(None, [state.header_stamp])])
    if dayfirst is None:
        raise state.source.refuse(0, "time", "dates both day-first and month-first")
    out: list[datetime | None] = []
    base: date | None = None
    if state.header_stamp is not None:
        header = clock.resolve(state.header_stamp, dayfirst=dayfirst, base=None)
        base = header.date() if header else None
    previous: datetime | None = None
    for report in state.reports:
        moment = clock.resolve(report.stamp, dayfirst=dayfirst, base=base)
        clock_only = report.stamp.moment is None and report.stamp.day is None
        if (
            clock_only
            and report.stamp.slashed is None
            and moment
            and previous
            and moment < previous
        ):
            moment += timedelta(days=1)
            base = moment.date()
        out.append(moment)
        previous = moment or previous
    return out


def _parsed(state: _State) -> Parsed:
    source = state.source
    timeline = Timeline(source)
    rows = timeline.rows
    started: datetime | None = None
    device_role = source_of(registry.ROLE_DEVICE)
    cpu_role = source_of(registry.ROLE_HOST_CPU)
    hostname = str(state.host.get("hostname") or "host")
    for report, moment in zip(state.reports, _times(state), strict=True):
        if moment is None:
            source.drop(report.line, "a time with no date (no header date before it)")
            continue
        if not timeline.accept(moment, report.line):
            continue
        if report.first:
            started = started or moment
            if report.has_devices or report.cpu:
                source.drop(report.line, FIRST_REPORT)
            continue
        rows.extend((moment, device_role, name, figures) for name, figures in report.devices)
        if report.cpu and not state.header_broken:
            rows.append((moment, cpu_role, hostname, report.cpu))
    rows = timeline.rows
    return Parsed(
        rows=rows,
        interval_s=_interval(rows),
        started=started,
        means_only=_means_only(state, device_role),
        host=state.host,
        notes=_notes(state),
    )


def _interval(rows: list[Row]) -> float | None:
    times = sorted({row[0] for row in rows})
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return round(statistics.median(gaps), 3) if gaps else None


def _means_only(state: _State, source: str) -> list[str]:
    out = [f"{source}: no request-size distribution (iostat gives means only)"]
    keys = {COLUMNS[c][0] for c in state.seen_columns}
    for key, what in COMBINED.items():
        if key in keys:
            out.append(f"{source}: {what} of reads and writes together ({key}), not apart")
    if "r_s" not in keys:
        out.append(f"{source}: reads and writes not counted apart (iops only)")
    return out


def _notes(state: _State) -> list[str]:
    notes = []
    if state.header_broken:
        notes.append("avg-cpu not imported: the header naming the host was not read")
    if state.ignored:
        notes.append(f"iostat columns not imported: {', '.join(sorted(state.ignored))}")
    if any(r.stamp.slashed for r in state.reports):
        order = "day first" if clock.day_first([r.stamp for r in state.reports]) else "month first"
        notes.append(f"dates read {order} (nn/nn/yy; a day above 12 decides, else month first)")
    return notes
