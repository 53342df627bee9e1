"""What the data could not say: each limit of the bundle as a sentence and where it is seen
(``summary.capture.means_only``, a column that is absent, the intervals' length …), so that
a figure the profile does not give is never taken for zero."""

from __future__ import annotations

from typing import Any

from sim import registry
from sim.profile.source import TIMESERIES, BundleInfo

Limit = dict[str, str]


def limit(what: str, seen: str) -> Limit:
    return {"what": what, "from": seen}


def from_summary(info: BundleInfo) -> list[Limit]:
    """What the capture itself says it could not record."""
    means_only = info.capture.get("means_only")
    listed = means_only if isinstance(means_only, list) else []  # a hand-edited bundle's
    out = [limit(str(said), "summary.capture.means_only") for said in listed]
    dropped = info.capture.get("dropped_count")
    if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped > 0:
        out.append(
            limit(
                f"{dropped:,} line(s) of the imported files were dropped (damaged or cut short)",
                "summary.capture.dropped_count",
            )
        )
    limits = info.capture.get("limits") or {}
    if isinstance(limits, dict) and limits.get("coarsened_to_s"):
        out.append(
            limit(
                f"the capture reached its size limit and coarsened its interval to "
                f"{limits['coarsened_to_s']} s",
                "summary.capture.limits",
            )
        )
    if info.running:
        out.append(
            limit(
                f"the {'capture' if info.kind == 'capture' else 'run'} is still running: "
                "this profile covers its intervals so far",
                "summary.json status running",
            )
        )
    return out


#: Per device limit, the words that say it in a capture's own ``means_only`` list.
SAID_AS = ("request-size", "sequential", "in flight", "percentile")


def device_limits(
    info: BundleInfo, doc: dict[str, Any] | None, traced: bool, latency_name: str
) -> list[Limit]:
    """What the device figures lack: a size distribution, a sequential share, the requests
    in flight, latency percentiles (they need the device-latency source's tracing)."""
    if doc is None:
        return []
    columns = doc.get("columns") or {}
    why = (
        f"no such column in {latency_name}"
        if traced
        else "no device-latency source (eBPF tracing) in the bundle"
    )
    checks = (
        (
            "read_sizes" in doc or "write_sizes" in doc,
            "means only: no request-size distribution "
            "(mean read and write sizes from rareq-sz/wareq-sz)",
        ),
        ("seq_pct" in columns, "no sequential share of the requests"),
        (
            "inflight_mean" in columns,
            "queue depth from aqu-sz only (requests queued or in "
            "service, averaged over time), not the requests in flight at each issue",
        ),
        (
            "read_p99_ms" in columns or "write_p99_ms" in columns,
            "device latency: mean await only, no percentiles",
        ),
    )
    # What the capture said already (summary.capture.means_only) is not said twice.
    means_only = info.capture.get("means_only")
    listed = means_only if isinstance(means_only, list) else []
    said = " ".join(str(s) for s in listed).lower()
    return [
        limit(f"block: {text}", why)
        for (found, text), key in zip(checks, SAID_AS, strict=True)
        if not found and key not in said
    ]


def peak_limits(peaks: dict[str, Any] | None, daily: dict[str, Any] | None) -> list[Limit]:
    out = []
    for key in ("busiest_minute", "busiest_15min", "p95_hour"):
        said = ((peaks or {}).get(key) or {}).get("unresolved")
        if said:
            out.append(limit(said, "the intervals' length and the data's span"))
    said = (daily or {}).get("unresolved")
    if said:
        out.append(limit(said, "the data's span"))
    return out


def database_limits(
    info: BundleInfo, doc: dict[str, Any] | None, source: str | None
) -> list[Limit]:
    """No database source, one without the vocabulary, or entities that lack parts of it."""
    if source is None:
        return [limit("no database figures", "no collector plays the database role")]
    name = f"{TIMESERIES}/{source}.csv"
    if doc is None:
        held = "has no measured row" if (info.path / name).exists() else "is not in the bundle"
        return [limit("no database figures", f"{name} {held}")]
    out = []
    if doc["without"] and not doc["entities"]:
        out.append(
            limit(
                f"db: {', '.join(doc['without'][:5])} carry none of the database I/O "
                "vocabulary (phys_read_req_s …): no database figures",
                f"{name} columns",
            )
        )
    for entity, entry in doc["entities"].items():
        columns = entry["columns"]
        if "single_block_read_s" not in columns and "multi_block_read_s" not in columns:
            out.append(
                limit(
                    f"db {entity}: no split of physical reads into single- and multi-block",
                    f"{name} columns",
                )
            )
    return out


def unread_layers(info: BundleInfo, read: set[str]) -> list[Limit]:
    """Time series of a layer that counts I/Os (an NFS client, an array) that no role the
    profile reads covers: said, rather than left out in silence."""
    out = []
    for source, entry in registry.collectors().items():
        path = info.path / TIMESERIES / f"{source}.csv"
        if entry.ios_figure and source not in read and path.is_file():
            out.append(
                limit(
                    f"{TIMESERIES}/{source}.csv: I/O figures of a layer this profile does not read",
                    f"the {source} collector declares no role the profile reads",
                )
            )
    return out
