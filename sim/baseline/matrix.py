"""The presets' points planned for this host: which points run, with what load.

The matrices themselves, with each seed table's load cited, are in
:mod:`sim.baseline.presets`; a point, a seed's load and a citation in
:mod:`sim.baseline.points`.

**Scaling to this host.** The seeds ran from 1 to 12 client machines with 8 to 128 threads
each; this is one client. What is kept is the number of I/Os one seed client kept in flight
(jobs × queue depth): ``numjobs = min(seed jobs, CPUs)`` and ``iodepth = ceil(outstanding /
numjobs)`` (at most :data:`MAX_IODEPTH`), through libaio with ``direct=1`` so the page cache
is not measured. Where a seed does not state its queue depth, fio's default (1) is what its
jobs had — except where the page says its runs show the maximum (seed 000): there the depth
is searched (:mod:`sim.baseline.strategy`), each step scaled by the same rule.
``--numjobs``/``--iodepth N`` override the result, ``--iodepth search`` searches any point.
The published figure still used N clients: the comparison says so beside every row.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Literal

from sim.baseline.points import Access, Cite, Point, Preset, SeedLoad
from sim.baseline.presets import CURVE_PCTS, MIXES, MIXES_10, PRESETS, SWEEP_SIZES_KIB
from sim.baseline.strategy import SEARCH_DEPTHS
from sim.baseline.workset import WorkingSet
from sim.errors import ConfigError

__all__ = [
    "CURVE_PCTS", "MAX_IODEPTH", "MIXES", "MIXES_10", "PRESETS", "SWEEP_SIZES_KIB", "Access",
    "Cite", "Depth", "PlannedPoint", "Point", "Preset", "SeedLoad", "parse_curve",
    "parse_filter", "plan", "scale",
]  # fmt: skip

MAX_IODEPTH = 256
MAX_NUMJOBS = 1024
Depth = int | Literal["search"] | None


@dataclass(frozen=True)
class PlannedPoint:
    """A point with the load it runs with here."""

    point: Point
    numjobs: int
    iodepth: int
    seed: SeedLoad
    #: The iodepth search: (seed depth, depth here) per step; () runs ``iodepth`` once.
    search: tuple[tuple[int, int], ...] = ()
    curve: tuple[int, ...] = ()  # iorate curve, percent of the uncapped run
    preset: str = ""
    work: WorkingSet | None = None  # set once the target is known (workset.working_set)
    job_bytes: int | None = None  # files: of each job's file; device: the span used
    how: str = ""  # the scaling, with its numbers (job files and --dry-run say it)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.point.id,
            "access": self.point.access,
            "block_kib": self.point.block_kib,
            "read_pct": self.point.read_pct,
            "rw": self.point.rw,
            "numjobs": self.numjobs,
            "iodepth": self.iodepth,
            "preset": self.preset,
            "seed_table": self.seed.table,
            "seed_load": self.seed.describe(),
            "seed_source": self.seed.source,
            "working_set": self.work.to_dict() if self.work else None,
        }

    def at_depth(self, iodepth: int) -> PlannedPoint:
        return replace(self, iodepth=iodepth)


def scale(seed: SeedLoad, cpus: int, numjobs: int | None, iodepth: int | None) -> tuple[int, int]:
    """Jobs and queue depth for one client of this host keeping the seed's per-client I/Os in
    flight (see the module docstring); explicit values win."""
    jobs = numjobs if numjobs is not None else max(1, min(seed.jobs, cpus))
    depth = iodepth if iodepth is not None else math.ceil(seed.outstanding / jobs)
    return jobs, max(1, min(depth, MAX_IODEPTH))


def search_steps(seed: SeedLoad, jobs: int) -> tuple[tuple[int, int], ...]:
    """The search's seed depths (1, 6, 11 … 41) and each one scaled to ``jobs`` jobs here."""
    return tuple(
        (d, max(1, min(math.ceil(seed.jobs * d / jobs), MAX_IODEPTH))) for d in SEARCH_DEPTHS
    )


def parse_filter(text: str) -> tuple[Access | None, int | None, int | None]:
    """``--only`` terms: ``r75`` (read %), ``4k`` (size), ``rand``/``seq`` — or a point id."""
    access: Access | None = None
    size = pct = None
    for term in text.lower().replace(",", "-").split("-"):
        if term in ("rand", "random"):
            access = "random"
        elif term in ("seq", "sequential"):
            access = "sequential"
        elif term.startswith("r") and term[1:].isdigit():
            pct = int(term[1:])
        elif term.endswith("k") and term[:-1].isdigit():
            size = int(term[:-1])
        elif term:
            raise ConfigError(
                f"baseline --only: {text!r}: use terms like rand, seq, 4k, r75 (e.g. rand-4k-r75)"
            )
    return access, size, pct


