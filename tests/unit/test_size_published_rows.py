"""Issue #30, part 2: a workload asked at a published row's own printed figures is that row —
published, FITS at 100 % with zero headroom, "at the published limit", exit 0 — for every
published cell; and the tolerance that decides "the same point" is the one docs/sizing.md
states (``storage.envelopes.model.same_point``)."""

from __future__ import annotations

import pytest

from sim.cli.size import exit_code, render
from storage.envelopes import ENVELOPE_NAMES, Workload, get_envelope, size
from storage.envelopes.model import MIX_SNAP, Envelope, same_point
from storage.envelopes.schema import Point, Table
from storage.envelopes.sizing import SizingAnswer
from storage.envelopes.units import to_ops

EXIT_OK = 0


def _cells() -> list[tuple[str, Table, Point]]:
    """Every published point of every envelope's tables, in the data files' order."""
    return [
        (name, table, point)
        for name in ENVELOPE_NAMES
        for table in get_envelope(name).spec.tables
        for point in table.sorted_points()
    ]


CELLS = _cells()
# The cells whose request size the page prints (GCNV's 70, ANF's 8, the A800's four corners):
# asked as printed they are the page's own figure and nothing else. The database points
# (SLOB, SSB, the A800's SQL and Oracle profiles) print no request size, so any size asked is
# an assumption: the same verdict at the limit, but certainty "estimate" (tested below).
SIZED = [c for c in CELLS if c[1].block_size_kib is not None]
UNSIZED = [c for c in CELLS if c[1].block_size_kib is None]
ISSUE_ROWS = {  # the five cells read as interpolated before (issue #30), three as DOES NOT FIT
    ("gcnv-extreme-nfsv3", "nfs-64k-seq", 75.0),  # 2.284 + 764 (seed 000 lines 101-102)
    ("gcnv-extreme-nfsv3", "nfs-64k-seq", 25.0),  # 610 + 1.835
    ("gcnv-extreme-smb", "smb-8k-random", 50.0),  # 65.700 + 65.900 (lines 256-257)
    ("gcnv-extreme-smb", "smb-256k-seq", 75.0),
    ("gcnv-extreme-smb", "smb-256k-seq", 25.0),
}


def cells(found: list[tuple[str, Table, Point]]) -> pytest.MarkDecorator:
    """Parametrise a test by cells, each named ``envelope/table/read %``."""
    ids = [f"{n}/{t.id}/{p.read_pct:g}" for n, t, p in found]
    return pytest.mark.parametrize(("name", "table", "point"), found, ids=ids)


def _as_printed(table: Table, point: Point, block_kib: float) -> Workload:
    """The row asked with its own figures: read and write in the table's unit (a total split
    by the printed mix where the page prints only the total)."""
    if point.total is not None:
        read, write = point.fraction * point.total, (1 - point.fraction) * point.total
    else:
        read, write = point.read or 0.0, point.write or 0.0
    if table.unit == "IOPS":
        return Workload.from_numbers(read_iops=read, write_iops=write, block_kib=block_kib)
    assert table.unit == "MiB/s"
    return Workload.from_numbers(read_mibps=read, write_mibps=write, block_kib=block_kib)


def _assert_at_the_limit(answer: SizingAnswer) -> None:
    assert answer.fits is True and answer.verdict == "fits"
    assert exit_code(answer) == EXIT_OK
    assert answer.at_limit and answer.utilisation_pct == 100.0 and answer.headroom_pct == 0.0
    data = answer.to_dict()
    assert (data["verdict"], data["at_limit"]) == ("fits", True)
    assert (data["utilisation_pct"], data["headroom_pct"]) == (100.0, 0.0)


def test_the_cells_are_all_there() -> None:
    # GCNV: 4 envelopes x 4 tables x 5 mixes = 80 cells minus Flex File's 2 missing tables
    # (70); ANF: 2 envelopes x 2 tables x 2 mixes (8); A800 four corners: 2 x 2 (4).
    assert len(SIZED) == 82
    assert len(UNSIZED) == 8  # SLOB 2, SSB 2, A800 SQL 2, Oracle 2
    assert {(n, t.id, p.read_pct) for n, t, p in SIZED} >= ISSUE_ROWS


