"""Two readings of one NFS mount: the figures of ``nfsiostat``, or the counter that reset.

Arithmetic (nfs-utils ``tools/nfs-iostat/nfs-iostat.py``, ``__print_rpc_op_stats``), for the
differences of two readings over an interval of ``t`` seconds, kB meaning 1024 bytes::

    ops_s          ops / t                                 nfsiostat  ops/s
    kB_s           (bytes_sent + bytes_recv) / 1024 / t               kB/s
    kB_per_op      (bytes_sent + bytes_recv) / 1024 / ops             kB/op
    retrans        transmissions - ops                                retrans (count)
    retrans_pct    retrans * 100 / ops                                retrans (%)
    avg_rtt_ms     rtt_ms / ops                                       avg RTT (ms)
    avg_exe_ms     execute_ms / ops                                   avg exe (ms)
    avg_queue_ms   queue_ms / ops                                     avg queue (ms)
    errors         errors (RPC iostats 1.1 only)                      errors (count)
    errors_pct     errors * 100 / ops (1.1 only)                      errors (%)
    timeouts       major_timeouts (nfsiostat does not print it)

Every per-op ratio is 0 when ``ops`` is 0, as in nfsiostat. Mount-level figures are in
:func:`interval_figures`.

Counters that go down. The kernel never lowers a counter of a mount it keeps: a lower reading
means the counters started again (a remount, a reboot, a transport replaced) or, for the
queue/RTT/execute totals, that the kernel added a negative time. A decrease is therefore a
*reset* — no rate is formed across it — unless the counter's width says it wrapped: only a
32-bit counter (``unsigned int``, or ``unsigned long`` on a 32-bit kernel) can wrap within a
run, and only a wrapped difference under half its range (2³¹) is taken as one wrap. A 64-bit
counter would need centuries at any real rate, and the times are signed (read as such by
:mod:`storage.collectors.mountstats`), so for them a decrease is always a reset. nfs-utils
subtracts plainly and prints negative figures (−13.5 ms of queue, where a modulo-2⁶⁴ rule
prints 49 856 065 064 079 856 ms).

A mount resets when its source, type, statvers or RPC iostats version changed, ``age`` went
down, a transport went away or changed protocol, or any ``events:``, ``bytes:``, transport
counter or per-op count (ops, transmissions, major timeouts, errors: the mount sums them) went
down. An op alone resets when only its bytes or times went down: the mount keeps its figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from storage.collectors.mountstats import XPRT_FORMATS, Kind, MountStats, OpCounters

OP_RATE_KEYS: tuple[str, ...] = (
    "ops_s", "kB_s", "kB_per_op", "retrans", "retrans_pct", "avg_rtt_ms", "avg_exe_ms",
    "avg_queue_ms", "timeouts", "errors", "errors_pct",
)  # fmt: skip
"""Keys of :func:`op_rates` (``errors`` and ``errors_pct`` only with RPC iostats 1.1)."""

_ZERO_OP = OpCounters(0, 0, 0, 0, 0, 0, 0, 0, 0)
_IDENTITY = ("device", "fstype", "statvers", "rpc_iostats", "program")
_GAUGES = frozenset({"port", "idle_time", "max_slots"})
"""Transport fields that are not counters: a port, the seconds since last use, the highest
slot-table use since mounting."""


@dataclass(frozen=True)
class Reset:
    """The counter that went down (``GETATTR.ops``, ``age``, ``xprt[2].sends`` …) and its
    two readings; ``str()`` gives ``"<counter>: <old> -> <new>"``."""

    counter: str
    old: int | str | None
    new: int | str | None

    def __str__(self) -> str:
        return f"{self.counter}: {self.old} -> {self.new}"


class CounterReset(ValueError):
    """Raised by :func:`op_rates` and :func:`mount_rates` when no rate can be formed."""

    def __init__(self, reset: Reset) -> None:
        super().__init__(f"counter reset: {reset}")
        self.reset = reset


def counter_delta(curr: int, prev: int, kind: Kind = "llu", long_bits: int = 64) -> int | None:
    """``curr - prev`` for a counter of ``kind`` (see :data:`~storage.collectors.mountstats.
    Kind`) on a kernel whose ``unsigned long`` has ``long_bits`` bits; None when it went down
    and cannot have wrapped (a reset, see the module docstring)."""
    if curr >= prev:
        return curr - prev
    width = 32 if kind == "u" or (kind == "lu" and long_bits == 32) else None
    if width is None:
        return None
    wrapped = curr + (1 << width) - prev
    return wrapped if 0 <= wrapped < 1 << (width - 1) else None


class _Differ:
    """Deltas of many counters, remembering the first that reset (its delta counts as 0)."""

    def __init__(self, long_bits: int) -> None:
        self.long_bits = long_bits
        self.reset: Reset | None = None

    def __call__(self, name: str, curr: int, prev: int, kind: Kind) -> int:
        delta = counter_delta(curr, prev, kind, self.long_bits)
        if delta is None:
            self.reset = self.reset or Reset(name, prev, curr)
            return 0
        return delta


def _op_figures(
    name: str, prev: OpCounters | None, curr: OpCounters, interval_s: float, long_bits: int
) -> tuple[dict[str, float], Reset | None, Reset | None]:
    """One op's figures, the first of its counters that reset, and the first of the counts
    the mount sums that reset (ops, transmissions, major timeouts, errors)."""
    p = prev or _ZERO_OP
    counts, others = _Differ(long_bits), _Differ(long_bits)
    ops = counts(f"{name}.ops", curr.ops, p.ops, "lu")
    # nfsiostat: retrans = delta(transmissions) - delta(ops), on the deltas.
    retrans = counts(f"{name}.transmissions", curr.transmissions, p.transmissions, "lu") - ops
    timeouts = counts(f"{name}.major_timeouts", curr.major_timeouts, p.major_timeouts, "lu")
    errors = None
    if curr.errors is not None:
        errors = counts(f"{name}.errors", curr.errors, p.errors or 0, "lu")
    sent = others(f"{name}.bytes_sent", curr.bytes_sent, p.bytes_sent, "llu")
    kilobytes = (sent + others(f"{name}.bytes_recv", curr.bytes_recv, p.bytes_recv, "llu")) / 1024
    queue = others(f"{name}.queue_ms", curr.queue_ms, p.queue_ms, "ms")
    rtt = others(f"{name}.rtt_ms", curr.rtt_ms, p.rtt_ms, "ms")
    execute = others(f"{name}.execute_ms", curr.execute_ms, p.execute_ms, "ms")

    def per_op(value: float) -> float:
        return value / ops if ops else 0.0

    out = {
        "ops_s": ops / interval_s,
        "kB_s": kilobytes / interval_s,
        "kB_per_op": per_op(kilobytes),
        "retrans": float(retrans),
        "retrans_pct": per_op(retrans * 100),
        "avg_rtt_ms": per_op(rtt),
        "avg_exe_ms": per_op(execute),
        "avg_queue_ms": per_op(queue),
        "timeouts": float(timeouts),
    }
    if errors is not None:
        out["errors"] = float(errors)
        out["errors_pct"] = per_op(errors * 100)
    return out, counts.reset or others.reset, counts.reset


def op_rates(
    prev: OpCounters | None, curr: OpCounters, interval_s: float, long_bits: int = 64
) -> dict[str, float]:
    """nfsiostat's figures for one op between two readings ``interval_s`` apart; ``prev``
    None counts from zero (a mount made during the interval). Keys: :data:`OP_RATE_KEYS`.
    Raises :class:`CounterReset` when a counter went down without wrapping."""
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    values, reset, _ = _op_figures("op", prev, curr, interval_s, long_bits)
    if reset is not None:
        raise CounterReset(reset)
    return values


def mount_reset(prev: MountStats, curr: MountStats) -> Reset | None:
    """Why no mount-level rate can be formed from ``prev`` to ``curr`` (another mount, a
    remount, a counter that went down: see the module docstring), or None."""
    for what in _IDENTITY:
        if getattr(prev, what) != getattr(curr, what):
            return Reset(what, getattr(prev, what), getattr(curr, what))
    if prev.age_s is not None and curr.age_s is not None and curr.age_s < prev.age_s:
        return Reset("age", prev.age_s, curr.age_s)
    if curr.connections < prev.connections:
        return Reset("connections", prev.connections, curr.connections)
    differ = _Differ(curr.long_bits)
    for name, value in curr.events.items():
        differ(f"events.{name}", value, prev.events.get(name, 0), "lu")
    for name, value in curr.bytes.items():
        differ(f"bytes.{name}", value, prev.bytes.get(name, 0), "llu")
    for i, (old, new) in enumerate(zip(prev.xprts, curr.xprts, strict=False)):
        if old.proto != new.proto:
            return differ.reset or Reset(f"xprt[{i}].proto", old.proto, new.proto)
        for name, kind in XPRT_FORMATS.get(new.proto, ()):
            if name not in _GAUGES and name in new.counters and name in old.counters:
                differ(f"xprt[{i}].{name}", new.counters[name], old.counters[name], kind)
    return differ.reset


@dataclass(frozen=True)
class Figures:
    """One interval of one mount. ``mount`` holds the mount-level figures, or is None and
    ``reset`` names the counter that went down; ``ops`` the figures of every op whose
    counters all went forward, ``op_resets`` the first counter of each other op that did not
    (empty when the whole mount reset: its ops are not reported)."""

    mount: Mapping[str, float] | None
    reset: Reset | None
    ops: Mapping[str, Mapping[str, float]]
    op_resets: Mapping[str, Reset]


def interval_figures(prev: MountStats | None, curr: MountStats, interval_s: float) -> Figures:
    """Per-op and mount-level figures between two readings of one mount ``interval_s``
    apart; ``prev`` None counts every counter from zero (a mount made in the interval).

    Mount-level keys (kB is 1024 bytes): ``read_kB_s``/``write_kB_s`` (``serverreadbytes``/
    ``serverwritebytes``: the payload of NFS READ and WRITE, what the server's storage
    serves), ``app_read_kB_s``/``app_write_kB_s`` (NORMAL + DIRECT: what applications asked
    for), ``read_cache_hit_pct`` (nfs-iostat.py ``__print_data_cache_stats``: (normal -
    (server - direct)) * 100 / normal, 0 without buffered reads), ``ops_s`` (per-op ops
    summed), ``rpc_sends_s`` (``sends`` summed over the connections; nfsiostat's mount
    ``ops/s``), ``rpc_bklog`` (nfsiostat's ``rpc bklog``: ``bklog_u`` / ``sends`` / t, summed
    over the connections), ``retrans``, ``timeouts``, ``errors`` (1.1), ``connections``,
    ``connects`` (``connect_count`` delta: connections made, reconnections included),
    ``bad_xids`` and ``max_slots`` (highest slot-table use of any connection since mounting;
    absent from kernels that do not print it).
    """
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    if prev is not None and (reset := mount_reset(prev, curr)) is not None:
        return Figures(None, reset, {}, {})
    old_ops: Mapping[str, OpCounters] = prev.ops if prev else {}
    every: dict[str, dict[str, float]] = {}
    ops: dict[str, Mapping[str, float]] = {}
    op_resets: dict[str, Reset] = {}
    count_reset: Reset | None = None
    for name, counters in curr.ops.items():
        values, reset, counts = _op_figures(
            name, old_ops.get(name), counters, interval_s, curr.long_bits
        )
        every[name] = values
        if reset is None:
            ops[name] = values
        else:
            op_resets[name] = reset
        count_reset = count_reset or counts
    if count_reset is not None:
        return Figures(None, count_reset, ops, op_resets)
    mount, reset = _mount_figures(prev, curr, every, interval_s)
    return Figures(mount, reset, ops, op_resets)


def _mount_figures(
    prev: MountStats | None,
    curr: MountStats,
    per_op: Mapping[str, Mapping[str, float]],
    interval_s: float,
) -> tuple[dict[str, float] | None, Reset | None]:
    differ = _Differ(curr.long_bits)

    def byte_delta(name: str) -> int:
        old = prev.bytes.get(name, 0) if prev else 0
        return differ(f"bytes.{name}", curr.bytes.get(name, 0), old, "llu")

    def xprt_delta(name: str) -> int:
        # Connections pair up by position (the kernel lists them in the order it added them);
        # one that is new counts from zero.
        old = prev.xprts if prev else ()
        kinds = {x.proto: dict(XPRT_FORMATS.get(x.proto, ())) for x in curr.xprts}
        return sum(
            differ(
                f"xprt[{i}].{name}",
                x.counters.get(name, 0),
                old[i].counters.get(name, 0) if i < len(old) else 0,
                kinds[x.proto].get(name, "llu"),
            )
            for i, x in enumerate(curr.xprts)
        )

    t = interval_s
    normal, direct = byte_delta("normalreadbytes"), byte_delta("directreadbytes")
    server = byte_delta("serverreadbytes")
    sends = xprt_delta("sends")
    mount = {
        "read_kB_s": server / 1024 / t,
        "write_kB_s": byte_delta("serverwritebytes") / 1024 / t,
        "app_read_kB_s": (normal + direct) / 1024 / t,
        "app_write_kB_s": (byte_delta("normalwritebytes") + byte_delta("directwritebytes"))
        / 1024
        / t,
        "read_cache_hit_pct": (normal - (server - direct)) * 100 / normal if normal else 0.0,
        "ops_s": sum(v["ops_s"] for v in per_op.values()),
        "rpc_sends_s": sends / t,
        "rpc_bklog": xprt_delta("bklog_u") / sends / t if sends else 0.0,
        "retrans": sum(v["retrans"] for v in per_op.values()),
        "timeouts": sum(v["timeouts"] for v in per_op.values()),
        "connections": float(curr.connections),
        "connects": float(xprt_delta("connect_count")),
        "bad_xids": float(xprt_delta("bad_xids")),
    }
    slots = [x.counters["max_slots"] for x in curr.xprts if "max_slots" in x.counters]
    if slots:
        mount["max_slots"] = float(max(slots))
    if any("errors" in v for v in per_op.values()):
        mount["errors"] = sum(v.get("errors", 0.0) for v in per_op.values())
    if differ.reset is not None:
        return None, differ.reset
    return mount, None


def mount_rates(
    prev: MountStats | None, curr: MountStats, interval_s: float
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per-op figures (every op of ``curr``) and mount-level figures between two readings
    (keys: :func:`interval_figures`); ``prev`` None counts every counter from zero. Raises
    :class:`CounterReset` when any counter reset (the collector reports each entity apart,
    through :func:`interval_figures`)."""
    figures = interval_figures(prev, curr, interval_s)
    reset = figures.reset or next(iter(figures.op_resets.values()), None)
    if reset is not None or figures.mount is None:
        raise CounterReset(reset or Reset("mount", None, None))
    return {k: dict(v) for k, v in figures.ops.items()}, dict(figures.mount)
