"""Load asked in device IOPS (``load.rate_iops``, ``load.steps[].rate_iops``, a sweep over
``rate_iops``): a closed-loop calibration stage measures the device I/Os per operation, and
each stage asked in IOPS runs open loop at ``rate_iops / io_per_op`` ops/s.

The calibration stage runs before the warm-up, at the first stage's sessions, for
``load.calibration_s``. Each of its intervals sampled by the block collector gives one ratio
``(r/s + w/s) / ops/s`` on the calibration device: the device with the most IOPS over the
calibration (the bundle's primary device, :func:`sim.bundle.figures.primary_device`), which is
the device under the data for a target whose storage paths resolve to one. The estimate is
the ratio of sums — all device I/Os over all operations issued, which a mean of per-interval
ratios would overstate when an interval holds few operations — with a Student-t 95 %
confidence interval from the ratio estimator's standard error across the intervals (each
interval one observation; intervals with no operation are left out and counted).

A calibration that sees (almost) no device I/O per operation — the data is served from a
cache — cannot convert IOPS into a rate: the run fails (exit 3, ``status: failed``, the bundle
says why) rather than offering an unbounded rate. A run asked in IOPS without a block device
under the data is refused before any session starts (exit 2).

From then on the stages asked in IOPS run open loop in their sessions but closed loop on
the delivered device IOPS (``load.iops_control: closed``, the default; sim.run.iops_control):
every collector interval the device I/Os per operation are measured again and the stage's
ops/s rate is set from them, so the run holds the IOPS asked while that cost drifts;
``iops_control: open`` keeps the calibration's rate for the whole run (the behaviour before).

As the run goes on, each stage asked in IOPS records in its stage log entry the device IOPS
delivered on the calibration device (``delivered_iops``), its tolerance and whether it held
(``iops_tolerance``, ``iops_held``; ``iops_unmet`` when the target was too slow), and a
console line says requested against delivered; the summary's ``calibration.control`` holds,
per interval, the IOPS asked and delivered, the cost per operation and the rate set. The run's last interval closes only once the sessions have drained (their
operations in flight finish, none is issued): it is left out of the last stage's figure when
it ends past the stage's time, since its rate is diluted by the drain.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sim import registry
from sim.bundle.figures import finite, primary_device
from sim.config.scenario import ScenarioBase
from sim.core.stages import PHASE_CALIBRATE, Stage, calibrated
from sim.errors import ConfigError, SimError
from sim.run.iops_control import (
    COLUMNS,
    GAIN,
    MAKEUP_INTERVALS,
    MAKEUP_SHARE,
    Controller,
    judge_stage,
)

if TYPE_CHECKING:
    from sim.core.engine import Engine
    from sim.core.metrics import Interval
    from sim.protocols import Sample, Target

#: Below this many device I/Os per operation the storage is not exercised (the data is
#: cached): converting IOPS into ops/s would ask for a rate without bound.
MIN_IO_PER_OP = 0.01
#: Fewest calibration intervals with operations and a device sample: a mean and a spread.
MIN_INTERVALS = 2
#: An interval ending later than this share of an interval past its stage's time holds the
#: run's drain (a stage boundary closes its interval a few milliseconds after the time).
DRAIN_FRACTION = 0.1
METHOD = (
    "ratio of sums (device I/Os / operations issued) over the intervals; 95 % Student-t "
    "interval from the ratio estimator's standard error across intervals"
)


class CalibrationError(SimError):
    """The calibration could not give device I/Os per operation: the run fails (exit 3)."""


@dataclass(frozen=True)
class Point:
    """One calibration interval: operations issued, its seconds, device IOPS per device."""

    ops: int
    seconds: float
    device_iops: Mapping[str, float]


def estimate(points: Sequence[Point], device: str | None = None) -> dict[str, Any]:
    """Device I/Os per operation from calibration intervals: on ``device`` (default: the one
    with the most IOPS), the mean of the intervals' ratios and its 95 % t interval. Raises
    :class:`CalibrationError` when there are too few intervals or no device I/O to speak of."""
    means = _device_means(points)
    device = device or primary_device({d: {"iops": v} for d, v in means.items()})
    if device is None:
        raise CalibrationError("calibration: the block collector gave no device figures")
    usable = [p for p in points if p.ops > 0 and device in p.device_iops and p.seconds > 0]
    where = f"{len(usable)} intervals on {device}"
    if len(usable) < MIN_INTERVALS:
        raise CalibrationError(
            f"calibration: {where} with operations and device figures (at least "
            f"{MIN_INTERVALS} needed): lengthen load.calibration_s"
        )
    ios = [p.device_iops[device] * p.seconds for p in usable]
    ops = [float(p.ops) for p in usable]
    ratio, half = ratio_interval(ios, ops)
    if ratio < MIN_IO_PER_OP:
        raise CalibrationError(
            f"calibration: storage not exercised: {ratio:.3g} device I/Os per op over "
            f"{where} (the data is served from a cache), so rate_iops cannot be converted to "
            "an ops/s rate; make the data larger than the caches or ask in rate_ops_s"
        )
    seconds = sum(p.seconds for p in usable)
    return {
        "device": device,
        "io_per_op": round(ratio, 4),
        "ci95": [round(ratio - half, 4), round(ratio + half, 4)],
        "method": METHOD,
        "intervals": len(usable),
        "intervals_left_out": len(points) - len(usable),
        "ops_s": round(sum(ops) / seconds, 2),
        "device_iops": round(sum(ios) / seconds, 1),
        # Per interval: operations issued, seconds, device I/Os (the estimate's inputs).
        "points": [
            [p.ops, round(p.seconds, 3), round(io, 1)] for p, io in zip(usable, ios, strict=True)
        ],
    }


def ratio_interval(ios: Sequence[float], ops: Sequence[float]) -> tuple[float, float]:
    """The ratio estimator ``sum(ios) / sum(ops)`` and the half-width of its 95 % interval:
    ``t(0.975, n-1) * s_d / (sqrt(n) * mean(ops))``, ``s_d`` the standard deviation of the
    residuals ``ios - ratio * ops`` (Cochran, Sampling Techniques, 6.3)."""
    # Imported here: check_calibration serves validate, which needs no analysis (numpy's
    # typing and every analysis module: ~10 ms CPU of its start).
    from sim.analysis.stats import t975

    n = len(ios)
    ratio = sum(ios) / sum(ops)
    residuals = [y - ratio * x for y, x in zip(ios, ops, strict=True)]
    spread = statistics.stdev(residuals) if n > 1 else math.inf
    return ratio, t975(n - 1) * spread / (math.sqrt(n) * statistics.fmean(ops))


def _device_means(points: Sequence[Point]) -> dict[str, float]:
    devices = sorted({d for p in points for d in p.device_iops})
    return {
        d: statistics.fmean(p.device_iops[d] for p in points if d in p.device_iops) for d in devices
    }


def conversion_line(section: Mapping[str, Any], asked: Sequence[float]) -> str:
    """The console's line: ``calibration: 1.93 device I/Os per op (95 % CI 1.85-2.01, 10
    intervals on loop3): 1,000 IOPS asked = 518 ops/s``."""
    lo, hi = section["ci95"]
    io = section["io_per_op"]
    head = (
        f"calibration: {io:.3g} device I/Os per op (95 % CI {lo:.3g}-{hi:.3g}, "
        f"{section['intervals']} intervals on {section['device']}): "
    )
    rates = [f"{iops:,.0f} IOPS asked = {_rate(iops / io)} ops/s" for iops in asked[:4]]
    more = f", … ({len(asked) - 4} more)" if len(asked) > 4 else ""
    return head + ", ".join(rates) + more


def delivered_line(entry: Mapping[str, Any], device: str) -> str:
    """A stage's requested against delivered device IOPS, for the console."""
    name = "warm-up" if entry.get("phase") == "warmup" else _label(entry)
    asked, got = float(entry["rate_iops"]), entry.get("delivered_iops")
    text = f"{name}: {asked:,.0f} IOPS asked"
    if got is None:
        return f"{text}, no device figures on {device}"
    rate = finite(entry.get("rate_ops_s"))
    offered = f"; {_rate(rate)} ops/s offered" if rate is not None else ""
    held = ""
    if entry.get("iops_tolerance") is not None:
        word = "held" if entry.get("iops_held") else "NOT held"
        held = f"; {word} (±{100 * entry['iops_tolerance']:.0f} %)"
        if entry.get("iops_unmet"):
            held += ": target too slow"
    return f"{text}, {got:,.0f} delivered on {device} ({100 * got / asked:.0f} %){offered}{held}"


