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

import os
import sys

import pytest
from hypothesis import settings
from hypothesis.internal.detection import is_hypothesis_test

# Hypothesis profiles (tests/README.md, "Property tests: derandomized in CI, explored on
# purpose"). Loaded here, before any test module is imported: a test's own @settings takes
# every value it does not set from the profile loaded when it is decorated.
# "ci", the default: the same examples on every run, so a bug found at random never fails a
# session's CI; print_blob lets a failure be replayed with @reproduce_failure.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
# "explore" (make test-explore): fresh random examples, EXPLORE_SCALE times each test's own
# max_examples (pytest_collection_modifyitems below), failures printed with their blob.
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
EXPLORE_SCALE = int(os.environ.get("HYPOTHESIS_EXPLORE_SCALE", "10"))
settings.load_profile(HYPOTHESIS_PROFILE)


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under "explore", each property test runs EXPLORE_SCALE times its own max_examples with
    random seeds, whatever its @settings pin (max_examples, derandomize): a per-test @settings
    overrides any profile, so the profile alone could not raise them."""
    if HYPOTHESIS_PROFILE != "explore":
        return
    done: set[int] = set()
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        if not is_hypothesis_test(test) or id(test) in done:
            continue  # a parametrized test shares one function: scaled once
        done.add(id(test))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is None:  # where Hypothesis keeps a test's settings (hypothesis/core.py)
            raise pytest.UsageError(f"{item.nodeid}: Hypothesis keeps its settings elsewhere now")
        test._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
            own, max_examples=own.max_examples * EXPLORE_SCALE, derandomize=False, database=None
        )


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
