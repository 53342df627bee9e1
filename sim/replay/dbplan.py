"""``dbsim replay --on SCENARIO.yaml``: the capture replayed as a SLOB-like workload on the
scenario's database, every scale through the normal run path (:mod:`sim.replay.dbrun`).

First a calibration at 1x with the model's parameters (:mod:`sim.replay.dbjob`): its run
measures the device reads one operation and the writes one update really cost on this
target, and every scale's ``update_pct`` is derived again from them; after each scale its own
measured costs correct them for the next (damped and bounded, ``correction`` in replay.json:
the read/write split is held across runs, the run's closed loop holds the total within one;
the device requests a scan of ``cf2`` made the same way, but a scale whose scans the caches
served is taken at once). On a target whose dialect reads consecutive blocks (PostgreSQL's
TID ranges) range reads make the captured mean read size, and the calibration measures what
one costs at the device (:mod:`sim.replay.dbsize`), corrected between scales the same way.
Where SLOB's mix cannot make the captured writes, the workload's appends make the rest
(:mod:`sim.replay.dbappend`): the writes one append costs are measured and corrected the same
way (a run that both updated and appended scales the job's two costs by one common factor).
When the capture wrote, every run warms up for the host's write-back delay first
(:func:`sim.replay.dbjob.warmup_for`). Each scale is then judged
by the fio path's tolerances (:mod:`sim.replay.fidelity`) on the run's own device figures;
an unfaithful scale is labelled with the cause its run shows: the run's ``iops_unmet`` (the
target too slow), the data under the caches (not exercising storage), or a mix SLOB cannot
make (the workload cannot reach the write share).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sim.bundle.files import new_bundle_dir
from sim.replay import dbappend, dbrowmix, dbsize, dbwarmup, fidelity, verdict
from sim.replay.dbjob import (
    CACHED_SCAN_REQUESTS,
    DbJob,
    derive,
    measured_costs,
    measured_scan_requests,
    write_pct_at,
)
from sim.replay.dbrun import DbScaleRun, read_scenario, run_db_scale

#: How far one scale's measured I/O per operation and writes per update move the costs the
#: next scale is derived from, and at most how many times in one step.
COST_GAIN = 0.5
COST_STEP = 2.0


def storage_hidden(summary: dict[str, Any]) -> str | None:
    """Why the run's reads came from memory, None when they reached the storage."""
    from sim.core.cache import not_exercised

    cache = summary.get("cache") or {}
    if cache.get("hidden_by_caches"):
        return f"not exercising storage: {cache.get('warning') or 'data under the caches'}"
    reason = not_exercised(summary)
    return f"not exercising storage: {reason}" if reason else None


def cause(failed: list[fidelity.Check], run: DbScaleRun, job: DbJob) -> str:
    """What the run shows for the checks that failed, the rate's cause first: the target too
    slow (the run's ``iops_unmet``), the data under the caches, a mix SLOB cannot make; then
    request sizes that are the database's own."""
    unmet = run.stage.get("iops_unmet")
    if unmet:
        return f"{unmet} (the run's closed loop on the delivered IOPS, measured)"
    hidden = storage_hidden(run.summary)
    if hidden:
        return hidden
    reasons = []
    rates = [c for c in failed if c.figure in ("read IOPS", "write IOPS", "read share")]
    if rates and not job.reachable:
        reasons.append(str(job.why))
    elif rates:
        reasons.append(_mix_moved(rates, run, job))
    for c in failed:
        if c.figure == "read size" and job.size_why:
            reasons.append(
                f"the workload cannot reach the read size: the database's mean read is "
                f"{c.delivered:.3g} KiB against the capture's {c.expected:.3g} ({c.off}): "
                f"{job.size_why}"
            )
        elif c.figure == "read size":
            lever = (
                f"range_pct {job.parameters['range_pct']}: the range reads'"
                if "range_pct" in job.parameters
                else f"scan_pct {job.parameters['scan_pct']}: the scans'"
            )
            reasons.append(
                f"the database's mean read size is {c.delivered:.3g} KiB against the "
                f"capture's {c.expected:.3g} ({c.off}) with {lever} share of multi-block "
                "reads moved from the costs measured before this run"
            )
        elif c.figure.endswith("size"):
            reasons.append(
                f"the database's mean {c.figure} is {c.delivered:.3g} KiB against the "
                f"capture's {c.expected:.3g} ({c.off}): its requests are its own blocks and "
                "log writes, sizes SLOB's parameters do not set"
            )
    return "; ".join(reasons)


