"""What the tests of the native SQL session loops share (test_pgloop, test_marialoop,
test_odbcloop): the loud skip or failure when a loop cannot run, and the wait for a run's
PostgreSQL backends to be gone."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType

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
