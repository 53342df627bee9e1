"""Mutated import samples: a clean refusal naming FILE:LINE, or a partial import that says
what it dropped, never a traceback and never a wrong figure.

Each case takes one sample of tests/data (public ones where there are; see the READMEs),
imports it as it is, then mutates it one of four ways and imports it again:

* truncate: the file ends at any byte;
* drop a column: one whitespace-separated word (or, in JSON, one ``"key": value``) removed
  from one line;
* garble a number: a digit of a number on one line replaced by a letter or a comma, or a
  minus sign put before it;
* reorder: two neighbouring lines swapped.

Shown: the only exception is :class:`ConfigError` (exit 2) and its line names the file and a
line (``FILE:N: field: …``); otherwise every row imported is one of the unmutated file's
rows, time, entity and figures alike (a mutation may cost rows, never change one); and when
rows were lost to anything but a cut at the end of a line (a file that simply ends earlier),
the dropped list holds something the unmutated import's did not.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.errors import ConfigError
from sim.imports.run import importer
from sim.imports.source import Dropped, ImportClock, read_source

DATA = Path(__file__).resolve().parents[1] / "data"
CLOCK = ImportClock(datetime(2024, 1, 15, 10, 0, 0), 10.0)
CASES = [
    ("iostat", "iostat/iostatplot_object1_indented.out"),
    ("iostat", "iostat/postgres_long_commit.log"),
    ("iostat", "iostat/made_here_sysstat12.log"),
    ("sadf", "sadf/sysstat_data-11.6.5.sadf-j.json"),
    ("sadf", "sadf/made_here.sadf-j.json"),
    ("mountstats", "mountstats_series/nfsv3_statvers10.series"),
    ("mountstats", "mountstats_series/mixed_mounts.series"),
    ("nfsiostat", "nfsiostat/made_here_nfsv41_errors_attr.out"),
    ("nfsiostat", "nfsiostat/made_here_mixed_mounts_dir.out"),
]
Key = tuple[datetime, str, str]


def parse(fmt: str, path: Path) -> tuple[dict[Key, dict[str, float]], list[dict[str, Any]]]:
    module = importer(fmt)
    dropped = Dropped()
    source = read_source(path, dropped)
    parsed = (
        module.parse([source], CLOCK)
        if getattr(module, "USES_CLOCK", False)
        else module.parse([source])
    )
    # Times as their wall clock: a zone the file no longer states is said in the summary
    # (capture.timezone), it is not a figure.
    rows = {
        (moment.replace(tzinfo=None), src, entity): dict(figures)
        for moment, src, entity, figures in parsed.rows
    }
    assert len(rows) == len(parsed.rows), "two rows for one time and entity"
    return rows, dropped.entries


def mutate(text: str, kind: str, data: st.DataObject) -> tuple[str, bool]:
    """The mutated text, and whether it is the file simply ending at a line's end."""
    lines = text.split("\n")
    if kind == "truncate":
        at = data.draw(st.integers(0, max(len(text) - 1, 0)), label="cut at")
        return text[:at], at == 0 or text[at - 1] == "\n"
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    line = lines[index]
    if kind == "drop a column":
        words = list(re.finditer(r'"[^"]+":\s*[^,}\]]+,?\s*|\S+', line))
        if not words:
            return text, False
        word = data.draw(st.sampled_from(words), label="word")
        lines[index] = line[: word.start()] + line[word.end() :]
    elif kind == "garble a number":
        # A digit of a number (a word that is one), not of a name such as ``loop5``.
        digits = [
            m.start() + i
            for m in re.finditer(r"(?<![\w.:/-])-?\d+(?:\.\d+)?(?![\w.:/-])", line)
            for i, c in enumerate(m.group(0))
            if c.isdigit()
        ]
        if not digits:
            return text, False
        at = data.draw(st.sampled_from(digits), label="digit")
        bad = data.draw(st.sampled_from(["x", "-", "O", "l", ","]), label="with")
        lines[index] = line[:at] + (bad + line[at] if bad == "-" else bad) + line[at + 1 :]
    else:  # reorder
        if index + 1 >= len(lines):
            return text, False
        lines[index], lines[index + 1] = lines[index + 1], lines[index]
    return "\n".join(lines), False


@pytest.mark.parametrize(("fmt", "sample"), CASES, ids=[c[1] for c in CASES])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["truncate", "drop a column", "garble a number", "reorder"]),
    data=st.data(),
)
def test_a_mutated_sample_is_refused_or_imported_partly_and_said(
    tmp_path: Path, fmt: str, sample: str, kind: str, data: st.DataObject
) -> None:
    original = DATA / sample
    as_is, want_dropped = parse(fmt, original)
    # Every row the text holds, its last line included where the file lacks the end of line
    # after it (the import drops that line: a cut it cannot tell from a whole one).
    whole = tmp_path / "whole" / original.name
    whole.parent.mkdir(exist_ok=True)
    whole.write_text(original.read_text(encoding="utf-8").rstrip("\n") + "\n", encoding="utf-8")
    want_rows, _ = parse(fmt, whole)
    text, clean_cut = mutate(original.read_text(encoding="utf-8"), kind, data)
    path = tmp_path / original.name
    path.write_text(text, encoding="utf-8")
    try:
        rows, dropped = parse(fmt, path)
    except ConfigError as exc:
        line = str(exc).splitlines()[0]
        assert len(str(exc).splitlines()) == 1, str(exc)
        assert line.startswith(f"{path}:") or line.startswith(f"{path}: "), line
        return
    for key, figures in rows.items():
        assert key in want_rows, f"a row the file does not have: {key}"
        assert figures == want_rows[key], f"{key}: {figures} != {want_rows[key]}"
    new = [d for d in dropped if {**d, "file": str(original)} not in want_dropped]
    lost = [key for key in as_is if key not in rows]
    if lost and not clean_cut:
        assert new, f"{kind}: {len(lost)} rows lost and nothing said, first {lost[0]}"
