"""The ``#`` lines that head every fio job file dbsim writes: which seed table the point comes
from and the sentences that state its load, how that load and the working set were scaled to
this host, and the search or curve step the file is. fio ignores them; a reader of the bundle's
``fio/*.fio`` (or of ``--dry-run``) sees why each line of the job is what it is."""

from __future__ import annotations

from sim.baseline.matrix import PlannedPoint
from sim.baseline.points import human_bytes
from sim.baseline.strategy import RATE_PROCESS, SEARCH_CITES, SEARCH_GAIN


def _search(planned: PlannedPoint) -> list[str]:
    seed_depths = ", ".join(str(s) for s, _ in planned.search)
    here = ", ".join(str(h) for _, h in planned.search)
    step = next((s for s, h in planned.search if h == planned.iodepth), None)
    return [
        f"iodepth search: seed iodepth {seed_depths} -> here {here} per job; this file: "
        f"iodepth {planned.iodepth} (seed {step})",
        f"  stops when a run gains under {SEARCH_GAIN:.0%} over the best before it, after "
        f"{len(planned.search)} runs, or when a run does not complete; the point settles on "
        "the highest throughput",
        *(f"  {c}" for c in SEARCH_CITES),
    ]


def _curve(planned: PlannedPoint, rate: int | None, pct: int | None) -> list[str]:
    if rate is not None:
        total = rate * planned.numjobs
        share = f" ({pct} % of the uncapped run's IOPS)" if pct is not None else ""
        return [
            f"iorate curve step: rate_iops={rate} per job x {planned.numjobs} jobs = {total:,} "
            f"IOPS{share}; rate_process={RATE_PROCESS} (vdbench's exponential arrivals)"
        ]
    if not planned.curve:
        return []
    pcts = ", ".join(str(p) for p in planned.curve)
    return [
        f"iorate curve: after this uncapped run, {len(planned.curve)} runs at {pcts} % of its "
        f"IOPS, each with rate_iops = that share / {planned.numjobs} jobs (fio caps each job)",
    ]


def comments(
    planned: PlannedPoint, *, rate: int | None = None, pct: int | None = None, lab: bool = False
) -> list[str]:
    """The job file's header, one string per ``#`` line."""
    seed = planned.seed
    lines = [
        f"dbsim baseline: {planned.point.id}, preset {planned.preset} ({seed.table})",
        f"seed load: {seed.describe()}",
        *(f"  {c}" for c in seed.cites),
        *(f"  note: {n}" for n in seed.notes),
        f"here: {planned.how}",
    ]
    if planned.search and rate is None:
        lines += _search(planned)
    lines += _curve(planned, rate, pct)
    if planned.work is not None:
        per_job = f"; {human_bytes(planned.job_bytes)} per job" if planned.job_bytes else ""
        lines.append(f"working set: {human_bytes(planned.work.bytes)}{per_job}")
        lines.append(f"  {planned.work.rule}")
    if lab:
        lines.append("run inside the lab's cgroups (--lab)")
    return lines
