"""Points measured in several fio runs: the iodepth search and the iorate curve, run through a
``run_once`` callback (one fio process, its files named by a stem), with the rules of
:mod:`sim.baseline.strategy`.

Files: a search step is ``fio/<point>.qd<depth>.*``, a curve step ``fio/<point>.iorate<pct>.*``;
the run a point settles on is also ``fio/<point>.*`` (``adopt``), so every point's figures sit
beside fio's own report under the point's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from sim.baseline.matrix import PlannedPoint
from sim.baseline.strategy import (
    SEARCH_CITES,
    SEARCH_GAIN,
    SearchStep,
    curve_rate,
    search_verdict,
)

RunOnce = Callable[[PlannedPoint, str, int | None, int | None], Awaitable[dict[str, Any]]]
"""(the point at its depth, the files' stem, rate_iops per job, the curve's percent)"""
Adopt = Callable[[str], None]
Say = Callable[[str], None]


def search_rule() -> str:
    return (
        f"iodepth 1, 6, 11 … per seed job, scaled to this host's jobs; stop when a run gains "
        f"under {SEARCH_GAIN:.0%} over the best before it, after nine runs, or when a run does "
        f"not complete; settle on the highest throughput ({SEARCH_CITES[1]})"
    )


def _summary(result: dict[str, Any], **extra: Any) -> dict[str, Any]:
    read, write = result.get("read") or {}, result.get("write") or {}
    return {
        **extra,
        "status": result.get("status"),
        "iops": result.get("iops"),
        "mib_s": result.get("mib_s"),
        "read_p50_us": read.get("p50_us") if read.get("ios") else None,
        "read_p99_us": read.get("p99_us") if read.get("ios") else None,
        "write_p50_us": write.get("p50_us") if write.get("ios") else None,
        "write_p99_us": write.get("p99_us") if write.get("ios") else None,
        "t_measure_start": result.get("t_measure_start"),
        "t_end": result.get("t_end"),
        "device": result.get("device"),
    }


async def searched(
    planned: PlannedPoint, run_once: RunOnce, adopt: Adopt, say: Say
) -> dict[str, Any]:
    """Run the search's steps until the rule stops it; the point's result is the settled run's,
    with every step and the reason under ``search``."""
    steps: list[SearchStep] = []
    results: list[dict[str, Any]] = []
    stems: list[str] = []
    for seed_depth, depth in planned.search:
        stem = f"{planned.point.id}.qd{depth}"
        result = await run_once(planned.at_depth(depth), stem, None, None)
        done = result.get("status") == "completed"
        steps.append(SearchStep(seed_depth, depth, result.get("iops") if done else None))
        results.append(result)
        stems.append(stem)
        if done:
            say(f"    search: iodepth {depth} (seed {seed_depth}): {result['iops']:,.0f} IOPS")
        verdict = search_verdict(steps, list(planned.search))
        if verdict.done:
            break
    chosen = verdict.settled if verdict.settled is not None else len(results) - 1
    adopt(stems[chosen])
    best = dict(results[chosen])
    if results[-1].get("status") != "completed":  # interrupted or failed: the point says so
        best["status"] = results[-1].get("status")
    best["search"] = {
        "rule": search_rule(),
        "steps": [
            _summary(r, seed_iodepth=s.seed_depth, iodepth=s.iodepth, files=stem)
            for s, r, stem in zip(steps, results, stems, strict=True)
        ],
        "settled_iodepth": steps[chosen].iodepth,
        "settled_seed_iodepth": steps[chosen].seed_depth,
        "why": verdict.why,
    }
    if best.get("status") == "completed":
        say(f"    settled on iodepth {steps[chosen].iodepth} (seed {steps[chosen].seed_depth}): "
            f"{verdict.why}")  # fmt: skip
    return best


async def curved(
    planned: PlannedPoint, top: dict[str, Any], run_once: RunOnce, say: Say
) -> dict[str, Any]:
    """After the uncapped run ``top``: one run per curve percentage, fio's ``rate_iops`` per
    job set to that share of ``top``'s IOPS; the steps go under ``curve``."""
    max_iops = float(top.get("iops") or 0.0)
    steps = []
    for pct in planned.curve:
        rate = curve_rate(max_iops, pct, planned.numjobs)
        stem = f"{planned.point.id}.iorate{pct}"
        result = await run_once(replace(planned, curve=()), stem, rate, pct)
        steps.append(
            _summary(result, pct=pct, rate_iops_per_job=rate,
                     target_iops=rate * planned.numjobs, files=stem)
        )  # fmt: skip
        if result.get("status") != "completed":
            break
        say(f"    curve {pct} %: asked {rate * planned.numjobs:,} IOPS, measured "
            f"{result['iops']:,.0f}")  # fmt: skip
    out = dict(top)
    out["curve"] = {"max_iops": max_iops, "steps": steps}
    if steps and steps[-1]["status"] != "completed":
        out["status"] = steps[-1]["status"]
    return out
