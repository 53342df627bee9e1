"""Which runner ``load.session_runner`` gives a run's sessions, and the reason the summary
gives for it."""

from __future__ import annotations

from typing import Any

import pytest

from sim.config.scenario import Load, ThinkTime
from sim.core.session_choice import choose_runner
from storage.targets import fileloop


class Blocking:
    """A session with blocking calls only (as a SQLite session)."""

    def next_call(self) -> tuple[str, Any]:
        return "op", lambda: None


class NativeCapable(Blocking):
    """A session with a native loop as well (as an EDA session)."""

    def native_program(self) -> Any:
        raise AssertionError("not built while choosing")


class OnTheLoop:
    """A coroutine-only session (as an asyncpg one)."""


def test_auto_picks_the_native_loop_when_it_is_built_and_says_why() -> None:
    runner, why = choose_runner(Load(), [NativeCapable(), NativeCapable()])
    if fileloop.unavailable():
        assert (runner, why) == ("threads", fileloop.unavailable())
        assert why.startswith("native loop unavailable: extension not built")
    else:
        assert runner == "native" and "extension is built" in why


def test_sessions_without_a_native_loop_run_on_threads() -> None:
    runner, why = choose_runner(Load(), [NativeCapable(), Blocking()])
    assert runner == "threads"
    assert why in (
        fileloop.unavailable(),
        "native loop unavailable: the workload's sessions have no native loop",
    )


def test_think_time_keeps_sessions_in_python() -> None:
    think = ThinkTime(min_ms=1, max_ms=2)
    runner, why = choose_runner(Load(think=think), [NativeCapable()])
    assert runner == "threads"
    assert "think time" in why or why == fileloop.unavailable()


@pytest.mark.parametrize("wanted", ["auto", "native", "threads"])
def test_coroutine_sessions_stay_on_the_event_loop(wanted: str) -> None:
    runner, why = choose_runner(Load(session_runner=wanted), [OnTheLoop()])
    assert (runner, why) == ("event loop", "the sessions make no blocking calls")


@pytest.mark.parametrize("wanted", ["threads", "loop"])
def test_an_explicit_runner_is_kept(wanted: str) -> None:
    runner, why = choose_runner(Load(session_runner=wanted), [NativeCapable()])
    assert runner == ("threads" if wanted == "threads" else "event loop")
    assert why == f"load.session_runner {wanted}"
