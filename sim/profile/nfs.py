"""What the NFS client asked of its servers, from the source playing the NFS role: per mount
the calls per second and the READ/WRITE payload, per NFS operation its calls per second, its
size per call and its time per call (nfsiostat's arithmetic: docs/telemetry.md, ``nfs``).

A mount's entity is its mount point; an operation's is ``<mount point>:<OP>`` (``:READ``,
``:GETATTR`` …), told apart by an upper-case name after the last colon of a listed mount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sim.profile.columns import TIME, Col, summary_figures, window_figures
from sim.profile.figures import column_info
from sim.profile.source import Table

MOUNT_COLUMNS = (
    Col("ops_s", "calls/s", "1/s", TIME, "NFS calls completed per second, every operation"),
    Col("read_kB_s", "READ kB/s", "kB/s", TIME, "payload of READ calls, kB per second"),
    Col("write_kB_s", "WRITE kB/s", "kB/s", TIME, "payload of WRITE calls, kB per second"),
)
OP_COLUMNS = (
    Col("ops_s", "calls/s", "1/s", TIME, "calls of this operation completed per second"),
    Col("kB_per_op", "kB/call", "kB", "ops_s", "bytes on the wire per call, headers included"),
    Col("avg_exe_ms", "time/call", "ms", "ops_s", "from creating the call to its completion"),
    Col("avg_rtt_ms", "RTT", "ms", "ops_s", "round trip to the server and back"),
)
KEEP = frozenset(c.key for c in (*MOUNT_COLUMNS, *OP_COLUMNS))
_OP_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def keep_column(name: str) -> bool:
    return name in KEEP


@dataclass
class NfsData:
    table: Table
    column_kind: str
    #: mount point -> its operations (OP -> entity name)
    mounts: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def lengths(self) -> list[float]:
        return self.table.lengths


def nfs_data(table: Table, column_kind: str) -> NfsData:
    data = NfsData(table, column_kind)
    names = set(table.values)
    for entity in sorted(names):
        mount, _, op = entity.rpartition(":")
        if mount in names and _OP_NAME.match(op):
            continue
        data.mounts[entity] = {}
    for entity in sorted(names):
        mount, _, op = entity.rpartition(":")
        if mount in data.mounts and _OP_NAME.match(op):
            data.mounts[mount][op] = entity
    return data


def _info(data: NfsData, entity: str, cols: tuple[Col, ...]) -> dict[str, dict[str, str]]:
    return {
        c.key: column_info(c.unit, data.column_kind, f"{data.table.name}: {c.key} of {entity}")
        for c in cols
    }


def nfs_document(data: NfsData) -> dict[str, Any]:
    """Per mount: its summary and per-interval calls; per operation the same, busiest first."""
    mounts = {}
    for mount, ops in data.mounts.items():
        series = data.table.values[mount]
        info = _info(data, mount, MOUNT_COLUMNS)
        per_op = {}
        for op, entity in ops.items():
            op_series = data.table.values[entity]
            op_info = _info(data, entity, OP_COLUMNS)
            per_op[op] = {
                "summary": summary_figures(op_series, data.lengths, op_info, OP_COLUMNS),
                "series": {k: v for k, v in op_series.items() if k in ("ops_s", "kB_per_op")},
            }
        busiest = sorted(per_op, key=lambda op: -_mean_of(per_op[op], "ops_s"))
        mounts[mount] = {
            "summary": summary_figures(series, data.lengths, info, MOUNT_COLUMNS),
            "series": {k: v for k, v in series.items() if k in ("ops_s",)},
            "operations": {op: per_op[op] for op in busiest},
        }
    return {"source": data.table.source, "mounts": mounts}


def _mean_of(entry: dict[str, Any], key: str) -> float:
    value = ((entry.get("summary") or {}).get(key) or {}).get("mean") or {}
    return float(value.get("value") or 0.0)


def load_series(data: NfsData) -> tuple[list[float | None], str]:
    """Every mount's calls per second together, per interval, and where from."""
    parts = [data.table.column(m, "ops_s") for m in data.mounts]
    total = [
        sum(v for v in values if v is not None) if any(v is not None for v in values) else None
        for values in zip(*parts, strict=True)
    ]
    return total, f"{data.table.name}: ops_s, over {', '.join(data.mounts)}"


def window_document(data: NfsData, first: int, last: int) -> dict[str, Any]:
    """Every mount's figures over intervals ``first..last``."""
    return {
        mount: window_figures(
            data.table.values[mount],
            data.lengths,
            _info(data, mount, MOUNT_COLUMNS),
            MOUNT_COLUMNS,
            first,
            last,
        )
        for mount in data.mounts
    }
