"""An AWR report as tables, whichever way it was printed: the text report's fixed-width
columns (``awrrpt.sql`` with ``text``) read here, the HTML report's ``<table>`` s in
:mod:`sim.imports.awr_html`. Both give an :class:`AwrDocument`: the report's header (database,
instance, release, the two snapshots and the Elapsed time) and its tables by title, every
row with the line of the file it is on, so a figure can be traced back and a refusal can
name its line.

Layouts read (the public samples in tests/data/awr, see its README): the instance report of
11.2.0.4 (text and HTML), 12.2 and 19c (HTML), and the RAC report of 12.2 (``awrgrpt.sql``,
HTML). The text report's tables are found by their title line (``Foreground Wait Events
DB/Inst: ORCL/orcl1 Snaps: 2-3``), their columns by the dashes under the headings: a cell
is the text from its dashes to the next column's; headings over several lines are joined.
A table the report continues on a new page (the title printed again) is read on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from sim.imports.source import SourceFile, number

#: How AWR prints a snapshot's time (``10-Jul-14 04:00:45``).
SNAP_TIME_FORMAT = "%d-%b-%y %H:%M:%S"
#: A line of dashes under a text table's headings: groups of dashes, single spaces between.
_DASHES = re.compile(r"^ *-+( +-+)* *$")
#: The mark that ends a text table (a long dashes line indented under the last columns).
_TABLE_END = re.compile(r"^ {10,}-{20,} *$")
_KEY_VALUE = re.compile(r"^\s*(?P<label>[^:]{1,60}?):\s*(?P<values>.*)$")
_SNAP = re.compile(
    r"^\s*(?P<which>Begin|End) Snap:\s+(?P<id>\d+)\s+(?P<time>\d{1,2}-[A-Za-z]{3}-\d{2} "
    r"\d{2}:\d{2}:\d{2})"
)
_ELAPSED = re.compile(r"^\s*Elapsed:\s+(?P<mins>[\d,.]+) \(mins\)")
#: A heading line of text tables that carries the report's scope after the title.
_SCOPE = "DB/Inst:"


@dataclass
class Table:
    """One table: its title, its column headings and its rows (cells as printed, with the
    1-based line of the file each row is on)."""

    title: str
    header: list[str]
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    line: int = 0

    def column(self, *words: str) -> int | None:
        """The first column whose heading holds every word (case and spacing ignored)."""
        for index, heading in enumerate(self.header):
            text = " ".join(heading.lower().split())
            if all(word.lower() in text for word in words):
                return index
        return None


@dataclass
class AwrDocument:
    """What one report holds. ``kind``: ``instance`` (``awrrpt``) or ``rac`` (``awrgrpt``)."""

    source: SourceFile
    kind: str
    db_name: str = ""
    instance: str = ""
    release: str = ""
    begin: datetime | None = None
    end: datetime | None = None
    elapsed_s: float | None = None
    header_line: int = 0
    tables: dict[str, list[Table]] = field(default_factory=dict)

    def add(self, table: Table) -> None:
        self.tables.setdefault(normal_title(table.title), []).append(table)

    def find(self, *titles: str) -> list[Table]:
        """The tables whose title (or HTML summary) starts with any of ``titles``, compared
        case and spacing blind, in the order the report prints them, each once."""
        wanted = [normal_title(title) for title in titles]
        found: list[Table] = []
        for key, tables in self.tables.items():
            if any(key.startswith(prefix) for prefix in wanted):
                found.extend(t for t in tables if all(t is not seen for seen in found))
        return sorted(found, key=lambda table: table.line)


def normal_title(title: str) -> str:
    return " ".join(title.lower().split())


def snap_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(" ".join(text.split()), SNAP_TIME_FORMAT)
    except ValueError:
        return None


# --------------------------------------------------------------------------- text report


def read_text(source: SourceFile, kind: str) -> AwrDocument:
    """The text report in ``source`` as an :class:`AwrDocument` (header fields left empty
    when the report lacks them; the caller refuses what it needs and is missing)."""
    # A page break is a form feed before the page's first line: not part of its text.
    lines = [line.lstrip("\f") for line in source.lines]
    document = AwrDocument(source, kind)
    _text_header(document, lines)
    for title_index, title in _titles(lines):
        table = _text_table(lines, title_index, title)
        if table is not None:
            document.add(table)
    for title in ("Load Profile", "IO Profile"):
        table = _key_values(lines, title)
        if table is not None:
            document.add(table)
    return document


def _text_header(document: AwrDocument, lines: list[str]) -> None:
    for index, line in enumerate(lines[:400]):
        if (snap := _SNAP.match(line)) is not None:
            moment = snap_time(snap["time"])
            if snap["which"] == "Begin":
                document.begin, document.header_line = moment, index + 1
            else:
                document.end = moment
        elif (elapsed := _ELAPSED.match(line)) is not None:
            document.elapsed_s = _minutes(elapsed["mins"])
        elif _DASHES.match(line) and index > 0:
            table = _table_below(lines, index, "header")
            for name, words in (("db_name", ("db name",)), ("instance", ("instance",))):
                column = table.column(*words)
                if column is not None and table.rows and not getattr(document, name):
                    setattr(document, name, table.rows[0][1][column])
            column = table.column("release")
            if column is not None and table.rows and not document.release:
                document.release = table.rows[0][1][column]


def _minutes(text: str) -> float | None:
    value = number(text.replace(",", ""))
    return None if value is None else value * 60.0


def _titles(lines: list[str]) -> Iterator[tuple[int, str]]:
    """Each section title line (``<title>  DB/Inst: <db>/<inst>  Snaps: <b>-<e>``)."""
    for index, line in enumerate(lines):
        if _SCOPE in line and not line.startswith(" "):
            yield index, line.split(_SCOPE, 1)[0].strip()


def _text_table(lines: list[str], title_index: int, title: str) -> Table | None:
    """The table under a title line: the first dashes line within the next 25 lines (notes
    starting ``->`` come first), the headings above it and the rows below it."""
    for index in range(title_index + 1, min(title_index + 26, len(lines))):
        line = lines[index]
        if _SCOPE in line and not line.startswith(" "):
            return None
        if _DASHES.match(line) and not _TABLE_END.match(line):
            table = _table_below(lines, index, title)
            table.line = title_index + 1
            return table
    return None


def _spans(dashes: str) -> list[tuple[int, int]]:
    starts = [m.start() for m in re.finditer(r"-+", dashes)]
    ends = [*starts[1:], 10_000]
    return list(zip(starts, ends, strict=True))


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    # A cell runs from its dashes to the next column's: right-aligned numbers end inside it.
    cells = [line[start:end].strip() for start, end in spans]
    first = spans[0][0]
    if first > 0 and line[:first].strip():  # a name printed left of its dashes
        cells[0] = (line[:first] + line[first : spans[0][1]]).strip()
    return cells


def _table_below(lines: list[str], dash_index: int, title: str) -> Table:
    spans = _spans(lines[dash_index])
    heading_lines: list[str] = []
    for index in range(dash_index - 1, max(dash_index - 5, -1), -1):
        text = lines[index]
        if not text.strip() or text.lstrip().startswith("->") or _SCOPE in text:
            break
        if _DASHES.match(text):  # the rule over grouped headings (``% of Waits``)
            break
        heading_lines.insert(0, text)
    header = [
        " ".join(" ".join(part for part in (h[s:e].strip() for h in heading_lines) if part).split())
        for s, e in spans
    ]
    table = Table(title, header, line=dash_index)
    for index in range(dash_index + 1, len(lines)):
        line = lines[index]
        if not line.strip() or _TABLE_END.match(line) or _DASHES.match(line):
            break
        if _SCOPE in line or line.lstrip().startswith("->"):  # the next page's title
            break
        table.rows.append((index + 1, _cells(line, spans)))
    return table


def _key_values(lines: list[str], title: str) -> Table | None:
    """``Load Profile`` / ``IO Profile``: ``label:  value  value …`` lines up to a blank
    line, under a title line and a ``~~~`` line."""
    for index, line in enumerate(lines):
        if line.startswith(title) and index + 1 < len(lines) and lines[index + 1].startswith("~"):
            table = Table(title, ["", *lines[index].split()[len(title.split()) :]], line=index + 1)
            for at in range(index + 2, len(lines)):
                text = lines[at]
                if not text.strip():
                    break
                match = _KEY_VALUE.match(text)
                if match is not None:
                    label = match["label"].strip() + ":"
                    table.rows.append((at + 1, [label, *match["values"].split()]))
            return table
    return None
