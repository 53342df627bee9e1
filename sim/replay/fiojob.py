"""The fio job that reproduces a captured shape at a scale, on a file dbsim laid out.

Two jobs on the one file, a reader and a writer, each paced on its own rate: fio's mixed
``rw=randrw`` with ``rwmixread`` and a per-direction ``rate_iops`` delivered 112 reads/s of
300 asked here (one direction's pacing holds the other back). ``rate_iops`` with a
``bssplit`` and fio's default (linear) pacing paces by the smallest block size (fio's
documentation of ``rate_iops``): 192 of 600 asked with ``bssplit=8k/70:64k/30``. So a job of
one block size is paced evenly in bytes (``rate=``, the IOPS times the size: exact), and a
job of several sizes as Poisson arrivals at ``rate_iops`` (``rate_process=poisson``: 610 of
600 in 4 s, whose count is off by about 1/sqrt(n)); pacing those in bytes makes the count
follow each run's drawn sizes (3 % over, here).

- ``bssplit`` from the captured request-size histogram: each bucket's upper bound, scaled
  down together (each kept inside its bucket, 4 KiB aligned) when that brings the mix's mean
  closer to the captured mean size; without a histogram, the mean size alone.
- the rates: the captured read and write IOPS times the scale (over the calibration's
  device IOPS per IOPS fio completed, the request path's ratio, where it found one:
  :mod:`sim.replay.correction`).
- ``iodepth``: the production's requests in flight at issue, times the scale (Little's law at
  the same latency), times the direction's share, doubled so that a burst is not capped; at
  least 4: at depth 2, 405 writes/s asked of a device throttled to 506/s, beside two busy
  CPUs, fell 5.7 % short (a throttled request waits for its slice, tens of ms at p99).
- ``percentage_random``: 100 less the captured sequential share.

Where the load really ran is read from fio's own clock, not from when dbsim saw fio start and
end (beside CPU load dbsim noticed fio's end a second or more late, and a window stretched so
read the device's IOPS 5 % to 26 % low, which the calibration then "corrected"): each job
writes an IOPS log averaged over a tenth of a sampling interval and stamped on
CLOCK_MONOTONIC (``log_alternate_epoch``, clock id 1), the capture's own clock
(``time.monotonic``). fio logs nothing during its ramp and stamps a sample at the end of its
period, so a job's measured run starts at its first sample less one period and lasts fio's
``job_runtime`` (measured: within 50 ms of both ends).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.profile.device import SIZE_BOUNDS
from sim.replay.shape import BUCKETS, Shape

ALIGN_KIB = 4
MIN_DEPTH = 4
DEPTH_SLACK = 2.0
#: clock_gettime's CLOCK_MONOTONIC (Linux): fio's log stamps on the capture's clock.
MONOTONIC_CLOCK_ID = 1
#: The IOPS logs' averaging period, in parts of a sampling interval.
LOG_PARTS = 10
#: A log is dense (its first sample is its start) with samples for this share of its periods.
DENSE_SHARE = 0.5
#: The upper bound of each bucket, and its lower bound (KiB); "gt_1024" is taken as 2 MiB.
UPPER = dict(zip(BUCKETS, (*SIZE_BOUNDS, 2048), strict=True))
LOWER = dict(zip(BUCKETS, (0, *SIZE_BOUNDS), strict=True))


@dataclass(frozen=True)
class Direction:
    rw: str  # randread / randwrite
    iops: float
    split: tuple[tuple[int, int], ...]  # (KiB, %)
    depth: int

    @property
    def mean_kib(self) -> float:
        return sum(kib * pct for kib, pct in self.split) / 100.0

    @property
    def bssplit(self) -> str:
        return ":".join(f"{kib}k/{pct}" for kib, pct in self.split)


@dataclass(frozen=True)
class ReplayJob:
    scale: float
    directions: tuple[Direction, ...]
    random_pct: int
    rules: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "scale": self.scale,
            "random_pct": self.random_pct,
            "jobs": [
                {
                    "rw": d.rw,
                    "iops": d.iops,
                    "bssplit": d.bssplit,
                    "mean_kib": d.mean_kib,
                    "iodepth": d.depth,
                }
                for d in self.directions
            ],
            "rules": list(self.rules),
        }


def _percentages(weights: dict[str, float]) -> list[tuple[str, int]]:
    """Whole percentages adding up to 100 (largest remainders), zeros left out."""
    total = sum(weights.values())
    exact = {b: 100.0 * w / total for b, w in weights.items()}
    floors = {b: int(v) for b, v in exact.items()}
    left = 100 - sum(floors.values())
    for b in sorted(exact, key=lambda k: exact[k] - floors[k], reverse=True)[:left]:
        floors[b] += 1
    return [(b, p) for b, p in floors.items() if p > 0]


def _align(kib: float) -> int:
    return max(ALIGN_KIB, round(kib / ALIGN_KIB) * ALIGN_KIB)


def split_of(sizes: dict[str, float], mean_kib: float | None) -> tuple[tuple[int, int], ...]:
    """``bssplit`` entries (KiB, %) from the bucket counts, matched to the mean size."""
    if not sizes:
        return ((_align(mean_kib or ALIGN_KIB), 100),)
    shares = _percentages(sizes)
    upper = [(UPPER[b], p) for b, p in shares]
    if mean_kib:
        predicted = sum(k * p for k, p in upper) / 100.0
        factor = mean_kib / predicted
        scaled = []
        for (b, p), (k, _) in zip(shares, upper, strict=True):
            low = LOWER[b] + (ALIGN_KIB if LOWER[b] else 0)
            scaled.append((min(k, max(low, _align(k * factor))), p))
        if abs(sum(k * p for k, p in scaled) / 100.0 - mean_kib) < abs(predicted - mean_kib):
            upper = scaled
    merged: dict[int, int] = {}
    for kib, pct in upper:
        merged[kib] = merged.get(kib, 0) + pct
    return tuple(sorted(merged.items()))


def derive(
    shape: Shape, scale: float, correction: dict[str, dict[str, float]] | None = None
) -> ReplayJob:
    """The job at ``scale``; ``correction`` (the calibration's, per direction): ``iops`` is
    the device's IOPS over the IOPS fio completed (the request path's ratio), so fio is asked
    the rate that the device then sees as the capture's."""
    total = shape.iops
    correction = correction or {}
    inflight = shape.inflight if shape.inflight is not None else 1.0
    directions = []
    for rw, iops, sizes, mean in (
        ("randread", shape.read_iops, shape.read_sizes, shape.read_kib),
        ("randwrite", shape.write_iops, shape.write_sizes, shape.write_kib),
    ):
        if iops <= 0:
            continue
        fix = correction.get(rw.removeprefix("rand"), {})
        depth = max(MIN_DEPTH, math.ceil(DEPTH_SLACK * inflight * scale * iops / total))
        asked = iops * scale / fix.get("iops", 1.0)
        directions.append(Direction(rw, asked, split_of(sizes, mean), depth))
    seq = shape.seq_pct or 0.0
    rules = (
        "rates: the capture's read and write IOPS times the scale; one block size paced "
        "evenly in bytes (rate = IOPS x bs), several sizes as Poisson arrivals (rate_iops)"
        + (", over the calibration's device IOPS per IOPS fio completed" if correction else ""),
        "bssplit: the captured request-size buckets, sizes matched to the captured mean"
        if shape.read_sizes or shape.write_sizes
        else "bs: the captured mean request size (no request-size histogram was captured)",
        f"iodepth: {DEPTH_SLACK:g} x the captured {inflight:.3g} requests in flight x the "
        f"scale x the direction's share, at least {MIN_DEPTH}",
        f"percentage_random: 100 less the captured {seq:.3g} % sequential",
    )
    random_pct = min(100, max(0, round(100.0 - seq)))
    return ReplayJob(scale, tuple(directions), random_pct, rules)


