"""Each measured point beside a published envelope's figure at the same mix and size.

The published figure is read from the envelope's tables as :mod:`storage.envelopes.model`
reads them for sizing (published points as printed; between mixes and sizes by service time,
flagged as estimates; nothing extrapolated). An envelope published per volume size (OCI Block
Volume: IOPS at 4 KiB, bandwidth for 256 KiB and larger, for a 50 GB and a 1 TB volume) gives
its figures where the seed states them — 4 KiB points get the IOPS, points of 256 KiB and more
the bandwidth — for ``--capacity`` (default the largest published size), each row also
listing every published size; between, nothing is assumed. When both an IOPS and a bandwidth
ceiling apply,
the lower one, in IOPS at the point's request size, is the published figure. It is the
figure at the seed's test conditions (its volume size and service level, *and its N
clients*): a single client here may legitimately reach less, and the row says so.
"""

from __future__ import annotations

from typing import Any

from storage.envelopes.model import Envelope, Limit
from storage.envelopes.scaling import Setting, capacity_limits, capacity_unit, default_capacity
from storage.envelopes.units import capacity_tib as to_tib
from storage.envelopes.units import fmt_capacity

MIB_PER_KIB = 1 / 1024


def _as_iops(limit: Limit, block_kib: float) -> float:
    return limit.value if limit.kind == "iops" else limit.value / (block_kib * MIB_PER_KIB)


def _sized_limits(
    envelope: Envelope, read_pct: float, block_kib: float, capacity_tib: float | None
) -> list[Limit]:
    """An envelope published per volume size (OCI: IOPS at 4 KiB, bandwidth from 256 KiB):
    the figures that apply at this request size, for the volume's size (default: the largest
    published). A figure the seed did not publish for this size (basis ``outside``) is left
    out rather than assumed: the row then has no published figure."""
    if envelope.spec.capacity.kind != "points":
        return []
    limits, _ = capacity_limits(
        envelope, read_pct / 100.0, block_kib, Setting(capacity_tib=capacity_tib)
    )
    return [lim for lim in limits if lim.scales_with == "capacity" and lim.basis != "outside"]


def by_size(envelope: Envelope, read_pct: float, block_kib: float) -> list[dict[str, Any]]:
    """The figure at this point for every volume size the seed publishes (OCI: 50 GB, 1 TB)."""
    if envelope.spec.capacity.kind != "points":
        return []
    out = []
    for point in sorted(
        envelope.spec.capacity.points, key=lambda p: to_tib(p.capacity.value, p.capacity.unit)
    ):
        tib = to_tib(point.capacity.value, point.capacity.unit)
        found = published_at(envelope, read_pct, block_kib, tib, sizes=False)
        if found is not None:
            out.append({"capacity": f"{point.capacity.value:g} {point.capacity.unit}", **found})
    return out


def published_at(
    envelope: Envelope,
    read_pct: float,
    block_kib: float,
    capacity_tib: float | None = None,
    *,
    sizes: bool = True,
) -> dict[str, Any] | None:
    """The envelope's figure at one point, or None when its tables say nothing there."""
    limits = envelope.table_limits(read_pct / 100.0, block_kib)
    limits += _sized_limits(envelope, read_pct, block_kib, capacity_tib)
    if not limits:
        return None
    binding = min(limits, key=lambda lim: _as_iops(lim, block_kib))
    iops = _as_iops(binding, block_kib)
    found: dict[str, Any] = {
        "iops": iops,
        "mib_s": iops * block_kib * MIB_PER_KIB,
        "limit": binding.label,
        "basis": binding.basis,  # published / interpolated / outside
        "latency": list(binding.latency),  # as published at the points it rests on
        "band": binding.band.to_dict() if binding.band else None,
        "described": binding.describe(),
        "flags": [str(flag) for flag in binding.flags],
        "sources": list(binding.sources),
    }
    if sizes and envelope.spec.capacity.kind == "points":
        found["by_size"] = by_size(envelope, read_pct, block_kib)
    return found


def volume(envelope: Envelope, capacity_tib: float | None) -> str | None:
    """The volume size the figures are read at, as the seed writes sizes (``1 TB``); None
    for an envelope whose figures do not depend on it."""
    if envelope.spec.capacity.kind != "points":
        return None
    tib = capacity_tib if capacity_tib is not None else default_capacity(envelope)
    return None if tib is None else fmt_capacity(tib, capacity_unit(envelope))


def caveat(envelope: Envelope) -> str:
    """The conditions under which the published figures were measured, in one sentence."""
    conditions = envelope.spec.conditions
    clients = conditions.client_count
    who = f"{clients} client(s)" if clients else "an unstated number of clients"
    jobs = f", {conditions.jobs}" if conditions.jobs else ""
    return (
        f"{envelope.name}: published with {who} ({conditions.clients}{jobs}); this baseline "
        f"ran from one client, so a lower figure can be the client's limit, not the storage's"
    )


def compare(
    envelope: Envelope, points: list[dict[str, Any]], capacity_tib: float | None = None
) -> dict[str, Any]:
    """``points``: the baseline's results (``id``, ``read_pct``, ``block_kib``, ``iops``,
    ``mib_s``); ``capacity_tib``: the volume's size, for an envelope published per size.
    Returns the comparison for the bundle, one row per point."""
    rows = []
    for point in points:
        published = published_at(envelope, point["read_pct"], point["block_kib"], capacity_tib)
        row: dict[str, Any] = {
            "id": point["id"],
            "measured_iops": point.get("iops"),
            "measured_mib_s": point.get("mib_s"),
            "published": published,
        }
        if published and point.get("iops") is not None and published["iops"] > 0:
            row["ratio"] = point["iops"] / published["iops"]
        rows.append(row)
    return {
        "envelope": envelope.name,
        "title": envelope.spec.title,
        "clients": envelope.spec.conditions.client_count,
        "volume": volume(envelope, capacity_tib),
        "caveat": caveat(envelope),
        "rows": rows,
    }