def parse_depth(text: str | None) -> Depth:
    """``--iodepth``: a number, or ``search``."""
    if text is None:
        return None
    if text.strip().lower() == "search":
        return "search"
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"baseline --iodepth: {text!r}: give a number or 'search'") from None


def parse_curve(text: str | None) -> tuple[int, ...] | None:
    """``--curve``: ``none``, or percentages of the uncapped run (``10,50,100,120``)."""
    if text is None:
        return None
    if text.strip().lower() in ("none", "off", "no"):
        return ()
    try:
        pcts = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    except ValueError:
        pcts = ()
    if not pcts or any(not 1 <= p <= 200 for p in pcts):
        raise ConfigError(
            f"baseline --curve: {text!r}: give percentages from 1 to 200 (e.g. 10,50,100) or none"
        )
    return pcts


def _check(numjobs: int | None, iodepth: Depth) -> None:
    if numjobs is not None and not 1 <= numjobs <= MAX_NUMJOBS:
        raise ConfigError(f"baseline --numjobs: {numjobs} is out of range (1 … {MAX_NUMJOBS})")
    if isinstance(iodepth, int) and not 1 <= iodepth <= MAX_IODEPTH:
        raise ConfigError(f"baseline --iodepth: {iodepth} is out of range (1 … {MAX_IODEPTH})")


def _how(seed: SeedLoad, cpus: int, jobs: int, depth: int, numjobs: int | None, fixed: int | None,
         searched: bool) -> str:  # fmt: skip
    """The scaling of one point in words, with its numbers."""
    if numjobs is not None:
        how_jobs = f"numjobs={jobs} (--numjobs)"
    else:
        how_jobs = f"numjobs = min({seed.jobs} seed jobs, {cpus} CPUs) = {jobs}"
    if searched:
        return f"{how_jobs}; iodepth searched, each seed depth d as ceil({seed.jobs} × d / {jobs})"
    if fixed is not None:
        return f"{how_jobs}; iodepth={depth} (--iodepth): {jobs * depth} in flight"
    stated = str(seed.iodepth) if seed.iodepth else "1 (fio's default: not stated)"
    return (
        f"{how_jobs}; iodepth = ceil({seed.jobs} × {seed.iodepth or 1} / {jobs}) = {depth}: "
        f"{jobs * depth} in flight, for one seed client's {seed.jobs} jobs × iodepth {stated}"
    )


def _planned(
    name: str, point: Point, seed: SeedLoad, cpus: int, numjobs: int | None, iodepth: Depth
) -> PlannedPoint:
    fixed = iodepth if isinstance(iodepth, int) else None
    jobs, depth = scale(seed, cpus, numjobs, fixed)
    searched = iodepth == "search" or (iodepth is None and seed.search and seed.iodepth is None)
    steps = search_steps(seed, jobs) if searched else ()
    how = _how(seed, cpus, jobs, depth, numjobs, fixed, searched)
    curve = PRESETS[name].curve
    first = steps[0][1] if steps else depth
    return PlannedPoint(point, jobs, first, seed, steps, curve, name, how=how)


def plan(
    preset_names: list[str],
    only: list[str] | None = None,
    numjobs: int | None = None,
    iodepth: Depth = None,
    cpus: int | None = None,
    curve: tuple[int, ...] | None = None,
) -> list[PlannedPoint]:
    """The points to run, in preset order, each once (the first preset naming it gives its
    load), with their scaled load; ``curve`` replaces the presets' iorate curves."""
    _check(numjobs, iodepth)
    unknown = [n for n in preset_names if n not in PRESETS]
    if unknown:
        raise ConfigError(
            f"baseline --preset: unknown preset {', '.join(unknown)} (known: {', '.join(PRESETS)})"
        )
    filters = [parse_filter(text) for text in only or []]
    cpus = cpus or os.cpu_count() or 1
    planned: dict[str, PlannedPoint] = {}
    for name in preset_names:
        for seed, points in PRESETS[name].tables:
            for point in points:
                if filters and not any(_matches(point, f) for f in filters):
                    continue
                found = _planned(name, point, seed, cpus, numjobs, iodepth)
                if curve is not None:
                    found = replace(found, curve=curve)
                planned.setdefault(point.id, found)
    if not planned:
        raise ConfigError(
            f"baseline --only: no point of {', '.join(preset_names)} matches {', '.join(only or [])}"
        )
    return list(planned.values())


def _matches(point: Point, wanted: tuple[Access | None, int | None, int | None]) -> bool:
    access, size, pct = wanted
    return (
        (access is None or point.access == access)
        and (size is None or point.block_kib == size)
        and (pct is None or point.read_pct == pct)
    )