def _rate(ops_s: float) -> str:
    return f"{ops_s:,.0f}" if ops_s >= 10 else f"{ops_s:.3g}"


def _label(entry: Mapping[str, Any]) -> str:
    step = entry.get("step")
    return f"step {step + 1}" if isinstance(step, int) else "measured"


def check_calibration(scenario: ScenarioBase) -> None:
    """Refuse, before anything runs (exit 2), a scenario asked in IOPS whose settings cannot
    calibrate: the block collector off, or a calibration shorter than two intervals."""
    load, collectors = scenario.load, scenario.collectors
    if not load.asks_iops:
        return
    device = registry.collector_with_role(registry.ROLE_DEVICE)
    enabled = collectors.enabled
    if device is None:
        raise ConfigError(
            "load.rate_iops: needs a collector of the block devices under the data, and no "
            "collector declares that role"
        )
    if enabled == "none" or (isinstance(enabled, list) and device not in enabled):
        raise ConfigError(
            f"load.rate_iops: needs the {device} collector (collectors.enabled leaves it out): "
            "the device I/Os per operation are measured on the block device under the data"
        )
    if load.calibration_s < MIN_INTERVALS * collectors.interval_s:
        raise ConfigError(
            f"load.calibration_s: {load.calibration_s:g} s is shorter than {MIN_INTERVALS} "
            f"collector intervals ({collectors.interval_s:g} s each)"
        )


