"""The target's NFS mount options beside the ones the seed's tables were run with.

Seed 000's NFS tables were run with ``nconnect`` 16 (and the Flex tables with rsize and wsize
65536); seed 002's nconnect test with 16. For a target on an NFS mount, the options in force
are read from ``/proc/self/mountstats`` (:mod:`storage.collectors.mountstats`, the
``opts:`` line; :func:`storage.collectors.nfs_advice.option_summary` types them, nconnect 1
when the kernel prints none) and compared, option by option. A difference is a caveat printed
beside the comparison — fewer connections or smaller transfers can hold one client below the
published figure — never a refusal: measuring the mount as it is is the point.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.baseline.points import MountOption
from storage.collectors.mountstats import MOUNTSTATS, MountStats, read_mountstats
from storage.collectors.nfs_advice import option_summary
from storage.devices import DeviceResolver


@dataclass(frozen=True)
class MountFacts:
    """What is under the target: its mount, and for NFS the options in force (None when the
    target is not on NFS or mountstats could not be read: ``problem`` says which)."""

    mount_point: str | None
    fstype: str | None
    source: str | None
    options: dict[str, Any] | None = None
    problem: str = ""

    @property
    def is_nfs(self) -> bool:
        return self.fstype in ("nfs", "nfs4")


def facts_from_stats(stats: MountStats) -> MountFacts:
    """The facts of one parsed mountstats section (tests feed recorded text through here)."""
    return MountFacts(stats.mount_point, stats.fstype, stats.device, option_summary(stats))


def read_facts(
    target: Path, resolver: DeviceResolver | None = None, mountstats: Path = MOUNTSTATS
) -> MountFacts:
    """The mount under ``target`` (or its nearest existing ancestor) and, on NFS, its options.
    Reads ``/proc`` only; never raises for what it cannot read (the facts say so)."""
    try:
        resolved = (resolver or DeviceResolver()).resolve(target)
    except OSError as exc:
        return MountFacts(None, None, None, problem=f"cannot resolve {target}: {exc.strerror}")
    if resolved.kind != "nfs" or resolved.mount_point is None:
        return MountFacts(resolved.mount_point, resolved.fstype, resolved.source)
    try:
        reading = read_mountstats(mountstats)
    except OSError as exc:
        problem = f"cannot read {mountstats}: {exc.strerror}"
        return MountFacts(resolved.mount_point, resolved.fstype, resolved.source, problem=problem)
    stats = reading.get(resolved.mount_point)
    if stats is None:
        bad = reading.unreadable.get(resolved.mount_point)
        why = bad.detail if bad else "the mount is not listed"
        problem = f"{mountstats}: {resolved.mount_point}: {why}"
        return MountFacts(resolved.mount_point, resolved.fstype, resolved.source, problem=problem)
    return facts_from_stats(stats)


def compare(facts: MountFacts, expected: Iterable[MountOption]) -> list[dict[str, Any]]:
    """One entry per option the seed states: the page's value, this mount's (None when not on
    NFS or unreadable), whether they match, and the seed's sentence."""
    found = facts.options or {}
    return [
        {
            "option": opt.name,
            "page": opt.value,
            "here": found.get(opt.name),
            "matches": found.get(opt.name) == opt.value,
            "cite": str(opt.cite),
        }
        for opt in expected
    ]


def sentences(facts: MountFacts, table: str, checks: list[dict[str, Any]]) -> list[str]:
    """What the console, the bundle and the report say about one table's mount options."""
    if not checks:
        return []
    page = ", ".join(f"{c['option']}={c['page']}" for c in checks)
    where = f"{facts.mount_point} ({facts.fstype}, {facts.source})"
    if not facts.is_nfs:
        fs = facts.fstype or "an unknown file system"
        return [f"{table}: the page ran on NFS with {page}; the target is on {fs}, not NFS"]
    if facts.options is None:
        return [f"{table}: the page ran with {page}; the options of {where} are unknown "
                f"({facts.problem})"]  # fmt: skip
    same = [c for c in checks if c["matches"]]
    differ = [c for c in checks if not c["matches"]]
    out = []
    if same:
        shown = ", ".join(f"{c['option']}={c['here']}" for c in same)
        out.append(f"{table}: mount {where} has {shown}, as the page")
    if differ:
        shown = ", ".join(f"{c['option']}={c['here']} (page {c['page']})" for c in differ)
        out.append(
            f"{table}: mount {where} has {shown}: a caveat, not a refusal — fewer connections "
            "or smaller transfers can hold this client below the published figure"
        )
    return out


def report(facts: MountFacts, tables: dict[str, tuple[MountOption, ...]]) -> dict[str, Any]:
    """The bundle's ``mount`` entry: the facts, and per seed table its checks and sentences."""
    per_table = []
    for table, expected in tables.items():
        checks = compare(facts, expected)
        per_table.append(
            {"table": table, "checks": checks, "said": sentences(facts, table, checks)}
        )
    return {
        "mount_point": facts.mount_point,
        "fstype": facts.fstype,
        "source": facts.source,
        "options": facts.options,
        "problem": facts.problem or None,
        "tables": per_table,
    }
