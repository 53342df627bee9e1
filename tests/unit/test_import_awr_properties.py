"""Hypothesis mutates the public AWR reports (lines deleted, replaced by garbage, cells
blanked, the file cut short, tags dropped): the importer either refuses the file with its
one-line error naming the file and a line, or imports figures that are all finite, rates
not negative and histogram shares within 0..100 — never another exception."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.imports import awr
from sim.imports.source import Dropped, ImportFileError, SourceFile

DATA = Path(__file__).resolve().parents[1] / "data" / "awr"
TEXT = gzip.decompress((DATA / "awr_11204_1.txt.gz").read_bytes()).decode().split("\n")
HTML = gzip.decompress((DATA / "awr_11204_1.html.gz").read_bytes()).decode().split("\n")
GARBAGE = st.sampled_from(
    ["", "x", "-" * 40, "Elapsed:  nan (mins)", "1,2,3", "<tr><td>", "</table>", "\f", "9" * 120]
)


def check(lines: list[str]) -> None:
    text = "\n".join(lines)
    source = SourceFile("mutated", text, "0" * 64, Dropped())
    try:
        parsed = awr.parse([source])
    except ImportFileError as refused:
        message = str(refused)
        assert message.startswith("mutated") and "\n" not in message
        assert refused.line >= 0
        return
    assert parsed.rows
    for _, _, entity, figures in parsed.rows:
        for name, value in figures.items():
            assert math.isfinite(value), (entity, name, value)
            if name.endswith("_pct"):
                assert 0.0 <= value <= 100.0, (entity, name, value)
            elif name.endswith(("_s", "_ms")):
                assert value >= 0.0, (entity, name, value)


MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["delete", "replace", "blank_cell"]), st.integers(0, 10**6), GARBAGE),
    min_size=1,
    max_size=12,
)


def mutate(lines: list[str], edits: list[tuple[str, int, str]], cut: int | None) -> list[str]:
    out = list(lines)
    for kind, where, garbage in edits:
        index = where % len(out)
        if kind == "delete":
            del out[index]
        elif kind == "replace":
            out[index] = garbage
        else:  # a number blanked or replaced where one is expected
            out[index] = out[index].replace("0", garbage[:3], 1)
    return out[: cut % len(out)] if cut is not None else out


@pytest.mark.parametrize("lines", [TEXT, HTML], ids=["text", "html"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=MUTATIONS, cut=st.one_of(st.none(), st.integers(0, 10**6)))
def test_mutated_reports_are_refused_or_imported_sanely(
    lines: list[str], edits: list[tuple[str, int, str]], cut: int | None
) -> None:
    check(mutate(lines, edits, cut))


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 10**6), length=st.integers(1, 400))
def test_a_block_of_the_report_removed(start: int, length: int) -> None:
    at = start % len(TEXT)
    check(TEXT[:at] + TEXT[at + length :])
