"""Periodic ``nfsiostat INTERVAL [COUNT] [-a|-d|-p] [MOUNT…]`` output (nfs-utils) as the nfs
collector's figures.

nfsiostat prints, per report and per mount::

    filer01:/vol/oradata mounted on /u02/oradata:

               ops/s       rpc bklog
            1575.500           0.200

    read:              ops/s            kB/s           kB/op         retrans    avg RTT (ms)    avg exe (ms)  avg queue (ms)          errors
                    1200.000        9900.000           8.250        3 (0.0%)           2.500           2.800           0.100        0 (0.0%)

(``avg queue`` since nfs-utils 2.3, ``errors`` with RPC iostats 1.1; older versions print
``op/s``. An nfsiostat whose Python 2 ``print x,`` (no end of line) became ``print(x),``
under Python 3 ends a line after every figure and after ``read:``: read as the same report.)
The figures are those of :mod:`storage.collectors.nfs_rates`, which reproduces this
arithmetic: the mount's ``ops/s`` and ``rpc bklog`` are ``rpc_sends_s`` and
``rpc_bklog`` (entity: the mount point), an op's columns are ``ops_s kB_s kB_per_op retrans
retrans_pct avg_rtt_ms avg_exe_ms avg_queue_ms errors errors_pct`` (entity
``<mount>:<OP>``; an op with no call in the interval has no row, as live). nfsiostat prints
3 decimals (percentages 1); nfs-utils reads only the last ``xprt:`` line, so with
``nconnect`` the mount's two figures cover one connection (noted in the summary).

nfsiostat prints no time. The k-th report of a mount ends ``k × INTERVAL`` after nfsiostat
started: ``dbsim import nfsiostat FILE --start TIME --interval SECONDS``. A time line before
a report (``date`` output) is used instead when the file has them. The first report of each
mount holds the averages since mounting, not an interval: dropped and listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace

from sim.imports import clock
from sim.imports.source import (
    ImportClock,
    Parsed,
    Row,
    SourceFile,
    combine,
    number,
    same_kind,
)
from storage.collectors.nfs import NfsClientCollector

USES_CLOCK = True
_MOUNT = re.compile(r"(?P<export>\S.*?) mounted on (?P<mount>\S.*):\s*$")
_COUNT = re.compile(r"(\d+) \((\d+(?:\.\d+)?)%\)")
#: The lines -a, -d and -p print about caches: nfsiostat's own, not figures kept here.
_CACHE_TEXT = re.compile(
    r"^(app bytes:|Data cache hit ratio|\d+ (VFS opens|inoderevalidates|page cache|attribute cache"
    r"|open operations|dentry revalidates|vfs getdents|nfs_readpage|nfs_readpages|nfs_updatepage"
    r"|nfs_writepage|nfs_writepages|congestion waits)|resulted in|\(\d)"
)
_BARE_OP = re.compile(r"^[a-z_]+:$")
FIRST = "first report of the mount: averages since mounting, not an interval"


@dataclass
class Block:
    """One mount's part of one report."""

    line: int
    mount: str
    index: int  # 0: the since-mount report
    stamp: datetime | None
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    broken: bool = False


def parse(files: list[SourceFile], clock_given: ImportClock) -> Parsed:
    return combine(files, lambda source: parse_file(source, clock_given))


