"""A run's stages: the calibration (when load is asked in device IOPS), the warm-up and the
measured stretches (steps of a sweep), each with its phase, session count, rate and lab
ceilings, planned from the scenario's load section."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sim.config.scenario import Load, Step

#: The phase of the closed-loop stage that measures device I/Os per operation (rate_iops).
PHASE_CALIBRATE = "calibrate"


@dataclass(frozen=True)
class Stage:
    """A stretch of the run with one phase, session count and rate."""

    phase: str  # "calibrate", "warmup" or "measure"
    step: int | None
    duration_s: float | None  # None: until every session finished its loops
    sessions: int
    #: Open-loop rate; None: closed loop (always in the calibration stage).
    rate_ops_s: float | None
    #: Lab ceilings to apply when the stage starts (``Step.lab``), or None.
    lab: dict[str, int | str | None] | None = None
    #: Device IOPS asked; ``rate_ops_s`` is set from it once the calibration has run.
    rate_iops: float | None = None


def plan_stages(load: Load, default_sessions: int) -> list[Stage]:
    """The run's stages in order, from the scenario's load section."""
    sessions = load.sessions or default_sessions
    stages: list[Stage] = []
    rates = [_rates(load, step) for step in load.steps] or [_rates(load, None)]
    first_lab = _lab(load.steps[0]) if load.steps else None
    first_sessions = (load.steps[0].sessions if load.steps else None) or sessions
    if load.asks_iops:
        stages.append(
            Stage(PHASE_CALIBRATE, None, load.calibration_s, first_sessions, None, first_lab)
        )
    if load.warmup_s > 0:
        ops_s, iops = rates[0]
        warmup = Stage("warmup", None, load.warmup_s, first_sessions, ops_s, first_lab, iops)
        stages.append(warmup)
    if load.steps:
        for i, step in enumerate(load.steps):
            ops_s, iops = rates[i]
            count = step.sessions or sessions
            stages.append(Stage("measure", i, step.duration_s, count, ops_s, _lab(step), iops))
    else:
        duration = None if load.loops_per_session else load.duration_s
        ops_s, iops = rates[0]
        stages.append(Stage("measure", None, duration, sessions, ops_s, None, iops))
    return stages


def _rates(load: Load, step: Step | None) -> tuple[float | None, float | None]:
    """(rate_ops_s, rate_iops) of a step: its own rate, either kind, else the load's."""
    if step is not None and (step.rate_ops_s or step.rate_iops):
        return step.rate_ops_s, step.rate_iops
    return load.rate_ops_s, load.rate_iops


def calibrated(stages: list[Stage], io_per_op: float) -> list[Stage]:
    """The stages with each one asked in device IOPS given its ops/s rate: IOPS / I/Os per op."""
    return [
        dataclasses.replace(s, rate_ops_s=s.rate_iops / io_per_op) if s.rate_iops else s
        for s in stages
    ]


def _lab(step: Step) -> dict[str, int | str | None] | None:
    return step.lab.model_dump(exclude_unset=True) if step.lab is not None else None
