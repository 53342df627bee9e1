"""What a process hosting an engine hands on: intervals and its final result as plain dicts.

A *packet* is one closed interval of one engine: its histograms (HDR, base64, as the bundle's
``intervals.hlog`` holds them), its errors, its storage samples, and — for measured intervals
— the :class:`~sim.locust.stats.LatencyBatch` per operation that feeds Locust's table. Packets
are built on the engine thread (the encoding costs CPU there, not on the gevent hub) and are
msgpack-ready, because workers ship them to the master on Locust's worker-report channel.

Storage samples of several workers are merged by :func:`sim.live.worker_samples.merge_samples`.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
from hdrh.histogram import HdrHistogram
from locust.rpc import protocol

from sim.core.engine import Engine
from sim.core.metrics import Interval, OpStats
from sim.locust.stats import LatencyBatch, batch_from_stats
from sim.protocols import Sample

PACKET_VERSION = 1
#: msgpack's integers: what is outside travels as text.
_INT_RANGE = (-(2**63), 2**64)

log = logging.getLogger(__name__)

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


def wire_safe(item: Any, what: str) -> Any:
    """``item`` (a packet, a final report) as Locust's channel carries it: itself when msgpack
    takes it, else a copy in which numpy scalars are plain numbers, sets are lists and anything
    else is its text, with an error logged naming ``what``. A value msgpack refuses (a numpy
    integer, a set) raises inside Locust's stats reporter, whose greenlet then dies: the
    worker stays alive on its heartbeats and sends nothing more for the rest of the run."""
    try:
        msgpack.packb(item, default=protocol.encode)  # as Locust's Message.serialize
        return item
    except (TypeError, ValueError, OverflowError) as exc:
        log.error("%s: a value msgpack cannot carry (%s); sent as plain values", what, exc)
        return _plain(item)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, bytes, float, datetime.datetime)):
        return value  # (datetimes: Locust's encoder carries them)
    if isinstance(value, int):
        return value if _INT_RANGE[0] <= value < _INT_RANGE[1] else str(value)
    if isinstance(value, Mapping):
        return {k if isinstance(k, (str, int)) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=str)
    scalar = getattr(value, "item", None)  # a numpy scalar
    if callable(scalar):
        with contextlib.suppress(Exception):
            return _plain(scalar())
    return str(value)
