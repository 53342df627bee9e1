"""``target.tablespace`` is checked as settings, before anything connects (issue #19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from storage.targets.settings import OracleSettings, PostgresSettings


def problem(tablespace: object) -> str:
    with pytest.raises(ValidationError) as caught:
        PostgresSettings(tablespace=tablespace)
    return str(caught.value)


@pytest.mark.parametrize(
    ("tablespace", "said"),
    [
        ({"name": "pg_mine"}, "reserved by PostgreSQL"),
        ({"name": "Mixed"}, "should match pattern"),
        ({"name": "a" * 64}, "should match pattern"),
        ({"name": "ts", "create": True}, "create: true needs a location"),
        ({"name": "ts", "location": "relative/dir"}, "not an absolute path"),
        ({"name": "ts", "location": "/srv/it's"}, "quotes, backslashes and line breaks"),
        ({"name": "ts", "location": "/srv/a\nb"}, "quotes, backslashes and line breaks"),
        ({"name": "ts", "locaton": "/srv/pg"}, "Extra inputs are not permitted"),
    ],
)
def test_a_wrong_tablespace_setting_is_refused_naming_why(tablespace: object, said: str) -> None:
    assert said in problem(tablespace)


def test_the_tablespace_name_is_an_identifier_the_scenario_checks() -> None:
    settings = PostgresSettings(
        tablespace={"name": "dbsim_ts", "location": "/srv/pg", "create": True}
    )
    assert settings.tablespace is not None and settings.tablespace.location == Path("/srv/pg")
    assert settings.sql_identifiers() == {"schema_name": ["public"], "tablespace": ["dbsim_ts"]}
    assert OracleSettings(tablespace="DBSIM_DATA").sql_identifiers() == {
        "tablespace": ["DBSIM_DATA"]
    }
    with pytest.raises(ValidationError):
        OracleSettings(tablespace="no spaces")
