"""SLOB-like rules that need no database: the 100-operation mix and the key ranges."""

from __future__ import annotations

import pytest

from workloads.slob.parameters import SlobParameters, parse_scale
from workloads.slob.workload import takes_this_op


@pytest.mark.parametrize("pct", [0, 1, 7, 10, 33, 50, 100])
def test_exactly_pct_in_every_block_of_100(pct: int) -> None:
    for block in range(5):
        picked = sum(takes_this_op(i, pct) for i in range(block * 100, block * 100 + 100))
        assert picked == pct


def test_any_prefix_is_within_one_of_the_share() -> None:
    for n in range(1, 400):
        picked = sum(takes_this_op(i, 10) for i in range(n))
        assert abs(picked - n * 10 / 100) < 1


@pytest.mark.parametrize("value", [51, 99, -1, 101])
def test_pct_outside_the_slob_rule_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="0-50 or 100"):
        SlobParameters(update_pct=value)


def test_scale_units() -> None:
    assert parse_scale("80M", 8192) == 10240
    assert parse_scale("2G", 8192) == 262144
    assert parse_scale(50000, 8192) == 50000
    assert parse_scale("50000", 8192) == 50000


def test_hotspot_must_fit_in_the_data() -> None:
    with pytest.raises(ValueError, match="hotspot"):
        SlobParameters(do_hotspot=True, hotspot_offset_mb=100, scale="80M")
    ok = SlobParameters(do_hotspot=True, scale="80M")
    assert ok.hotspot_rows == (2049, 3072)


class _Recorder:
    """Captures the parameters a session would send (the coroutine is closed unawaited)."""

    def __init__(self) -> None:
        self.params: list[tuple[int, ...]] = []

    async def scalar(self, statement: object, params: tuple[int, ...] = ()) -> None:
        return None

    async def execute(self, statement: object, params: tuple[object, ...] = ()) -> int:
        return 0

    async def commit(self) -> None:
        return None


def test_key_ranges_stay_inside_the_table_and_hit_the_hot_spot() -> None:
    from storage.targets.settings import SqliteSettings
    from storage.targets.sqlite import SqliteTarget
    from workloads.slob.workload import SlobSession, SlobWorkload

    params = SlobParameters(
        update_pct=0, work_unit=64, scale=20000, do_hotspot=True, hotspot_frequency=2
    )
    workload = SlobWorkload(params, SqliteTarget(SqliteSettings()))
    session = SlobSession(workload, 0, _Recorder(), seed=7)  # type: ignore[arg-type]
    lows, hot = [], 0
    first, last = params.hotspot_rows
    for loop in range(1, 20001):
        name, coro = session.next_transaction()
        frame = coro.cr_frame  # type: ignore[attr-defined]
        lo, hi = frame.f_locals["params"]
        coro.close()
        assert name == "read" and hi - lo == 64
        assert lo >= 1 and hi <= 20000 - 64
        lows.append(lo)
        if loop % 2 == 0:
            assert first <= lo and hi <= last
            hot += 1
    assert min(lows) == 1 and max(lows) >= 20000 - 2 * 64 - 5  # the whole range is reached
    assert hot == 10000


def test_range_reads_are_their_share_of_the_plain_reads_on_block_addressed_rows() -> None:
    """range_pct of the reads that do not scan read range_blocks consecutive blocks of cf1
    (PostgreSQL's TID ranges), counted as expected_mix counts them; a dialect without
    block-addressed rows refuses the parameter in one line."""
    from sim.errors import ConfigError
    from storage.targets.postgres import PostgresTarget
    from storage.targets.settings import PostgresSettings, SqliteSettings
    from storage.targets.sqlite import SqliteTarget
    from workloads.slob.workload import SlobSession, SlobWorkload

    params = SlobParameters(update_pct=20, scan_pct=10, range_pct=47, range_blocks=2, scale=20000)
    workload = SlobWorkload(params, PostgresTarget(PostgresSettings()))
    session = SlobSession(workload, 0, _Recorder(), seed=3)  # type: ignore[arg-type]
    counts = {"read": 0, "update": 0, "scan": 0, "range": 0}
    for _ in range(1, 1234):
        name, statement, args = session.next_statement()
        counts[name] += 1
        if name == "range":
            assert statement.name == "range_read" and "ctid" in statement.sql
            lo, hi = args if session.range_in_order else args[::-1]
            assert hi - lo == 2 and lo >= 0 and hi <= 20000
    assert counts == workload.expected_mix([(0, 1233)])
    assert counts["range"] > 0
    with pytest.raises(ConfigError, match="but sqlite has no read of consecutive blocks"):
        SlobWorkload(SlobParameters(range_pct=10, scale=20000), SqliteTarget(SqliteSettings()))
