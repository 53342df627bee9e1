"""Which runner PostgreSQL SQL sessions get, and the reason the summary gives (issue #33).

No server is needed: choosing a runner only looks at the target's kind, the extension and
the sessions' shape (the sessions are built on an unconnected PostgresConnection)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.config.scenario import Load, ThinkTime
from sim.core.session_choice import RUNNER_LOOP, RUNNER_NATIVE, choose_runner
from storage.targets import pgloop
from storage.targets.postgres import PostgresConnection, PostgresTarget
from storage.targets.postgres_room import ConnectionRoom
from storage.targets.settings import PostgresSettings
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobSession, SlobWorkload


def sessions(n: int = 2) -> tuple[list[Any], PostgresTarget]:
    target = PostgresTarget(PostgresSettings())
    slob = SlobWorkload(SlobParameters(scale=10_000, table_prefix="pgc"), target)
    conn = PostgresConnection(None, None, "public", [])
    return [slob.new_session(i, conn, i) for i in range(n)], target


@pytest.fixture(autouse=True)
def _built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pgloop.SWITCH, raising=False)
    if pgloop.unavailable():
        pytest.fail(f"the native loop is not built here: {pgloop.unavailable()}")


def test_auto_runs_postgres_sql_sessions_natively() -> None:
    found, target = sessions()
    runner, why = choose_runner(Load(), found, target)
    assert (runner, why) == (RUNNER_NATIVE, "native loop: libpq extension built, statements "
                             "prepared in it")  # fmt: skip


def test_loop_asked_is_the_asyncpg_path() -> None:
    found, target = sessions()
    assert choose_runner(Load(session_runner="loop"), found, target)[0] == RUNNER_LOOP


def test_think_time_stays_on_asyncpg_and_says_so() -> None:
    found, target = sessions()
    load = Load(think=ThinkTime(min_ms=1, max_ms=2))
    runner, why = choose_runner(load, found, target)
    assert runner == RUNNER_LOOP
    assert why == "native loop unavailable: think time is paced in Python between operations"


def test_without_the_extension_the_reason_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    found, target = sessions()
    monkeypatch.setattr(pgloop, "_WHY_NOT", "libpq extension not built (no module _pgloop)")
    runner, why = choose_runner(Load(session_runner="native"), found, target)
    assert runner == RUNNER_LOOP
    assert why == "native loop unavailable: libpq extension not built (no module _pgloop)"


def test_a_server_without_room_for_two_connections_per_session_keeps_asyncpg() -> None:
    found, target = sessions(3)  # native needs 3 x 2 + 1 = 7 connections
    target.connection_room = ConnectionRoom(max_connections=10, reserved=3, in_use=4,
                                            superuser=True)  # fmt: skip
    assert target.connection_room.free == 7
    assert choose_runner(Load(), found, target)[0] == RUNNER_NATIVE
    target.connection_room = ConnectionRoom(max_connections=9, reserved=3, in_use=4,
                                            superuser=True)  # fmt: skip
    runner, why = choose_runner(Load(), found, target)
    assert runner == RUNNER_LOOP
    assert why == (
        "native loop unavailable: the server had room for 6 connections, the native loop "
        "needs 7 (its own and the engine's per session, and the db collector's)"
    )


def test_the_switch_keeps_asyncpg(monkeypatch: pytest.MonkeyPatch) -> None:
    found, target = sessions()
    monkeypatch.setenv(pgloop.SWITCH, "0")
    runner, why = choose_runner(Load(), found, target)
    assert (runner, why) == (RUNNER_LOOP, "native loop unavailable: disabled by DBSIM_PGLOOP=0")


class _OwnTransactions(SlobSession):
    def next_transaction(self) -> Any:  # a session that runs more than one statement
        raise AssertionError("not called when choosing")


def test_a_session_with_its_own_transactions_is_not_dealt_natively() -> None:
    found, target = sessions(1)
    odd = _OwnTransactions.__new__(_OwnTransactions)
    odd.__dict__.update(found[0].__dict__)
    runner, why = choose_runner(Load(), [*found, odd], target)
    assert runner == RUNNER_LOOP
    assert why == (
        "native loop unavailable: statement shape not supported: _OwnTransactions runs its "
        "own transactions"
    )


def test_libpq_keywords_carry_the_pools_settings_and_escape_options() -> None:
    settings = PostgresSettings(
        schema_name="Mixed_1", session_settings={"lock_timeout": "50ms", "work_mem": "64 MB"}
    )
    params = dict(pgloop.connection_params(settings, "s3cret"))
    assert params["options"] == '-c search_path="Mixed_1" -c lock_timeout=50ms -c work_mem=64\\ MB'
    assert params["application_name"] == "dbsim"
    assert params["password"] == "s3cret"
    assert "password" not in dict(pgloop.connection_params(settings, None))


def mysql_sessions(n: int = 2) -> tuple[list[Any], Any]:
    from storage.targets.mysql import MysqlConnection, MysqlTarget
    from storage.targets.mysql_record import MysqlSettings

    target = MysqlTarget(MysqlSettings())
    slob = SlobWorkload(SlobParameters(scale=10_000, table_prefix="myc"), target)
    conn = MysqlConnection(None, None, [])
    return [slob.new_session(i, conn, i) for i in range(n)], target


def test_auto_runs_mariadb_sql_sessions_natively_and_the_switch_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from storage.targets import marialoop

    monkeypatch.delenv(marialoop.SWITCH, raising=False)
    if marialoop.unavailable():
        pytest.fail(f"the MariaDB native loop is not built here: {marialoop.unavailable()}")
    found, target = mysql_sessions()
    runner, why = choose_runner(Load(), found, target)
    assert (runner, why) == (RUNNER_NATIVE, "native loop: MariaDB Connector/C extension "
                             "built, statements prepared in it")  # fmt: skip
    monkeypatch.setenv(marialoop.SWITCH, "0")
    runner, why = choose_runner(Load(), found, target)
    assert (runner, why) == (RUNNER_LOOP, "native loop unavailable: disabled by DBSIM_MARIALOOP=0")


def test_a_mariadb_server_without_room_for_the_native_connections_keeps_asyncmy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from storage.targets import marialoop
    from storage.targets.mysql import ConnectionRoom as MysqlRoom

    monkeypatch.delenv(marialoop.SWITCH, raising=False)
    found, target = mysql_sessions(4)
    target.connection_room = MysqlRoom(max_connections=10, in_use=3)  # room for 8, needs 9
    runner, why = choose_runner(Load(), found, target)
    assert runner == RUNNER_LOOP
    assert why.startswith("native loop unavailable: the server had room for 8 connections"), why
