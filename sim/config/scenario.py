"""Scenario files: YAML validated once into a frozen, typed model.

Precedence, resolved once here and nowhere else: CLI overrides > ``DBSIM_*`` environment
(``DBSIM_LOAD__SESSIONS=8`` sets ``load.sessions``) > the scenario file > defaults. The result
is a frozen :class:`Scenario` passed down explicitly; there is no global config getter.

Every invalid field becomes one line ``path: what is wrong``; the CLI prints them all and exits
with code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    model_validator,
)

ENV_PREFIX = "DBSIM_"
DEFAULT_DURATION_S = 30.0
DEFAULT_OUTPUT_DIR = Path("runs")
#: Most sessions one process runs. Measured at 4,096 (docs/safety.md, "Input"): on SQLite a
#: thread, two file descriptors and up to target.cache_size_kib of page cache per session
#: (2.6 GiB RSS, 8,213 descriptors after 5 s; SQLite's one writer then makes 10 % of updates
#: time out: an invalid run, said so); PostgreSQL refuses at connect time the sessions beyond
#: the server's max_connections, with the figures.
MAX_SESSIONS = 4096
#: Most load.steps (a sweep's included).
MAX_STEPS = 10_000
#: load.max_error_pct's default: more failed operations than this and the figures describe
#: the errors, not the storage.
DEFAULT_MAX_ERROR_PCT = 1.0
#: load.calibration_s's default: ten one-second intervals of device I/Os per operation.
DEFAULT_CALIBRATION_S = 10.0
#: Deepest nesting a scenario may have (its own sections go ~6 deep; collectors.ontap is free
#: form). Deeper input is a mistake or an attack and would exhaust Python's recursion limit.
MAX_DEPTH = 32
#: Most values (mappings, lists, scalars) a scenario may hold: YAML aliases nested in aliases
#: expand exponentially ("billion laughs") and would keep validation busy for hours.
MAX_VALUES = 100_000
#: Most steps a sweep expands to.
MAX_SWEEP_STEPS = 100
LATENCY_LIMITS = {"p50_us_max": "p50_us", "p95_us_max": "p95_us", "p99_us_max": "p99_us"}
OP_LIMITS = (*LATENCY_LIMITS, "ops_s_min", "error_pct_max")
#: Device latency limit → the device-latency collector's figure it bounds (ms).
DEVICE_LATENCY_LIMITS = {"device_p95_ms_max": "p95_ms", "device_p99_ms_max": "p99_ms"}
STORAGE_LIMITS = ("iops_min", "await_ms_max", *DEVICE_LATENCY_LIMITS)


class StrictModel(BaseModel):
    # allow_inf_nan=False: ``duration_s: .inf`` (or ``--duration inf``) would run forever and
    # ``.nan`` compares false with every bound; both are refused with the field named.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Slo(BaseModel):
    """One service-level objective: limits for an operation (or all) or for a device."""

    # allow_inf_nan=False: an .inf limit is always met and would be written to summary.json as
    # Infinity, which is not JSON.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str | None = Field(default=None, description="A label for reports (optional).")
    op: str | None = Field(
        default=None,
        min_length=1,
        description="Operation the limits apply to; '*' (the default): every operation.",
    )
    device: str | None = Field(
        default=None,
        min_length=1,
        description="Block device for storage limits; unset: the device with the most IOPS.",
    )
    p50_us_max: float | None = Field(default=None, gt=0, description="Median latency, µs.")
    p95_us_max: float | None = Field(default=None, gt=0, description="95th percentile, µs.")
    p99_us_max: float | None = Field(default=None, gt=0, description="99th percentile, µs.")
    ops_s_min: float | None = Field(default=None, gt=0, description="Completed operations/s.")
    error_pct_max: float | None = Field(
        default=None, ge=0, le=100, description="Errors in percent of operations issued."
    )
    iops_min: float | None = Field(default=None, gt=0, description="Device IOPS (mean).")
    await_ms_max: float | None = Field(
        default=None, gt=0, description="Device await, ms (mean, reads and writes)."
    )
    device_p95_ms_max: float | None = Field(
        default=None, gt=0, description="Device 95th percentile latency, ms (eBPF)."
    )
    device_p99_ms_max: float | None = Field(
        default=None, gt=0, description="Device 99th percentile latency, ms (eBPF)."
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Slo:
        ops = [k for k in OP_LIMITS if getattr(self, k) is not None]
        storage = [k for k in STORAGE_LIMITS if getattr(self, k) is not None]
        if not ops and not storage:
            raise ValueError(f"give at least one limit ({', '.join(OP_LIMITS + STORAGE_LIMITS)})")
        # A device IOPS floor under "op: read" would read as read IOPS, which it is not.
        if ops and storage:
            raise ValueError(
                f"operation limits ({', '.join(ops)}) and storage limits ({', '.join(storage)}) "
                "go in separate entries"
            )
        if ops and self.device is not None:
            raise ValueError(f"device applies to storage limits ({', '.join(STORAGE_LIMITS)}) only")
        if storage and self.op is not None:
            raise ValueError("op applies to operation limits only; name a device instead")
        return self

    @property
    def storage(self) -> bool:
        """Whether this entry holds storage limits (else operation limits)."""
        return any(getattr(self, k) is not None for k in STORAGE_LIMITS)

    def limits(self) -> list[tuple[str, float]]:
        """The limits set, in a fixed order."""
        return [
            (k, v) for k in (*OP_LIMITS, *STORAGE_LIMITS) if (v := getattr(self, k)) is not None
        ]


class Sweep(BaseModel):
    """A load ramp: ``start``, then ×``factor`` or +``step`` per step, up to ``max``."""

    # allow_inf_nan=False: ``max: .inf`` has no whole number of steps (int(inf) overflows);
    # refused as a field error instead.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    vary: Literal["sessions", "rate_ops_s", "rate_iops"] = Field(
        description="What each step raises (rate_iops: device IOPS asked, docs/validation.md)."
    )
    start: float = Field(gt=0, description="The first step's sessions or rate.")
    max: float = Field(gt=0, description="No step goes above this.")
    factor: float | None = Field(default=None, gt=1, description="Multiply per step.")
    step: float | None = Field(default=None, gt=0, description="Add per step.")
    step_duration_s: float = Field(gt=0, description="Measured seconds per step.")
    stop_on_breach: bool = Field(
        default=True, description="End the run after the first step that missed an SLO."
    )

    @model_validator(mode="after")
    def _ramp(self) -> Sweep:
        if (self.factor is None) == (self.step is None):
            raise ValueError("give either factor (multiply per step) or step (add per step)")
        if self.start > self.max:
            raise ValueError(f"start ({self.start:g}) is above max ({self.max:g})")
        if self.vary == "sessions":
            whole = {"start": self.start, "max": self.max, "step": self.step}
            fractional = [k for k, v in whole.items() if v is not None and v != int(v)]
            if fractional:
                raise ValueError(f"sessions are whole numbers: {', '.join(fractional)}")
            if self.max > MAX_SESSIONS:
                raise ValueError(f"max: at most {MAX_SESSIONS} sessions")
        if len(self.values()) > MAX_SWEEP_STEPS:
            raise ValueError(
                f"more than {MAX_SWEEP_STEPS} steps from {self.start:g} to {self.max:g}; "
                "raise factor or step"
            )
        return self

    def values(self) -> list[float]:
        """The load of each step, rising, none above ``max``."""
        out = [self.start]
        while len(out) <= MAX_SWEEP_STEPS:
            last = out[-1]
            nxt = last * self.factor if self.factor is not None else last + (self.step or 0)
            # Sessions: ×1.2 of 1 session must still rise. Rates: 0.1 + 0.2 shows as 0.3.
            nxt = max(float(round(nxt)), last + 1) if self.vary == "sessions" else round(nxt, 6)
            if nxt > self.max * (1 + 1e-9):
                break
            out.append(nxt)
        return out

    def steps(self) -> list[dict[str, Any]]:
        """The ``load.steps`` this sweep stands for."""
        cast = int if self.vary == "sessions" else float
        return [{"duration_s": self.step_duration_s, self.vary: cast(v)} for v in self.values()]


class ThinkTime(StrictModel):
    """Closed-loop think time: every ``every_n_loops``-th loop a session waits a uniform
    random time in [min_ms, max_ms] (SLOB's THINK_TM_FREQUENCY / _MIN / _MAX)."""

    every_n_loops: int = Field(
        default=1, ge=1, description="Think every n-th loop (SLOB THINK_TM_FREQUENCY)."
    )
    min_ms: float = Field(default=0.0, ge=0, description="Shortest think time, ms.")
    max_ms: float = Field(default=0.0, ge=0, description="Longest think time, ms (≥ min_ms).")

    @model_validator(mode="after")
    def _ordered(self) -> ThinkTime:
        if self.max_ms < self.min_ms:
            raise ValueError("max_ms must be >= min_ms")
        return self


class LabCeilings(StrictModel):
    """Storage ceilings of the lab device (``dbsim lab``) for one step; 0 means unlimited and
    an omitted one keeps its value."""

    read_iops: int | None = Field(default=None, ge=0, description="Read IOPS ceiling.")
    write_iops: int | None = Field(default=None, ge=0, description="Write IOPS ceiling.")
    read_bps: int | None = Field(default=None, ge=0, description="Read bytes/s ceiling.")
    write_bps: int | None = Field(default=None, ge=0, description="Write bytes/s ceiling.")
    qos_iops: int | None = Field(
        default=None, ge=0, description="Array volume: the QoS policy's max IOPS (read + write)."
    )
    qos_bps: int | None = Field(
        default=None, ge=0, description="Array volume: the QoS policy's max bytes/s."
    )
    service_us: int | None = Field(
        default=None, ge=0, description="Array volume: the array's base service time in µs."
    )
    volume: str | None = Field(
        default=None,
        description="The lab volume these ceilings are for (`dbsim lab up --volume NAME`); "
        "needed when the lab has several.",
    )


class Step(StrictModel):
    """One load point of a stepped run: its length and what changes."""

    duration_s: float = Field(gt=0, description="Measured time of this step.")
    sessions: int | None = Field(
        default=None, ge=1, le=MAX_SESSIONS, description="Sessions of this step (else load's)."
    )
    rate_ops_s: float | None = Field(
        default=None, gt=0, description="Open-loop rate of this step, all sessions."
    )
    rate_iops: float | None = Field(
        default=None,
        gt=0,
        description="Device IOPS asked of this step (open loop), converted to ops/s by the "
        "run's calibration (docs/validation.md).",
    )
    lab: LabCeilings | None = Field(
        default=None,
        description="Set the lab device's ceilings when this step starts (root, lab up).",
    )

    @model_validator(mode="after")
    def _single_rate(self) -> Step:
        _one_rate(self.rate_ops_s, self.rate_iops)
        return self


class Load(StrictModel):
    """How the load is applied: sessions, duration, warm-up, pacing, steps."""

    sessions: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SESSIONS,
        description=f"Concurrent sessions (workload default if unset; at most {MAX_SESSIONS:,}). "
        "Each SQLite session holds its own page cache (target.cache_size_kib) and two file "
        "descriptors; on PostgreSQL, sessions beyond the server's max_connections (less the "
        "connections in use) are refused when they connect.",
    )
    duration_s: float = Field(
        default=DEFAULT_DURATION_S, gt=0, description="Measured time after warm-up."
    )
    warmup_s: float = Field(
        default=0.0, ge=0, description="Run before measuring; excluded from results."
    )
    loops_per_session: int | None = Field(
        default=None,
        ge=1,
        description="Fixed transactions per session instead of a duration (SLOB WORK_LOOP).",
    )
    mode: Literal["closed", "open"] = Field(
        default="closed",
        description="closed: each session starts its next op when the last ends (plus think time); "
        "open: ops are scheduled at rate_ops_s and latency counts from the intended start.",
    )
    rate_ops_s: float | None = Field(
        default=None, gt=0, description="Target rate for open loop, all sessions."
    )
    rate_iops: float | None = Field(
        default=None,
        gt=0,
        description="Device IOPS asked (open loop, all sessions), converted to an ops/s rate "
        "through the device I/Os per operation measured by a closed-loop calibration stage "
        "before the warm-up (docs/validation.md).",
    )
    iops_control: Literal["closed", "open"] = Field(
        default="closed",
        description="closed: the ops/s rate of a stage asked in rate_iops follows the device "
        "I/Os per operation measured every interval, holding the IOPS asked; open: the "
        "calibration's rate for the whole run (docs/validation.md).",
    )
    calibration_s: float = Field(
        default=DEFAULT_CALIBRATION_S,
        gt=0,
        description="Length of the calibration stage that rate_iops needs (at least two "
        "collector intervals); unused without rate_iops.",
    )
    think: ThinkTime | None = Field(
        default=None, description="Closed-loop think time between transactions (SLOB THINK_TM)."
    )
    steps: list[Step] = Field(
        default_factory=list,
        max_length=MAX_STEPS,
        description=f"Load points run one after another (at most {MAX_STEPS:,}: every step is "
        "a stage of summary.json's stage log and of the analysis; 10,000 steps cost dbsim "
        "about 40 s of its own time).",
    )
    seed: int | None = Field(default=None, description="Seed for reproducible random choices.")
    session_runner: Literal["auto", "native", "threads", "loop"] = Field(
        default="auto",
        description="How sessions run: auto (file-tree sessions in the native C loop when it "
        "is built, else each session on its own OS thread when the workload's sessions make "
        "blocking calls — file trees, SQLite, ODBC — else coroutines on the event loop), "
        "native, threads, or loop (always coroutines; blocking calls through a pool). "
        "The summary names the one used and why (session_runner).",
    )
    max_error_pct: float = Field(
        default=DEFAULT_MAX_ERROR_PCT,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="Error budget: a run in which any operation's errors (or all operations' "
        "together) pass this share of what was issued in the measured window ends failed "
        "(exit 3); an SLO with error_pct_max judges the share instead (exit 1). An operation "
        "with no success at all always fails the run (docs/bundle.md).",
    )
    sweep: Sweep | None = Field(
        default=None,
        description="Raise sessions or rate step by step until an SLO breaks (docs/validation.md); "
        "becomes load.steps.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _sweep_steps(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Load:
        # The sweep is expanded here, so the engine runs a sweep as ordinary steps. A resolved
        # scenario (a bundle's scenario.yaml) holds both: accepted when the steps are the sweep's.
        load = handler(data)
        if load.sweep is None or not isinstance(data, dict):
            return load
        if load.sweep.vary != "sessions" and load.mode != "open":
            raise ValueError(f"sweep.vary {load.sweep.vary} needs mode: open")
        expanded = handler({**data, "steps": load.sweep.steps()})
        if load.steps and load.steps != expanded.steps:
            raise ValueError("steps and sweep cannot be combined (the sweep makes the steps)")
        return expanded

    @model_validator(mode="after")
    def _consistent(self) -> Load:
        _one_rate(self.rate_ops_s, self.rate_iops)
        rated = self.rate_ops_s is not None or self.rate_iops is not None
        steps_rated = any(s.rate_ops_s or s.rate_iops for s in self.steps)
        if self.mode == "open" and not rated and not steps_rated:
            raise ValueError(
                "open-loop mode needs rate_ops_s or rate_iops (or a rate in every step)"
            )
        if self.mode == "closed" and (self.rate_ops_s is not None or steps_rated or rated):
            which = "rate_iops" if self.asks_iops else "rate_ops_s"
            raise ValueError(f"{which} applies to mode: open only: set mode: open")
        if self.mode == "open" and self.think is not None:
            raise ValueError("think time applies to mode: closed only")
        if self.steps and self.loops_per_session is not None:
            raise ValueError("steps and loops_per_session cannot be combined")
        return self

    @property
    def asks_iops(self) -> bool:
        """Whether some load is asked in device IOPS (then the run calibrates first)."""
        return self.rate_iops is not None or any(s.rate_iops for s in self.steps)


def _one_rate(rate_ops_s: float | None, rate_iops: float | None) -> None:
    if rate_ops_s is not None and rate_iops is not None:
        raise ValueError(
            "rate_iops and rate_ops_s conflict: give the rate in device IOPS or in ops/s, not both"
        )


class CollectorSettings(StrictModel):
    """Which storage collectors sample during the run; each collector's own options are the
    field named after it."""

    enabled: Literal["auto", "none"] | list[str] = Field(
        default="auto", description="'auto': every collector that applies to the target."
    )
    interval_s: float = Field(
        default=1.0,
        ge=0.1,
        le=60,
        description="Sampling interval: latencies and storage figures are grouped by it.",
    )
    timeout_s: float = Field(
        default=2.0, gt=0, description="A sample taking longer is dropped and counted."
    )


class Output(StrictModel):
    """Where the run bundle goes."""

    directory: Path = Field(
        default=DEFAULT_OUTPUT_DIR, description="Where run bundles are created (one per run)."
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$",
        description="Bundle directory name after its timestamp (default: the scenario's name).",
    )
    flush_interval_s: float = Field(
        default=2.0,
        ge=0.5,
        le=60,
        description="How often the bundle is flushed and summary.json rewritten.",
    )


class ScenarioBase(StrictModel):
    name: str = Field(
        default="scenario",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$",
        description="Names the run and its bundle directory.",
    )
    description: str = Field(default="", description="Free text, kept in the bundle.")
    load: Load = Field(
        default_factory=Load, description="Sessions, duration, warm-up, pacing and steps."
    )
    slos: list[Slo] = Field(
        default_factory=list,
        description="Service-level objectives; a missed one makes `dbsim run` exit 1 "
        "(docs/validation.md).",
    )
    collectors: CollectorSettings = Field(
        default_factory=CollectorSettings, description="Storage collectors sampled during the run."
    )
    output: Output = Field(default_factory=Output, description="Where the run bundle goes.")
