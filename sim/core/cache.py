"""Whether the caches between the workload and the storage hide the storage.

Two checks, both reported in the summary's ``cache`` section (docs/validation.md, "Caches"):

* **before the load**, the data the scenario builds (``Workload.data_bytes``) is held against
  the server's own data cache (the dialect record's ``cache``: shared_buffers, the
  InnoDB buffer pool …) plus the host's RAM, which bounds its page cache — when the server
  runs on this host; for a remote one the host's RAM is "unknown" and only the server's cache
  counts. A server that reads past the page cache (O_DIRECT: the record's ``direct_query``,
  a workload's ``direct_io``) has only its own cache; one in a memory cgroup (the process
  serving the connection, or dbsim itself for SQLite and file trees) has at most the group's
  limit. Data under :data:`EXERCISE_FACTOR` times the caches gets one warning line offering
  first the cheaper way where the user controls the test box — caps on the caches (the
  record's ``cache_recipe``: a small server cache with direct I/O or a memory-capped server)
  at a quarter of the data — then the parameter setting that would reach that size;
* **after the run**, a run whose watched block devices read less than
  :data:`NOT_EXERCISED_PCT` % as many times per second as the workload's reading operations
  ran is **storage not exercised**: its latencies are the caches', so the console and the
  report say so before any figure and the verdict makes no storage call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.dialects import dialect_of
from sim.protocols import Target, Workload, connect_sql
from sim.sql import Statement

if TYPE_CHECKING:
    # An annotation: dbsim check, drop and the console's headline need no numpy (issue #25).
    from sim.core.metrics import OpStats

log = logging.getLogger(__name__)

#: The SLOB method: data several times the caches. With keys drawn uniformly over D bytes of
#: data and C bytes of cache, about C / D of the reads hit; at D = 4 C three reads in four at
#: least miss every cache and reach the device, so its latency dominates the operations'.
EXERCISE_FACTOR = 4
#: Device reads per second under this share of the workload's reading operations per second:
#: nearly every read was served from memory (a SLOB read at one row per block needs at least
#: one device read when it misses).
NOT_EXERCISED_PCT = 1.0
#: Reading operations per second below which a run read too little to be judged at all.
MIN_READ_OPS_S = 1.0
MEMINFO = Path("/proc/meminfo")
PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: A v1 limit at or above this is "no limit" (the kernel reports 2^63 rounded to a page).
UNLIMITED_BYTES = 2**62
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
GIB = 2**30
MIB = 2**20


def host_ram_bytes(meminfo: Path = MEMINFO) -> int | None:
    """This host's MemTotal (bytes), None when /proc/meminfo cannot be read."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def server_is_local(description: Mapping[str, Any]) -> bool:
    """Whether the target's data is served from this host: no host at all (SQLite, a file
    tree), a loopback name, or a unix socket directory."""
    host = description.get("host")
    if not host:
        return True
    text = str(host)
    return text in LOCAL_HOSTS or text.startswith("/")


def size_text(n: int | None) -> str:
    if n is None:
        return "unknown"
    if n >= GIB:
        return f"{n / GIB:.1f} GiB"
    return f"{n / 2**20:.0f} MiB"


