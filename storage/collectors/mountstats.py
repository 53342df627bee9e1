"""Read ``/proc/self/mountstats``: one section per mount, each parsed on its own.

One section per mount. It starts with ``device <source> mounted on <mount point> with fstype
<type>`` (``no device mounted on …`` when the kernel has no name for the source; source and
mount point escape space, tab, newline and backslash as ``\\ooo``). NFS mounts (``nfs``,
``nfs4``) append ``statvers=<v>`` and go on with lines that start with a tab: ``opts:``,
``age:`` (seconds since mounting), ``impl_id:``, ``caps:``, ``nfsv4:``, ``sec:``, ``events:``
(25 counters in statvers 1.0, 27 from 1.1 with the two pNFS counters; 1.2 renamed
``vfsreadpages`` to ``vfsreadahead``), ``bytes:`` (8), ``fsc:``, then ``RPC iostats version:
<1.0|1.1>  p/v: <prog>/<vers> (nfs)``, one ``xprt:`` line per transport (``nconnect=N`` gives
N), ``per-op statistics`` and one line per RPC procedure::

    NAME: ops transmissions major_timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]

(``net/sunrpc/stats.c``, ``rpc_count_iostats_metrics``: per completed RPC, 1 op,
``max(rq_ntrans, 1)`` transmissions, the major timeouts, the bytes sent and received with the
RPC headers, the time from creating the task to transmitting it (queue), the round trip, the
time from creating the task to completing it (execute); RPC iostats 1.1 adds ``errors``, the
calls that completed with ``tk_status < 0``.)

The numbers and their C types are in :mod:`storage.collectors.mountstats_format`.

Isolation: a line that does not start with white space starts a new section, so one broken
section cannot swallow the next. Each section is parsed on its own; a malformed one (a number
that is not one, does not fit its C type, a field count that is not the kernel's, a line cut
short at the end of the file, a per-op line before its header, a required line missing, a
per-op list that ends before the kernel's does: :mod:`storage.collectors.mountstats_ops`) is
returned as :class:`Unreadable` with the line, and every other mount keeps its exact figures.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from storage.collectors.mountstats_format import (
    BYTE_NAMES,
    EVENT_NAMES,
    OP_FIELDS,
    XPRT_FIELDS,
    XPRT_FORMATS,
    Kind,
    NfsSection,
    OpCounters,
    Xprt,
)
from storage.collectors.mountstats_ops import op_list_problem

__all__ = [
    "BYTE_NAMES", "EVENT_NAMES", "KERNEL_LONG_BITS", "MOUNTSTATS", "NFS_FSTYPES", "OP_FIELDS",
    "XPRT_FIELDS", "XPRT_FORMATS", "Kind", "MountStats", "MountstatsFile", "OpCounters",
    "Unreadable", "Xprt", "kernel_long_bits", "parse_mountstats", "read_mountstats", "unescape",
]  # fmt: skip

MOUNTSTATS = Path("/proc/self/mountstats")
NFS_FSTYPES = frozenset({"nfs", "nfs4"})
DETAIL_CHARS = 200
"""An unreadable line is quoted up to this many characters."""

_HEADER = re.compile(
    r"(?:device (?P<device>.+?)|no device) mounted on (?P<mount>\S+) with fstype (?P<fstype>\S+)"
    r"(?: statvers=(?P<statvers>\S*))? *"
)
_MOUNT_ONLY = re.compile(r" mounted on (?P<mount>\S+) ")
_STATVERS = re.compile(r"[0-9]+\.[0-9]+")
_ESCAPE = re.compile(r"\\([0-7]{3})")


def kernel_long_bits(machine: str | None = None) -> int:
    """The width of the kernel's ``unsigned long``: 64 on 64-bit machines (``uname -m``
    x86_64, aarch64, ppc64le, s390x, riscv64 …), 32 on i686, armv7l and the like."""
    machine = machine if machine is not None else os.uname().machine
    return 64 if "64" in machine or machine in {"s390x", "alpha"} else 32


KERNEL_LONG_BITS = kernel_long_bits()


@dataclass(frozen=True)
class MountStats:
    """One readable mount; for a mount without statistics only the first four fields are set.
    ``options`` maps each ``opts:`` item to its value ("" for a flag); ``long_bits`` is the
    width of the kernel's ``unsigned long`` the reading was taken with."""

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
    long_bits: int = 64

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


@dataclass(frozen=True)
class Unreadable:
    """A section that does not follow the kernel's format: the mount point when the header
    names one (None when the header itself is broken), the line, its number and why."""

    mount_point: str | None
    lineno: int
    line: str
    reason: str

    @property
    def detail(self) -> str:
        """What a gap sample says: ``line 12: <why>: '<the line, cut to 200 characters>'``."""
        return f"line {self.lineno}: {self.reason}: {self.line[:DETAIL_CHARS]!r}"


class MountstatsFile(Mapping[str, MountStats]):
    """One reading: the readable mounts by mount point (a mapping), the sections that were
    not (:attr:`unreadable`, by mount point) and the broken headers naming no mount point
    (:attr:`orphans`). A mount point listed twice keeps its last section, the mount on top,
    which hides the others (nfs-utils does the same), whether or not that one is readable.
    :attr:`order` lists the mount points, readable or not, in the order of the file (the
    kernel's: the order the mounts were made); :attr:`cut` is the section the file ends inside
    of (no newline at its end: the read was cut), or None."""

    def __init__(
        self,
        mounts: dict[str, MountStats],
        unreadable: dict[str, Unreadable],
        orphans: tuple[Unreadable, ...],
        order: tuple[str, ...] = (),
        cut: Unreadable | None = None,
    ) -> None:
        self.mounts = mounts
        self.unreadable = unreadable
        self.orphans = orphans
        self.order = order or tuple(dict.fromkeys([*mounts, *unreadable]))
        self.cut = cut

    def __getitem__(self, key: str) -> MountStats:
        return self.mounts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.mounts)

    def __len__(self) -> int:
        return len(self.mounts)


