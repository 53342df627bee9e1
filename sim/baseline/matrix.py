"""The published fio/vdbench test matrices as presets, and their scaling to this host.

A **point** is one fio job: random or sequential, one request size, one read percentage. A
**preset** is a seed's matrix of points together with the load the seed generated it with
(jobs per client, queue depth, number of clients), cited to the seed:

==============  ==========================================================================
preset          points (read % 100/75/50/25/0 unless stated) and the seed's load
==============  ==========================================================================
random-4k       4 KiB random — seed 000 (Google Cloud NetApp Volumes): fio, 8 jobs per VM
random-8k       8 KiB random — seed 000, as above
seq-64k         64 KiB sequential — seed 000, as above
seq-256k        256 KiB sequential — seed 000, as above
seed-000        the four above (20 points): seed 000's NFSv3/SMB matrix
iscsi           64/256 KiB sequential and 4 KiB random — seed 000's iSCSI tests: fio,
                24 jobs per VM, iodepth 1
four-corners    4 KiB random 100/0 % and 64 KiB sequential 100/0 % — seed 003 (AFF A800,
                vdbench: 128 / 64 / 16 / 8 threads) and seed 001 (Azure NetApp Files)
block-sweep     4 KiB … 1 MiB random at every mix (45 points) — seed 004 (OCI Block
                Volume: fio, direct I/O, 10 GB working set)
==============  ==========================================================================

**Scaling to this host.** The seeds ran from 1 to 12 client machines with 8 to 128 threads
each; this is one client. What is kept is the number of I/Os one seed client kept in flight
(jobs × queue depth): ``numjobs = min(seed jobs, CPUs)`` and ``iodepth = ceil(outstanding /
numjobs)`` (at most :data:`MAX_IODEPTH`), through libaio with ``direct=1`` so the page cache
is not measured. Where a seed does not state its queue depth, fio's default (1) is what its
jobs had. ``--numjobs``/``--iodepth`` override the result. The published figure still used N
clients: the comparison says so beside every row.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Literal

from sim.errors import ConfigError

Access = Literal["random", "sequential"]
MIXES = (100, 75, 50, 25, 0)
SWEEP_SIZES_KIB = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
MAX_IODEPTH = 256


@dataclass(frozen=True)
class Point:
    """One fio job of the matrix."""

    access: Access
    block_kib: int
    read_pct: int

    @property
    def id(self) -> str:
        """``rand-4k-r75``, ``seq-64k-r100``: also the fio job's name and file stem."""
        kind = "rand" if self.access == "random" else "seq"
        return f"{kind}-{self.block_kib}k-r{self.read_pct}"

    @property
    def rw(self) -> str:
        """fio's ``rw=``: pure reads and writes by name, mixes as ``randrw``/``rw``."""
        random = self.access == "random"
        if self.read_pct == 100:
            return "randread" if random else "read"
        if self.read_pct == 0:
            return "randwrite" if random else "write"
        return "randrw" if random else "rw"

    @property
    def writes(self) -> bool:
        return self.read_pct < 100


@dataclass(frozen=True)
class SeedLoad:
    """How a seed generated its load, per client, as it states it."""

    jobs: int  # jobs (fio) or threads (vdbench) per client
    iodepth: int | None  # per job; None: not stated (fio's default, 1, is assumed)
    clients: int
    source: str  # seed file and the sentence it comes from

    @property
    def outstanding(self) -> int:
        """I/Os one client kept in flight."""
        return self.jobs * (self.iodepth or 1)

    def describe(self) -> str:
        depth = f"iodepth {self.iodepth}" if self.iodepth else "iodepth not stated (fio's 1)"
        return f"{self.jobs} jobs × {depth} per client on {self.clients} client(s)"


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    points: tuple[Point, ...]
    load: SeedLoad
    #: A seed that varies its threads per point (vdbench's four corners) lists them here.
    load_by_point: dict[str, SeedLoad] = field(default_factory=dict)

    def load_for(self, point: Point) -> SeedLoad:
        return self.load_by_point.get(point.id, self.load)


def _row(access: Access, block_kib: int, mixes: tuple[int, ...] = MIXES) -> tuple[Point, ...]:
    return tuple(Point(access, block_kib, pct) for pct in mixes)


