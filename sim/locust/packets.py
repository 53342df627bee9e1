"""What a process hosting an engine hands on: intervals and its final result as plain dicts.

A *packet* is one closed interval of one engine: its histograms (HDR, base64, as the bundle's
``intervals.hlog`` holds them), its errors, its storage samples, and — for measured intervals
— the :class:`~sim.locust.stats.LatencyBatch` per operation that feeds Locust's table. Packets
are built on the engine thread (the encoding costs CPU there, not on the gevent hub) and are
msgpack-ready, because workers ship them to the master on Locust's worker-report channel.

Storage samples of several workers are merged by one rule (:func:`merge_samples`), from each
collector's declared scope (:class:`sim.registry.CollectorEntry`): a host-local view (block
devices, NFS client counters, host CPU) is taken once per host, from the lowest-numbered
worker on that host — two workers on one machine see the same disk, and adding their views
would double its IOPS — except per-process figures (dbsim's CPU), which are summed over that
host's workers. A view of a shared system (the array's ONTAP counters, a database server's
statistics) is taken once for the whole run. With workers on several hosts, host-local
entities are named ``<host>/<entity>`` (unless the entity names the host already).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hdrh.histogram import HdrHistogram

from sim import registry
from sim.core.engine import Engine
from sim.core.metrics import Interval, OpStats
from sim.locust.stats import LatencyBatch, batch_from_stats
from sim.protocols import Sample
from sim.registry import COLLECTOR_SCOPE_SHARED

PACKET_VERSION = 1

Packet = dict[str, Any]


def hostname() -> str:
    return socket.gethostname()


def encode_ops(ops: Mapping[str, OpStats]) -> dict[str, dict[str, Any]]:
    """Histograms and errors per operation, as text (empty histograms travel as "")."""
    return {
        name: {
            "h": stats.histogram.encode().decode("ascii") if stats.count else "",
            "err": dict(stats.errors),
        }
        for name, stats in ops.items()
    }


def decode_ops(data: Mapping[str, Mapping[str, Any]]) -> dict[str, OpStats]:
    """The inverse of :func:`encode_ops`."""
    out: dict[str, OpStats] = {}
    for name, item in data.items():
        stats = OpStats()
        if item["h"]:
            stats.histogram.add(HdrHistogram.decode(item["h"]))
        stats.errors = {str(k): int(v) for k, v in item["err"].items()}
        out[str(name)] = stats
    return out


def interval_packet(
    interval: Interval,
    samples: Sequence[Sample],
    *,
    wall0: float,
    with_histograms: bool,
) -> Packet:
    """One closed interval as a packet (called on the engine thread). ``wall0`` is the wall
    clock of the engine's time 0, so the packet knows which seconds it covers."""
    packet: Packet = {
        "v": PACKET_VERSION,
        "i": interval.index,
        "t0": interval.t_start,
        "t1": interval.t_end,
        "phase": interval.phase,
        "step": interval.step,
        "wall0": wall0,
        "host": hostname(),
        # A gap (sim.protocols.Sample.gap) travels as two more fields, so the master's bundle
        # records the reset or unreadable entity as a single-process run's does.
        "samples": [
            [
                s.source,
                s.entity,
                dict(s.values),
                dict(s.meta),
                *((s.gap, s.detail) if s.gap else ()),
            ]
            for s in samples
        ],
    }
    if interval.measured:
        packet["lat"] = {name: batch_from_stats(s).to_wire() for name, s in interval.ops.items()}
    if with_histograms:
        packet["ops"] = encode_ops(interval.ops)
    return packet


def packet_batches(packet: Packet) -> dict[str, LatencyBatch]:
    """The Locust feed of a measured packet (empty for a warm-up one)."""
    return {name: LatencyBatch.from_wire(data) for name, data in packet.get("lat", {}).items()}


def packet_wall(packet: Packet) -> tuple[float, float]:
    """Wall-clock start and end of the packet's interval."""
    return packet["wall0"] + packet["t0"], packet["wall0"] + packet["t1"]


def packet_ops(packet: Packet) -> dict[str, OpStats]:
    return decode_ops(packet.get("ops", {}))


def packet_samples(packet: Packet) -> list[Sample]:
    out = []
    for source, entity, values, meta, *gap in packet["samples"]:
        kind, detail = (str(gap[0]), str(gap[1])) if len(gap) == 2 else ("", "")
        out.append(
            Sample(str(source), str(entity), dict(values), packet["t1"], dict(meta), kind, detail)
        )
    return out


def final_report(engine: Engine, packets: int) -> dict[str, Any]:
    """What a worker tells the master once its engine has finished (engine thread)."""
    result = engine.result
    workload = engine.workload
    try:
        expected = workload.expected_mix(result.op_ranges)
    except Exception as exc:  # a workload bug must not lose the worker's figures
        expected = None
        result.error = result.error or f"expected_mix: {type(exc).__name__}: {exc}"
    return {
        "v": PACKET_VERSION,
        "host": hostname(),
        "packets": packets,
        "outcome": result.outcome,
        "reason": result.reason,
        "stopped_early": getattr(result, "stopped_early", False),
        "error": result.error,
        # 2 when the error is a refusal (a foreign object in the way): bad input, as for a
        # single-process run (getattr: the field is newer than some engines' results).
        "error_exit_code": getattr(result, "error_exit_code", None),
        "last_state": result.last_state,
        "sessions": result.sessions,
        "sessions_started_wall": result.sessions_started_wall,
        "measured_s": result.measured_s,
        "warmup_s": result.warmup_s,
        "stages": result.stage_log,
        "totals": encode_ops(engine.recorder.totals),
        "error_examples": engine.recorder.error_examples,
        "expected_mix": expected,
        "requested_pct": dict(workload.operations()),
        "load": result.load_report,
        "verify": result.verify_report,
        "target": result.target,
        "collectors": result.collectors,
        "collector_errors": result.collector_errors,
        "messages": engine.events.failures(),
    }


def merge_samples(by_worker: Iterable[tuple[int, str, Sequence[Sample]]]) -> list[Sample]:
    """Merge the storage samples of several workers for one interval (see the module
    docstring). ``by_worker``: (worker index, host name, samples)."""
    ordered = sorted(by_worker, key=lambda item: item[0])
    hosts = {host for _, host, _ in ordered}
    taken: dict[tuple[str, str], int] = {}  # (scope, source) -> worker index whose view counts
    merged: dict[tuple[str, str], Sample] = {}
    for index, host, samples in ordered:
        for sample in samples:
            entry = registry.collector(sample.source)
            shared = entry is not None and entry.scope == COLLECTOR_SCOPE_SHARED
            scope = "*" if shared else host
            owner = taken.setdefault((scope, sample.source), index)
            entity = sample.entity
            if len(hosts) > 1 and not shared and not (entry and entry.entity_names_host):
                entity = f"{host}/{entity}"
            key = (sample.source, entity)
            if owner == index:
                merged[key] = Sample(
                    sample.source,
                    entity,
                    dict(sample.values),
                    sample.t,
                    sample.meta,
                    sample.gap,
                    sample.detail,
                )
                continue
            if sample.gap:
                continue  # another worker's gap in a view already taken: nothing to add
            # Another worker's view of the same host: only its own process's figures add up.
            existing = merged.get(key)
            if existing is None or existing.gap:
                continue
            values = dict(existing.values)
            for figure in (entry.per_process if entry else frozenset()) & set(sample.values):
                values[figure] = values.get(figure, 0.0) + sample.values[figure]
            merged[key] = Sample(
                existing.source, existing.entity, values, existing.t, existing.meta
            )
    return list(merged.values())
