"""make test's work units for pytest-xdist (tests/conftest.py): a module is one unit, as with
``--dist loadscope``, but the docs blocks of tests/docs/test_docs.py are one unit per page.

A page's blocks share its working directory and build on each other in page order (a block
runs what an earlier one wrote), so they stay together and in order on one worker; different
pages share nothing (each worker makes its own page directories).
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadScopeScheduling

DOCS_MODULE = "tests/docs/test_docs.py"
_PAGE = re.compile(r"\[(?P<page>[^\]]+\.md):\d+\]$")


def scope_of(nodeid: str) -> str:
    """The work unit of a test: its page for a docs block, else its module (or class)."""
    module, _, name = nodeid.partition("::")
    if module == DOCS_MODULE and (found := _PAGE.search(name)):
        return f"{DOCS_MODULE}::{found['page']}"
    return nodeid.rsplit("::", 1)[0]


class PageScopes(LoadScopeScheduling):
    """``--dist loadscope`` with a unit per docs page."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
