"""The run facts summary.json holds beside its totals, typed once: the runner builds them
from the engine's result for a run in one process, the merger from its workers' final
reports for a distributed run, and both write them through :meth:`RunFacts.summary_fields`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.core.result import OUTCOME_COMPLETED


@dataclass
class RunFacts:
    """How a run ended and what it ran: the fields every kind of run writes."""

    reason: str
    last_state: str
    error: str | None
    sessions: int
    sessions_started_at: str | None
    warmup_s: float
    measured_s: float
    stages: list[dict[str, Any]]
    mix: dict[str, Any]
    workload: dict[str, Any]
    target: dict[str, Any]
    collectors: list[dict[str, Any]]
    collector_errors: dict[str, int]
    findings: dict[str, Any] = field(default_factory=dict)
    #: Stopped by a person during the measurement: ``completed``, a shorter window.
    stopped_early: bool = False

    def summary_fields(self, **more: Any) -> dict[str, Any]:
        """The fields as summary.json holds them, then ``more``: what only one kind of run
        has (the session runner, errors and outages of one process; ``distributed``)."""
        return {
            "reason": self.reason,
            "stopped_early": self.stopped_early,
            "last_state": self.last_state,
            "error": self.error,
            "sessions": self.sessions,
            "timing": {
                "sessions_started_at": self.sessions_started_at,
                "warmup_s": round(self.warmup_s, 3),
                "measured_s": round(self.measured_s, 3),
            },
            "stages": self.stages,
            "mix": self.mix,
            "workload": self.workload,
            "target": self.target,
            "collectors": self.collectors,
            "collector_errors": self.collector_errors,
            "findings": self.findings,
            **more,
        }


def status_text(summary: Mapping[str, Any]) -> str:
    """The run's status as people read it: ``completed (stopped early)`` for a run a person
    stopped during its measurement, else the status itself."""
    status = str(summary.get("status") or "unknown")
    if status == OUTCOME_COMPLETED and summary.get("stopped_early"):
        return "completed (stopped early)"
    return status
