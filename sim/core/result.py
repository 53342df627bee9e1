"""How a run ended and what it measured: the engine fills a :class:`RunResult` as it goes,
and the summary is built from it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

OUTCOME_COMPLETED = "completed"
OUTCOME_INTERRUPTED = "interrupted"
OUTCOME_FAILED = "failed"


@dataclass
class RunResult:
    """How a run ended and what it measured (the bundle's summary is built from this)."""

    outcome: str = OUTCOME_FAILED
    reason: str = ""
    #: Stopped by a person during the measurement (``Engine.request_stop(early=True)``):
    #: still ``completed``, its window shorter than planned.
    stopped_early: bool = False
    last_state: str = "setup"
    started_wall: float = field(default_factory=time.time)
    sessions_started_wall: float | None = None
    measured_s: float = 0.0
    warmup_s: float = 0.0
    load_report: dict[str, Any] = field(default_factory=dict)
    verify_report: dict[str, Any] = field(default_factory=dict)
    collectors: list[dict[str, Any]] = field(default_factory=list)
    collector_errors: dict[str, int] = field(default_factory=dict)
    #: ``target.describe()`` taken while the target was open (closing may forget facts).
    target: dict[str, Any] = field(default_factory=dict)
    sessions: int = 0
    loops_completed: list[int] = field(default_factory=list)
    #: Sessions that lost their connection: when, when it was back, after how many attempts.
    outages: list[dict[str, Any]] = field(default_factory=list)
    #: Every stage entered: t (s since sessions started), phase, step, sessions, rate, lab.
    stage_log: list[dict[str, Any]] = field(default_factory=list)
    #: Per session: index of its first measured transaction and one past its last.
    op_ranges: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    #: How the sessions ran (sim.core.session_choice): ``native``, ``threads`` or ``event loop``.
    session_runner: str = ""
    #: Why that runner (e.g. "native loop unavailable: extension not built").
    session_runner_why: str = ""
    #: The exit code the error asks for (``SimError.exit_code``): 2 for bad input — a foreign
    #: object refused, the data missing under --skip-load — found before any session started.
    error_exit_code: int | None = None
    #: What the engine's ``before_load`` hook found (sim.core.cache: the data against the caches).
    cache: dict[str, Any] = field(default_factory=dict)
    #: The calibration of a run asked in device IOPS (sim.run.calibration), else empty.
    calibration: dict[str, Any] = field(default_factory=dict)