def memory_cgroup_limit(pid: int, proc: Path = PROC, root: Path = CGROUP_ROOT) -> int | None:
    """The smallest memory limit on ``pid``'s memory cgroup and its ancestors (v1
    ``memory.limit_in_bytes``, v2 ``memory.max``): what bounds the page cache charged to it.
    None when there is none, or it cannot be read (another host's process, no cgroup)."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    places: list[tuple[Path, str, str]] = []
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if "memory" in fields[1].split(","):
            places.append((root / "memory", "memory.limit_in_bytes", fields[2]))
        elif fields[0] == "0" and (root / "cgroup.controllers").exists():  # v2 at the root
            places.append((root, "memory.max", fields[2]))
    limits: list[int] = []
    for base, name, path in places:
        parts = [part for part in path.split("/") if part and part != ".."]
        for depth in range(len(parts), -1, -1):
            try:
                value = (base.joinpath(*parts[:depth]) / name).read_text().strip()
            except OSError:
                continue
            if value.isdigit() and int(value) < UNLIMITED_BYTES:
                limits.append(int(value))
    return min(limits) if limits else None


def cache_cap_mib(data_bytes: int) -> int:
    """The caches, in whole MiB, under which ``data_bytes`` is :data:`EXERCISE_FACTOR` times
    them: what the cache recipes cap them at (at least 1 MiB)."""
    return max(data_bytes // EXERCISE_FACTOR // MIB, 1)


def recipe_text(recipe: str, data_bytes: int) -> str:
    """A dialect's or workload's ``cache_recipe`` filled in for ``data_bytes`` of data."""
    cap = cache_cap_mib(data_bytes)
    return recipe.format(cap_mb=cap, quarter_mb=max(cap // 4, 1))


def cache_section(
    *,
    data_bytes: int | None,
    server_cache_name: str,
    server_cache_bytes: int | None,
    host_ram: int | None,
    scale_for: Callable[[int], str | None],
    memory_limit: int | None = None,
    direct: bool = False,
    recipe: str = "",
) -> dict[str, Any]:
    """The pre-load comparison: the data against ``EXERCISE_FACTOR`` × (server cache + host
    RAM), with a ``warning`` line, the ``recipe`` that caps the caches and the ``recommended``
    setting when the data is smaller. ``direct``: the server reads past the page cache (only
    its own cache counts); ``memory_limit``: the memory cgroup the page cache is charged to
    (it bounds the server's cache and the page cache together)."""
    page_cache = None if direct else host_ram
    caches = (server_cache_bytes or 0) + (page_cache or 0)
    capped = not direct and memory_limit is not None and memory_limit < caches
    if capped and memory_limit is not None:
        caches = memory_limit
    needed = EXERCISE_FACTOR * caches
    section: dict[str, Any] = {
        "data_bytes": data_bytes,
        "server_cache": {"name": server_cache_name, "bytes": server_cache_bytes},
        "host_ram_bytes": host_ram if host_ram is not None else "unknown",
        "memory_limit_bytes": memory_limit,
        "direct_io": direct,
        "factor": EXERCISE_FACTOR,
        "rule": f"data >= {EXERCISE_FACTOR} x (server cache + host RAM)",
        "needed_bytes": needed,
    }
    hidden = data_bytes is not None and caches > 0 and data_bytes < needed
    section["hidden_by_caches"] = hidden
    if hidden and data_bytes is not None:
        section["recommended"] = scale_for(needed)
        if recipe:
            section["cap_bytes"] = cache_cap_mib(data_bytes) * MIB
            section["recipe"] = recipe_text(recipe, data_bytes)
        if server_cache_bytes is None:  # none of its own: the host's page cache is the cache
            held = []
        else:
            held = [f"{server_cache_name} {size_text(server_cache_bytes)}"]
        if direct:
            held.append("no page cache: direct I/O")
        elif capped:
            held = [f"the memory cgroup's limit {size_text(memory_limit)}"]
        else:
            held.append(
                f"host RAM {size_text(host_ram)}" if host_ram is not None else "host RAM unknown"
            )
        section["warning"] = (
            f"cache: the data ({size_text(data_bytes)}) is under {EXERCISE_FACTOR} x "
            f"({' + '.join(held)}) = {size_text(needed)}, so reads may be served from memory, "
            f"not the storage{_advice(section)}"
        )
    return section


def _advice(section: Mapping[str, Any]) -> str:
    """The warning's tail: the caps on the caches first, then the scale."""
    advice = []
    if section.get("recipe"):
        advice.append(
            f"where you control the test box, cap the caches at "
            f"{size_text(section['cap_bytes'])}: {section['recipe']}"
        )
    if section.get("recommended"):
        advice.append(f"{'or ' if advice else ''}use {section['recommended']}")
    return f"; to exercise the storage {'; '.join(advice)}" if advice else ""


async def server_cache_bytes(target: Target) -> tuple[int | None, str | None]:
    """The server's data cache in bytes by its dialect's ``cache`` query (None: it has none
    or the query failed — then with the reason; never fatal to the run)."""
    facts = await server_cache_facts(target)
    return facts["bytes"], facts["error"]


async def server_cache_facts(target: Target) -> dict[str, Any]:
    """The server's data cache by its dialect record's queries: ``bytes`` (None: it has none
    or the query failed, then with ``error``), ``direct`` (reads past the page cache) and
    ``pid`` (the process serving the connection; None: the dialect cannot tell). Never fatal
    to the run."""
    facts: dict[str, Any] = {"bytes": None, "error": None, "direct": False, "pid": None}
    record = dialect_of(target)
    if record is None or record.cache is None:
        return facts
    cache = record.cache
    try:
        conn = await connect_sql(target)
    except Exception as exc:  # a target that cannot be reached fails the load next
        log.debug("cache size query failed: %s", exc)
        facts["error"] = f"{type(exc).__name__}: {exc}"
        return facts
    try:
        try:
            facts["bytes"] = int(await conn.scalar(Statement("cache_size", cache.query, ())))
        except Exception as exc:  # a privilege the user lacks must not stop the run
            # Recorded in the section; nothing is printed here.
            log.debug("cache size query failed: %s", exc)
            facts["error"] = f"{type(exc).__name__}: {exc}"
        for key, name, query in (
            ("direct", "cache_direct", cache.direct_query),
            ("pid", "cache_pid", cache.pid_query),
        ):
            if query is None:
                continue
            try:
                value = await conn.scalar(Statement(name, query, ()))
            except Exception as exc:  # as above: the check goes on without it
                log.debug("cache query %s failed: %s", name, exc)
                continue
            facts[key] = truth(value) if key == "direct" else int(value)
    finally:
        await conn.close()
    return facts


def truth(value: Any) -> bool:
    """A boolean as a driver returns it: True/False, 1/0, or text — psqlODBC sends PostgreSQL's
    booleans as the characters '0' and '1' by default (BoolsAsChar), and bool('0') is True."""
    if isinstance(value, str):
        return value.strip().lower() in {"1", "t", "true", "on", "yes", "y"}
    return bool(value)


async def check_caches(
    target: Target,
    workload: Workload,
    *,
    host_ram: int | str | None = "auto",
    memory_limit: int | str | None = "auto",
) -> dict[str, Any]:
    """The pre-load ``cache`` section for ``workload`` on the opened ``target``.
    ``host_ram``: "auto" reads this host's MemTotal when the server is local;
    ``memory_limit``: "auto" reads the memory cgroup of the local server's process (the
    dialect record's ``pid_query``), or dbsim's own where the reads are dbsim's (SQLite, a
    file tree: no server cache)."""
    record = dialect_of(target)
    name = record.cache.name if record and record.cache else "none (the host's page cache)"
    facts = await server_cache_facts(target)
    local = server_is_local(target.describe())
    if host_ram == "auto":
        ram = host_ram_bytes() if local else None
    else:
        ram = host_ram if isinstance(host_ram, int) else None
    if memory_limit == "auto":
        in_process = record is None or record.cache is None
        pid = os.getpid() if in_process else facts["pid"]
        limit = memory_cgroup_limit(pid) if local and pid is not None else None
    else:
        limit = memory_limit if isinstance(memory_limit, int) else None
    recipe = workload.cache_recipe() or (record.cache_recipe if record else "")
    section = cache_section(
        data_bytes=workload.data_bytes(),
        server_cache_name=name,
        server_cache_bytes=facts["bytes"],
        host_ram=ram,
        scale_for=workload.scale_for_bytes,
        memory_limit=limit,
        direct=bool(facts["direct"]) or workload.reads_direct(),
        recipe=recipe,
    )
    if facts["error"]:
        section["server_cache"]["error"] = facts["error"]
    return section


def exercised_section(
    device_means: Mapping[str, Mapping[str, float]],
    totals: Mapping[str, OpStats],
    read_ops: Collection[str],
    measured_s: float,
) -> dict[str, Any]:
    """Whether the watched block devices (``device_means``: the means by device of the source
    playing sim.registry.ROLE_DEVICE) read at all while the workload read: ``exercised`` is None when it cannot be told
    (no device watched, no reading operation, too short a run)."""
    reads = sum(totals[op].count for op in read_ops if op in totals)
    read_ops_s = reads / measured_s if measured_s > 0 else 0.0
    section: dict[str, Any] = {
        "read_ops_s": round(read_ops_s, 3),
        "threshold_pct": NOT_EXERCISED_PCT,
    }
    if not device_means or read_ops_s < MIN_READ_OPS_S:
        section["exercised"] = None
        section["why"] = (
            "no block device was watched" if not device_means else "the workload read too little"
        )
        return section
    device_r_s = sum(float(means.get("r_s") or 0.0) for means in device_means.values())
    pct = 100.0 * device_r_s / read_ops_s
    section.update(
        devices=sorted(device_means),
        device_r_s=round(device_r_s, 3),
        device_reads_pct=round(pct, 3),
        exercised=pct >= NOT_EXERCISED_PCT,
    )
    if pct < NOT_EXERCISED_PCT:
        section["reason"] = (
            f"{', '.join(sorted(device_means))} read {device_r_s:.1f}/s against "
            f"{read_ops_s:,.1f} reading operations/s ({pct:.2g} %, under {NOT_EXERCISED_PCT:g} %)"
        )
    return section


def not_exercised(summary: Mapping[str, Any]) -> str | None:
    """The reason a finished run did not exercise the storage, None when it did (or when it
    cannot be told)."""
    section = (summary.get("cache") or {}).get("exercised") or {}
    if section.get("exercised") is not False:
        return None
    return str(section.get("reason") or "the devices hardly read")


def not_exercised_headline(summary: Mapping[str, Any], *, figures: bool = True) -> str | None:
    """The line that goes before every figure of a run that did not exercise the storage
    (``figures`` False: said alone, as ``dbsim run --quiet`` says it)."""
    reason = not_exercised(summary)
    if reason is None:
        return None
    cache = summary.get("cache") or {}
    advice = []
    if cache.get("recipe"):
        advice.append(f"cap the caches: {cache['recipe']}")
    if cache.get("recommended"):
        advice.append(f"use {cache['recommended']}")
    tail = f"; to exercise it {'; or '.join(advice)}" if advice else ""
    which = "the figures below describe" if figures else "its figures describe"
    return f"STORAGE NOT EXERCISED: {reason}; {which} the caches, not the storage{tail}"