_SEED000 = "000_86fde6e6690b0d9c.txt"
_SEED000_NFS = SeedLoad(
    8,
    None,
    6,
    f"{_SEED000}: 'O Fio foi executado com oito jobs em cada máquina virtual, totalizando 48 "
    "jobs' (six n2-standard-32 VMs)",
)
_SEED000_ISCSI = SeedLoad(
    24,
    1,
    6,
    f"{_SEED000}: 'O Fio foi executado com 24 tarefas em cada máquina virtual com iodepth "
    "definido como 1'",
)
_SEED003 = "003_feeaf53e70529773.txt"
_VDBENCH = "(vdbench threads on each of 12 servers; seed 003's conditions)"
_FOUR_CORNERS = (
    Point("random", 4, 100),
    Point("random", 4, 0),
    Point("sequential", 64, 100),
    Point("sequential", 64, 0),
)
_SEED004 = SeedLoad(
    1,
    None,
    1,
    "004_2edda23bd904e66d.txt: 'a carga de trabalho foi E/S direta com um conjunto de "
    "trabalho de 10 GB' (jobs and queue depth not stated)",
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("random-4k", "4 KiB random, 100→0 % read", _row("random", 4), _SEED000_NFS),
        Preset("random-8k", "8 KiB random, 100→0 % read", _row("random", 8), _SEED000_NFS),
        Preset("seq-64k", "64 KiB sequential, 100→0 % read", _row("sequential", 64), _SEED000_NFS),
        Preset(
            "seq-256k", "256 KiB sequential, 100→0 % read", _row("sequential", 256), _SEED000_NFS
        ),
        Preset(
            "seed-000",
            "seed 000's NFSv3/SMB matrix: 4/8 KiB random and 64/256 KiB sequential",
            _row("random", 4)
            + _row("random", 8)
            + _row("sequential", 64)
            + _row("sequential", 256),
            _SEED000_NFS,
        ),
        Preset(
            "iscsi",
            "seed 000's iSCSI matrix: 4 KiB random, 64/256 KiB sequential",
            _row("random", 4) + _row("sequential", 64) + _row("sequential", 256),
            _SEED000_ISCSI,
        ),
        Preset(
            "four-corners",
            "four corners: 4 KiB random read/write, 64 KiB sequential read/write",
            _FOUR_CORNERS,
            SeedLoad(128, None, 12, f"{_SEED003} {_VDBENCH}"),
            {
                point.id: SeedLoad(threads, None, 12, f"{_SEED003}: {threads} threads {_VDBENCH}")
                for point, threads in zip(_FOUR_CORNERS, (128, 64, 16, 8), strict=True)
            },
        ),
        Preset(
            "block-sweep",
            "4 KiB … 1 MiB random at 100→0 % read (seed 004's axes)",
            tuple(p for size in SWEEP_SIZES_KIB for p in _row("random", size)),
            _SEED004,
        ),
    )
}


@dataclass(frozen=True)
class PlannedPoint:
    """A point with the load it runs with here."""

    point: Point
    numjobs: int
    iodepth: int
    seed: SeedLoad

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.point.id,
            "access": self.point.access,
            "block_kib": self.point.block_kib,
            "read_pct": self.point.read_pct,
            "rw": self.point.rw,
            "numjobs": self.numjobs,
            "iodepth": self.iodepth,
            "seed_load": self.seed.describe(),
            "seed_source": self.seed.source,
        }


def scale(seed: SeedLoad, cpus: int, numjobs: int | None, iodepth: int | None) -> tuple[int, int]:
    """Jobs and queue depth for one client of this host keeping the seed's per-client I/Os in
    flight (see the module docstring); explicit values win."""
    jobs = numjobs if numjobs is not None else max(1, min(seed.jobs, cpus))
    depth = iodepth if iodepth is not None else math.ceil(seed.outstanding / jobs)
    return jobs, max(1, min(depth, MAX_IODEPTH))


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


def plan(
    preset_names: list[str],
    only: list[str] | None = None,
    numjobs: int | None = None,
    iodepth: int | None = None,
    cpus: int | None = None,
) -> list[PlannedPoint]:
    """The points to run, in preset order, each once, with their scaled load."""
    for value, flag in ((numjobs, "--numjobs"), (iodepth, "--iodepth")):
        if value is not None and not 1 <= value <= (MAX_IODEPTH if flag == "--iodepth" else 1024):
            raise ConfigError(f"baseline {flag}: {value} is out of range")
    unknown = [n for n in preset_names if n not in PRESETS]
    if unknown:
        raise ConfigError(
            f"baseline --preset: unknown preset {', '.join(unknown)} (known: {', '.join(PRESETS)})"
        )
    filters = [parse_filter(text) for text in only or []]
    cpus = cpus or os.cpu_count() or 1
    planned: dict[str, PlannedPoint] = {}
    for name in preset_names:
        preset = PRESETS[name]
        for point in preset.points:
            if filters and not any(_matches(point, f) for f in filters):
                continue
            seed = preset.load_for(point)
            jobs, depth = scale(seed, cpus, numjobs, iodepth)
            planned.setdefault(point.id, PlannedPoint(point, jobs, depth, seed))
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
