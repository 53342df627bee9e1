"""Named events the engine fires; the bundle writer, the console and the Locust adapter listen.

Every hook's arguments are documented beside it. Listeners run on the engine's loop thread and
must be quick: anything slow (file writes) goes through the engine's thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class EventHook:
    """A list of listeners called in order with keyword arguments."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[..., Any]] = []

    def add_listener(self, listener: Callable[..., Any]) -> Callable[..., Any]:
        self._listeners.append(listener)
        return listener

    def remove_listener(self, listener: Callable[..., Any]) -> None:
        self._listeners.remove(listener)

    def fire(self, **kwargs: Any) -> None:
        for listener in list(self._listeners):
            listener(**kwargs)


class EngineEvents:
    """The engine's hooks."""

    def __init__(self) -> None:
        #: ``state(state: str, detail: str)``: setup, loading, verifying, connecting, warmup,
        #: measure, stopping, finished.
        self.state = EventHook("state")
        #: ``stage(stage: sim.engine.Stage, log: dict)``: a stage (warm-up, a step) begins;
        #: a listener may add facts to ``log`` (it goes into the summary's ``stages``).
        self.stage = EventHook("stage")
        #: ``progress(what: str, done: int, total: int)``: long set-up steps (loading data).
        self.progress = EventHook("progress")
        #: ``interval(interval: sim.metrics.Interval, samples: list[sim.protocols.Sample])``:
        #: once per interval, application figures and storage samples on the same clock.
        self.interval = EventHook("interval")
        #: ``collector_error(source: str, message: str)``: a sample failed or timed out.
        self.collector_error = EventHook("collector_error")
        #: ``finished(result: sim.engine.RunResult)``: the run has ended, however it ended.
        self.finished = EventHook("finished")
