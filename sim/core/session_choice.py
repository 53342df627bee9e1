"""Which runner a run's sessions get (native loop, OS threads, or the event loop) and why.

The summary names the runner and the reason (``session_runner``, docs/architecture.md); the
engine asks :func:`choose_runner` once per run, before the sessions start.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

RUNNER_NATIVE = "native"
RUNNER_THREADS = "threads"
RUNNER_LOOP = "event loop"
#: The target kinds whose SQL sessions may run in a native loop, and the C client library it
#: runs over (storage.targets.pgloop_session.BACKENDS; tests/unit/test_start_imports.py holds
#: the kinds equal).
NATIVE_SQL_KINDS = {
    "postgres": "libpq",
    "mysql": "MariaDB Connector/C",
    "odbc": "unixODBC",
    "sqlserver": "unixODBC",
}
#: What the summary says of each runner.
RUNNER_DESCRIPTIONS = {
    RUNNER_NATIVE: "OS threads, batches of operations in a native loop (file system calls, "
    "MariaDB Connector/C and unixODBC: a thread per session; libpq: up to 4 PostgreSQL "
    "sessions per thread, one statement in flight each)",
    RUNNER_THREADS: "one OS thread per session, blocking calls made in place",
    RUNNER_LOOP: "coroutines on the engine's event loop (blocking calls through its pool)",
}


def choose_runner(load: Any, sessions: list[Any], target: Any = None) -> tuple[str, str]:
    """(runner, why) for these sessions under ``load.session_runner`` (auto, native, threads,
    loop): native when the extension is built, every session has a native loop and no think
    time is paced between operations; else threads when every session offers blocking calls;
    else the event loop. PostgreSQL and MariaDB/MySQL SQL sessions: native in the libpq or
    Connector/C loop when it can deal their statements (storage.targets.pgloop_session), else
    the event loop, saying why."""
    wanted = load.session_runner
    # Asked only for the kinds it has a loop for: its module imports asyncpg and asyncmy
    # (~40 ms of every other run's start); its answer for any other kind is None.
    if wanted in ("auto", "native") and getattr(target, "kind", None) in NATIVE_SQL_KINDS:
        from storage.targets.pgloop_session import unavailable as pg_unavailable

        why_not_pg = pg_unavailable(load, sessions, target)
        if why_not_pg == "":
            library = NATIVE_SQL_KINDS[target.kind]
            return (
                RUNNER_NATIVE,
                f"native loop: {library} extension built, statements prepared in it",
            )
        if why_not_pg is not None:
            # A driver that blocks (pyodbc) keeps its sessions on OS threads; asyncpg and
            # asyncmy run on the event loop.
            fallback = RUNNER_THREADS if all(map(offers_blocking_calls, sessions)) else RUNNER_LOOP
            if wanted == "native":
                log.warning("load.session_runner native: %s; sessions run on %s (the Python "
                            "driver)", why_not_pg, fallback)  # fmt: skip
            return fallback, f"native loop unavailable: {why_not_pg}"
    blocking = bool(sessions) and all(map(offers_blocking_calls, sessions))
    if wanted == "loop":
        return RUNNER_LOOP, "load.session_runner loop"
    if not blocking:
        if wanted in ("threads", "native"):
            log.warning(
                "load.session_runner %s: this workload and target have no blocking "
                "sessions; running them on the event loop",
                wanted,
            )
        return RUNNER_LOOP, "the sessions make no blocking calls"
    if wanted in ("auto", "native"):
        why_not = native_unavailable(load, sessions)
        if not why_not:
            return RUNNER_NATIVE, "native loop: the extension is built and every session has one"
        if wanted == "native":
            log.warning("load.session_runner native: %s; running sessions on threads", why_not)
        return RUNNER_THREADS, why_not
    return RUNNER_THREADS, "load.session_runner threads"


def native_unavailable(load: Any, sessions: list[Any]) -> str:
    """Why these sessions cannot run in the native loop ('' when they can)."""
    from storage.targets.fileloop import unavailable

    why = unavailable()
    if why:
        return why
    if not all(callable(getattr(s, "native_program", None)) for s in sessions):
        return "native loop unavailable: the workload's sessions have no native loop"
    think = load.think
    if think is not None and think.max_ms > 0:
        return "native loop unavailable: think time is paced in Python between operations"
    return ""


def offers_blocking_calls(session: Any) -> bool:
    """Whether a workload session can run on its own thread: it has ``next_call`` and, where
    that depends on its connection (a SQL session on asyncpg has none), says it is ready."""
    return callable(getattr(session, "next_call", None)) and bool(
        getattr(session, "blocking_ready", True)
    )


__all__ = [
    "NATIVE_SQL_KINDS",
    "RUNNER_DESCRIPTIONS",
    "RUNNER_LOOP",
    "RUNNER_NATIVE",
    "RUNNER_THREADS",
    "choose_runner",
    "native_unavailable",
    "offers_blocking_calls",
]
