"""Periodic ``nfsiostat INTERVAL [COUNT] [-a|-d|-p] [MOUNT…]`` output (nfs-utils) as the nfs
collector's figures.

nfsiostat prints, per report and per mount::

    filer01:/vol/oradata mounted on /u02/oradata:

               ops/s       rpc bklog
            1575.500           0.200

    read:              ops/s            kB/s           kB/op         retrans    avg RTT (ms)    avg exe (ms)  avg queue (ms)          errors
                    1200.000        9900.000           8.250        3 (0.0%)           2.500           2.800           0.100        0 (0.0%)

(``avg queue`` since nfs-utils 2.3, ``errors`` with RPC iostats 1.1; older versions print
``op/s``.) The figures are those of :mod:`storage.collectors.nfs_rates`, which reproduces
this arithmetic: the mount's ``ops/s`` and ``rpc bklog`` are ``rpc_sends_s`` and
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

from sim.imports import clock
from sim.imports.source import ImportClock, Parsed, Row, SourceFile, combine, number
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
    for block in blocks:
        if block.index == 0:
            source.drop(block.line, FIRST)
            continue
        if block.broken:
            continue
        moment = block.stamp if stamped else _moment(given, block.index)
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


def _blocks(source: SourceFile) -> list[Block]:
    blocks: list[Block] = []
    seen: dict[str, int] = {}
    stamp: datetime | None = None
    pending: tuple[int, str] | None = None  # an op's header waiting for its figures
    for number_, line in enumerate(source.lines, start=1):
        text = line.strip()
        if not text or _CACHE_TEXT.match(text):
            continue
        mount = _MOUNT.match(text)
        if mount:
            point = mount.group("mount")
            seen[point] = seen.get(point, -1) + 1
            blocks.append(Block(number_, point, seen[point], stamp))
            stamp, pending = None, None
            continue
        found = clock.parse_stamp(text)
        if found is not None:
            stamp = clock.resolve(found, dayfirst=False, base=None)
            continue
        pending = _figure_line(source, blocks, number_, text, pending)
    return blocks


def _figure_line(
    source: SourceFile, blocks: list[Block], line: int, text: str, pending: tuple[int, str] | None
) -> tuple[int, str] | None:
    """Read a header or a figures line; returns the header now pending, if any."""
    block = blocks[-1] if blocks else None
    if block is None:
        source.drop(line, f"not a line of an nfsiostat report: {text[:60]!r}")
        return None
    words = text.split()
    if words[0] in ("ops/s", "op/s") or words[0].endswith(":"):
        return (line, text)
    if pending is None:
        _broken(source, block, line, "figures without their header line")
        return None
    head_line, head = pending
    figures = _values(head, text)
    if figures is None:
        _broken(source, block, line, f"figures that do not match the header of line {head_line}")
        return None
    name = head.split()[0]
    if name in ("ops/s", "op/s"):
        block.figures[block.mount] = {
            "rpc_sends_s": figures["ops_s"],
            "rpc_bklog": figures.get("rpc_bklog", 0.0),
        }
    elif figures.get("ops_s", 0.0) > 0:
        block.figures[f"{block.mount}:{name.rstrip(':').upper()}"] = figures
    return None


def _broken(source: SourceFile, block: Block, line: int, why: str) -> None:
    """A damaged line loses its whole report of that mount (never a partial one)."""
    if not block.broken and block.index > 0:
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


def _values(head: str, text: str) -> dict[str, float] | None:
    """The figures of a line under its header, by the header's names: a ``3 (0.0%)`` column
    gives the count and its percentage (``retrans_pct``, ``errors_pct``)."""
    keys = [HEAD_KEYS[name] for name in _HEAD.findall(head)]
    percents = iter(float(p) for _, p in _COUNT.findall(text))
    words = _COUNT.sub(lambda m: m.group(1), text).split()
    if len(words) != len(keys):
        return None
    out: dict[str, float] = {}
    for key, word in zip(keys, words, strict=True):
        value = number(word)
        if value is None:
            return None
        out[key] = value
        if key in ("retrans", "errors"):
            percent = next(percents, None)
            if percent is not None:
                out[f"{key}_pct"] = percent
    return out
