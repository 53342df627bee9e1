"""Parse ``/proc/self/mountstats`` and turn two readings into the figures of ``nfsiostat``.

One block per mount. Mounts without statistics are one line,
``device <source> mounted on <mount point> with fstype <type>`` (``no device mounted on …``
when the kernel has no name for the source). NFS mounts (``nfs``, ``nfs4``) append
``statvers=<v>`` and then, one per line: ``opts:`` (the options in force), ``age:`` (seconds
since mounting), ``caps:``, ``nfsv4:``, ``sec:``, ``events:`` (25 counters in statvers 1.0, 27
from 1.1 with the two pNFS counters; 1.2 renamed ``vfsreadpages`` to ``vfsreadahead``),
``bytes:`` (8 counters), ``RPC iostats version: <1.0|1.1>  p/v: <prog>/<vers> (nfs)``, one
``xprt:`` line per transport (``nconnect=N`` gives N), ``per-op statistics`` and one line per
RPC procedure::

    NAME: ops transmissions major_timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]

(``net/sunrpc/stats.c``: ``rpc_count_iostats_metrics`` adds, per completed RPC, 1 op,
``max(rq_ntrans, 1)`` transmissions, the task's major timeouts, the bytes sent and received
including RPC headers, the time from creating the task to transmitting the request (queue),
the round trip, and the time from creating the task to its completion (execute, which includes
queue and RTT); RPC iostats 1.1 adds ``errors``: calls that completed with ``tk_status < 0``.)
The per-op counters belong to the mount's RPC client, so they are not repeated per connection.

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
:func:`mount_rates`.

Counter wrap: the kernel prints ``unsigned long`` (64 bits on 64-bit kernels, 32 on 32-bit)
and ``unsigned long long`` counters. A counter that went down wrapped: its delta is taken
modulo 2**32 when the old value fits 32 bits, else modulo 2**64. A remount resets every
counter; :func:`same_mount` recognises it (``age`` went down, or another source).
nfs-utils subtracts plainly and would print negative figures in both cases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

MOUNTSTATS = Path("/proc/self/mountstats")
NFS_FSTYPES = frozenset({"nfs", "nfs4"})

EVENT_NAMES: tuple[str, ...] = (
    "inoderevalidates", "dentryrevalidates", "datainvalidates", "attrinvalidates", "vfsopen",
    "vfslookup", "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages", "vfswritepage",
    "vfswritepages", "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync", "vfslock",
    "vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrenames",
    "shortreads", "shortwrites", "delay", "pnfsreads", "pnfswrites",
)  # fmt: skip
"""``events:`` in kernel order (``include/linux/nfs_iostat.h``, ``nfs_stat_eventcounters``)."""

BYTE_NAMES: tuple[str, ...] = (
    "normalreadbytes", "normalwritebytes", "directreadbytes", "directwritebytes",
    "serverreadbytes", "serverwritebytes", "readpages", "writepages",
)  # fmt: skip
"""``bytes:`` in kernel order: NORMAL is read(2)/write(2), DIRECT is O_DIRECT, SERVER is the
payload of NFS READ and WRITE calls, then pages read and written."""

_TCP = ("port", "bind_count", "connect_count", "connect_time", "idle_time", "sends", "recvs",
        "bad_xids", "req_u", "bklog_u")  # fmt: skip
_SLOTS = ("max_slots", "sending_u", "pending_u")
XPRT_FIELDS: dict[str, tuple[str, ...]] = {
    "tcp": _TCP + _SLOTS,
    "udp": ("port", "bind_count", "sends", "recvs", "bad_xids", "req_u", "bklog_u", *_SLOTS),
    "local": _TCP[1:] + _SLOTS,
    "rdma": _TCP,
}
"""Field names of an ``xprt:`` line after the protocol (``net/sunrpc/xprtsock.c``
``xs_*_print_stats``, ``xprtrdma/transport.c``). Kernels before the slot-table statistics
print tcp and udp lines without the last three; rdma goes on with its own counters."""

OP_RATE_KEYS: tuple[str, ...] = (
    "ops_s", "kB_s", "kB_per_op", "retrans", "retrans_pct", "avg_rtt_ms", "avg_exe_ms",
    "avg_queue_ms", "timeouts", "errors", "errors_pct",
)  # fmt: skip
"""Keys of :func:`op_rates` (``errors`` and ``errors_pct`` only with RPC iostats 1.1)."""

_U32 = 1 << 32
_U64 = 1 << 64
_HEADER = re.compile(
    r"^(?:device (?P<device>\S+)|no device) mounted on (?P<mount>\S+)"
    r" with fstype (?P<fstype>\S+)(?: statvers=(?P<statvers>\S+))?"
)
_RPC = re.compile(r"RPC iostats version: (?P<vers>\S+)\s+p/v: (?P<pv>\S+)")
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class OpCounters:
    """One ``per-op statistics`` line; ``errors`` is None with RPC iostats 1.0 (8 fields)."""

    ops: int
    transmissions: int
    major_timeouts: int
    bytes_sent: int
    bytes_recv: int
    queue_ms: int
    rtt_ms: int
    execute_ms: int
    errors: int | None = None


_ZERO_OP = OpCounters(0, 0, 0, 0, 0, 0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Xprt:
    """One ``xprt:`` line: ``counters`` by the names of :data:`XPRT_FIELDS` (only the fields
    the line has), ``extra`` for any further fields (rdma's own counters)."""

    proto: str
    counters: Mapping[str, int]
    extra: tuple[int, ...] = ()


@dataclass(frozen=True)
class MountStats:
    """One mount of ``/proc/self/mountstats``; for a mount without statistics only the first
    four fields are set. ``options`` maps each ``opts:`` item to its value ("" for a flag)."""

    device: str
    mount_point: str
    fstype: str
    statvers: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    age_s: int | None = None
    events: Mapping[str, int] = field(default_factory=dict)
    bytes: Mapping[str, int] = field(default_factory=dict)
    rpc_iostats: str | None = None
    program: str | None = None
    xprts: tuple[Xprt, ...] = ()
    ops: Mapping[str, OpCounters] = field(default_factory=dict)
    lines: Mapping[str, str] = field(default_factory=dict)
    """Other ``key:`` lines as printed (``caps``, ``sec``, ``nfsv4``, ``fsc`` …)."""

    @property
    def is_nfs(self) -> bool:
        return self.fstype in NFS_FSTYPES

    @property
    def connections(self) -> int:
        """Number of ``xprt:`` lines (the transports in use, ``nconnect`` when set)."""
        return len(self.xprts)

    def xprt_total(self, name: str) -> int:
        """``name`` summed over the transports: meaningful for the counters (``sends``,
        ``bklog_u``, ``connect_count`` …), not for ``port``, ``idle_time`` or ``max_slots``."""
        return sum(x.counters.get(name, 0) for x in self.xprts)


def unescape(text: str) -> str:
    """Undo the kernel's ``seq_escape`` (space, tab, newline, backslash as ``\\ooo``)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def _ints(words: list[str], what: str, lineno: int) -> list[int]:
    try:
        return [int(w) for w in words]
    except ValueError:
        raise ValueError(f"mountstats line {lineno}: {what}: not a number in {words}") from None


def _xprt(words: list[str], lineno: int) -> Xprt:
    if not words:
        raise ValueError(f"mountstats line {lineno}: xprt: no protocol")
    proto, nums = words[0], _ints(words[1:], "xprt", lineno)
    names = XPRT_FIELDS.get(proto, ())
    return Xprt(proto, dict(zip(names, nums, strict=False)), tuple(nums[len(names) :]))


@dataclass
class _Builder:
    """The mount being read; NFS lines fill it in, :meth:`build` freezes it."""

    device: str
    mount_point: str
    fstype: str
    statvers: str | None
    options: dict[str, str] = field(default_factory=dict)
    age_s: int | None = None
    events: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    rpc_iostats: str | None = None
    program: str | None = None
    xprts: list[Xprt] = field(default_factory=list)
    ops: dict[str, OpCounters] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)
    in_ops: bool = False

    def feed(self, stripped: str, lineno: int) -> None:
        if self.in_ops:
            name, _, rest = stripped.partition(":")
            nums = _ints(rest.split(), name, lineno)
            if len(nums) < 8:
                raise ValueError(f"mountstats line {lineno}: {name}: {len(nums)} fields, not 8+")
            ops, trans, timeouts, sent, recv, queue, rtt, exe = nums[:8]
            errors = nums[8] if len(nums) > 8 else None
            self.ops[name.strip()] = OpCounters(
                ops, trans, timeouts, sent, recv, queue, rtt, exe, errors
            )
            return
        if stripped == "per-op statistics":
            self.in_ops = True
            return
        rpc = _RPC.match(stripped)
        if rpc:
            self.rpc_iostats, self.program = rpc["vers"], rpc["pv"]
            return
        key, _, rest = stripped.partition(":")
        words = rest.split()
        if key == "opts":
            pairs = (item.strip().partition("=") for item in rest.split(","))
            self.options = {name: value for name, _, value in pairs if name}
        elif key == "age":
            self.age_s = _ints(words[:1], key, lineno)[0]
        elif key == "events":
            names = list(EVENT_NAMES)
            if tuple(int(n) for n in re.findall(r"\d+", self.statvers or "")) >= (1, 2):
                names[EVENT_NAMES.index("vfsreadpages")] = "vfsreadahead"
            self.events = dict(zip(names, _ints(words, key, lineno), strict=False))
        elif key == "bytes":
            self.bytes = dict(zip(BYTE_NAMES, _ints(words, key, lineno), strict=False))
        elif key == "xprt":
            self.xprts.append(_xprt(words, lineno))
        else:
            self.lines[key] = rest.strip()

    def build(self) -> MountStats:
        values = {f.name: getattr(self, f.name) for f in fields(MountStats)}
        return MountStats(**(values | {"xprts": tuple(self.xprts)}))


def parse_mountstats(text: str) -> dict[str, MountStats]:
    """Parse the whole file; keys are mount points (unescaped). A mount point listed twice
    keeps the last entry: the mount on top, which hides the others (nfs-utils does the same).

    Raises ``ValueError`` naming the line when a counter of an NFS mount is not numeric.
    Lines the parser does not know are kept in :attr:`MountStats.lines` (before the per-op
    section) so a newer kernel's additions do not break it.
    """
    found: dict[str, MountStats] = {}
    current: _Builder | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            if current is not None:
                found[current.mount_point] = current.build()
            current = _Builder(
                unescape(header["device"] or "none"),
                unescape(header["mount"]),
                header["fstype"],
                header["statvers"],
            )
        elif current is not None and current.fstype in NFS_FSTYPES and line.strip():
            current.feed(line.strip(), lineno)
    if current is not None:
        found[current.mount_point] = current.build()
    return found


def read_mountstats(path: Path = MOUNTSTATS) -> dict[str, MountStats]:
    """Read and parse a mountstats file (one ``read``; kernel memory, nothing on the server)."""
    return parse_mountstats(Path(path).read_text(encoding="utf-8", errors="replace"))


# --------------------------------------------------------------------------- arithmetic


def counter_delta(curr: int, prev: int) -> int:
    """``curr - prev`` for a kernel counter that may have wrapped once (see module doc)."""
    if curr >= prev:
        return curr - prev
    return curr + (_U32 if prev < _U32 else _U64) - prev


def same_mount(prev: MountStats, curr: MountStats) -> bool:
    """False when ``curr`` is a new mount on the same mount point: another source or type, or
    an ``age`` that went down (an unmount and mount between the readings)."""
    if (prev.device, prev.fstype) != (curr.device, curr.fstype):
        return False
    return prev.age_s is None or curr.age_s is None or curr.age_s >= prev.age_s


def op_rates(prev: OpCounters | None, curr: OpCounters, interval_s: float) -> dict[str, float]:
    """nfsiostat's figures for one op between two readings ``interval_s`` apart; ``prev``
    None counts from zero (a mount made during the interval). Keys: :data:`OP_RATE_KEYS`."""
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    p = prev or _ZERO_OP
    ops = counter_delta(curr.ops, p.ops)
    # nfsiostat: retrans = delta(transmissions) - delta(ops), on the deltas.
    retrans = counter_delta(curr.transmissions, p.transmissions) - ops
    kilobytes = (
        counter_delta(curr.bytes_sent, p.bytes_sent) + counter_delta(curr.bytes_recv, p.bytes_recv)
    ) / 1024

    def per_op(value: float) -> float:
        return value / ops if ops else 0.0

    out = {
        "ops_s": ops / interval_s,
        "kB_s": kilobytes / interval_s,
        "kB_per_op": per_op(kilobytes),
        "retrans": float(retrans),
        "retrans_pct": per_op(retrans * 100),
        "avg_rtt_ms": per_op(counter_delta(curr.rtt_ms, p.rtt_ms)),
        "avg_exe_ms": per_op(counter_delta(curr.execute_ms, p.execute_ms)),
        "avg_queue_ms": per_op(counter_delta(curr.queue_ms, p.queue_ms)),
        "timeouts": float(counter_delta(curr.major_timeouts, p.major_timeouts)),
    }
    if curr.errors is not None:
        errors = counter_delta(curr.errors, p.errors or 0)
        out["errors"] = float(errors)
        out["errors_pct"] = per_op(errors * 100)
    return out


def mount_rates(
    prev: MountStats | None, curr: MountStats, interval_s: float
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per-op figures (every op of ``curr``) and mount-level figures between two readings.

    ``prev`` None counts every counter from zero. Mount-level keys (kB is 1024 bytes):
    ``read_kB_s``/``write_kB_s`` (``serverreadbytes``/``serverwritebytes``: the payload of NFS
    READ and WRITE, what the server's storage serves), ``app_read_kB_s``/``app_write_kB_s``
    (NORMAL + DIRECT: what applications asked for), ``read_cache_hit_pct`` (nfs-iostat.py
    ``__print_data_cache_stats``: (normal - (server - direct)) * 100 / normal, 0 without
    buffered reads), ``ops_s`` (per-op ops summed), ``rpc_sends_s`` (``sends`` summed over
    the connections; nfsiostat's mount ``ops/s``), ``rpc_bklog`` (nfsiostat's ``rpc bklog``:
    ``bklog_u`` / ``sends`` / t, summed over the connections), ``retrans``, ``timeouts``,
    ``errors`` (1.1), ``connections``, ``connects`` (``connect_count`` delta: connections
    made, reconnections included), ``bad_xids`` and ``max_slots`` (highest slot-table use of
    any connection since mounting; absent from kernels that do not print it).
    """
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    old_ops: Mapping[str, OpCounters] = prev.ops if prev else {}
    per_op = {name: op_rates(old_ops.get(name), c, interval_s) for name, c in curr.ops.items()}

    def byte_delta(name: str) -> int:
        return counter_delta(curr.bytes.get(name, 0), prev.bytes.get(name, 0) if prev else 0)

    def xprt_delta(name: str) -> int:
        # Connections pair up by position (the kernel lists them in the order it added them);
        # one that is new counts from zero.
        old = prev.xprts if prev else ()
        return sum(
            counter_delta(
                x.counters.get(name, 0), old[i].counters.get(name, 0) if i < len(old) else 0
            )
            for i, x in enumerate(curr.xprts)
        )

    normal, direct = byte_delta("normalreadbytes"), byte_delta("directreadbytes")
    server = byte_delta("serverreadbytes")
    sends = xprt_delta("sends")
    mount = {
        "read_kB_s": server / 1024 / interval_s,
        "write_kB_s": byte_delta("serverwritebytes") / 1024 / interval_s,
        "app_read_kB_s": (normal + direct) / 1024 / interval_s,
        "app_write_kB_s": (byte_delta("normalwritebytes") + byte_delta("directwritebytes"))
        / 1024
        / interval_s,
        "read_cache_hit_pct": (normal - (server - direct)) * 100 / normal if normal else 0.0,
        "ops_s": sum(v["ops_s"] for v in per_op.values()),
        "rpc_sends_s": sends / interval_s,
        "rpc_bklog": xprt_delta("bklog_u") / sends / interval_s if sends else 0.0,
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
    return per_op, mount
