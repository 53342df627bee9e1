"""The options of one baseline run, and the checks a run and a dry run share before anything
else (exit 2 on bad input, nothing written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.baseline.matrix import Depth, PlannedPoint, plan
from sim.errors import ConfigError


@dataclass
class BaselineOptions:
    target: Path
    presets: list[str]
    raw_device: str | None = None
    only: list[str] = field(default_factory=list)
    numjobs: int | None = None
    iodepth: Depth = None  # a number, "search", or None (the presets' own)
    curve: tuple[int, ...] | None = None  # None: the presets' iorate curves
    runtime_s: float = 30.0
    ramp_s: float = 5.0
    size_bytes: int | None = None  # files: the working set; device: the span used
    envelope: str | None = None
    lab: bool = False
    keep_files: bool = False
    directory: Path = Path("runs")
    name: str | None = None
    interval_s: float = 1.0
    fio_binary: str | None = None
    direct: bool = True
    capacity_tib: float | None = None  # the volume's size, for envelopes that scale with it


def checked(opts: BaselineOptions) -> tuple[list[PlannedPoint], Any]:
    """The options a run and a dry run both check before anything else: the points planned,
    and the envelope (None without ``--envelope``); ConfigError (exit 2) otherwise."""
    if opts.runtime_s <= 0 or opts.ramp_s < 0 or opts.interval_s <= 0:
        raise ConfigError("baseline: --runtime and --interval must be > 0, --ramp ≥ 0")
    points = plan(opts.presets, opts.only, opts.numjobs, opts.iodepth, curve=opts.curve)
    if not opts.envelope:
        if opts.capacity_tib is not None:
            raise ConfigError(
                "baseline --capacity: it chooses an envelope's figures; give --envelope"
            )
        return points, None
    from storage.envelopes import get_envelope

    try:
        envelope = get_envelope(opts.envelope)
    except ConfigError as exc:  # name the option: the message alone says "envelope"
        raise ConfigError(f"baseline --envelope: {exc}") from None
    if opts.capacity_tib is not None and envelope.spec.capacity.kind != "points":
        # A size the comparison would not use is refused, never quietly dropped.
        raise ConfigError(
            f"baseline --capacity: {opts.envelope} is not published per volume size; "
            "leave --capacity out"
        )
    return points, envelope