def _mix_moved(rates: list[fidelity.Check], run: DbScaleRun, job: DbJob) -> str:
    """The run delivered another read/write split than its costs predicted: which cost moved
    and by how much, and the write share SLOB's nearest steps make on the costs the run
    measured (bench/replay_db.py: at update_pct 50 nothing lies between scan_pct 50 and 100)."""
    first = rates[0]
    asked, got = run.stage.get("rate_iops"), run.stage.get("delivered_iops")
    total = (
        f"the run held {got:,.1f} of {asked:,.1f} device IOPS asked, but "
        if run.stage.get("iops_held") and got is not None and asked is not None
        else ""
    )
    measured = run_costs(run, job)
    if job.row_costs is not None:
        return _row_mix_moved(first, total, run, job, measured["row_costs"])
    reads, per_update = measured["reads_per_op"], measured["writes_per_update"]
    per_append = measured["writes_per_append"]
    moved = []
    for words, before, after in (
        ("reads an operation on cf1", job.block_reads, reads),
        ("writes an update", job.per_update, per_update),
        ("writes an append", job.per_append, per_append),
    ):
        if before and after:
            moved.append(
                f"{words} {before:.3g} -> {after:.3g} ({100 * (after / before - 1):+.1f} %)"
            )
    u, scan = int(job.parameters["update_pct"]), int(job.parameters["scan_pct"])
    appends = int(job.parameters.get("append_pct") or 0)
    steps = ""
    if appends and reads and (per_update or not u) and per_append:
        made = ", ".join(
            f"update_pct {u} append_pct {b}: "
            f"{write_pct_at(u, scan, reads, per_update or 0.0, (b, per_append)):.1f} %"
            for b in (appends - 1, min(appends + 1, 100))
        )
        steps = (
            f"; on the costs this run measured the appends' nearest steps make {made} "
            f"writes, {job.asked_write_pct:.1f} % captured"
        )
    elif reads and per_update:
        near = [(50, 50), (50, 100)] if u == 50 else [(max(u - 1, 0), scan), (min(u + 1, 50), scan)]
        made = ", ".join(
            f"update_pct {a} scan_pct {b}: {write_pct_at(a, b, reads, per_update):.1f} %"
            for a, b in near
        )
        steps = (
            f"; on the costs this run measured SLOB's nearest steps make {made} writes, "
            f"{job.asked_write_pct:.1f} % captured"
        )
    return (
        f"the database's {first.figure} is not the capture's ({first.off}): {total}its I/O "
        f"per operation moved from the costs the job was derived from "
        f"({'; '.join(moved) or 'not measured'}; the closed loop holds the total, not the "
        f"split){steps}"
    )


def _row_mix_moved(first: fidelity.Check, total: str, run: DbScaleRun, job: DbJob, got: Any) -> str:
    """:func:`_mix_moved` for a row-update mix: the row costs that moved, and what the job's
    shares make on the costs the run measured (sim.replay.dbrowmix)."""
    assert job.row_costs is not None
    before = dbrowmix.RowCosts(
        job.row_costs["reads_per_row"], job.row_costs["writes_per_row_update"], None, ""
    )
    made = ""
    if got is not None:
        p, r = int(job.parameters["row_update_pct"]), int(job.parameters.get("range_pct") or 0)
        at = dbrowmix.figures(p, r, got)
        made = (
            f"; on the costs this run measured row_update_pct {p}, range_pct {r} make "
            f"{at.write_pct:.1f} % writes and {at.read_kib:.3g} KiB reads, "
            f"{job.asked_write_pct:.1f} % writes captured"
        )
    return (
        f"the database's {first.figure} is not the capture's ({first.off}): {total}its I/O "
        f"per operation moved from the costs the job was derived from "
        f"({dbrowmix.moved_words(before, got)}; the closed loop holds the total, not the "
        f"split){made}"
    )


