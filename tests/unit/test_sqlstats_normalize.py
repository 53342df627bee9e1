"""sim.sqlstats.normalize: parameters renamed :p1 …, compared columns, read-only, folded text."""

from __future__ import annotations

import pytest

from sim.sqlstats.normalize import normalize


@pytest.mark.parametrize(
    ("text", "style", "sql", "params"),
    [
        # pg_stat_statements: $1 twice is one parameter; a cast and a string are not.
        ("SELECT a FROM t WHERE b = $2 AND c = $1::int AND d = $2 AND e = '$3'", "dollar",
         "SELECT a FROM t WHERE b = :p1 AND c = :p2::int AND d = :p1 AND e = '$3'",
         ["p1", "p2"]),
        # A MariaDB digest: every ? is a new one; one in a comment or string is not.
        ("SELECT `c` FROM `t` WHERE `id` = ? /* ? */ AND x = '?' AND y = ?", "qmark",
         "SELECT `c` FROM `t` WHERE `id` = :p1 /* ? */ AND x = '?' AND y = :p2",
         ["p1", "p2"]),
        # Oracle (AWR): :B1 twice is one parameter, :1 another.
        ("SELECT * FROM T WHERE ID = :B1 AND X = :1 AND Y = :B1", "colon",
         "SELECT * FROM T WHERE ID = :p1 AND X = :p2 AND Y = :p1", ["p1", "p2"]),
        # Query Store: @1 and @name; @@ROWCOUNT is no parameter.
        ("SELECT a FROM t WHERE id = @1 AND n = @name AND @@ROWCOUNT > 0", "at",
         "SELECT a FROM t WHERE id = :p1 AND n = :p2 AND @@ROWCOUNT > 0", ["p1", "p2"]),
    ],
)  # fmt: skip
def test_parameters_are_renamed_in_order_of_first_use(
    text: str, style: str, sql: str, params: list[str]
) -> None:
    normalized = normalize(text, style)
    assert normalized.sql == sql
    assert normalized.params == params


def test_a_dollar_quoted_string_hides_its_marks() -> None:
    normalized = normalize("SELECT $tag$ $1 ? $tag$ FROM t WHERE a = $1", "dollar")
    assert normalized.params == ["p1"]
    assert normalized.sql.endswith("a = :p1")


def test_compared_columns_are_found_in_where_and_on_but_not_in_set() -> None:
    update = normalize("UPDATE acc SET bal = bal + $1, c = $3 WHERE aid = $2", "dollar")
    assert update.compared == {"p3": ("acc", "aid")}  # $2 became :p3 (third in order)
    assert update.sql == "UPDATE acc SET bal = bal + :p1, c = :p2 WHERE aid = :p3"
    joined = normalize(
        "SELECT a.x FROM s.t1 AS a JOIN t2 b ON b.id = $1 WHERE $2 = a.k AND c = $3", "dollar"
    )
    # a.k and b.id by their aliases; the unqualified c of two tables: not known.
    assert joined.compared == {"p1": ("t2", "id"), "p2": ("s.t1", "k")}
    assert joined.tables == ["s.t1", "t2"]


def test_quoted_names_are_unquoted_for_the_sample() -> None:
    digest = normalize("SELECT `c` FROM `db`.`sbtest1` WHERE `id` = ?", "qmark")
    assert digest.compared == {"p1": ("db.sbtest1", "id")}


@pytest.mark.parametrize(
    ("text", "read_only"),
    [
        ("SELECT a FROM t WHERE id = $1", True),
        ("SELECT a FROM t WHERE id = $1 FOR UPDATE", False),
        ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", False),
        ("WITH d AS (SELECT 1) SELECT * FROM d", True),
        ("VALUES (1)", True),
        ("UPDATE t SET a = 1", False),
        ("INSERT INTO t VALUES ($1)", False),
    ],
)
def test_read_only_is_read_from_the_text(text: str, read_only: bool) -> None:
    assert normalize(text, "dollar").read_only is read_only


def test_what_is_not_replayable() -> None:
    assert not normalize("BEGIN", "dollar").replayable
    assert not normalize("SET search_path = $1", "dollar").replayable
    assert not normalize("CREATE TABLE x (a int)", "dollar").replayable
    folded = normalize("INSERT INTO `t` ( `a` , `b` ) VALUES (...)", "qmark")
    assert folded.folded and not folded.replayable
    assert not normalize("SELECT * FROM pg_stat_statements", "dollar").replayable
    assert not normalize("select obj# from obj$ where owner# = :1", "colon").replayable
    assert normalize("SELECT 'a...b' FROM t", "dollar").replayable  # dots in a string


def test_a_digests_spaced_call_is_joined_so_mariadb_reads_the_builtin() -> None:
    digest = normalize("SELECT SUM ( `k` ) FROM `t` WHERE ID BETWEEN ? AND ?", "qmark")
    assert digest.sql == "SELECT SUM( `k` ) FROM `t` WHERE ID BETWEEN :p1 AND :p2"


def test_unknown_style_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown parameter style"):
        normalize("SELECT 1", "percent")