def parse_file(source: SourceFile, given: ImportClock) -> Parsed:
    blocks = _blocks(source)
    if not blocks:
        raise source.refuse(0, "mounted on", "no nfsiostat report (no 'X mounted on Y:' line)")
    stamped = any(b.stamp for b in blocks)
    if not stamped and (given.start is None or given.interval_s is None):
        raise source.refuse(
            blocks[0].line,
            "--start",
            "nfsiostat prints no time: give --start (when it started) and --interval",
        )
    rows: list[Row] = []
    nfs = NfsClientCollector.source
    last: dict[str, datetime] = {}
    kinds = SimpleNamespace(_aware=None)
    for block in blocks:
        if block.index == 0:
            source.drop(block.line, FIRST)
            continue
        if block.broken:
            continue
        moment = block.stamp if stamped else _moment(given, block.index)
        if moment is not None and not same_kind(kinds, moment):
            moment = None
        if moment is None or (block.mount in last and moment <= last[block.mount]):
            source.drop(block.line, "a report without its own time, or out of order")
            continue
        last[block.mount] = moment
        rows.extend((moment, nfs, entity, figures) for entity, figures in block.figures.items())
    return Parsed(
        rows=rows,
        interval_s=given.interval_s if not stamped else None,
        started=given.start if not stamped else None,
        means_only=[f"{nfs}: per-op means (nfsiostat prints averages, 3 decimals)"],
        notes=[
            "nfsiostat reads the last xprt: line only: with nconnect, rpc_sends_s and "
            "rpc_bklog cover one connection"
        ],
    )


def _moment(given: ImportClock, index: int) -> datetime | None:
    if given.start is None or given.interval_s is None:
        return None
    return given.start + timedelta(seconds=given.interval_s * index)


class _Reader:
    """The file's lines, block by block: a header line must be followed by its figures."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.blocks: list[Block] = []
        self.seen: dict[str, int] = {}
        self.stamp: datetime | None = None
        self.pending: tuple[int, str] | None = None  # a header waiting for its figures
        self.partial: list[str] = []  # its figures so far, when they come one per line

    def close(self, line: int) -> None:
        """Whatever comes next is not the pending header's figures."""
        if self.pending is not None and self.blocks:
            why = "figures cut short" if self.partial else "a header without its figures"
            _broken(self.source, self.blocks[-1], line, why)
        self.pending, self.partial = None, []

    def line(self, number_: int, text: str) -> None:
        mount = _MOUNT.match(text)
        if mount:
            self.close(number_)
            point = mount.group("mount")
            self.seen[point] = self.seen.get(point, -1) + 1
            self.blocks.append(Block(number_, point, self.seen[point], self.stamp))
            self.stamp = None
            return
        if self.pending is not None and self.blocks:
            joined = " ".join([*self.partial, text])
            if _values(self.pending[1], joined) is not None or _starts(self.pending[1], joined):
                # A figure awaited, even one that would read as a time (a 10-digit kB/s).
                self._figure(self.blocks[-1], number_, text)
                return
        found = clock.parse_stamp(text)
        if found is not None:
            self.close(number_)
            self.stamp = clock.resolve(found, dayfirst=False, base=None)
            return
        block = self.blocks[-1] if self.blocks else None
        if block is None:
            self.source.drop(number_, f"not a line of an nfsiostat report: {text[:60]!r}")
            return
        words = text.split()
        if words[0] in ("ops/s", "op/s") or words[0].endswith(":"):
            bare = self.pending is not None and _BARE_OP.match(self.pending[1])
            if bare and not self.partial and words[0] == "ops/s" and self.pending is not None:
                # "read:" alone, its column names on the next line (the one-value-a-line
                # layout): one header.
                self.pending = (self.pending[0], f"{self.pending[1]} {text}")
                return
            self.close(number_)
            self.pending = (number_, text)
            return
        self._figure(block, number_, text)

    def _figure(self, block: Block, number_: int, text: str) -> None:
        pending = self.pending
        if pending is None:
            _broken(self.source, block, number_, "figures without their header line")
            return
        # Published output where each figure has its own line (and "read:" is apart from its
        # column names): the figures of one header are the number lines that follow it
        # (tests/data/nfsiostat/README.md).
        joined = " ".join([*self.partial, text])
        if _values(pending[1], joined) is None and _starts(pending[1], joined):
            self.partial.append(text)
            return
        self.pending, self.partial = None, []
        _figures(self.source, block, number_, pending, joined)


