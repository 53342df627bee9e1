"""Whether the caches between the workload and the storage hide the storage.

Two checks, both reported in the summary's ``cache`` section (docs/validation.md, "Caches"):

* **before the load**, the data the scenario builds (``Workload.data_bytes``) is held against
  the server's own data cache (the dialect record's ``cache``: shared_buffers, the
  InnoDB buffer pool …) plus the host's RAM, which bounds its page cache — when the server
  runs on this host; for a remote one the host's RAM is "unknown" and only the server's cache
  counts. Data under :data:`EXERCISE_FACTOR` times the caches gets one warning line naming
  the parameter setting that would reach that size;
* **after the run**, a run whose watched block devices read less than
  :data:`NOT_EXERCISED_PCT` % as many times per second as the workload's reading operations
  ran is **storage not exercised**: its latencies are the caches', so the console and the
  report say so before any figure and the verdict makes no storage call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from sim.core.metrics import OpStats
from sim.dialects import dialect_of
from sim.protocols import Target, Workload, connect_sql
from sim.sql import Statement

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
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
GIB = 2**30


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


def cache_section(
    *,
    data_bytes: int | None,
    server_cache_name: str,
    server_cache_bytes: int | None,
    host_ram: int | None,
    scale_for: Callable[[int], str | None],
) -> dict[str, Any]:
    """The pre-load comparison: the data against ``EXERCISE_FACTOR`` × (server cache + host
    RAM), with a ``warning`` line and the ``recommended`` setting when the data is smaller."""
    caches = (server_cache_bytes or 0) + (host_ram or 0)
    needed = EXERCISE_FACTOR * caches
    section: dict[str, Any] = {
        "data_bytes": data_bytes,
        "server_cache": {"name": server_cache_name, "bytes": server_cache_bytes},
        "host_ram_bytes": host_ram if host_ram is not None else "unknown",
        "factor": EXERCISE_FACTOR,
        "rule": f"data >= {EXERCISE_FACTOR} x (server cache + host RAM)",
        "needed_bytes": needed,
    }
    hidden = data_bytes is not None and caches > 0 and data_bytes < needed
    section["hidden_by_caches"] = hidden
    if hidden:
        recommended = scale_for(needed)
        section["recommended"] = recommended
        held = [f"{server_cache_name} {size_text(server_cache_bytes)}"]
        if server_cache_bytes is None:  # none of its own: the host's page cache is the cache
            held = []
        held.append(
            f"host RAM {size_text(host_ram)}" if host_ram is not None else "host RAM unknown"
        )
        advice = f"; to exercise the storage use {recommended}" if recommended else ""
        section["warning"] = (
            f"cache: the data ({size_text(data_bytes)}) is under {EXERCISE_FACTOR} x "
            f"({' + '.join(held)}) = {size_text(needed)}, so reads may be served from memory, "
            f"not the storage{advice}"
        )
    return section


async def server_cache_bytes(target: Target) -> tuple[int | None, str | None]:
    """The server's data cache in bytes by its dialect's ``cache`` query (None: it has none
    or the query failed — then with the reason; never fatal to the run)."""
    record = dialect_of(target)
    if record is None or record.cache is None:
        return None, None
    try:
        conn = await connect_sql(target)
        try:
            value = await conn.scalar(Statement("cache_size", record.cache.query, ()))
        finally:
            await conn.close()
        return int(value), None
    except Exception as exc:  # a privilege the user lacks must not stop the run
        # Recorded in the section; a target that cannot be reached fails the load next, with
        # its own one line, so nothing is printed here.
        log.debug("cache size query failed: %s", exc)
        return None, f"{type(exc).__name__}: {exc}"


async def check_caches(
    target: Target, workload: Workload, *, host_ram: int | str | None = "auto"
) -> dict[str, Any]:
    """The pre-load ``cache`` section for ``workload`` on the opened ``target``.
    ``host_ram``: "auto" reads this host's MemTotal when the server is local."""
    record = dialect_of(target)
    name = record.cache.name if record and record.cache else "none (the host's page cache)"
    cache_bytes, failed = await server_cache_bytes(target)
    if host_ram == "auto":
        ram = host_ram_bytes() if server_is_local(target.describe()) else None
    else:
        ram = host_ram if isinstance(host_ram, int) else None
    section = cache_section(
        data_bytes=workload.data_bytes(),
        server_cache_name=name,
        server_cache_bytes=cache_bytes,
        host_ram=ram,
        scale_for=workload.scale_for_bytes,
    )
    if failed:
        section["server_cache"]["error"] = failed
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


def not_exercised_headline(summary: Mapping[str, Any]) -> str | None:
    """The line that goes before every figure of a run that did not exercise the storage."""
    reason = not_exercised(summary)
    if reason is None:
        return None
    advice = (summary.get("cache") or {}).get("recommended")
    tail = f"; to exercise it use {advice}" if advice else ""
    return (
        f"STORAGE NOT EXERCISED: {reason}; the figures below describe the caches, not the "
        f"storage{tail}"
    )
