"""Table-name allocation (workloads.naming) and the identity records of workloads.ownership,
without a server.

The property: two scenarios that differ in workload or prefix never produce a common object
name, after any catalogue's case folding, however their prefixes and table counts are chosen;
and neither one's ``dbsim drop`` pattern matches a name of the other's. Before the separator,
``slob1`` with one schema and ``slob`` with eleven both made ``slob11_cf1``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sim.errors import WorkloadError
from sim.sql import dialect_names, quote_identifier
from storage.targets.settings import SqliteSettings
from storage.targets.sqlite import SqliteTarget
from workloads.common import catalog_name
from workloads.identity import (
    CatalogObject,
    create_registry_statement,
    mark_statements,
    marked_create,
)
from workloads.naming import TABLE_PREFIX_PATTERN, number_of, numbered, owned_pattern
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload
from workloads.ssb.parameters import SsbParameters
from workloads.ssb.schema import index_name
from workloads.ssb.workload import SsbWorkload

MAX_COUNT = 40

#: The index names of each SLOB table built so far, by everything ``SlobWorkload.table`` reads
#: (the table's name and role, the workload's dialect, block size and tablespace). The
#: examples meet the same table (prefix and number) again and again, and building its
#: SQLAlchemy table anew (~0.5 ms, 80 % of this module's CPU) gives the same names.
_slob_indexes: dict[tuple[object, ...], set[str]] = {}


def objects(workload: str, prefix: str, count: int) -> set[str]:
    """Every table and index name the real workload classes make for this configuration."""
    target = SqliteTarget(SqliteSettings())
    if workload == "slob":
        parameters = SlobParameters(table_prefix=prefix, schemas=count, scan_pct=10, append_pct=10)
        slob = SlobWorkload(parameters, target)
        names = set()
        for planned in slob.planned_tables():
            names.add(planned.name)
            key = (planned.name, planned.role, slob.dialect, slob.p.block_size_bytes,
                   slob.tablespace)  # fmt: skip
            if key not in _slob_indexes:
                _slob_indexes[key] = {str(i.name) for i in slob.table(planned).indexes}
            names |= _slob_indexes[key]
        return names
    ssb = SsbWorkload(SsbParameters(table_prefix=prefix, tables=count), target)
    tables = {ssb.table_name(n) for n in range(1, count + 1)}
    return tables | {index_name(t) for t in tables}


def drop_pattern(workload: str, prefix: str) -> str:
    return SlobWorkload.name_suffix if workload == "slob" else ""


def folded(names: set[str]) -> set[str]:
    """The names as a case-insensitive catalogue compares them (SQLite, SQL Server, MariaDB),
    and as Oracle stores them: the strongest folding of any dialect."""
    return {catalog_name("oracle", n).lower() for n in names}


prefixes = st.from_regex(TABLE_PREFIX_PATTERN, fullmatch=True)
suffixes = st.sampled_from(["", "1", "11", "_1", "_11", "_1_cf", "_1_cf1", "_cf", "0", "_"])


@st.composite
def neighbours(draw: st.DrawFn) -> tuple[str, str]:
    """A prefix and one made to collide with it: it plus digits, an underscore, a number, a
    workload suffix … (the shapes that ran together before)."""
    base = draw(prefixes)
    other = (base + draw(suffixes))[:16]
    if draw(st.booleans()):
        base, other = other, base
    return base, other


@settings(max_examples=150, deadline=None)
@given(
    pair=st.one_of(neighbours(), st.tuples(prefixes, prefixes)),
    workloads=st.tuples(st.sampled_from(["slob", "ssb"]), st.sampled_from(["slob", "ssb"])),
    counts=st.tuples(
        st.integers(min_value=1, max_value=MAX_COUNT), st.integers(min_value=1, max_value=MAX_COUNT)
    ),
)
def test_two_scenarios_never_share_an_object_name(
    pair: tuple[str, str], workloads: tuple[str, str], counts: tuple[int, int]
) -> None:
    (p1, p2), (w1, w2), (n1, n2) = pair, workloads, counts
    for p in (p1, p2):
        try:
            SlobParameters(table_prefix=p)
        except ValidationError:
            pytest.skip("not a valid prefix (from_regex may add what the validator refuses)")
    a, b = objects(w1, p1, n1), objects(w2, p2, n2)
    if (w1, p1) == (w2, p2):
        assert a <= b or b <= a  # the same data set, larger or smaller: by design
        return
    assert not folded(a) & folded(b), (w1, p1, n1, w2, p2, n2)
    # dbsim drop of one scenario matches no table of the other's, whatever its count was.
    for (w, p), theirs in (((w1, p1), b), ((w2, p2), a)):
        pattern = owned_pattern(p, drop_pattern(w, p))
        assert not [n for n in theirs if pattern.fullmatch(n)], (w, p, theirs)


@given(prefix=prefixes, count=st.integers(min_value=1, max_value=MAX_COUNT))
@settings(max_examples=100, deadline=None)
def test_names_are_never_quoted_so_every_catalogue_stores_them_as_written(
    prefix: str, count: int
) -> None:
    for workload in ("slob", "ssb"):
        for name in objects(workload, prefix, count):
            for dialect in dialect_names():
                assert quote_identifier(dialect, name) == name


@given(prefix=prefixes.filter(lambda p: p.upper() != p))
@settings(max_examples=50, deadline=None)
def test_a_prefix_that_differs_only_in_case_is_refused(prefix: str) -> None:
    """SQLite and SQL Server fold case: SLOB and slob would name the same tables."""
    for model in (SlobParameters, SsbParameters):
        with pytest.raises(ValidationError, match="table_prefix"):
            model(table_prefix=prefix.upper())


def test_the_names_that_ran_together_are_now_distinct() -> None:
    assert numbered("slob1", 1, "_cf1") == "slob1_1_cf1"
    assert numbered("slob", 11, "_cf1") == "slob_11_cf1"
    assert objects("ssb", "user", 2) == {"user_1", "user_2", "user_1_custid", "user_2_custid"}
    # An SSB table named like a SLOB one needs a number ending in cf1: impossible.
    assert not objects("slob", "a", 3) & objects("ssb", "a_1_cf", 3)
    with pytest.raises(ValueError, match="start at 1"):
        numbered("slob", 0)


@given(
    prefix=prefixes,
    numbers=st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=12),
    suffix=st.sampled_from(["", "_cf1", "_cf2", "_cf3"]),
)
@settings(max_examples=100, deadline=None)
def test_dbsim_drop_orders_a_prefixs_tables_by_their_number(
    prefix: str, numbers: list[int], suffix: str
) -> None:
    """workloads.sqlkit drops in table-number order: slob_2_cf1 before slob_10_cf1."""
    names = [numbered(prefix, n, suffix) for n in numbers]
    assert [number_of(prefix, name) for name in names] == numbers
    ordered = sorted(names, key=lambda name: number_of(prefix, name))
    assert ordered == [numbered(prefix, n, suffix) for n in sorted(numbers)]
    with pytest.raises(ValueError, match="is not a table of"):
        number_of(prefix + "x", names[0])


def test_old_style_prefixes_are_refused_with_the_field_named() -> None:
    for bad in ("Slob", "1slob", "slob-x", "s" * 17, ""):
        with pytest.raises(ValidationError, match="table_prefix"):
            SlobParameters(table_prefix=bad)


# --------------------------------------------------------------------------- identity records


def test_catalogue_rows_parse_into_kind_identity_and_token() -> None:
    token = "ab" * 16
    pg = CatalogObject.parse(f"table|16384|745|dbsim:{token}")
    assert pg == CatalogObject("table", "16384:745", token)
    sqlite = CatalogObject.parse(f"table|2||CREATE TABLE t (/* dbsim:{token} */ x)")
    assert sqlite == CatalogObject("table", "2:", token)
    view = CatalogObject.parse("materialized view|99|12|")
    assert view == CatalogObject("materialized view", "99:12", None)
    # A comment that merely mentions dbsim is not a marker; SQL Server has none at all.
    assert CatalogObject.parse("table|5|x|dbsim:not-a-token").token is None
    mssql = CatalogObject.parse("table|245575913|2026-01-02T03:04:05.678|")
    assert mssql.ident == "245575913:2026-01-02T03:04:05.678"


def test_the_marker_goes_inside_the_create_text_on_sqlite_and_into_a_comment_elsewhere() -> None:
    token = "0123456789abcdef" * 2
    marked = marked_create("sqlite", create_registry_statement("sqlite"), token)
    assert marked.sql.startswith(f"CREATE TABLE dbsim_registry (/* dbsim:{token} */")
    assert marked_create("postgres", create_registry_statement("postgres"), token).sql == (
        create_registry_statement("postgres").sql
    )
    assert mark_statements("sqlite", "slob_1_cf1", token) == []
    [comment] = mark_statements("postgres", "slob_1_cf1", token)
    assert comment.sql == f"COMMENT ON TABLE slob_1_cf1 IS 'dbsim:{token}'"
    assert mark_statements("sqlserver", "t", token) == []
    with pytest.raises(WorkloadError, match="not a dbsim token"):
        mark_statements("postgres", "slob_1_cf1", "x'; DROP TABLE victim; --")


@settings(max_examples=100, deadline=None)
@given(pair=neighbours(), kind=st.sampled_from(["slob", "ssb"]))
def test_the_database_collector_samples_one_scenarios_tables_only(
    pair: tuple[str, str], kind: str
) -> None:
    """The db collector keeps the tables its workload's pattern matches: every table of that
    scenario, and no table of a neighbouring prefix (``a`` and ``a_1``)."""
    mine, other = pair
    if mine == other:
        return
    target = SqliteTarget(SqliteSettings())

    def build(prefix: str) -> SlobWorkload | SsbWorkload:
        if kind == "slob":
            return SlobWorkload(SlobParameters(table_prefix=prefix, scale=10_000), target)
        return SsbWorkload(SsbParameters(table_prefix=prefix), target)

    workload, neighbour = build(mine), build(other)
    pattern = re.compile(workload.table_pattern())
    for n in range(1, 4):
        assert pattern.search(workload.table_name(n))
        assert not pattern.search(neighbour.table_name(n)), (mine, other)
