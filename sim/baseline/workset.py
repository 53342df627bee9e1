"""The working set of each point, scaled from the seed's to this host.

A seed's working set is what one client read and wrote: 1 TiB per n2-standard-32 (128 GiB of
memory) is eight times that client's memory. What a large working set is for is that no cache
holds it — the client's page cache, and the storage's own. So the rule keeps **the seed's ratio
of working set to client memory**, and never asks for more than the seed used:

    working set = min(published × this host's memory / the seed client's memory, published)

then at most :data:`FREE_SHARE` (half) of the space available on the target (a raw device: its
size): fio never fills a volume that others write to as well. Where the seed does not name its
client's memory the published size is used as it is (still bounded by the free space); where
it states no working set at all, :data:`DEFAULT_SIZE` (1 GiB). ``--size`` replaces the whole rule.

fio lays its files out once for every point (one file per job of the point with the most
jobs); a point uses ``working set / its numjobs`` of each of its jobs' files, at most the
file's size, and the sentence each point carries (:attr:`WorkingSet.rule`) says the figures.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from sim.baseline.points import GIB, SeedLoad, human_bytes

MIB = 1 << 20
FREE_SHARE = 0.5
DEFAULT_SIZE = GIB


@dataclass(frozen=True)
class HostFacts:
    """What the scaling reads of this host: CPUs, memory, and the room on the target."""

    cpus: int
    ram: int
    room: int | None  # bytes the working set may use (None: unknown, not bounded)
    room_why: str = ""  # "50 % of 76.4 GiB available on /data", "/dev/sdx's 1 TiB"


@dataclass(frozen=True)
class WorkingSet:
    """One point's working set here and how it was reached, in one sentence."""

    bytes: int
    published: int | None
    rule: str

    def to_dict(self) -> dict[str, object]:
        return {"bytes": self.bytes, "published_bytes": self.published, "rule": self.rule}


def host_ram() -> int:
    """This host's memory (MemTotal), in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def available(path: Path) -> tuple[int, Path]:
    """Bytes available to an unprivileged writer on the file system of ``path`` (or of its
    nearest existing ancestor), and the directory they were read from."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize, where


def tree_room(target: Path, ours: int = 0) -> tuple[int, str]:
    """The room for fio's files in a directory target: :data:`FREE_SHARE` of what is available,
    counting dbsim's own files already there (``ours``, kept by ``--keep-files``) as free."""
    free, where = available(target)
    room = int((free + ours) * FREE_SHARE)
    return room, f"{FREE_SHARE:.0%} of {human_bytes(free + ours)} available on {where}"


def working_set(seed: SeedLoad, host: HostFacts, override: int | None = None) -> WorkingSet:
    """The rule of the module docstring for one seed table."""
    if override is not None:
        return WorkingSet(override, seed.working_set, f"--size {human_bytes(override)}")
    published = seed.working_set
    if published is None:
        size, why = DEFAULT_SIZE, f"the seed states none: dbsim's {human_bytes(DEFAULT_SIZE)}"
    elif seed.client_ram:
        ratio = published / seed.client_ram
        scaled = published * host.ram / seed.client_ram
        size = int(min(scaled, published))
        why = (
            f"seed: {human_bytes(published)} per {seed.client or 'client'} of "
            f"{human_bytes(seed.client_ram)} memory ({ratio:.3g}× it); × this host's "
            f"{human_bytes(host.ram)} = {human_bytes(int(scaled))}"
        )
        if scaled > published:
            why += f", held at the seed's {human_bytes(published)}"
    else:
        size = published
        why = f"seed: {human_bytes(published)} per client (its memory not stated: as published)"
    if host.room is not None and size > host.room:
        size = host.room
        why += f"; bounded by {host.room_why} → {human_bytes(size)}"
    return WorkingSet(max(MIB, size - size % MIB), published, why)


def per_job(work: WorkingSet, numjobs: int) -> int:
    """Bytes of one job's file a point with ``numjobs`` jobs uses (whole MiB, at least 1)."""
    share = work.bytes // max(1, numjobs)
    return max(MIB, share - share % MIB)


def layout(points: list[tuple[WorkingSet, int]], room: int | None) -> tuple[int, int]:
    """fio's files for a run: (how many, bytes each) — one per job of the point with the most
    jobs, each as large as the largest share a point asks for, the whole within ``room``."""
    files = max(n for _, n in points)
    each = max(per_job(work, n) for work, n in points)
    if room is not None:
        each = min(each, max(MIB, math.floor(room / files / MIB) * MIB))
    return files, each
