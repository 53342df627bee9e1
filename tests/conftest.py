"""Suite-wide guard: nothing may monkey-patch the pytest process with gevent.

Importing locust (or calling gevent's patch_all) here would turn every later test's thread
pool into greenlets that never run, and the suite would hang far from the cause. Locust and
gevent run only in child processes (sim.locust is the one place that imports them).
"""

from __future__ import annotations

import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        pytest.exit(f"{item.nodeid} monkey-patched the test process with gevent", returncode=3)