def _blocks(source: SourceFile) -> list[Block]:
    reader = _Reader(source)
    cut = bool(source.text) and not source.text.endswith("\n")
    for number_, line in enumerate(source.lines, start=1):
        text = line.strip()
        if cut and number_ == len(source.lines):
            if reader.blocks:
                why = "last line has no end of line: cut short?"
                _broken(source, reader.blocks[-1], number_, why)
            return reader.blocks
        if text and not _CACHE_TEXT.match(text):
            reader.line(number_, text)
    reader.close(len(source.lines))
    return reader.blocks


def _figures(
    source: SourceFile, block: Block, line: int, pending: tuple[int, str], text: str
) -> None:
    head_line, head = pending
    figures = _values(head, text)
    name = head.split()[0]
    summary = name in ("ops/s", "op/s")
    expected = {"ops_s", "rpc_bklog"} if summary else {"ops_s", "kB_s", "kB_per_op"}
    if figures is None or not expected <= set(figures) or (summary and len(figures) != 2):
        _broken(source, block, line, f"figures that do not match the header of line {head_line}")
    elif summary and block.mount in block.figures:
        _broken(source, block, line, "a second ops/s line in one report of the mount")
    elif summary:
        block.figures[block.mount] = {
            "rpc_sends_s": figures["ops_s"],
            "rpc_bklog": figures["rpc_bklog"],
        }
    elif figures["ops_s"] > 0:
        block.figures[f"{block.mount}:{name.rstrip(':').upper()}"] = figures


def _broken(source: SourceFile, block: Block, line: int, why: str) -> None:
    """A damaged line loses its whole report of that mount (never a partial one)."""
    if not block.broken:
        source.drop(line, f"{block.mount}: {why}")
    block.broken, block.figures = True, {}


_HEAD = re.compile(
    r"ops/s|op/s|rpc bklog|kB/s|kB/op|retrans|avg RTT \(ms\)|avg exe \(ms\)"
    r"|avg queue \(ms\)|errors"
)
HEAD_KEYS = {
    "ops/s": "ops_s",
    "op/s": "ops_s",
    "rpc bklog": "rpc_bklog",
    "kB/s": "kB_s",
    "kB/op": "kB_per_op",
    "retrans": "retrans",
    "avg RTT (ms)": "avg_rtt_ms",
    "avg exe (ms)": "avg_exe_ms",
    "avg queue (ms)": "avg_queue_ms",
    "errors": "errors",
}


def _starts(head: str, text: str) -> bool:
    """Whether ``text`` is the first figures of ``head``'s line, some still to come."""
    keys = [HEAD_KEYS[name] for name in _HEAD.findall(head)]
    words = _COUNT.sub(lambda m: m.group(1), text).split()
    if not words or len(words) >= len(keys):
        return False
    if len(_COUNT.findall(text)) != sum(k in ("retrans", "errors") for k in keys[: len(words)]):
        return False
    return all((value := number(word)) is not None and value >= 0 for word in words)


def _values(head: str, text: str) -> dict[str, float] | None:
    """The figures of a line under its header, by the header's names: a ``3 (0.0%)`` column
    gives the count and its percentage (``retrans_pct``, ``errors_pct``)."""
    keys = [HEAD_KEYS[name] for name in _HEAD.findall(head)]
    counted = _COUNT.findall(text)
    if len(counted) != sum(key in ("retrans", "errors") for key in keys):
        return None  # nfsiostat prints every count with its percentage
    percents = iter(float(p) for _, p in counted)
    words = _COUNT.sub(lambda m: m.group(1), text).split()
    if len(words) != len(keys):
        return None
    out: dict[str, float] = {}
    for key, word in zip(keys, words, strict=True):
        value = number(word)
        if value is None or value < 0:  # nfsiostat prints no negative figure
            return None
        out[key] = value
        if key in ("retrans", "errors"):
            percent = next(percents, None)
            if percent is not None:
                out[f"{key}_pct"] = percent
    return out
