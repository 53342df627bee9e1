"""Each measured point beside a published envelope's figure at the same mix and size.

The published figure is read from the envelope's tables as :mod:`storage.envelopes.model`
reads them for sizing (published points as printed; between mixes and sizes by service time,
flagged as estimates; nothing extrapolated). When both an IOPS and a bandwidth ceiling apply,
the lower one, in IOPS at the point's request size, is the published figure. It is the
figure at the seed's test conditions (its volume size and service level, *and its N
clients*): a single client here may legitimately reach less, and the row says so.
"""

from __future__ import annotations

from typing import Any

from storage.envelopes.model import Envelope, Limit

MIB_PER_KIB = 1 / 1024


def _as_iops(limit: Limit, block_kib: float) -> float:
    return limit.value if limit.kind == "iops" else limit.value / (block_kib * MIB_PER_KIB)


def published_at(envelope: Envelope, read_pct: float, block_kib: float) -> dict[str, Any] | None:
    """The envelope's figure at one point, or None when its tables say nothing there."""
    limits = envelope.table_limits(read_pct / 100.0, block_kib)
    if not limits:
        return None
    binding = min(limits, key=lambda lim: _as_iops(lim, block_kib))
    iops = _as_iops(binding, block_kib)
    return {
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


def compare(envelope: Envelope, points: list[dict[str, Any]]) -> dict[str, Any]:
    """``points``: the baseline's results (``id``, ``read_pct``, ``block_kib``, ``iops``,
    ``mib_s``). Returns the comparison for the bundle, one row per point."""
    rows = []
    for point in points:
        published = published_at(envelope, point["read_pct"], point["block_kib"])
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
        "caveat": caveat(envelope),
        "rows": rows,
    }