class Calibration:
    """The calibration of one run: wired to an engine by :func:`attach`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.source = registry.collector_with_role(registry.ROLE_DEVICE) or ""
        self.points: list[Point] = []
        self.section: dict[str, Any] = {}
        #: The stage log entry whose delivered IOPS are being summed, and its sampled
        #: intervals: (device I/Os, seconds, interval start, interval end).
        self._entry: dict[str, Any] | None = None
        self._parts: list[tuple[float, float, float, float]] = []
        #: The closed loop on the delivered IOPS (from the calibration on), and the rate in
        #: force per stage (phase, step).
        self.controller: Controller | None = None
        self._rates: dict[tuple[str, int | None], float] = {}

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        iops = {
            s.entity: r + w
            for s in samples
            if s.source == self.source
            and (r := finite(s.values.get("r_s"))) is not None
            and (w := finite(s.values.get("w_s"))) is not None
        }
        seconds = interval.t_end - interval.t_start
        if interval.phase == PHASE_CALIBRATE:
            if samples:  # a boundary's fragment is not sampled
                ops = sum(st.count + st.error_count for st in interval.ops.values())
                self.points.append(Point(ops, seconds, iops))
            return
        entry = self._entry_of(interval)
        if entry is not self._entry:
            self._close_entry()
            self._entry, self._parts = entry, []
        device = self.section.get("device")
        if entry is not None and device in iops and samples:
            part = (iops[device] * seconds, seconds, interval.t_start, interval.t_end)
            self._parts.append(part)
        if entry is not None and samples and self.controller is not None:
            self._control(interval, entry, iops.get(str(device)), seconds)

    def _control(
        self, interval: Interval, entry: dict[str, Any], delivered: float | None, seconds: float
    ) -> None:
        """One step of the closed loop: measure the interval's cost per operation, then set
        the rate of the stage now running (the interval may be the one a boundary closed)."""
        assert self.controller is not None
        key = (interval.phase, interval.step)
        offered = self._rates.get(key, float(entry.get("rate_ops_s") or 0.0))
        ops = sum(st.count + st.error_count for st in interval.ops.values())
        self.controller.update(
            float(entry["rate_iops"]),
            offered,
            delivered,
            ops / seconds if seconds > 0 else 0.0,
            (interval.t_end, interval.phase, interval.step),
            sessions=int(entry.get("sessions") or 1),
            seconds=seconds,
        )
        stage = self.engine._stage  # the stage running now: its rate follows the estimate
        if self.controller.closed and stage.rate_iops is not None:
            rate = self.controller.rate(stage.rate_iops, (stage.phase, stage.step))
            self.controller.rows[-1][8] = round(rate, 3)  # the rate set: the running stage's
            self._set_rate(stage.phase, stage.step, rate)

    def _set_rate(self, phase: str, step: int | None, rate: float) -> None:
        self._rates[(phase, step)] = rate
        self.engine.set_rate(rate)

    def _within_the_stage(self, entry: dict[str, Any]) -> list[tuple[float, float, float, float]]:
        """The entry's sampled intervals without one that ends past the stage's time: the
        run's last, which holds the drain (measured on the lab: 289 device IOPS over its 1.55 s
        after seven seconds at ~420, which took the step's figure from 395 to 377)."""
        duration = finite(entry.get("duration_s"))
        if not self._parts or duration is None:
            return self._parts
        end = self._parts[0][2] + duration + DRAIN_FRACTION * self.engine.interval_s
        kept = [p for p in self._parts if p[3] <= end]
        return kept or self._parts

    def _entry_of(self, interval: Interval) -> dict[str, Any] | None:
        """The stage log entry of the stage asked in IOPS that ``interval`` belongs to."""
        for entry in reversed(self.engine.result.stage_log):
            if entry.get("phase") == interval.phase and entry.get("step") == interval.step:
                return entry if "rate_iops" in entry else None
        return None

    def _close_entry(self) -> None:
        entry = self._entry
        if entry is None:
            return
        parts = self._within_the_stage(entry)
        io, seconds = sum(p[0] for p in parts), sum(p[1] for p in parts)
        entry["delivered_iops"] = round(io / seconds, 1) if seconds > 0 else None
        if self.controller is not None:
            # The rates set within the stage's time (not after the run's drain, see above).
            end = float(entry["t"]) + float(entry.get("duration_s") or 0.0)
            end += DRAIN_FRACTION * self.engine.interval_s
            kept = [
                i
                for i, r in enumerate(self.controller.rows)
                if (r[1], r[2]) == (entry["phase"], entry["step"]) and r[0] <= end
            ]
            rows = [self.controller.rows[i] for i in kept]
            owed = sum(self.controller.owed[i] for i in kept)
            if rows:
                entry["rate_ops_s_range"] = [min(r[8] for r in rows), max(r[8] for r in rows)]
            judge_stage(entry, sum(bool(r[9]) for r in rows), len(rows), owed)
        line = delivered_line(entry, self.section["device"])
        self.engine.events.notice.fire(message=line, warning=False)
        self._entry = None

    def on_stage(self, stage: Stage, log: dict[str, Any]) -> None:
        """A stage asked in IOPS starts at ``asked / cost`` ops/s, the cost as estimated now
        (the calibration's before the loop has run): ``io_per_op`` in its log entry."""
        if stage.rate_iops is None or not self.section:
            return
        log["calibration_device"] = self.section["device"]
        control = self.controller
        log["io_per_op"] = round(control.io_per_op, 4) if control else self.section["io_per_op"]
        if control is not None and control.closed:
            rate = control.rate(stage.rate_iops)
            log["rate_ops_s"] = round(rate, 3)
            self._set_rate(stage.phase, stage.step, rate)

    def on_finished(self, result: Any) -> None:
        self._close_entry()
        section = self.section or {"error": result.error}
        if self.controller is not None:
            section["control"] = {
                "mode": "closed" if self.controller.closed else "open",
                "law": (
                    "each interval: cost per op c = S_D / S_R, forgetting sums of device IOPS "
                    "and ops/s (gain g; step clamped x2, within x20 of the calibration's); rate "
                    "= (IOPS asked + stage shortfall / 3 intervals, within ±25 %) / c"
                    if self.controller.closed
                    else "open: the calibration's rate for the whole run"
                ),
                "gain": GAIN,
                "makeup_intervals": MAKEUP_INTERVALS,
                "makeup_share": MAKEUP_SHARE,
                "columns": list(COLUMNS),
                "rows": self.controller.rows,
            }
        result.calibration = section

    def on_calibrated(self, stages: list[Stage]) -> list[Stage]:
        """The stages with ops/s rates from the measured device I/Os per operation."""
        calibration = next(s for s in stages if s.phase == PHASE_CALIBRATE)
        self.section = estimate(self.points)
        asked = sorted({s.rate_iops for s in stages if s.rate_iops is not None})
        self.section.update(
            duration_s=calibration.duration_s,
            sessions=calibration.sessions,
            conversions=[
                {"rate_iops": a, "rate_ops_s": round(a / self.section["io_per_op"], 3)}
                for a in asked
            ],
        )
        self.section["line"] = conversion_line(self.section, asked)
        self.engine.events.notice.fire(message=self.section["line"], warning=False)
        closed = self.engine.load.iops_control == "closed"
        self.controller = Controller(
            self.section["io_per_op"], closed=closed, interval_s=self.engine.interval_s
        )
        return calibrated(stages, self.section["io_per_op"])

    def needs_device(
        self, before: Callable[[Target], Awaitable[dict[str, Any]]] | None
    ) -> Callable[[Target], Awaitable[dict[str, Any]]]:
        """The engine's pre-load hook, refusing first (exit 2, no session started) a target
        without a block device under its data."""

        async def check(target: Target) -> dict[str, Any]:
            if not any(c.source == self.source for c in self.engine.collectors):
                paths = ", ".join(str(p) for p in target.storage_paths()) or "none"
                raise ConfigError(
                    f"load.rate_iops: no block device under the data (storage paths: {paths}; "
                    "tmpfs, NFS and other file systems without one cannot be calibrated): "
                    "ask in rate_ops_s"
                )
            return await before(target) if before is not None else {}

        return check


def attach(engine: Engine) -> Calibration | None:
    """Wire the calibration to ``engine`` when its load is asked in device IOPS."""
    if not engine.load.asks_iops:
        return None
    cal = Calibration(engine)
    engine.on_calibrated = cal.on_calibrated
    engine.before_load = cal.needs_device(engine.before_load)
    engine.events.interval.add_listener(cal.on_interval)
    engine.events.stage.add_listener(cal.on_stage)
    engine.events.finished.add_listener(cal.on_finished)
    return cal
