"""Statement catalogues: overrides by name, fail fast on unknown or missing statements."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.errors import WorkloadError
from sim.sql import Catalogue, quote_identifier, to_paramstyle
from workloads.slob.workload import SQL_DIR, STATEMENTS


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)


def test_override_replaces_default_by_name(tmp_path: Path) -> None:
    write(tmp_path, "default.sql", "-- name: a\nSELECT 1\n-- name: b\nSELECT 2\n")
    write(tmp_path, "postgres.sql", "-- name: b\nSELECT 22\n")
    assert Catalogue.load(tmp_path, "postgres").text("b") == "SELECT 22"
    assert Catalogue.load(tmp_path, "sqlite").text("b") == "SELECT 2"


def test_override_of_an_unknown_statement_fails_at_load(tmp_path: Path) -> None:
    write(tmp_path, "default.sql", "-- name: a\nSELECT 1\n")
    write(tmp_path, "oracle.sql", "-- name: typo\nSELECT 1 FROM dual\n")
    with pytest.raises(WorkloadError, match="overrides unknown statement"):
        Catalogue.load(tmp_path, "oracle")


def test_dialect_specific_statement_must_be_overridden(tmp_path: Path) -> None:
    write(tmp_path, "default.sql", "-- name: a\n!dialect-specific\n")
    with pytest.raises(WorkloadError, match="no sqlserver statement for a"):
        Catalogue.load(tmp_path, "sqlserver")


def test_slob_catalogue_is_complete_for_the_dialects_it_runs_here() -> None:
    # range_read needs rows addressed by block: PostgreSQL's TID ranges, !unsupported in
    # SQLite (left out of its catalogue, and a scenario asking for range reads is refused).
    for dialect, missing in (("sqlite", {"range_read"}), ("postgres", set())):
        catalogue = Catalogue.load(SQL_DIR, dialect, required=STATEMENTS - {"range_read"})
        assert set(catalogue.statements) >= STATEMENTS - missing
        assert not catalogue.has("range_read") if missing else catalogue.has("range_read")


@pytest.mark.parametrize(
    ("style", "sql", "order"),
    [
        ("qmark", "x > ? AND x < ? AND y = ?::text", ("lo", "hi", "v")),
        ("numeric_dollar", "x > $1 AND x < $2 AND y = $3::text", ("lo", "hi", "v")),
        ("named", "x > :lo AND x < :hi AND y = :v::text", ("lo", "hi", "v")),
        ("numeric", "x > :1 AND x < :2 AND y = :3::text", ("lo", "hi", "v")),
        ("format", "x > %s AND x < %s AND y = %s::text", ("lo", "hi", "v")),
    ],
)
def test_binds_are_rewritten_and_casts_left_alone(
    style: str, sql: str, order: tuple[str, ...]
) -> None:
    assert to_paramstyle("x > :lo AND x < :hi AND y = :v::text", style) == (sql, order)


def test_format_paramstyle_doubles_a_literal_percent_sign() -> None:
    assert to_paramstyle("name LIKE 'a%' AND id = :id", "format") == (
        "name LIKE 'a%%' AND id = %s",
        ("id",),
    )


def test_identifiers_are_validated_and_quoted() -> None:
    assert quote_identifier("postgres", "slob1_cf1") == "slob1_cf1"
    assert quote_identifier("postgres", "Select") == '"Select"'
    with pytest.raises(WorkloadError):
        quote_identifier("sqlite", "x; DROP TABLE y")
