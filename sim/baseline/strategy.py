"""How a point is run when one fio run is not the whole measurement: the iodepth search and the
iorate curve. Pure rules here; :mod:`sim.baseline.stepped` runs them with fio.

**The iodepth search.** Seed 000 says its runs "foram configurados para mostrar o máximo de
resultados" without stating a queue depth; seed 002 says how such a maximum was found: "O
parâmetro iodepth foi aumentado em cinco cada execução até que a capacidade de processamento
máxima fosse atingida" (nine runs, numjobs 8). So a point whose depth the seed does not state
runs at the seed's iodepth 1, 6, 11, … 41 (per seed job, each scaled to this host as every
depth is: ``ceil(seed jobs × depth / numjobs)``), and stops

* after a run whose throughput is less than :data:`SEARCH_GAIN` (5 %) above the best run
  before it — a smaller rise is within the run-to-run noise of fio on one client, so
  throughput has stopped rising;
* after the ninth run (seed 002's nine), or when the depth cannot grow (dbsim's cap), or
  when a run does not complete.

The point settles on the run with the highest throughput (IOPS, the same order as MiB/s at
one request size): that run is the point's result, the others are kept beside it.

**The iorate curve.** vdbench's ``iorate=curve`` first runs uncapped, then at fractions of that
maximum. Each fraction becomes fio's ``rate_iops``, which fio applies **per job**, so the total
is split among the point's jobs; ``rate_process=poisson`` spaces the I/Os as vdbench's default
exponential inter-arrival times do. A fraction above 100 % asks for more than the uncapped run
achieved: fio then runs as fast as it can, and the point shows the latency there.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.baseline.points import Cite
from sim.baseline.presets import MAXIMUM, S002

SEARCH_START = 1
SEARCH_STEP = 5
SEARCH_RUNS = 9
SEARCH_DEPTHS = tuple(SEARCH_START + SEARCH_STEP * i for i in range(SEARCH_RUNS))  # 1 … 41
SEARCH_GAIN = 0.05
SEARCH_CITES = (
    MAXIMUM,
    Cite(
        S002,
        "Ajustar o cliente",
        "O parâmetro iodepth foi aumentado em cinco cada execução até que a capacidade de "
        "processamento máxima fosse atingida.",
    ),
    Cite(
        S002,
        "Ajustar o cliente",
        "Cada instância de RSS foi executada nove vezes com um parâmetro numjobs de 8.",
    ),
)
RATE_PROCESS = "poisson"


@dataclass(frozen=True)
class SearchStep:
    """One run of a search: the seed's depth it stands for, the depth it ran at here, and the
    total IOPS fio measured (None when the run did not complete)."""

    seed_depth: int
    iodepth: int
    iops: float | None


@dataclass(frozen=True)
class Verdict:
    """After a run: go on (``done`` False), or stop and settle on ``settled`` (an index into
    the steps, None when no run completed), and why."""

    done: bool
    settled: int | None = None
    why: str = ""


def search_verdict(steps: list[SearchStep], planned: list[tuple[int, int]]) -> Verdict:
    """The stopping rule (see the module docstring) after ``steps`` of the ``planned`` (seed
    depth, depth here) pairs have run."""
    done = [i for i, s in enumerate(steps) if s.iops is not None]
    best = max(done, key=lambda i: steps[i].iops or 0.0) if done else None
    last = steps[-1]
    if last.iops is None:
        return Verdict(True, best, f"the run at iodepth {last.iodepth} did not complete")
    earlier = [s.iops for s in steps[:-1] if s.iops is not None]
    if earlier:
        top = max(earlier)
        gain = last.iops / top - 1 if top > 0 else float("inf")
        if gain < SEARCH_GAIN:
            return Verdict(
                True,
                best,
                f"seed iodepth {last.seed_depth} ({last.iodepth} here) gave {gain:+.1%} over the "
                f"best run before it (< {SEARCH_GAIN:.0%}): throughput stopped rising",
            )
    if len(steps) >= len(planned):
        return Verdict(
            True,
            best,
            f"{len(steps)} runs, up to iodepth {last.seed_depth}: the bound (seed 002 ran nine)",
        )
    if planned[len(steps)][1] <= last.iodepth:
        return Verdict(True, best, f"iodepth here cannot grow past {last.iodepth} (dbsim's cap)")
    return Verdict(False)


def curve_rate(max_iops: float, pct: int, numjobs: int) -> int:
    """fio's ``rate_iops`` for one job: ``pct`` % of the uncapped total, split among the jobs
    (fio caps each job), at least 1."""
    return max(1, round(max_iops * pct / 100.0 / numjobs))
