"""An Oracle AWR report's "SQL ordered by Executions" as statements (text or HTML report,
read with :mod:`sim.imports`' AWR tables; a plain file, as the import reads it).

Figures, per SQL Id of that section: ``Executions`` calls; mean time = ``Elapsed Time (s)``
/ executions in ms; reads = ``Physical Reads`` of "SQL ordered by Reads" when the statement
is listed there too (blocks; none otherwise). The window is the report's ``Elapsed``.

The statement's text: the HTML report's "Complete List of SQL Text" (whole). The text report
has no such list: its text is the lines printed under the figures (a line of exactly 80
characters was wrapped and is joined without a space), read on across a page break; a text
printed on :data:`CUT_LINES` lines or more may have been cut by the report, and is marked
cut (``...``), so the skeleton leaves it out and says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from sim.errors import ConfigError
from sim.imports.awr_html import read_html
from sim.imports.awr_tables import AwrDocument, Table, read_text
from sim.imports.source import Dropped, number, read_source
from sim.sqlstats.captured import Captured, CapturedStatement

#: The mark that ends a text table (a long dashes line indented under the last columns).
_END = re.compile(r"^ {10,}-{20,} *$")
SQL_ID = re.compile(r"^[0-9a-z]{13}$")
EXECUTIONS = "SQL ordered by Executions"
READS = "SQL ordered by Reads"
FULL_TEXT = "Complete List of SQL Text"
#: The text report prints a statement's first lines only; this many may mean it was cut.
CUT_LINES = 4
WRAP = 80
READS_WHAT = "physical reads, blocks (AWR SQL ordered by Reads)"


def read_report(path: Path) -> Captured:
    """The statements of the report at ``path``, most executed first."""
    source = read_source(path, Dropped())
    html = "<html" in source.text[:20000].lower()
    document = (read_html if html else read_text)(source, "awr")
    tables = document.find(EXECUTIONS)
    if not tables:
        raise ConfigError(f"--awr {path}: no '{EXECUTIONS}' section: not an AWR report?")
    if not document.elapsed_s:
        raise ConfigError(f"--awr {path}: the report's Elapsed time is not found")
    texts = _full_texts(document)
    reads = _reads(document)
    rows = _html_rows(tables, path) if html else _text_rows(source.lines, tables, path)
    statements: dict[str, CapturedStatement] = {}
    for sql_id, calls, elapsed_s, text in rows:
        if sql_id in statements or calls <= 0:
            continue
        statements[sql_id] = CapturedStatement(
            key=sql_id,
            text=texts.get(sql_id, text),
            calls=int(calls),
            mean_ms=elapsed_s * 1000 / calls if elapsed_s is not None else None,
            reads=reads.get(sql_id),
        )
    ranked = sorted(statements.values(), key=lambda s: (-s.calls, s.key))
    return Captured(
        source=f"the AWR report {path} ({_scope(document)}), {EXECUTIONS}",
        statements=ranked,
        style="colon",
        reads_what=READS_WHAT,
        window_s=document.elapsed_s,
        window_what="the report's Elapsed",
        ranked_by="executions",
        notes=[]
        if html
        else [
            "a text report prints only each statement's first lines: compare them with "
            "the HTML report's Complete List of SQL Text"
        ],
    )


def _scope(document: AwrDocument) -> str:
    return (
        f"database {document.db_name or '?'}, instance {document.instance or '?'}, "
        f"{document.begin or '?'} to {document.end or '?'}"
    )


def _columns(table: Table, path: Path) -> tuple[int, int | None, int]:
    calls_at = table.column("executions")
    id_at = table.column("sql id")
    if calls_at is None or id_at is None:
        raise ConfigError(
            f"--awr {path}: line {table.line}: '{EXECUTIONS}' has no Executions or SQL Id column"
        )
    return calls_at, table.column("elapsed"), id_at


Row = tuple[str, float, float | None, str]


def _html_rows(tables: list[Table], path: Path) -> list[Row]:
    """(SQL Id, executions, elapsed s, the row's own text) of the HTML tables."""
    found: list[Row] = []
    for table in tables:
        calls_at, elapsed_at, id_at = _columns(table, path)
        for _, cells in table.rows:
            if len(cells) <= max(calls_at, id_at):
                continue
            calls, sql_id = number(cells[calls_at]), cells[id_at].strip()
            if calls is None or not SQL_ID.match(sql_id):
                continue
            elapsed = number(cells[elapsed_at]) if elapsed_at is not None else None
            found.append((sql_id, calls, elapsed, cells[-1]))
    return found


def _text_rows(lines: list[str], tables: list[Table], path: Path) -> list[Row]:
    """The text report's figure lines (every heading's cell filled: a number first, the SQL
    Id last) under each of the section's titles, and the text printed under each."""
    found: list[Row] = []
    for table in tables:
        calls_at, elapsed_at, id_at = _columns(table, path)
        for index in range(table.line, len(lines)):
            text = lines[index]
            if _END.match(text) or (index > table.line and text.startswith("\f")):
                break
            words = text.split()
            if len(words) != len(table.header) or not SQL_ID.match(words[id_at]):
                continue
            calls = number(words[calls_at])
            if calls is None:
                continue
            elapsed = number(words[elapsed_at]) if elapsed_at is not None else None
            found.append((words[id_at], calls, elapsed, _text_below(lines, index + 1)))
    return found


def _full_texts(document: AwrDocument) -> dict[str, str]:
    texts: dict[str, str] = {}
    for table in document.find(FULL_TEXT):
        for _, cells in table.rows:
            if len(cells) >= 2 and SQL_ID.match(cells[0].strip()):
                texts.setdefault(cells[0].strip(), cells[1])
    return texts


def _reads(document: AwrDocument) -> dict[str, float]:
    found: dict[str, float] = {}
    for table in document.find(READS):
        reads_at, id_at = table.column("physical", "reads"), table.column("sql id")
        if reads_at is None or id_at is None:
            continue
        for _, cells in table.rows:
            value = number(cells[reads_at]) if reads_at < len(cells) else None
            if id_at < len(cells) and value is not None:
                found.setdefault(cells[id_at].strip(), value)
    return found


def _text_below(lines: list[str], line: int) -> str:
    """The statement text printed under the figures on 1-based ``line``: up to a blank line
    or the table's end mark, read on past a page break (the title and headings printed
    again, down to their dashes)."""
    parts: list[str] = []
    i = line  # lines[line] is the line after the figures' line
    while i < len(lines):
        text = lines[i]
        if not text.strip() or text.strip().startswith("-----"):
            break
        if text.startswith("\f") or EXECUTIONS in text:
            while i < len(lines) and not lines[i].lstrip().startswith("---"):
                i += 1
            i += 1
            continue
        parts.append(text)
        i += 1
    joined = ""
    for part in parts:
        joined += part if len(part) >= WRAP else f"{part}\n"  # a full line was wrapped
    text = joined.strip()
    return f"{text} ..." if len(parts) >= CUT_LINES else text