def global_lines(filename: Path, size_bytes: int, random_pct: int) -> list[str]:
    return [
        "[global]",
        "ioengine=libaio",
        "direct=1",
        f"filename={filename}",
        f"size={size_bytes}",
        "time_based=1",
        "randrepeat=0",
        "norandommap=1",
        f"percentage_random={random_pct}",
    ]


def log_period_ms(interval_s: float) -> int:
    return max(10, round(1000 * interval_s / LOG_PARTS))


def log_lines(period_ms: int) -> list[str]:
    """Global lines: IOPS logs averaged over ``period_ms``, stamped on the monotonic clock;
    each job names its own log (``write_iops_log=DIR/NAME`` gives ``DIR/NAME_iops.log``)."""
    return [f"log_avg_msec={period_ms}", "log_alternate_epoch=1",
            f"log_alternate_epoch_clock_id={MONOTONIC_CLOCK_ID}", "per_job_logs=0"]  # fmt: skip


def job_windows(
    log_dir: Path, report: dict[str, Any], clock_t0: float, period_ms: int
) -> dict[str, tuple[float, float]]:
    """Per job of fio's JSON report with a dense log, its measured run (s, the capture's t
    whose 0 is ``clock_t0`` on the monotonic clock): its first sample less one period, plus
    fio's ``job_runtime``. fio writes no sample for a period without I/O, so a sparse job's
    first sample is late (0.4 writes/s: 5 s late): a log with samples for fewer than half its
    periods is left out."""
    out: dict[str, tuple[float, float]] = {}
    for job in report.get("jobs") or []:
        name = str(job.get("jobname"))
        runtime_ms = float(job.get("job_runtime") or 0)
        stamps = _stamps(log_dir, name)
        if not stamps or len(stamps) < DENSE_SHARE * runtime_ms / period_ms:
            continue
        start = (stamps[0] - period_ms) / 1000.0 - clock_t0
        out[name] = (start, start + runtime_ms / 1000.0)
    return out


def _stamps(log_dir: Path, name: str) -> list[float]:
    """The samples' times (ms) of the job's IOPS log (``NAME_iops.log``)."""
    path = log_dir / f"{name}_iops.log"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        return [float(line.split(",", 1)[0]) for line in handle if line.strip()]


def direction_lines(d: Direction, name: str) -> list[str]:
    """One job section: the direction, its sizes, its depth and its pacing."""
    lines = [f"[{name}]", f"rw={d.rw}", f"bssplit={d.bssplit}", f"iodepth={d.depth}"]
    if len(d.split) == 1:
        return [*lines, "rate_process=linear", f"rate={max(1, round(d.iops * d.mean_kib * 1024))}"]
    return [*lines, "rate_process=poisson", f"rate_iops={max(1, round(d.iops))}"]


def job_text(
    job: ReplayJob,
    filename: Path,
    size_bytes: int,
    runtime_s: float,
    ramp_s: float,
    comments: Sequence[str] = (),
    logs: tuple[Path, int] | None = None,
) -> str:
    """The job file; ``logs`` (a directory, the period in ms): each direction's IOPS log."""
    lines = [f"# {c}" for c in (*comments, *job.rules)]
    lines += global_lines(filename, size_bytes, job.random_pct)
    lines += [f"runtime={runtime_s:g}s", f"ramp_time={ramp_s:g}s"]
    lines += log_lines(logs[1]) if logs else []
    for d in job.directions:
        lines += direction_lines(d, d.rw)
        lines += [f"write_iops_log={logs[0] / d.rw}"] if logs else []
    return "\n".join(lines) + "\n"
