"""SIGINT and SIGTERM take one path through ``dbsim run`` (sim/cli/run.py): the same handler,
``_stop_on_signals``' ``on_signal``, is registered for both, keeps the signal for the exit
code and asks the engine to stop with a reason naming it; the exit code is the only place the
two part (130 for SIGINT, 143 for SIGTERM). Nothing below the CLI names either signal (the
engine's ``request_stop`` takes a reason; the native loops install no handler).

This is why the signal sweeps (tests/e2e/test_signal_sweep.py, test_signal_sweep_native.py)
send one signal per phase and engine, alternating, instead of both: a case that sends SIGINT
in a phase checks the path a SIGTERM there would take. The sweeps still send both signals to
every engine and check both exit codes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sim.cli.app import EXIT_SIGINT, EXIT_SIGTERM
from sim.cli.run import _close_ignoring_signals, _outcome_exit_code, _stop_on_signals

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Engine:
    """What the handler reaches of the engine: ``request_stop(reason)``."""

    def __init__(self, stopped: asyncio.Future[None] | None = None) -> None:
        self.reasons: list[str] = []
        self._stopped = stopped

    def request_stop(self, reason: str) -> None:
        self.reasons.append(reason)
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)


class RecordingLoop:
    """Records what ``_stop_on_signals`` registers (``add_signal_handler``'s arguments)."""

    def __init__(self) -> None:
        self.handlers: dict[int, tuple[Callable[..., Any], tuple[Any, ...]]] = {}

    def add_signal_handler(self, signum: int, callback: Callable[..., Any], *args: Any) -> None:
        self.handlers[signum] = (callback, args)


def test_both_signals_get_the_one_handler() -> None:
    loop = RecordingLoop()
    received: list[int] = []
    engines: list[Any] = []
    _stop_on_signals(loop, received, engines)  # type: ignore[arg-type]
    assert set(loop.handlers) == set(SIGNALS)
    (on_int, int_args), (on_term, term_args) = (loop.handlers[s] for s in SIGNALS)
    assert on_int is on_term, "SIGINT and SIGTERM have different handlers"
    assert (int_args, term_args) == ((signal.SIGINT,), (signal.SIGTERM,))

    on_int(*int_args)  # before the engine exists: kept, applied when it is created
    assert received == [signal.SIGINT]
    engine = Engine()
    engines.append(engine)
    on_term(*term_args)
    on_int(*int_args)
    assert received == [signal.SIGINT, signal.SIGTERM, signal.SIGINT]
    assert engine.reasons == ["stopped by SIGTERM", "stopped by SIGINT"]


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    """The worker's own SIGINT/SIGTERM handlers, put back (closing a loop sets the defaults)."""
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_real_signal_stops_the_engine(signum: signal.Signals, restored_handlers: None) -> None:
    """Delivered to this process on a real event loop, each signal reaches the engine the same
    way and names itself in the reason; the exit code of the interrupted run is its own."""
    loop = asyncio.new_event_loop()
    try:
        received: list[int] = []
        stopped: asyncio.Future[None] = loop.create_future()
        engine = Engine(stopped)
        _stop_on_signals(loop, received, [engine])
        os.kill(os.getpid(), signum)
        loop.run_until_complete(asyncio.wait_for(stopped, 10))
    finally:
        loop.close()
    assert received == [signum]
    assert engine.reasons == [f"stopped by {signum.name}"]
    code = _outcome_exit_code({"status": "interrupted"}, slos_declared=False, received=received)
    assert code == {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM}[signum]
    assert code == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]


def test_the_last_signal_names_the_exit_code() -> None:
    interrupted = {"status": "interrupted"}
    both = [signal.SIGINT, signal.SIGTERM]
    assert _outcome_exit_code(interrupted, slos_declared=False, received=both) == 143
    assert _outcome_exit_code(interrupted, slos_declared=False, received=both[::-1]) == 130


def test_after_the_loop_closes_both_signals_are_ignored_never_defaulted(
    restored_handlers: None,
) -> None:
    """The bundle is complete when the loop closes: from then on a signal is ignored (a
    SIGTERM at the default would kill the finished run with -15), and neither is left
    blocked. A SIGTERM sent to this very process afterwards does nothing."""
    loop = asyncio.new_event_loop()
    _stop_on_signals(loop, [], [])
    _close_ignoring_signals(loop)
    assert loop.is_closed()
    assert all(signal.getsignal(s) == signal.SIG_IGN for s in SIGNALS)
    assert not set(SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])
    os.kill(os.getpid(), signal.SIGTERM)  # ignored: the test goes on
