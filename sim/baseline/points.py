"""The pieces a preset is made of: a point (one fio job), the load a seed table was measured
with, and the seed sentences that say so.

Every figure a preset carries from a seed page (jobs, queue depth, clients, working set, mount
options) comes with a :class:`Cite`: the seed file, the heading it sits under and the sentence,
verbatim. ``tests/unit/test_baseline_presets.py`` finds every quote again in its seed, inside
its section, as the envelope transcription check does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Access = Literal["random", "sequential"]
GIB = 1 << 30
TIB = 1 << 40


@dataclass(frozen=True)
class Cite:
    """A sentence of a seed page, verbatim, under its heading (``within`` the headings above
    it, in order: the seeds repeat headings such as "Tamanho do bloco de 4 KiB")."""

    seed: str
    section: str
    quote: str
    within: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = " › ".join((*self.within, self.section))
        return f"seed {self.seed} › {where}: «{self.quote}»"


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
class MountOption:
    """An NFS mount option a seed table was run with (``nconnect=16``)."""

    name: str
    value: int
    cite: Cite


@dataclass(frozen=True)
class SeedLoad:
    """How one seed table was measured, per client, as the seed states it; ``notes`` say what
    dbsim assumes where the seed is silent."""

    jobs: int  # jobs (fio) or threads (vdbench) per client
    iodepth: int | None  # per job; None: not stated
    clients: int
    cites: tuple[Cite, ...] = ()
    table: str = ""  # which published table, in English
    working_set: int | None = None  # bytes per client; None: not stated
    client: str = ""  # the client machine as the seed names it
    client_ram: int | None = None  # its memory: the machine type's, not stated by the seeds
    search: bool = False  # depth not stated and the page says its runs show the maximum
    mount: tuple[MountOption, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def outstanding(self) -> int:
        """I/Os one client kept in flight (at fio's default depth, 1, when not stated)."""
        return self.jobs * (self.iodepth or 1)

    @property
    def source(self) -> str:
        """Every citation and note, in one line."""
        return "; ".join([*(str(c) for c in self.cites), *self.notes])

    def describe(self) -> str:
        if self.iodepth:
            depth = f"iodepth {self.iodepth}"
        elif self.search:
            depth = "iodepth not stated (searched: the page shows the maximum)"
        else:
            depth = "iodepth not stated (fio's 1)"
        text = f"{self.jobs} jobs × {depth} per client on {self.clients} client(s)"
        if self.working_set:
            text += f", working set {human_bytes(self.working_set)} per client"
        return text


@dataclass(frozen=True)
class Preset:
    """A seed's matrix: tables of points, each with the load its table was measured with."""

    name: str
    title: str
    tables: tuple[tuple[SeedLoad, tuple[Point, ...]], ...]
    #: The iorate curve (percent of each point's uncapped IOPS), vdbench style; () for none.
    curve: tuple[int, ...] = ()
    curve_cite: Cite | None = None
    #: What the preset's output must say besides the figures (how to compare, …).
    advice: tuple[str, ...] = field(default=())

    @property
    def points(self) -> tuple[Point, ...]:
        return tuple(p for _, points in self.tables for p in points)

    @property
    def load(self) -> SeedLoad:
        """The first table's load (the presets' one-line summary)."""
        return self.tables[0][0]

    def load_for(self, point: Point) -> SeedLoad:
        for load, points in self.tables:
            if point in points:
                return load
        raise KeyError(point.id)


def human_bytes(n: int) -> str:
    """``1 TiB``, ``96 GiB``, ``700 GB`` (decimal sizes stay decimal), ``60.8 GiB``, ``64 MiB``."""
    exact = (("TiB", TIB), ("GiB", GIB), ("TB", 10**12), ("GB", 10**9))
    for unit, size in exact:
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    for unit, size in (("TiB", TIB), ("GiB", GIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    if n >= 1 << 20:
        mib = n / (1 << 20)
        return f"{mib:.0f} MiB" if n % (1 << 20) == 0 else f"{mib:.1f} MiB"
    return f"{n} B"
