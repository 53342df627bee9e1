"""Tables that fit the terminal: folded into parts, never a truncated figure.

Rich shrinks a table that is wider than the console by cutting cells (``10,354…``) and
headings (``%ut…``). :func:`folded` instead measures every column at its full width (a
heading may wrap at its spaces, a cell never does) and, when the whole table does not fit,
splits the columns into as many tables as needed, each repeating the key columns (the
operation, the device, the run) so every part reads on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box as boxes
from rich.table import Table


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "right"
    #: Free text (an error's example): wraps at spaces instead of making the table wider.
    wraps: bool = False


def _width(column: Column, cells: Sequence[str]) -> int:
    words = max((len(word) for word in column.header.split()), default=0)
    if column.wraps:
        return max(words, 20)
    return max([words, *(len(cell) for cell in cells)])


def _table_width(widths: Sequence[int], boxed: bool) -> int:
    # Each column: its cells plus one space of padding either side; a box adds a rule
    # between columns and one at each edge; without one the outer padding is dropped.
    return sum(w + 2 for w in widths) + (len(widths) + 1 if boxed else -2)


def folded(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    title: str = "",
    keys: int = 1,
    boxed: bool = True,
) -> list[Table]:
    """``rows`` under ``columns`` as one table, or as several when wider than ``width``
    (None: no limit); the first ``keys`` columns are in every part."""
    widths = [_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    groups: list[list[int]] = [[]]
    key_width = list(widths[:keys])
    for index in range(keys, len(columns)):
        trial = [*key_width, *(widths[i] for i in groups[-1]), widths[index]]
        if groups[-1] and width is not None and _table_width(trial, boxed) > width:
            groups.append([])
        groups[-1].append(index)
    tables = []
    for part, group in enumerate(groups):
        shown = [*range(keys), *group]
        # A continuation names its table by the title's first words: "block devices (continued)",
        # "slob on sqlite (continued)" (a title's ": …" is said once, over the first part:
        # repeated over a narrow part it wrapped into four lines).
        short = title.split(" (")[0].split(": ")[0]
        heading = title if part == 0 else (f"{short} (continued)" if title else "")
        table = Table(title=heading or None, box=boxes.HEAVY_HEAD if boxed else None)
        if not boxed:
            table.pad_edge = False
        for i in shown:
            column = columns[i]
            table.add_column(
                column.header,
                justify=column.justify,
                # Cells never wrap: min_width holds the longest; a heading wraps at its spaces.
                no_wrap=False,
                min_width=None if column.wraps else widths[i],
                overflow="fold",
            )
        for row in rows:
            table.add_row(*(row[i] for i in shown))
        tables.append(table)
    return tables