def unescape(text: str) -> str:
    """Undo the kernel's ``seq_escape`` (space, tab, newline, backslash as ``\\ooo``)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def _parse_section(
    lines: list[tuple[int, str]], cut_lineno: int | None, long_bits: int
) -> MountStats | Unreadable:
    first, header_line = lines[0]
    for lineno, line in lines:
        if lineno == cut_lineno:
            # The kernel ends every line with a newline: without one, the read was cut.
            where = _MOUNT_ONLY.search(header_line)
            return Unreadable(
                unescape(where["mount"]) if where else None,
                lineno, line, "cut short (no newline at the end of the file)",
            )  # fmt: skip
    if header_line[:1] in (" ", "\t"):
        return Unreadable(None, first, header_line, "a mount's lines without their header")
    header = _HEADER.fullmatch(header_line)
    if header is None:
        where = _MOUNT_ONLY.search(header_line)
        mount = unescape(where["mount"]) if where else None
        return Unreadable(mount, first, header_line, "not a 'device … mounted on …' header")
    device = unescape(header["device"]) if header["device"] is not None else "none"
    mount, fstype, statvers = unescape(header["mount"]), header["fstype"], header["statvers"]
    if fstype not in NFS_FSTYPES:
        return MountStats(device, mount, fstype, statvers)  # its own lines are not ours to read
    if statvers is None or not _STATVERS.fullmatch(statvers):
        return Unreadable(mount, first, header_line, "an NFS header without a valid statvers=")
    section = NfsSection(statvers, long_bits)
    for lineno, line in lines[1:]:
        try:
            section.feed(line.strip())
        except ValueError as exc:
            return Unreadable(mount, lineno, line, str(exc))
    missing = section.missing()
    if missing is not None:
        lineno, line = lines[-1]
        return Unreadable(mount, lineno, line, f"the section ends here with {missing}")
    rpc = section.rpc
    assert rpc is not None  # missing() says so otherwise
    problem = op_list_problem(rpc["pv"], section.ops)
    if problem is not None:
        lineno, line = lines[-1]
        return Unreadable(mount, lineno, line, f"the per-op list ends here: {problem}")
    return MountStats(
        device, mount, fstype, statvers, section.options, section.age_s, section.events,
        section.bytes, rpc["vers"], rpc["pv"],
        tuple(section.xprts), section.ops, section.lines, long_bits,
    )  # fmt: skip


def parse_mountstats(text: str, long_bits: int = KERNEL_LONG_BITS) -> MountstatsFile:
    """Parse a whole reading, each section on its own (see the module docstring); never
    raises for what the text holds. ``long_bits`` is the width of the kernel's ``unsigned
    long`` (:func:`kernel_long_bits`; pass 32 or 64 for a file recorded elsewhere). Lines the
    parser does not know (``key: value`` before the RPC part) are kept in
    :attr:`MountStats.lines`, so a newer kernel's additions do not make a mount unreadable."""
    sections: list[list[tuple[int, str]]] = []
    orphans: list[Unreadable] = []
    rows = text.split("\n")  # not splitlines(): a mount name may hold \r or \x1c raw
    cut = None if text.endswith("\n") or not text else len(rows)
    if cut is None and rows and rows[-1] == "":
        rows.pop()
    for lineno, line in enumerate(rows, 1):
        if not line.strip() and lineno != cut:  # a cut may leave only a line's indent
            continue
        body = line[:1] in (" ", "\t")
        # The kernel prints "opts:" right under an NFS header: anywhere else, a header was
        # lost, and these lines must not be read as the previous mount's.
        lost = bool(sections) and len(sections[-1]) > 1 and line.lstrip().startswith("opts:")
        if body and sections and not lost:
            sections[-1].append((lineno, line))
        else:
            sections.append([(lineno, line)])
    mounts: dict[str, MountStats] = {}
    unreadable: dict[str, Unreadable] = {}
    order: dict[str, None] = {}
    cut_section: Unreadable | None = None
    for lines in sections:
        parsed = _parse_section(lines, cut, long_bits)
        key = parsed.mount_point
        if isinstance(parsed, Unreadable) and parsed.lineno == cut:
            cut_section = parsed
        if isinstance(parsed, MountStats) and not parsed.is_nfs and len(lines) > 1:
            # Only NFS prints lines under its header: these belong to a mount whose own
            # header was lost; the mount above them is fine.
            lineno, line = lines[1]
            orphans.append(Unreadable(None, lineno, line, "a mount's lines without their header"))
        if key is None:
            assert isinstance(parsed, Unreadable)
            orphans.append(parsed)
            continue
        mounts.pop(key, None)
        unreadable.pop(key, None)
        order.pop(key, None)
        order[key] = None
        if isinstance(parsed, Unreadable):
            unreadable[key] = parsed
        else:
            mounts[key] = parsed
    return MountstatsFile(mounts, unreadable, tuple(orphans), tuple(order), cut_section)


def read_mountstats(path: Path = MOUNTSTATS, long_bits: int = KERNEL_LONG_BITS) -> MountstatsFile:
    """Read and parse a mountstats file (one ``read``; kernel memory, nothing on the server).
    Bytes that are not UTF-8 are kept as the file system's own names are (surrogate escapes)."""
    raw = Path(path).read_bytes()
    return parse_mountstats(raw.decode("utf-8", "surrogateescape"), long_bits)