def judge(production: Any, run: DbScaleRun, job: DbJob) -> dict[str, Any]:
    found = fidelity.checks(production, run.shape, run.scale)
    failed = [c for c in found if not c.ok]
    hidden = storage_hidden(run.summary)
    if hidden and not failed:  # faithful figures from the caches are not a storage replay
        failed = [fidelity.Check("storage exercised", "", None, None, "yes", False, "no")]
        found.append(failed[0])
    ratios = [v / (production.iops * run.scale) for v in run.shape.iops_per_interval]
    return {
        "faithful": not failed,
        "checks": [c.as_dict() for c in found],
        "failed": [c.figure for c in failed],
        "cause": cause(failed, run, job) if failed else None,
        "per_interval": {
            "intervals": len(ratios),
            "lowest_pct": 100 * min(ratios) if ratios else None,
            "highest_pct": 100 * max(ratios) if ratios else None,
        },
    }


def entry(plan: Any, job: DbJob, run: DbScaleRun) -> dict[str, Any]:
    judged = judge(plan.production, run, job)
    judgement = verdict.verdict_if_faithful(judged, plan.production, run.shape, plan.slos)
    return {
        "scale": run.scale,
        "slob": job.as_dict(),
        "scenario": str(run.scenario),
        "bundle": str(run.bundle),
        "run": {
            k: run.stage.get(k)
            for k in ("rate_iops", "delivered_iops", "iops_held", "iops_tolerance", "iops_unmet")
        },
        "replay": run.shape.as_dict(),
        "fidelity": judged,
        "verdict": judgement,
    }


def run_costs(run: DbScaleRun, job: DbJob) -> dict[str, Any]:
    """The costs a run measured: device reads an operation that reads ``cf1`` (the appends
    read nothing), writes an update, writes an append (None without appends: with updates
    too, :func:`sim.replay.dbappend.split_writes` scales the job's two by one common factor)
    and device requests a scan of ``cf2`` (None without scans)."""
    operations = run.summary.get("operations") or {}
    ops_s = sum(float(o.get("ops_s") or 0.0) for o in operations.values())
    scan_ops_s = float((operations.get("scan") or {}).get("ops_s") or 0.0)
    if job.row_costs is not None:  # a row-update mix: its own costs (sim.replay.dbrowmix)
        rows = dbrowmix.run_row_costs(run.shape, operations, int(job.parameters["work_unit"]))
        return {
            "ops_s": ops_s,
            "scan_ops_s": scan_ops_s,
            "reads_per_op": None,
            "writes_per_update": None,
            "writes_per_append": None,
            "scan_requests": None,
            "range_cost": None,
            "row_costs": rows,
        }
    if int(job.parameters.get("range_pct") or 0) > 0:
        reads, per_update, cost = dbsize.run_range_costs(run.shape, operations)
        per_update, per_append = _writes_split(run, job, operations, per_update)
        return {
            "ops_s": ops_s,
            "scan_ops_s": scan_ops_s,
            "reads_per_op": reads,
            "writes_per_update": per_update,
            "writes_per_append": per_append,
            "scan_requests": None,  # the multi-block requests are the range reads'
            "range_cost": cost,
            "row_costs": None,
        }
    per_scan, multiblock = measured_scan_requests(
        run.shape.read_iops, run.shape.read_kib, scan_ops_s
    )
    reads, per_update = measured_costs(
        run.shape.read_iops,
        run.shape.write_iops,
        ops_s,
        int(job.parameters["update_pct"]),
        int(job.parameters["scan_pct"]),
        multiblock,
        int(job.parameters.get("append_pct") or 0),
    )
    per_update, per_append = _writes_split(run, job, operations, per_update)
    return {
        "ops_s": ops_s,
        "scan_ops_s": scan_ops_s,
        "reads_per_op": reads,
        "writes_per_update": per_update,
        "writes_per_append": per_append,
        "scan_requests": per_scan,
        "range_cost": None,
        "row_costs": None,
    }


def _writes_split(
    run: DbScaleRun, job: DbJob, operations: dict[str, Any], per_update: float | None
) -> tuple[float | None, float | None]:
    """Writes an update and writes an append: a run without appends keeps its writes an
    update as measured; with appends the device's writes are split by the operations' rates
    (:func:`sim.replay.dbappend.split_writes`)."""
    if not int(job.parameters.get("append_pct") or 0):
        return per_update, None

    def rate(name: str) -> float:
        return float((operations.get(name) or {}).get("ops_s") or 0.0)

    prior = (job.per_update, job.per_append or dbappend.MODEL_WRITES_PER_APPEND)
    return dbappend.split_writes(run.shape.write_iops, rate("update"), rate("append"), prior)


