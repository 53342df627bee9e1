"""Named events the engine fires; the bundle writer, the console and the Locust adapter listen.

Every hook's arguments are documented beside it. Listeners run on the engine's loop thread and
must be quick: anything slow (file writes) goes through the engine's thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def _name(listener: Callable[..., Any]) -> str:
    return getattr(listener, "__qualname__", repr(listener))


class EventHook:
    """A list of listeners called in order with keyword arguments."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[..., Any]] = []
        self.failures: list[str] = []

    def add_listener(self, listener: Callable[..., Any]) -> Callable[..., Any]:
        self._listeners.append(listener)
        return listener

    def remove_listener(self, listener: Callable[..., Any]) -> None:
        self._listeners.remove(listener)

    def fire(self, **kwargs: Any) -> None:
        """Call every listener; one that raises is logged and counted, and the others (and
        the engine's ticker, which fires ``interval``) carry on."""
        for listener in list(self._listeners):
            try:
                listener(**kwargs)
            except Exception as exc:
                self.failures.append(
                    f"{self.name} listener {_name(listener)}: {type(exc).__name__}: {exc}"
                )
                log.exception("%s listener %s failed", self.name, _name(listener))


class EngineEvents:
    """The engine's hooks."""

    def failures(self) -> list[str]:
        """Every listener failure so far, for the summary's messages."""
        hooks = (
            self.state,
            self.stage,
            self.progress,
            self.interval,
            self.collector_error,
            self.notice,
            self.finished,
        )
        return [failure for hook in hooks for failure in hook.failures]

    def __init__(self) -> None:
        #: ``state(state: str, detail: str)``: setup, loading, verifying, connecting, warmup,
        #: measure, stopping, finished.
        self.state = EventHook("state")
        #: ``stage(stage: sim.core.stages.Stage, log: dict)``: a stage (warm-up, a step) begins;
        #: a listener may add facts to ``log`` (it goes into the summary's ``stages``).
        self.stage = EventHook("stage")
        #: ``progress(what: str, done: int, total: int)``: long set-up steps (loading data).
        self.progress = EventHook("progress")
        #: ``interval(interval: sim.core.metrics.Interval, samples: list[sim.protocols.Sample])``:
        #: once per interval, application figures and storage samples on the same clock.
        self.interval = EventHook("interval")
        #: ``collector_error(source: str, message: str)``: a sample failed or timed out.
        self.collector_error = EventHook("collector_error")
        #: ``notice(message: str, warning: bool = True)``: one line the user should read before
        #: the figures (a warning: the data fits in the caches, sim.core.cache; not one: the
        #: calibration's conversion of IOPS into ops/s, sim.run.calibration).
        self.notice = EventHook("notice")
        #: ``finished(result: sim.core.result.RunResult)``: the run has ended, however it ended.
        self.finished = EventHook("finished")
