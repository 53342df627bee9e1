"""The scenario skeleton ``dbsim sql-from-stats`` writes, as YAML text with comments.

Each kept statement (replayable: a SELECT, WITH, INSERT, UPDATE, DELETE, VALUES or TABLE,
whole, not on the server's own catalogues) becomes one entry of ``workload.parameters.
statements``, in the source's order, the top ``top`` of them: ``weight`` = its captured
calls (weights are relative, so the mix is the captured mix), ``read_only`` from its text,
``sql`` with ``:p1`` …, and per parameter either a proposed ``sample:`` of the column the
statement compares it with (``col = :p1``) or the placeholder ``{fill_in: …}``, which is no
generator: the scenario fails validation until every one is replaced. Strings are written
as JSON strings, which YAML reads as double-quoted scalars, so no statement text can break
the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.sqlstats.captured import Captured, CapturedStatement
from sim.sqlstats.normalize import Normalized, normalize

DEFAULT_TOP = 10
#: Values a proposed ``sample:`` reads once before the measured window.
SAMPLE_ROWS = 10000
FILL_IN = "uniform | gaussian | exponential | zipfian | sequence | list | file | sample"
MAX_NAME = 40
#: The sql workload's largest weight: calls beyond it are divided by a power of ten.
MAX_WEIGHT = 1e9


@dataclass(frozen=True)
class Entry:
    """One statement of the skeleton: its name, its capture and its normalized text."""

    name: str
    captured: CapturedStatement
    normalized: Normalized


@dataclass(frozen=True)
class Skeleton:
    """The skeleton's entries, what was left out, and its text."""

    entries: list[Entry]
    skipped: dict[str, int]
    text: str

    @property
    def placeholders(self) -> int:
        return sum(len(e.normalized.params) - len(e.normalized.compared) for e in self.entries)


def choose(captured: Captured, top: int) -> tuple[list[Entry], dict[str, int]]:
    """The first ``top`` replayable statements and the counts of those left out, by why."""
    entries: list[Entry] = []
    skipped: dict[str, int] = {}
    names: set[str] = set()
    for statement in captured.statements:
        normalized = normalize(statement.text, captured.style)
        why = _why_not(normalized, statement)
        if why is None and len(entries) >= top:
            why = f"below the top {top}"
        if why is not None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        entries.append(Entry(_name(normalized, names), statement, normalized))
    return entries, skipped


def _why_not(normalized: Normalized, statement: CapturedStatement) -> str | None:
    if statement.calls <= 0:
        return "never called"
    if normalized.kind not in ("select", "with", "insert", "update", "delete", "values", "table"):
        return "not a query or DML (transaction control, SET, DDL, utility)"
    if normalized.folded:
        return "text cut or folded by the source ('...')"
    if normalized.on_system_tables:
        return "on the server's own catalogues"
    return None


def _name(normalized: Normalized, taken: set[str]) -> str:
    table = normalized.tables[0].split(".")[-1] if normalized.tables else "statement"
    base = re.sub(r"[^a-z0-9_]+", "_", f"{normalized.kind}_{table}".lower()).strip("_")
    base = base[:MAX_NAME] or "statement"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def build(
    captured: Captured, target: Mapping[str, Any] | None, top: int = DEFAULT_TOP, *, name: str
) -> Skeleton:
    """The skeleton of ``captured``'s top ``top`` statements, with ``target`` (the scenario's
    target section, secrets by reference only) when the source was a server."""
    entries, skipped = choose(captured, top)
    most = max((e.captured.calls for e in entries), default=0)
    scale = 1
    while most / scale > MAX_WEIGHT:
        scale *= 10
    lines = _header(captured, entries, skipped, top, scale)
    lines.append(f"name: {json.dumps(name)}")
    if target:
        lines.append("target:")
        lines += [f"  {key}: {json.dumps(value)}" for key, value in target.items()]
    lines += ["workload:", "  name: sql", "  parameters:", "    commit: false", "    statements:"]
    for entry in entries:
        lines += _statement(captured, entry, scale)
    if not entries:
        lines[-1] = "    statements: []  # nothing replayable was captured"
    return Skeleton(entries, skipped, "\n".join(lines) + "\n")


def _header(
    captured: Captured, entries: list[Entry], skipped: dict[str, int], top: int, scale: int
) -> list[str]:
    total = len(captured.statements)
    lines = [
        "# A skeleton of the sql workload, written by dbsim sql-from-stats from",
        f"# {captured.source}.",
        f"# The top {len(entries)} replayable of the {total} statements read, by "
        f"{captured.ranked_by} (asked: top {top}).",
    ]
    lines += [f"# Left out: {count} {why}." for why, count in sorted(skipped.items())]
    if captured.window_s is not None:
        lines.append(f"# Counted over {captured.window_s:,.0f} s ({captured.window_what}).")
    else:
        lines.append(f"# The source does not say over how long ({captured.window_what}).")
    lines += [f"# Note: {note}" for note in captured.notes]
    lines += [
        "# weight = the calls the source counted: relative call frequencies, as captured"
        + (f" (divided by {scale:,}: the workload's weights stop at 1e9)." if scale > 1 else "."),
        f"# reads = {captured.reads_what}.",
        "# Every {fill_in: ...} parameter must become a generator before dbsim validate",
        "# accepts the file; a proposed sample: reads the compared column's own values.",
        "# Statements that write run in a transaction that is rolled back (commit: false).",
    ]
    return lines


def _figure(value: float | None, unit: str) -> str:
    return f"{unit} not counted" if value is None else f"{value:,.4g} {unit}"


def _statement(captured: Captured, entry: Entry, scale: int) -> list[str]:
    statement, normalized = entry.captured, entry.normalized
    rate = (
        _figure(statement.calls / captured.window_s, "calls/s")
        if captured.window_s
        else "calls/s unknown"
    )
    reads = _figure(statement.reads_per_call, "reads/call")
    lines = [
        f"      # {entry.name}: measured by the source (key {statement.key}):",
        f"      #   {statement.calls:,} calls, {rate}, mean {_figure(statement.mean_ms, 'ms')}, "
        f"{reads}",
        f"      - name: {entry.name}",
        f"        weight: {statement.calls if scale == 1 else statement.calls / scale}",
        f"        read_only: {'true' if normalized.read_only else 'false'}",
        f"        sql: {json.dumps(normalized.sql)}",
    ]
    if not normalized.params:
        return lines
    lines.append("        params:")
    for param in normalized.params:
        compared = normalized.compared.get(param)
        if compared is not None:
            table, column = compared
            sample = {"table": table, "column": column, "rows": SAMPLE_ROWS}
            lines.append(
                f"          {param}: {{sample: {json.dumps(sample)}}}  # proposed: "
                f"the statement says {column} = :{param}"
            )
        else:
            lines.append(f"          {param}: {{fill_in: {json.dumps(FILL_IN)}}}  # FILL IN")
    return lines