def calibrated_costs(plan: Any, run: DbScaleRun, job: DbJob) -> dict[str, Any]:
    got = run_costs(run, job)
    got["range_cost"] = dbsize.as_dict(got["range_cost"])
    got["row_costs"] = dbrowmix.as_dict(got["row_costs"])
    return {
        "bundle": str(run.bundle),
        **got,
        "device": run.shape.as_dict(),
        "what": "measured at 1x with the model's parameters: the device's read IOPS over the "
        "operations/s that read cf1 (not the scans of cf2, not the appends), its write IOPS "
        "over the updates/s, and its multi-block read requests (the mean read size's excess "
        "over a block, in 128 KiB requests) over the scans/s; with range reads, its requests "
        "above one block (size buckets) over the range reads/s, and the block reads of the "
        "plain reads and updates only; with appends, its write IOPS over the appends/s when "
        "it made no update, else the model's writes an update and an append scaled by one "
        "common factor (the measured writes over the predicted: one equation, two costs)",
    }


async def execute_db(plan: Any, stop: asyncio.Event, say: Any = None) -> dict[str, Any]:
    base = read_scenario(plan.target)
    home = new_bundle_dir(plan.output, "replay")
    no_ranges = dbsize.range_reads_on(base)
    ranges: dbsize.RangeCost | None = dbsize.MODEL if no_ranges is None else None
    no_appends = dbappend.appends_on(base)
    rows = (
        dbrowmix.model_costs(no_ranges is None) if dbrowmix.row_updates_on(base) is None else None
    )
    first = derive(
        plan.production, 1.0, ranges=ranges, no_ranges=no_ranges,
        per_append=_append_cost(None, no_appends), rows=rows,
    )  # fmt: skip
    if say:
        say(f"dbsim replay: calibrating at 1x for {plan.duration_s:g} s on {plan.target}")
    run = await run_db_scale(
        base=base, job=first, duration_s=plan.duration_s, home=home, name="calibration",
        skip_load=False, stop=stop,
    )  # fmt: skip
    calibration = calibrated_costs(plan, run, first)
    costs: tuple[float | None, ...] = (
        calibration["reads_per_op"],
        calibration["writes_per_update"],
        calibration["scan_requests"],
        calibration["writes_per_append"],
    )
    if no_ranges is None:
        ranges = dbsize.corrected(ranges, run_costs(run, first)["range_cost"], 1.0, COST_STEP)
    if rows is not None:  # the calibration's row costs are taken at once, as its others are
        rows = dbrowmix.corrected(rows, run_costs(run, first)["row_costs"], 1.0, COST_STEP)
    scales = []
    for scale in plan.scales:
        job = derive(
            plan.production, scale, (costs[0], costs[1]), scan_requests=costs[2],
            ranges=ranges, no_ranges=no_ranges, per_append=_append_cost(costs[3], no_appends),
            rows=rows,
        )  # fmt: skip
        if say:
            say(f"dbsim replay: {scale:g}x for {plan.duration_s:g} s, {job.parameters}")
        run = await run_db_scale(
            base=base, job=job, duration_s=plan.duration_s, home=home, name=f"{scale:g}x",
            skip_load=_loaded(first, job), stop=stop,
        )  # fmt: skip
        done = entry(plan, job, run)
        costs, done["correction"] = corrected_costs(costs, run, job)
        ranges, rows = _correct_shared(run, job, (ranges, rows), done["correction"], no_ranges)
        scales.append(done)
    return document(plan, home, scales, calibration)


def _correct_shared(
    run: DbScaleRun,
    job: DbJob,
    before: tuple[dbsize.RangeCost | None, dbrowmix.RowCosts | None],
    correction: dict[str, Any],
    no_ranges: str | None,
) -> tuple[dbsize.RangeCost | None, dbrowmix.RowCosts | None]:
    """The range read's cost and the row-update mix's costs after a scale, corrected as
    :func:`corrected_costs` corrects the others, their rows added to ``correction``."""
    ranges, rows = before
    if no_ranges is None:
        got = run_costs(run, job)["range_cost"]
        old = ranges
        if not run.stage.get("iops_unmet"):
            ranges = dbsize.corrected(ranges, got, COST_GAIN, COST_STEP)
        for name, field in (("range_multi", "multi"), ("range_multi_kib", "multi_kib")):
            correction[name] = {
                k: getattr(c, field) if c is not None else None
                for k, c in (("before", old), ("measured", got), ("after", ranges))
            }
    if rows is not None:  # a row-update scale's own costs (its range reads' among them)
        got_rows, old_rows = run_costs(run, job)["row_costs"], rows
        if not run.stage.get("iops_unmet"):
            rows = dbrowmix.corrected(rows, got_rows, COST_GAIN, COST_STEP)
        if job.row_costs is not None:
            correction.update(dbrowmix.correction_rows(old_rows, got_rows, rows))
    return ranges, rows


