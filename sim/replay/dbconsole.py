"""The console lines of one scale replayed on a database: the SLOB-like parameters derived
and the run that carried them (sim.replay.console gives the fidelity table and the verdict)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.replay.dbjob import SHORT_WARMUP_S

COST_WORDS = {
    "reads_per_op": "reads an operation on cf1",
    "writes_per_update": "writes an update",
    "writes_per_append": "writes an append",
    "scan_requests": "device requests a scan of cf2",
    "range_multi": "multi-block requests a range read",
    "range_multi_kib": "their KiB",
    "reads_per_row": "reads a row touched",
    "writes_per_row_update": "writes a row update",
}


def db_scale_lines(entry: dict[str, Any], wrap: Callable[[str, str], list[str]]) -> list[str]:
    job, run = entry["slob"], entry["run"]
    params = ", ".join(f"{k}={v}" for k, v in job["parameters"].items())
    # The appends' share is among the parameters; what one append costs is said beside it.
    appends = (
        f" ({job.get('per_append', 0):.3g} writes an append)"
        if job["parameters"].get("append_pct")
        else ""
    )
    lines = wrap(
        f"At {entry['scale']:g}x: slob {params}, rate_iops={job['rate_iops']:,.0f} "
        f"(derived: capture x {entry['scale']:g}; model {job['reads_per_op']:.3g} reads and "
        f"{job['writes_per_op']:.3g} writes an operation{appends}, "
        f"{job['expected_write_pct']:.1f} % writes for {job['asked_write_pct']:.1f} % "
        "captured).",
        "  ",
    )
    warmup = job.get("warmup_s")
    if warmup and warmup > SHORT_WARMUP_S:
        lines += wrap(
            f"  warm-up {warmup:g} s before the measured stage: the host's write-back delay "
            "(a database's dirtied blocks reach the device that long after), so the writes "
            "measured are the run's own",
            "    ",
        )
    held = "held" if run.get("iops_held") else "NOT held"
    delivered = run.get("delivered_iops")
    lines += wrap(
        f"  dbsim run: {delivered if delivered is not None else '-'} device IOPS delivered "
        f"of {run.get('rate_iops')} asked ({held}, the run's closed loop, measured); "
        f"delivered = the run's own collectors over {entry['replay']['window']['how']}",
        "    ",
    )
    correction = entry.get("correction") or {}
    moved = [
        f"{COST_WORDS.get(name, name)} {row['before']:.3g} -> {row['after']:.3g} "
        f"(measured {row['measured']:.3g})"
        for name, row in correction.items()
        if isinstance(row, dict) and row.get("measured") and row.get("before")
    ]
    if moved:
        lines += wrap(f"  next scale's costs (damped, measured): {'; '.join(moved)}", "    ")
    return lines
