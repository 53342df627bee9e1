"""Suite-wide guards: nothing may monkey-patch the pytest process with gevent, and a test that
measures time or rates carries the timing marker (tests/support/timing_rule.py).

Importing locust (or calling gevent's patch_all) here would turn every later test's thread
pool into greenlets that never run, and the suite would hang far from the cause. Importing
:mod:`sim.locust` patches sockets (not threads): a socket accepted in one thread and read in
another then fails with "Cannot switch to a different thread" — in CI that was the ONTAP replay
server dropping connections, for every later test, after a unit test module had imported
``sim.locust.webui`` at collection. Locust and gevent run only in child processes; what tests
need of them in-process lives outside sim.locust (sim.live.storage_table, sim.live.worker_samples).
"""

from __future__ import annotations

import sys

import pytest


def _patched() -> list[str]:
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return []
    return [name for name in ("threading", "socket") if monkey.is_module_patched(name)]


def pytest_configure(config: pytest.Config) -> None:
    """DBSIM_TEST_CPU_DIR=<dir> records each test's CPU-seconds (tests/support/cpu_profile.py);
    unset, as in CI, nothing is registered."""
    from tests.support.cpu_profile import register

    register(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    if patched := _patched():  # a test module imported sim.locust (or gevent) at its top
        pytest.exit(f"collecting the tests monkey-patched {', '.join(patched)} with gevent", 3)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if patched := _patched():
        pytest.exit(f"{item.nodeid} monkey-patched {', '.join(patched)} with gevent", returncode=3)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The timing rule (tests/support/timing_rule.py): a test that measures time or rates
    must say so with ``@pytest.mark.timing``, which puts it in make test's serial phase; run
    beside seven other workers its figures would judge the machine's load, not dbsim."""
    if not isinstance(item, pytest.Function) or item.get_closest_marker("timing"):
        return
    from tests.support.timing_rule import timing_reasons

    qualname = item.originalname if item.cls is None else f"{item.cls.__name__}.{item.originalname}"
    if reasons := timing_reasons(item.path, qualname):
        pytest.fail(
            f"{item.nodeid} measures time or rates but is not marked timing "
            f"(@pytest.mark.timing; tests/support/timing_rule.py): {'; '.join(reasons)}",
            pytrace=False,
        )


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """make test's parallel phase (``--dist loadscope``) keeps each module on one worker,
    except the docs blocks, which are kept together per page: the guide's ~30 pages of real
    runs would otherwise be one module-long queue on one worker (the phase's longest)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.support.xdist_scopes import PageScopes

    return PageScopes(config, log)
