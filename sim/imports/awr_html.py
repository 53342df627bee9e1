"""The HTML AWR report (``awrrpt.sql`` / ``awrgrpt.sql`` with ``html``) as an
:class:`~sim.imports.awr_tables.AwrDocument`.

Every ``<table>`` is kept under the heading printed before it (``<h3>Wait Event Histogram
(up to 32 ms)</h3>``) and under its ``summary`` attribute (``This table displays load
profile``): the summary names the tables a heading groups (Report Summary holds Load
Profile, the top events …). A row of ``<th>`` cells is the headings (the last such row: the
RAC report puts group headings above the column headings); rows of ``<td>`` cells are the
data, each with the line of the file its ``<tr>`` is on. Text before ``<html`` (SQL*Plus's
prompts when a report was spooled) is ignored.
"""

from __future__ import annotations

from html.parser import HTMLParser

from sim.imports.awr_tables import AwrDocument, Table, normal_title, snap_time
from sim.imports.source import SourceFile, number

#: Times in the RAC report's instance table have no seconds (``11-Oct-18 20:03``).
RAC_TIME_FORMAT = "%d-%b-%y %H:%M"


class _Tables(HTMLParser):
    """Collects the tables, each with its heading and summary, and the headings' text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str, Table]] = []
        self.heading = ""
        self._heading_text: list[str] | None = None
        self._table: Table | None = None
        self._summary = ""
        self._row: list[str] | None = None
        self._row_line = 0
        self._row_has_th = self._row_has_data = self._cell_is_th = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3", "h4"):
            self._heading_text = []
        elif tag == "table" and self._table is None:
            self._summary = dict(attrs).get("summary") or ""
            self._table = Table(self.heading, [], line=self.getpos()[0])
        elif tag == "tr" and self._table is not None:
            self._row, self._row_line = [], self.getpos()[0]
            self._row_has_th = self._row_has_data = False
        elif tag in ("td", "th") and self._row is not None:
            self._cell, self._cell_is_th = [], tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2", "h3", "h4") and self._heading_text is not None:
            self.heading = " ".join("".join(self._heading_text).split())
            self._heading_text = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            self._row.append(text)
            self._row_has_th = self._row_has_th or self._cell_is_th
            self._row_has_data = self._row_has_data or (bool(text) and not self._cell_is_th)
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            # Headings: <th> cells, maybe beside empty <td> corners (``% of Waits`` above).
            if self._row_has_th and not self._row_has_data and not self._table.rows:
                self._table.header = self._row
            elif self._row:
                self._table.rows.append((self._row_line, self._row))
            self._row = None
        elif tag == "table" and self._table is not None:
            self.tables.append((self._summary, self._table))
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        elif self._heading_text is not None:
            self._heading_text.append(data)


def read_html(source: SourceFile, kind: str) -> AwrDocument:
    """The HTML report in ``source``; header fields the report lacks stay empty."""
    parser = _Tables()
    start = source.text.lower().find("<html")
    prefix_lines = source.text.count("\n", 0, start) if start > 0 else 0
    parser.feed(source.text[max(start, 0) :])
    parser.close()
    document = AwrDocument(source, kind)
    for summary, table in parser.tables:
        table.line += prefix_lines
        table.rows = [(line + prefix_lines, cells) for line, cells in table.rows]
        document.add(table)
        if summary:
            document.tables.setdefault(normal_title(summary), []).append(table)
    if kind == "rac":
        _rac_header(document)
    else:
        _instance_header(document)
    return document


def _first_cell(document: AwrDocument, summary: str, *words: str) -> str:
    for table in document.find(summary):
        column = table.column(*words)
        if column is not None and table.rows and column < len(table.rows[0][1]):
            return table.rows[0][1][column]
    return ""


def _instance_header(document: AwrDocument) -> None:
    info = "this table displays database instance information"
    document.db_name = _first_cell(document, info, "db name")
    document.instance = _first_cell(document, info, "instance")
    document.release = _first_cell(document, info, "release")
    for table in document.find("this table displays snapshot information"):
        for line, cells in table.rows:
            label = cells[0] if cells else ""
            if label == "Begin Snap:" and len(cells) > 2:
                document.begin, document.header_line = snap_time(cells[2]), line
            elif label == "End Snap:" and len(cells) > 2:
                document.end = snap_time(cells[2])
            elif label == "Elapsed:":
                document.elapsed_s = _minutes(" ".join(cells[1:]))


def _minutes(text: str) -> float | None:
    words = text.replace("(mins)", "").split()
    value = number(words[0].replace(",", "")) if words else None
    return None if value is None else value * 60.0


def _rac_header(document: AwrDocument) -> None:
    """The RAC report: the database from ``Database Summary``, each instance's snapshots
    from ``Database Instances Included In Report``; begin is the earliest, end the latest."""
    from datetime import datetime

    document.db_name = _first_cell(document, "database summary", "name")
    elapsed = _first_cell(document, "database summary", "elapsed")
    document.elapsed_s = _minutes(elapsed)
    for table in document.find("database instances included in report"):
        begin, end = table.column("begin snap"), table.column("end snap")
        names, release = table.column("instance"), table.column("release")
        if None in (begin, end, names):
            continue
        for line, cells in table.rows:
            try:
                first = datetime.strptime(cells[begin or 0], RAC_TIME_FORMAT)
                last = datetime.strptime(cells[end or 0], RAC_TIME_FORMAT)
            except (ValueError, IndexError):
                continue
            if document.begin is None or first < document.begin:
                document.begin, document.header_line = first, line
            if document.end is None or last > document.end:
                document.end = last
            document.instance = ",".join(filter(None, [document.instance, cells[names or 0]]))
            if release is not None and not document.release:
                document.release = cells[release]
