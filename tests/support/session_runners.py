"""Both session runners of a PostgreSQL, MariaDB or ODBC run (issue #33): the native C loop
(libpq, MariaDB Connector/C, unixODBC) and the Python fallback (asyncpg, asyncmy on the
engine's event loop; pyodbc, which blocks, on OS threads).

``session_runner`` (a fixture; import it into the module that uses it) is parametrised over
the two. Each case asks for its runner in the scenario's ``load.session_runner`` — never
through ``DBSIM_PGLOOP``/``DBSIM_MARIALOOP``, which tests/e2e/conftest.py strips from the
children it starts — so an engine test passes :meth:`AskedRunner.on` to ``Load`` and a CLI
test writes it into its scenario alike. The run's summary must then name the runner asked
(:meth:`AskedRunner.ran`): the engine falls back to Python with a warning when the native
loop cannot take the sessions, and a fallback must not pass as a native run.

Where the native loop is not built (no libpq-dev or libmariadb-dev) or switched off by its
environment variable, the native case skips with one loud line, ``!!! NOT RUN: …``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

#: load.session_runner asked -> what the summary's session_runner.runner then says.
SUMMARY_NAMES = {"native": "native", "loop": "event loop", "threads": "threads"}
#: The target kinds whose Python driver blocks (pyodbc): their fallback case asks for OS
#: threads, as the engine's own fallback gives them (sim.core.session_choice).
BLOCKING_KINDS = frozenset({"odbc", "sqlserver"})


def native_unavailable(kind: str) -> str:
    """Why the native loop for this target kind cannot run here ('' when it can)."""
    if kind == "postgres":
        from storage.targets import pgloop

        return pgloop.unavailable()
    if kind == "mysql":
        from storage.targets import marialoop

        return marialoop.unavailable()
    if kind in BLOCKING_KINDS:
        from storage.targets import odbcloop

        return odbcloop.unavailable()
    raise ValueError(f"no native session loop for target kind {kind!r}")


@dataclass
class AskedRunner:
    """One case of ``session_runner``: ``name`` is the case (``native`` or ``loop``, the Python
    driver's), ``asked`` the value :meth:`on` last gave ``load.session_runner``."""

    name: str
    asked: str = ""

    def on(self, kind: str) -> str:
        """``load.session_runner`` for a run on this target kind; the native case skips loudly
        where that kind's native loop cannot run; the Python case of a blocking driver's kind
        asks for threads."""
        if self.name == "native":
            why = native_unavailable(kind)
            if why:
                pytest.skip(f"!!! NOT RUN: the native {kind} session loop: {why}")
        self.asked = "threads" if self.name == "loop" and kind in BLOCKING_KINDS else self.name
        return self.asked

    def ran(self, runner: str, why: str) -> None:
        """Fail unless the run's summary names the runner asked (``session_runner.runner``)."""
        expected = SUMMARY_NAMES[self.asked or self.name]
        assert runner == expected, (
            f"load.session_runner {self.name} asked, the run used {runner!r}: {why}"
        )

    def ran_summary(self, summary: dict[str, Any]) -> None:
        """:meth:`ran` on a summary.json (or ``dbsim run --json``) document."""
        chosen = summary["session_runner"]
        self.ran(chosen["runner"], chosen["why"])


@pytest.fixture(params=["loop", "native"])
def session_runner(request: pytest.FixtureRequest) -> AskedRunner:
    """Each session runner in turn: ``native`` (the C loop) and ``loop`` (the Python driver)."""
    return AskedRunner(str(request.param))