def _append_cost(measured: float | None, no_appends: str | None) -> float | None:
    """The writes an append a job is derived from: None where the workload has no appends,
    else the measured, or the model's before a run appended."""
    if no_appends is not None:
        return None
    return measured if measured else dbappend.MODEL_WRITES_PER_APPEND


def _loaded(first: DbJob, job: DbJob) -> bool:
    """Whether a scale's run may skip the load: cf2 exists when the calibration scanned, cf3
    when it appended; a scale that scans or appends after a calibration that did not lets
    ``dbsim run`` load what is missing."""
    return all(
        int(first.parameters.get(name) or 0) > 0 or int(job.parameters.get(name) or 0) == 0
        for name in ("scan_pct", "append_pct")
    )


#: The costs a scale is derived from, in the order :func:`corrected_costs` carries them.
COST_NAMES = ("reads_per_op", "writes_per_update", "scan_requests", "writes_per_append")


def corrected_costs(
    costs: tuple[float | None, ...], run: DbScaleRun, job: DbJob
) -> tuple[tuple[float | None, ...], dict[str, Any]]:
    """The next scale's costs: each moved toward what this scale's run measured by
    :data:`COST_GAIN`, at most :data:`COST_STEP` times either way (damped and bounded: one
    run's noise, or a scale the target could not deliver, does not swing the next); the
    correction as replay.json records it. ``costs`` are the first of :data:`COST_NAMES`
    (the writes an append last: a caller without appends carries three), the same returned.
    With updates and appends both, their measured writes are the job's two scaled by one
    common factor (:func:`run_costs`), so the damping moves them by the same ratio."""
    got_costs = run_costs(run, job)
    names = COST_NAMES[: len(costs)]
    measured = tuple(got_costs[n] for n in names)
    out: list[float | None] = []
    rows = {}
    for name, old, got in zip(names, costs, measured, strict=True):
        new = old
        if run.stage.get("iops_unmet") or got is None:
            pass
        elif old is None:  # not measured before (no scans in the calibration): this run's
            new = got
        elif name == "scan_requests" and got < CACHED_SCAN_REQUESTS:
            # Scans the caches served: a fact of the target, not noise to damp (no gain makes
            # a cached table reach the device). Measured: 2.98 requests a scan in a
            # calibration that had just loaded cf2, then 0.041 and 0.043 at 1x and 2x.
            new = got
        elif old > 0:
            moved = old + COST_GAIN * (got - old)
            new = min(max(moved, old / COST_STEP), old * COST_STEP)
        out.append(new)
        rows[name] = {"before": old, "measured": got, "after": new}
    record = {
        **rows,
        "what": f"this scale's measured costs, taken in at a gain of {COST_GAIN:g} and at "
        f"most x{COST_STEP:g} (none after a scale the target could not deliver): the next "
        "scale's update_pct, append_pct and rate are derived from them; a scale that both "
        "updated and appended measured one figure for two costs: its writes over the "
        "writes the job predicted, one common factor on writes_per_update and "
        "writes_per_append",
    }
    return tuple(out), record


def document(
    plan: Any, home: Any, scales: list[dict[str, Any]], calibration: dict[str, Any]
) -> dict[str, Any]:
    return {
        "replay_version": 1,
        "directory": str(home),
        "capture": {
            "bundle": str(plan.bundle),
            "kind": plan.profile.get("kind"),
            "origin": plan.profile.get("origin"),
            "shape": plan.production.as_dict(),
        },
        "target": {"scenario": str(plan.target), "workload": "slob"},
        "duration_s": plan.duration_s,
        "tolerances": {
            "iops_pct": 100 * fidelity.IOPS_TOL,
            "read_share_points": fidelity.READ_SHARE_POINTS,
            "size_pct": 100 * fidelity.SIZE_TOL,
        },
        "slos_ms": plan.slos,
        "caveats": dbwarmup.short_windows(plan.production, plan.duration_s),
        "calibration": calibration,
        "scales": scales,
        "headroom": verdict.headroom(scales, plan.production.iops),
        "exit_code": verdict.exit_code(scales),
    }
