"""What the kernel prints in an NFS mount's section of ``/proc/self/mountstats``, line by line.

The numbers, as the kernel declares and prints them (``include/linux/sunrpc/metrics.h``
``struct rpc_iostats``, ``net/sunrpc/stats.c`` ``_print_rpc_iostats``; ``fs/nfs/iostat.h``
``struct nfs_iostats``, ``fs/nfs/super.c`` ``nfs_show_stats``; ``net/sunrpc/xprtsock.c``
``xs_*_print_stats``, ``net/sunrpc/xprtrdma/transport.c``):

======================================  =====================  =========================
field                                   C type                 printed as
======================================  =====================  =========================
per-op ops, transmissions, timeouts,    ``unsigned long``      ``%lu`` (32 or 64 bits)
errors; ``events:``; ``age:``; xprt
bind/connect counts, connect_time,
sends, recvs, bad_xids, max_slots
per-op bytes sent/received;             ``unsigned long long`` ``%llu``
``bytes:``; xprt req_u, bklog_u,
sending_u, pending_u
per-op queue, RTT, execute              ``ktime_t`` (s64 ns)   ``%llu`` of ``ktime_to_ms``:
                                                               signed, printed unsigned
xprt idle_time                          ``long``               ``%ld``
xprt port                               ``unsigned int``       ``%u``
======================================  =====================  =========================

So the queue/RTT/execute totals are read back as signed 64-bit numbers: a kernel that added a
negative time (``rpc_count_iostats_metrics`` before it checked ``rq_xtime``) prints
``18446743919241604546`` for −154 468 947 070 ms (prometheus/procfs recorded such a line). A
number is refused when it is not plain ASCII digits (a sign only where ``%ld`` prints one) or
does not fit its type; a line is refused when its count of numbers is not one the kernel
prints for its version.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Kind = Literal["u", "lu", "llu", "ld", "ms"]
"""How the kernel declares and prints a field: ``u`` unsigned int, ``lu`` unsigned long,
``llu`` unsigned long long, ``ld`` long (may be negative), ``ms`` a ktime_t in milliseconds,
signed but printed with ``%llu``."""

EVENT_NAMES: tuple[str, ...] = (
    "inoderevalidates", "dentryrevalidates", "datainvalidates", "attrinvalidates", "vfsopen",
    "vfslookup", "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages", "vfswritepage",
    "vfswritepages", "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync", "vfslock",
    "vfsrelease", "congestionwait", "setattrtrunc", "extendwrite", "sillyrenames",
    "shortreads", "shortwrites", "delay", "pnfsreads", "pnfswrites",
)  # fmt: skip
"""``events:`` in kernel order (``include/linux/nfs_iostat.h``, ``nfs_stat_eventcounters``)."""
EVENT_COUNTS = {"1.0": 25, "1.1": 27, "1.2": 27}
"""Events per statvers; a later statvers may add some (at least 27)."""

BYTE_NAMES: tuple[str, ...] = (
    "normalreadbytes", "normalwritebytes", "directreadbytes", "directwritebytes",
    "serverreadbytes", "serverwritebytes", "readpages", "writepages",
)  # fmt: skip
"""``bytes:`` in kernel order: NORMAL is read(2)/write(2), DIRECT is O_DIRECT, SERVER is the
payload of NFS READ and WRITE calls, then pages read and written."""

OP_FIELDS: tuple[tuple[str, Kind], ...] = (
    ("ops", "lu"), ("transmissions", "lu"), ("major_timeouts", "lu"), ("bytes_sent", "llu"),
    ("bytes_recv", "llu"), ("queue_ms", "ms"), ("rtt_ms", "ms"), ("execute_ms", "ms"),
    ("errors", "lu"),
)  # fmt: skip
OP_FIELD_COUNTS = {"1.0": 8, "1.1": 9}
"""Numbers per op line per RPC iostats version; a later version may add some (at least 9)."""

_TCP: tuple[tuple[str, Kind], ...] = (
    ("port", "u"), ("bind_count", "lu"), ("connect_count", "lu"), ("connect_time", "lu"),
    ("idle_time", "ld"), ("sends", "lu"), ("recvs", "lu"), ("bad_xids", "lu"),
    ("req_u", "llu"), ("bklog_u", "llu"),
)  # fmt: skip
_SLOTS: tuple[tuple[str, Kind], ...] = (
    ("max_slots", "lu"),
    ("sending_u", "llu"),
    ("pending_u", "llu"),
)
_UDP = (_TCP[0], _TCP[1], *_TCP[5:])
XPRT_FORMATS: dict[str, tuple[tuple[str, Kind], ...]] = {
    "tcp": _TCP + _SLOTS,
    "udp": _UDP + _SLOTS,
    "local": _TCP[1:] + _SLOTS,
    "rdma": _TCP,
}
"""Fields of an ``xprt:`` line after the protocol, with their kinds. Kernels before the
slot-table statistics print tcp, udp and local lines without the last three; rdma goes on with
counters of its own (kept in :attr:`Xprt.extra`). A line of any other protocol is refused."""
XPRT_FIELDS: dict[str, tuple[str, ...]] = {
    proto: tuple(name for name, _ in spec) for proto, spec in XPRT_FORMATS.items()
}
_XPRT_LENGTHS = {"tcp": (10, 13), "udp": (7, 10), "local": (9, 12)}

_RPC = re.compile(
    r"RPC iostats version: (?P<vers>[0-9]+\.[0-9]+)  p/v: (?P<pv>[0-9]+/[0-9]+) \(\S+\)"
)
_KEY = re.compile(r"[A-Za-z0-9_-]+")
_OP_LINE = re.compile(r"([A-Za-z0-9_-]+): ((?:0|[1-9][0-9]{0,19})(?: (?:0|[1-9][0-9]{0,19}))*)")
_UNSIGNED = re.compile(r"0|[1-9][0-9]{0,19}")
_SIGNED = re.compile(r"0|-?[1-9][0-9]{0,18}")
_BITS = {"u": 32, "llu": 64, "ms": 64}
_U64 = 1 << 64


@dataclass(frozen=True, slots=True)
class OpCounters:
    """One ``per-op statistics`` line; ``errors`` is None with RPC iostats 1.0 (8 fields).
    The three times are signed (see the module docstring)."""

    ops: int
    transmissions: int
    major_timeouts: int
    bytes_sent: int
    bytes_recv: int
    queue_ms: int
    rtt_ms: int
    execute_ms: int
    errors: int | None = None


@dataclass(frozen=True, slots=True)
class Xprt:
    """One ``xprt:`` line: ``counters`` by the names of :data:`XPRT_FIELDS` (only the fields
    the line has), ``extra`` for any further fields (rdma's own counters)."""

    proto: str
    counters: Mapping[str, int]
    extra: tuple[int, ...] = ()


def read_number(word: str, kind: Kind, long_bits: int) -> int:
    """One printed number, checked against its C type; ``ms`` comes back signed."""
    bits = _BITS.get(kind, long_bits)
    if not (_SIGNED if kind == "ld" else _UNSIGNED).fullmatch(word):
        raise ValueError(f"{word!r} is not a number the kernel prints")
    value = int(word)
    if kind == "ld":
        if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            raise ValueError(f"{word} does not fit a {bits}-bit long")
        return value
    if value >= 1 << bits:
        raise ValueError(f"{word} does not fit {bits} bits")
    return value - (1 << 64) if kind == "ms" and value >= 1 << 63 else value


class NfsSection:
    """The lines of one NFS mount after its header, fed one by one (:meth:`feed` raises
    ``ValueError`` saying what is wrong with a line), then :meth:`missing` says what a
    complete section would still have had."""

    def __init__(self, statvers: str, long_bits: int) -> None:
        self.statvers, self.long_bits = statvers, long_bits
        self.seen: set[str] = set()
        self.options: dict[str, str] = {}
        self.age_s: int | None = None
        self.events: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.rpc: re.Match[str] | None = None
        self.xprts: list[Xprt] = []
        self.ops: dict[str, OpCounters] = {}
        self.lines: dict[str, str] = {}
        self.in_ops = False
        self.op_count = 0
        self.limits: list[int] = []

    def numbers(self, words: list[str], kinds: list[Kind], what: str) -> list[int]:
        try:
            return [read_number(w, k, self.long_bits) for w, k in zip(words, kinds, strict=True)]
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None

    def feed(self, stripped: str) -> None:
        if self.in_ops:
            self.op_line(stripped)
        elif stripped == "per-op statistics":
            if self.rpc is None:
                raise ValueError("'per-op statistics' before the 'RPC iostats version' line")
            self.in_ops = True
            self.op_count = OP_FIELD_COUNTS.get(self.rpc["vers"], 0)  # 0: checked one by one
            self.limits = [1 << _BITS.get(k, self.long_bits) for _, k in OP_FIELDS]
        elif stripped.startswith("RPC iostats version:"):
            self.rpc_line(stripped)
        else:
            key, sep, rest = stripped.partition(":")
            if not sep or not _KEY.fullmatch(key):
                raise ValueError("not a 'key: value' line")
            if key in self.seen:
                raise ValueError(f"a second '{key}:' line")
            self.seen.add(key)
            self.keyed(key, rest.split(), rest)

    def rpc_line(self, stripped: str) -> None:
        if self.rpc is not None:
            raise ValueError("a second 'RPC iostats version' line")
        self.rpc = _RPC.fullmatch(stripped)
        if self.rpc is None:
            raise ValueError("not 'RPC iostats version: <v>  p/v: <prog>/<vers> (<name>)'")

    def keyed(self, key: str, words: list[str], rest: str) -> None:
        if key == "opts":
            pairs = (item.strip().partition("=") for item in rest.split(","))
            self.options = {name: value for name, _, value in pairs if name}
        elif key == "age":
            if len(words) != 1:
                raise ValueError(f"age: {len(words)} numbers, not 1")
            self.age_s = self.numbers(words, ["lu"], key)[0]
        elif key == "events":
            expected = EVENT_COUNTS.get(self.statvers)
            if len(words) != expected and (expected is not None or len(words) < 27):
                raise ValueError(f"events: {len(words)} counters, statvers {self.statvers} "
                                 f"prints {expected or 'at least 27'}")  # fmt: skip
            names = [*EVENT_NAMES, *(f"event{i}" for i in range(27, len(words)))][: len(words)]
            if tuple(int(n) for n in self.statvers.split(".")) >= (1, 2):
                names[EVENT_NAMES.index("vfsreadpages")] = "vfsreadahead"
            counts = self.numbers(words, ["lu"] * len(words), key)
            self.events = dict(zip(names, counts, strict=True))
        elif key == "bytes":
            if len(words) != len(BYTE_NAMES):
                raise ValueError(f"bytes: {len(words)} counters, not {len(BYTE_NAMES)}")
            self.bytes = dict(zip(BYTE_NAMES, self.numbers(words, ["llu"] * 8, key), strict=True))
        elif key == "xprt":
            self.xprts.append(self.xprt(words))
        elif self.rpc is not None and looks_like_op(words):
            raise ValueError("a per-op line without its 'per-op statistics' header")
        else:
            self.lines[key] = rest.strip()

    def xprt(self, words: list[str]) -> Xprt:
        if self.rpc is None:
            raise ValueError("an 'xprt:' line before the 'RPC iostats version' line")
        self.seen.discard("xprt")  # one line per transport
        if not words:
            raise ValueError("xprt: no protocol")
        proto, nums = words[0], words[1:]
        spec = XPRT_FORMATS.get(proto)
        if spec is None:
            # Read as a transport of no known fields, a line that lost its protocol word
            # ("xprt: 720 0 1 …") would count as a connection with no sends: wrong figures.
            raise ValueError(f"xprt: {proto!r} is not a transport the kernel prints "
                             f"({', '.join(XPRT_FORMATS)})")  # fmt: skip
        lengths = _XPRT_LENGTHS.get(proto)
        if lengths is not None and len(nums) not in lengths:
            shown = " or ".join(map(str, lengths))
            raise ValueError(f"xprt {proto}: {len(nums)} fields, the kernel prints {shown}")
        if proto == "rdma" and len(nums) < len(spec):
            raise ValueError(f"xprt rdma: {len(nums)} fields, at least {len(spec)}")
        kinds = [k for _, k in spec][: len(nums)] + ["llu"] * (len(nums) - len(spec))
        values = self.numbers(nums, kinds, f"xprt {proto}")
        named = dict(zip((n for n, _ in spec), values, strict=False))
        return Xprt(proto, named, tuple(values[len(spec) :]))

    def op_line(self, stripped: str) -> None:
        fast = _OP_LINE.fullmatch(stripped)
        if fast is not None and fast[1] not in self.ops:
            # The common case, in a few C-level passes: this runs for every op of every mount,
            # every interval; anything unusual takes the checks below, which say what is wrong.
            values = list(map(int, fast[2].split(" ")))
            if len(values) == self.op_count and not any(map(operator.ge, values, self.limits)):
                ops, trans, timeouts, sent, recv, queue, rtt, execute = values[:8]
                queue, rtt, execute = (v - _U64 if v >> 63 else v for v in (queue, rtt, execute))
                errors = values[8] if len(values) > 8 else None
                self.ops[fast[1]] = OpCounters(
                    ops, trans, timeouts, sent, recv, queue, rtt, execute, errors
                )
                return
        name, sep, rest = stripped.partition(":")
        words = rest.split()
        if not sep or not _KEY.fullmatch(name) or not rest.startswith(" "):
            raise ValueError("not a per-op line ('NAME: numbers')")
        assert self.rpc is not None  # the per-op header is refused before it
        vers = self.rpc["vers"]
        expected = OP_FIELD_COUNTS.get(vers)
        if len(words) != expected and (expected is not None or len(words) < 9):
            raise ValueError(f"{name}: {len(words)} fields, RPC iostats {vers} prints "
                             f"{expected or 'at least 9'}")  # fmt: skip
        if name in self.ops:
            raise ValueError(f"{name}: listed twice")
        kinds = [k for _, k in OP_FIELDS] + ["llu"] * (len(words) - 9)
        nums = self.numbers(words, kinds[: len(words)], name)
        ops, trans, timeouts, sent, recv, queue, rtt, execute = nums[:8]
        errors = nums[8] if len(nums) > 8 else None
        self.ops[name] = OpCounters(ops, trans, timeouts, sent, recv, queue, rtt, execute, errors)

    def missing(self) -> str | None:
        """What a complete section would have had, or None."""
        for key in ("opts", "age", "events", "bytes"):
            if key not in self.seen:
                return f"no '{key}:' line"
        if self.rpc is None:
            return "no 'RPC iostats version' line"
        if not self.xprts:  # a mount has a transport for as long as it is mounted
            return "no 'xprt:' line"
        if not self.in_ops:
            return "no 'per-op statistics' header"
        return None if self.ops else "no per-op lines"


def looks_like_op(words: list[str]) -> bool:
    return len(words) >= 8 and all(_UNSIGNED.fullmatch(w) for w in words)
