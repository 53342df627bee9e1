"""What the tests of the native SQL session loops share (test_pgloop, test_marialoop,
test_odbcloop): the loud skip or failure when a loop cannot run, one batch run on a bare loop,
and a run whose PostgreSQL backends must all be gone when it returns."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

#: A closed connection's backend leaves pg_stat_activity within milliseconds; this is only
#: the bound on a wait that a leak never ends.
BACKEND_EXIT_S = 5.0


def require_native(loop: ModuleType) -> None:
    """Skip loudly on the suite's Python-driver pass (the loop's SWITCH set to 0); fail when
    the loop is not built (its headers are test packages: Makefile)."""
    if os.environ.get(loop.SWITCH) == "0":
        pytest.skip(f"!!! NOT RUN on the native loop: {loop.unavailable()}")
    if loop.unavailable():
        pytest.fail(f"the native loop is not built here: {loop.unavailable()}")


def backends_left(psql: Callable[[str], str], where: str) -> str:
    """The PostgreSQL backends ``FROM pg_stat_activity WHERE …`` (``where``) still there once
    they have had :data:`BACKEND_EXIT_S` to go: pid, state and query, '' when none is."""
    settle = time.monotonic() + BACKEND_EXIT_S
    while psql(f"SELECT count(*) {where}") != "0" and time.monotonic() < settle:
        time.sleep(0.05)
    return psql(f"SELECT string_agg(pid || ' ' || state || ' ' || left(query, 60), '; ') {where}")


def batch(loop: Any, ops: list[tuple[int, tuple[Any, ...]]]) -> tuple[int, np.ndarray, list[Any]]:
    """Runs ``ops`` in one batch on a bare loop; (done, error indices, the loop's failures)."""
    codes, offsets, ints, kinds, texts = loop.pack(ops)
    n = len(ops)
    latency, errors, args = np.zeros(n, np.int64), np.zeros(n, np.int32), np.zeros(n, np.int64)
    generation = np.zeros(1, dtype=np.int64)
    done, _ = loop.run(codes, offsets, ints, kinds, texts, latency, errors, args, generation,
                       0, n, 2**62, False, 0, 0)  # fmt: skip
    assert (latency[:done] >= 0).all()
    return int(done), errors, loop.failures()


def run_leaving_no_backend(
    engine: Any, runner: str, psql: Callable[[str], str], where: str
) -> None:
    """Runs ``engine`` with garbage collections off (as a busy run's timing can leave them) on
    the runner the summary must name, then fails if a backend ``FROM pg_stat_activity WHERE
    …`` is left: only an explicit close ends a native program's connection (a program and its
    deck refer to each other)."""
    gc.disable()
    try:
        asyncio.run(engine.run())
        assert engine.result.outcome == "completed", engine.result.error
        assert engine.result.session_runner == runner, engine.result.session_runner_why
        left = backends_left(psql, where)
        assert not left, f"connections still open after the run: {left}"
    finally:
        gc.enable()