@cells(SIZED)
def test_a_published_cell_asked_as_printed_is_published_and_fits_at_its_limit(
    name: str, table: Table, point: Point
) -> None:
    env = get_envelope(name)
    assert table.block_size_kib is not None
    answer = size(env, _as_printed(table, point, table.block_size_kib))
    _assert_at_the_limit(answer)
    limit = answer.binding.limit
    assert limit.basis == "published" and answer.certainty == "published"
    assert limit.label.startswith("published ") and f"({table.block_size_kib:g} KiB" in limit.label
    # The limit is the row's own figure, in the limit's unit (MiB/s for a sequential table).
    ops = to_ops(point.sum, table.unit, table.block_size_kib)
    shown = ops if limit.kind == "iops" else ops * table.block_size_kib / 1024
    assert limit.value == pytest.approx(shown, rel=1e-12)
    text = render(answer)
    assert "FITS, at the published limit: " in text
    assert "utilisation 100.0 %, headroom 0 %" in text and "-0.0" not in text
    assert "figure: published (a stored point of the page, unchanged)" in text
    assert "caveat: " not in text
    data = answer.to_dict()
    assert (data["certainty"], data["basis"], data["certainty_caveat"]) == (
        "published",
        "published",
        None,
    )


@cells(UNSIZED)
def test_a_database_row_asked_as_printed_fits_at_its_limit_on_an_estimate(
    name: str, table: Table, point: Point
) -> None:
    # The page prints the IOPS and the mix, not the request size: at 8 KiB the figure is the
    # row's (published, at its limit) but read at a size the page never states.
    answer = size(get_envelope(name), _as_printed(table, point, 8))
    _assert_at_the_limit(answer)
    assert answer.binding.limit.basis == "published" and answer.certainty == "estimate"
    text = render(answer)
    assert "FITS, at the limit (on an estimate: see the caveat): " in text
    assert "figure: published, applied where the page does not say — " in text
    assert "states no request size" in text and "caveat: this verdict rests on an" in text
    assert answer.to_dict()["certainty_caveat"]


def test_the_issue_rows_were_off_their_column_and_are_now_that_column() -> None:
    # 2.284 / (2.284 + 764) = 74.934 % read: 0.066 points off "75%", more than the 0.05 that
    # decided before; the printed pair is the page's own, so its distance is the tolerance.
    for name, table_id, pct in ISSUE_ROWS:
        (table,) = [t for t in get_envelope(name).spec.tables if t.id == table_id]
        (point,) = [p for p in table.points if p.read_pct == pct]
        off = abs(point.printed_fraction - point.fraction)
        assert off > MIX_SNAP, (name, table_id, pct)
        assert same_point(point, point.printed_fraction)


def _radius(point: Point) -> float:
    return max(MIX_SNAP, abs(point.printed_fraction - point.fraction))


def test_the_same_point_tolerance_is_the_stated_one() -> None:
    # docs/sizing.md: the larger of 0.05 points and the printed pair's own distance from its
    # column's mix; at most 0.086 points on the stored tables (SMB 256 KiB, 25 % column:
    # 584 / 2.328 = 25.086 %), far below the 10 points between the closest two columns.
    radii = [_radius(p) for _, _, p in CELLS]
    assert max(radii) * 100 == pytest.approx(584 / (584 + 1744) * 100 - 25, abs=1e-9)
    assert max(radii) * 100 < 0.09
    for _, table, point in CELLS:
        gaps = [abs(point.fraction - other.fraction) for other in table.points if other != point]
        assert all(gap > 2 * _radius(point) for gap in gaps)


@pytest.mark.parametrize("name", [n for n in ENVELOPE_NAMES if get_envelope(n).spec.tables])
def test_just_inside_the_tolerance_is_the_point_and_just_outside_is_not(name: str) -> None:
    env: Envelope = get_envelope(name)
    for table in env.spec.tables:
        points = table.sorted_points()
        for point in points:
            radius = _radius(point)
            for side in (-1, 1):
                inside, outside = (
                    point.fraction + side * radius * 0.999,
                    point.fraction + side * (radius + 1e-4),
                )
                if not 0 <= outside <= 1:
                    continue
                assert same_point(point, inside), (table.id, point.read_pct, side)
                assert not same_point(point, outside), (table.id, point.read_pct, side)
                assert env.rate(table, inside).published
                assert not env.rate(table, outside).published
