"""``dbsim import awr``: Oracle AWR reports, text or HTML, one or a series, as the ``db``
source of a capture bundle (docs/capture.md, "Oracle AWR reports").

One report is one interval: the snapshot interval (``Elapsed``), ending at the end
snapshot's time, which AWR prints without a zone. Per instance (the entity is the instance
name; the RAC report's cluster-wide figures are ``<db>:cluster``) the database I/O
vocabulary, each a rate over Elapsed:

* ``phys_read_req_s``, ``phys_read_kB_s``, ``phys_write_req_s``, ``phys_write_kB_s``,
  ``log_write_kB_s``, ``commits_s``: Instance Activity Stats ``physical read IO requests``,
  ``physical read bytes`` / 1024, ``physical write IO requests``, ``physical write bytes`` /
  1024, ``redo size`` / 1024 and ``user commits``, their Total over Elapsed; without them
  the Load Profile's per-second column (``Read IO requests``, ``Read IO (MB)`` × 1024 …);
* ``single_block_read_s`` / ``_ms``, ``multi_block_read_s`` / ``_ms``, ``log_write_req_s``
  / ``log_write_ms``: ``db file sequential read``, ``db file scattered read`` and ``log file
  parallel write`` from the foreground and background wait events: their waits summed over
  Elapsed, their average waits weighted by waits;
* the three events' wait histograms as ``<instance>:wait:<event>`` (:mod:`awr_histogram`);
* IOStat by Function summary as ``<instance>:function:<function>``: ``read_req_s``,
  ``read_kB_s``, ``write_req_s``, ``write_kB_s``, ``waits_s``, ``wait_ms``.

Blocks are never counted as requests: the Load Profile's ``Physical read (blocks)`` and the
RAC report's per-instance ``Physical Reads/s`` count blocks (a direct read of 1 MB is 128 of
them); the RAC report's are written as ``phys_read_blocks_s`` / ``phys_write_blocks_s`` and
a note says which one the file gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sim.imports.awr_histogram import event_histogram
from sim.imports.awr_html import read_html
from sim.imports.awr_tables import AwrDocument, read_text
from sim.imports.source import Parsed, Row, SourceFile, number
from storage.collectors.database_figures import SOURCE as DB_SOURCE

#: Instance Activity Stats -> figure and the factor to its unit.
ACTIVITY = {
    "phys_read_req_s": ("physical read IO requests", 1.0),
    "phys_read_kB_s": ("physical read bytes", 1 / 1024),
    "phys_write_req_s": ("physical write IO requests", 1.0),
    "phys_write_kB_s": ("physical write bytes", 1 / 1024),
    "log_write_kB_s": ("redo size", 1 / 1024),
    "commits_s": ("user commits", 1.0),
}
#: Load Profile rows (per second) used when Instance Activity Stats lack the statistic.
LOAD_PROFILE = {
    "phys_read_req_s": ("Read IO requests:", 1.0),
    "phys_read_kB_s": ("Read IO (MB):", 1024.0),
    "phys_write_req_s": ("Write IO requests:", 1.0),
    "phys_write_kB_s": ("Write IO (MB):", 1024.0),
    "log_write_kB_s": ("Redo size (bytes):", 1 / 1024),
}
EVENTS = {
    "db file sequential read": ("single_block_read_s", "single_block_read_ms"),
    "db file scattered read": ("multi_block_read_s", "multi_block_read_ms"),
    "log file parallel write": ("log_write_req_s", "log_write_ms"),
}
ACTIVITY_TABLES = (
    "key instance activity stats",
    "other instance activity stats",
    "instance activity stats",
    "this table displays key instance activity",
    "this table displays instance activity",
    "this table displays non-key instance activity",
    "system statistics (global)",
)
WAIT_TABLES = (
    "foreground wait events",
    "background wait events",
    "this table displays foreground wait events",
    "this table displays background wait events",
)
HISTOGRAM_TABLES = ("wait event histogram",)
FUNCTION_TABLES = ("iostat by function summary", "this table displays the io statistics for")
#: A report's title, as the first lines (text) or the <h1> (HTML) print it.
TITLES = ("WORKLOAD REPOSITORY report for", "WORKLOAD REPOSITORY PDB report")
RAC_TITLE = "WORKLOAD REPOSITORY REPORT (RAC)"
#: How far into a file its title is looked for (SQL*Plus prompts may come first).
TITLE_LINES = 400
_SUFFIXES = "KMGT"
_TIME_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


@dataclass
class Report:
    """One file's figures: rows per entity, at the end snapshot's time."""

    source: SourceFile
    document: AwrDocument
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def awr_number(text: str, base: float = 1000.0) -> float | None:
    """``8,962`` / ``.9`` / ``10.2K`` as a number: a K, M, G or T suffix multiplies by
    ``base`` once, twice … (1000 for counts, 1024 for IOStat's Data columns)."""
    text = text.replace(",", "").strip()
    scale = 1.0
    if text and text[-1] in _SUFFIXES:
        scale = base ** (_SUFFIXES.index(text[-1]) + 1)
        text = text[:-1]
    value = number(text)
    return None if value is None else value * scale


def wait_ms(text: str, unit_ms: float | None) -> float | None:
    """An average wait: a plain number in ``unit_ms`` (``Avg wait (ms)``), or with its unit
    (``1.43ms``, ``316.77us``, ``52.86 s``)."""
    squeezed = "".join(text.split())
    if unit_ms is not None:
        value = awr_number(squeezed)
        return None if value is None else value * unit_ms
    for unit in ("us", "ms", "s"):
        if squeezed.endswith(unit):
            value = awr_number(squeezed[: -len(unit)])
            return None if value is None else value * _TIME_MS[unit]
    return None


# --------------------------------------------------------------------------- reading


def _layout(source: SourceFile) -> tuple[str, str]:
    """("text" | "html", "instance" | "rac"), or the refusal naming line 1."""
    head = source.lines[:TITLE_LINES]
    joined = "\n".join(head)
    html = "<html" in joined.lower()
    if RAC_TITLE in joined or "AWR RAC Report" in joined:
        if not html:
            raise source.refuse(1, "layout", "the text RAC report is not read; import its HTML")
        return "html", "rac"
    if any(title in joined for title in TITLES):
        return ("html" if html else "text"), "instance"
    if "STATSPACK report for" in joined or "STATSPACK Statistics Report" in joined:
        raise source.refuse(1, "layout", "a Statspack report: only AWR reports are read")
    raise source.refuse(
        1,
        "layout",
        f"not an AWR report: no 'WORKLOAD REPOSITORY' title in the first {TITLE_LINES} lines",
    )


def read_report(source: SourceFile) -> Report:
    printed, kind = _layout(source)
    document = (read_html if printed == "html" else read_text)(source, kind)
    line = document.header_line or 1
    if document.begin is None or document.end is None:
        raise source.refuse(line, "Begin Snap/End Snap", "the snapshot times are not found")
    if document.elapsed_s is None or document.elapsed_s <= 0:
        raise source.refuse(
            line, "Elapsed", "the report's Elapsed time is not found or not positive"
        )
    if document.end <= document.begin:
        raise source.refuse(line, "End Snap", "ends before it begins")
    if not (document.instance or document.db_name):
        raise source.refuse(line, "Instance", "the report names no instance or database")
    report = Report(source, document)
    if kind == "rac":
        _rac_figures(report)
    else:
        _instance_figures(report)
    if not report.rows:
        raise source.refuse(
            line,
            "tables",
            f"none of Load Profile, Instance Activity Stats or the wait events "
            f"found (release {document.release or 'unknown'}: this layout is not read)",
        )
    return report


# --------------------------------------------------------------------------- figures


def _activity(document: AwrDocument) -> dict[str, tuple[float, int]]:
    """Statistic -> (Total, line) from every Instance Activity Stats table."""
    totals: dict[str, tuple[float, int]] = {}
    for table in document.find(*ACTIVITY_TABLES):
        total = table.column("total")
        if total is None:
            continue
        for line, cells in table.rows:
            name = " ".join(cells[0].split()) if cells else ""
            value = awr_number(cells[total]) if total < len(cells) else None
            if name and name not in totals:
                if value is None:
                    document.source.drop(
                        line, f"{name}: Total {cells[total : total + 1]} is not a number"
                    )
                    continue
                totals[name] = (value, line)
    return totals


def _load_profile(document: AwrDocument) -> dict[str, tuple[float, int]]:
    found: dict[str, tuple[float, int]] = {}
    for table in document.find("load profile", "this table displays load profile"):
        for line, cells in table.rows:
            if len(cells) > 1 and (value := awr_number(cells[1])) is not None:
                found.setdefault(" ".join(cells[0].split()), (value, line))
    return found


def _waits(document: AwrDocument) -> dict[str, tuple[float, float | None]]:
    """Event -> (waits, mean wait in ms), foreground and background summed."""
    sums: dict[str, list[float]] = {}
    for table in document.find(*WAIT_TABLES, "foreground wait events (global)"):
        event, waits, avg = table.column("event"), table.column("waits"), table.column("avg")
        if event is None or waits is None:
            continue
        unit_ms = 1.0 if avg is not None and "(ms)" in table.header[avg] else None
        for line, cells in table.rows:
            name = " ".join(cells[event].split()) if event < len(cells) else ""
            if name not in EVENTS:
                continue
            count = awr_number(cells[waits]) if waits < len(cells) else None
            mean = wait_ms(cells[avg], unit_ms) if avg is not None and avg < len(cells) else None
            if count is None:
                document.source.drop(line, f"{name}: Waits is not a number")
                continue
            total = sums.setdefault(name, [0.0, 0.0, 0.0])
            total[0] += count
            if mean is not None:
                total[1] += count * mean
                total[2] += count
    return {name: (s[0], s[1] / s[2] if s[2] > 0 else None) for name, s in sums.items()}


def _vocabulary(document: AwrDocument, notes: list[str]) -> dict[str, float]:
    elapsed = document.elapsed_s or 1.0
    activity, profile = _activity(document), _load_profile(document)
    figures: dict[str, float] = {}
    used: list[str] = []
    for figure, (statistic, factor) in ACTIVITY.items():
        if statistic in activity:
            figures[figure] = activity[statistic][0] * factor / elapsed
            used.append(f"{figure} = '{statistic}' Total (line {activity[statistic][1]})")
        elif figure in LOAD_PROFILE and LOAD_PROFILE[figure][0] in profile:
            label, scale = LOAD_PROFILE[figure]
            figures[figure] = profile[label][0] * scale
            used.append(f"{figure} = Load Profile '{label}' per second (line {profile[label][1]})")
    for event, (waits, mean) in _waits(document).items():
        count_figure, ms_figure = EVENTS[event]
        figures[count_figure] = waits / elapsed
        if mean is not None:
            figures[ms_figure] = mean
    if used:
        notes.append(f"{document.source.path}: " + "; ".join(used) + f"; / Elapsed {elapsed:g} s")
    return figures


def _histograms(report: Report, entity: str) -> None:
    document = report.document
    tables = document.find(*HISTOGRAM_TABLES)
    for event in EVENTS:
        figures, bad = event_histogram(tables, event)
        for line in bad:
            document.source.drop(line, f"{event}: a histogram share is not a number in 0..100")
        if figures:
            report.rows.append(
                (document.end or datetime.min, DB_SOURCE, f"{entity}:wait:{event}", figures)
            )


def _functions(report: Report, entity: str) -> None:
    document, elapsed = report.document, report.document.elapsed_s or 1.0
    for table in document.find(*FUNCTION_TABLES):
        if len(table.header) < 9 or "reqs" not in table.header[2].lower():
            continue
        for line, cells in table.rows:
            name = cells[0].rstrip(":") if cells else ""
            if not name or name.upper() == "TOTAL" or len(cells) < 9:
                continue
            values = [awr_number(cells[i], 1024.0) for i in (2, 3, 5, 6)]
            values.append(awr_number(cells[7]))
            wait = (
                wait_ms(cells[8], 1.0 if "(ms)" in table.header[8] else None) if cells[8] else None
            )
            if any(value is None for value in values):
                document.source.drop(line, f"IOStat by Function {name}: a figure is not a number")
                continue
            read_req, read_data, write_req, write_data, count = (v or 0.0 for v in values)
            figures = {
                "read_req_s": read_req,
                "read_kB_s": read_data / 1024,
                "write_req_s": write_req,
                "write_kB_s": write_data / 1024,
                "waits_s": count / elapsed,
            }
            if wait is not None:
                figures["wait_ms"] = wait
            report.rows.append(
                (document.end or datetime.min, DB_SOURCE, f"{entity}:function:{name}", figures)
            )


def _instance_figures(report: Report) -> None:
    document = report.document
    entity = document.instance or document.db_name
    figures = _vocabulary(document, report.notes)
    if figures:
        report.rows.append((document.end or datetime.min, DB_SOURCE, entity, figures))
    _histograms(report, entity)
    _functions(report, entity)


def _rac_figures(report: Report) -> None:
    document = report.document
    cluster = f"{document.db_name or 'database'}:cluster"
    figures = _vocabulary(document, report.notes)
    if figures:
        report.rows.append((document.end or datetime.min, DB_SOURCE, cluster, figures))
    _histograms(report, cluster)
    names = _rac_instances(document)
    for table in document.find("system statistics - per second"):
        reads, writes = table.column("physical reads"), table.column("physical writes")
        number = table.column("i#")
        for line, cells in table.rows:
            values = [
                awr_number(cells[c]) if c is not None and c < len(cells) else None
                for c in (reads, writes)
            ]
            if number is None or None in values:
                document.source.drop(
                    line, "System Statistics - Per Second: a figure is not a number"
                )
                continue
            entity = names.get(cells[number], f"instance {cells[number]}")
            blocks = {
                "phys_read_blocks_s": values[0] or 0.0,
                "phys_write_blocks_s": values[1] or 0.0,
            }
            report.rows.append((document.end or datetime.min, DB_SOURCE, entity, blocks))
            report.notes.append(
                f"{document.source.path}:{line}: the RAC report's per-instance 'Physical Reads/s' "
                f"({values[0]:,.2f} for {entity}) counts blocks, not read requests: written as "
                "phys_read_blocks_s; read requests per second are given for the whole cluster "
                f"only ('physical read IO requests', entity {document.db_name}:cluster)"
            )


def _rac_instances(document: AwrDocument) -> dict[str, str]:
    names: dict[str, str] = {}
    for table in document.find("database instances included in report"):
        number, name = table.column("i#"), table.column("instance")
        if number is None or name is None:
            continue
        for _, cells in table.rows:
            if max(number, name) < len(cells):
                names[cells[number]] = cells[name]
    return names


# --------------------------------------------------------------------------- a series


def _check_overlaps(reports: list[Report]) -> None:
    """Two reports of one instance may not cover the same time (a RAC database's instances
    do, each its own entity)."""
    seen: dict[str, tuple[Report, datetime, datetime]] = {}
    for report in sorted(reports, key=lambda r: r.document.begin or datetime.min):
        document = report.document
        begin, end = document.begin or datetime.min, document.end or datetime.min
        key = document.instance or document.db_name
        if key in seen and begin < seen[key][2]:
            other = seen[key][0]
            raise report.source.refuse(
                document.header_line,
                "Begin Snap",
                f"{begin.isoformat(' ')} to {end.isoformat(' ')} overlaps {other.source.path} "
                f"({seen[key][1].isoformat(' ')} to {seen[key][2].isoformat(' ')}) for {key}",
            )
        seen[key] = (report, begin, end)


def _means_only(reports: list[Report]) -> list[str]:
    minutes = sorted({round((r.document.elapsed_s or 0) / 60, 2) for r in reports})
    text = ", ".join(f"{m:g}" for m in minutes)
    return [
        f"db: one value per {text}-min AWR snapshot interval: bursts shorter than the interval "
        "are invisible",
        "db: wait histograms are shares of a whole snapshot interval's waits, not per minute",
    ]


def parse(files: list[SourceFile]) -> Parsed:
    reports = [read_report(source) for source in files]
    _check_overlaps(reports)
    rows = [row for report in reports for row in report.rows]
    first = min(reports, key=lambda r: r.document.begin or datetime.min).document
    notes: list[str] = []
    for report in reports:
        d = report.document
        notes.append(
            f"{report.source.path}: AWR {d.kind} report, release {d.release or 'not printed'}, "
            f"{d.db_name}/{d.instance}, snapshots {d.begin} to {d.end} "
            f"(Elapsed {(d.elapsed_s or 0) / 60:g} min)"
        )
        notes.extend(n for n in report.notes if n not in notes)
    return Parsed(
        rows=rows,
        interval_s=first.elapsed_s,
        means_only=_means_only(reports),
        started=(first.begin or datetime.min),
        notes=notes,
    )
