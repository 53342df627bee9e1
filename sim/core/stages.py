"""A run's stages: the warm-up and the measured stretches (steps of a sweep), each with its
phase, session count, rate and lab ceilings, planned from the scenario's load section."""

from __future__ import annotations

from dataclasses import dataclass

from sim.config.scenario import Load, Step


@dataclass(frozen=True)
class Stage:
    """A stretch of the run with one phase, session count and rate."""

    phase: str  # "warmup" or "measure"
    step: int | None
    duration_s: float | None  # None: until every session finished its loops
    sessions: int
    rate_ops_s: float | None
    #: Lab ceilings to apply when the stage starts (``Step.lab``), or None.
    lab: dict[str, int | str | None] | None = None


def plan_stages(load: Load, default_sessions: int) -> list[Stage]:
    """The run's stages in order, from the scenario's load section."""
    sessions = load.sessions or default_sessions
    stages: list[Stage] = []
    first_rate = load.rate_ops_s
    if load.steps:
        first_rate = load.steps[0].rate_ops_s or load.rate_ops_s
    first_lab = _lab(load.steps[0]) if load.steps else None
    if load.warmup_s > 0:
        first_sessions = (load.steps[0].sessions if load.steps else None) or sessions
        stages.append(Stage("warmup", None, load.warmup_s, first_sessions, first_rate, first_lab))
    if load.steps:
        for i, step in enumerate(load.steps):
            stages.append(
                Stage(
                    "measure",
                    i,
                    step.duration_s,
                    step.sessions or sessions,
                    step.rate_ops_s or load.rate_ops_s,
                    _lab(step),
                )
            )
    else:
        duration = None if load.loops_per_session else load.duration_s
        stages.append(Stage("measure", None, duration, sessions, load.rate_ops_s))
    return stages


def _lab(step: Step) -> dict[str, int | str | None] | None:
    return step.lab.model_dump(exclude_unset=True) if step.lab is not None else None
