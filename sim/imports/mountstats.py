"""A series of ``/proc/self/mountstats`` snapshots as the nfs collector's figures.

Accepted layouts (docs/capture.md, "Importing files"):

* one file of several snapshots, each after a time line, as
  ``while sleep 60; do date -Is; cat /proc/self/mountstats; done > mountstats.log`` writes;
* several files (or a directory of them, read in name order), each one snapshot or more
  that starts with a time line, or whose name carries its time:
  ``mountstats.20240115T100000``, ``…-20240115-100000``, ``…2024-01-15T10:00:00…`` (as
  written, zone unknown) or ``….1705312800`` (seconds since the epoch, UTC).

A time line is any line :func:`sim.imports.clock.parse_stamp` reads (``date``, ``date -Is``,
``date +%s`` …); everything else belongs to the snapshot above it. Two snapshots in a row
give one interval ending at the second's time: the figures are the live collector's, from the
same parser (:mod:`storage.collectors.mountstats`) and arithmetic
(:func:`storage.collectors.nfs_rates.interval_figures`), per NFS mount (entity: the mount
point) and per op that completed calls (entity ``<mount>:<OP>``). The first snapshot is the
baseline. A mount whose counters went down between two snapshots (a remount, a reboot), or
whose section is unreadable, gives no figures for that interval: it is listed under
``dropped`` with the line of its snapshot. Counters are read as a 64-bit kernel prints them.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sim.imports import clock
from sim.imports.source import Parsed, Row, SourceFile, same_kind
from storage.collectors.mountstats import MountStats, MountstatsFile, parse_mountstats
from storage.collectors.nfs import NfsClientCollector
from storage.collectors.nfs_rates import interval_figures, mount_reset

READS_DIRECTORIES = True
LONG_BITS = 64
_NAME_TIME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})[T_-]?(\d{2}):?(\d{2}):?(\d{2})|(?<!\d)(\d{10})(?!\d)"
)
MEANS_ONLY = ("{0}: per-op means (no latency distribution: mountstats keeps sums)",)


@dataclass
class Snapshot:
    source: SourceFile
    line: int  # its time line (0: the time is the file name's); its text starts a line below
    moment: datetime
    text: str


def _name_time(name: str) -> datetime | None:
    match = _NAME_TIME.search(name)
    if not match:
        return None
    if match.group(7):
        return datetime.fromtimestamp(int(match.group(7)), UTC)
    y, mo, d, h, mi, sec = (int(g) for g in match.groups()[:6])
    try:
        return datetime(y, mo, d, h, mi, sec)
    except ValueError:
        return None


def _is_time_line(line: str) -> clock.Stamp | None:
    if not line or line[0] in " \t" or line.startswith(("device ", "no device ")):
        return None
    return clock.parse_stamp(line)


def _snapshots(source: SourceFile) -> list[Snapshot]:
    """The snapshots of one file; text before its first time line takes the file name's."""
    out: list[Snapshot] = []
    # ``start``: the line of the snapshot's time line (0: the file name's time).
    start, moment, body = 0, _name_time(source.path.rsplit("/", 1)[-1]), []
    for number, line in enumerate(source.lines, start=1):
        stamp = _is_time_line(line)
        if stamp is None:
            body.append(line)
            continue
        _add(out, source, start, moment, body)
        moment = clock.resolve(stamp, dayfirst=False, base=None)
        if moment is None:
            source.drop(number, "a time line without a date")
        start, body = number, []
    _add(out, source, start, moment, body, last=True)
    return out


def _add(
    out: list[Snapshot],
    source: SourceFile,
    start: int,
    moment: datetime | None,
    body: list[str],
    last: bool = False,
) -> None:
    if not any(text.strip() for text in body):
        return
    if moment is None:
        raise source.refuse(
            start, "time", "a snapshot without a time line before it or a time in the file name"
        )
    # A file cut mid-line keeps its cut: the parser refuses the section it falls in rather
    # than read a shortened number.
    cut = last and bool(source.text) and not source.text.endswith("\n")
    text = "\n".join(body) + ("" if cut else "\n")
    out.append(Snapshot(source, start, moment, text))


def parse(files: list[SourceFile]) -> Parsed:
    snapshots = [snap for source in files for snap in _snapshots(source)]
    if len(snapshots) < 2:
        where = files[0]
        raise where.refuse(
            0, "snapshots", f"{len(snapshots)} snapshot(s); an interval needs two or more"
        )
    series = _Series()
    for snap in snapshots:
        series.snapshot(snap, parse_mountstats(snap.text, LONG_BITS))
    if not series.rows:
        raise snapshots[0].source.nothing_left("snapshots")
    seconds = [(b.moment - a.moment).total_seconds() for a, b in itertools.pairwise(snapshots)]
    return Parsed(
        rows=series.rows,
        interval_s=sorted(seconds)[len(seconds) // 2] if seconds else None,
        started=snapshots[0].moment,
        means_only=[m.format(NfsClientCollector.source) for m in MEANS_ONLY],
        notes=[f"counters read as a {LONG_BITS}-bit kernel prints them"],
    )


class _Series:
    """The snapshots in order, each mount differenced from its baseline as the live collector
    does: an unreadable section, or one missing an op the baseline had, gives no figures and
    keeps the baseline (the next figures span both intervals); a reset gives none and the new
    reading is the baseline. A snapshot whose time is not after the one before makes both
    doubtful: it is dropped, the figures of the one before are taken back, and every mount
    starts again from a new baseline."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.source = NfsClientCollector.source
        self.baselines: dict[str, tuple[datetime, MountStats]] = {}
        self.last: tuple[Snapshot, MountstatsFile] | None = None
        self._aware: bool | None = None

    def snapshot(self, snap: Snapshot, reading: MountstatsFile) -> None:
        if not same_kind(self, snap.moment):
            snap.source.drop(snap.line, "a time with a zone where the others have none, or without")
            return
        last = self.last
        if last is not None and snap.moment <= last[0].moment:
            snap.source.drop(snap.line, f"time {snap.moment} is not after the snapshot before")
            taken = [row for row in self.rows if row[0] == last[0].moment]
            if taken:
                self.rows = [row for row in self.rows if row[0] != last[0].moment]
                last[0].source.drop(last[0].line, "figures taken back: the next time goes back")
            self.baselines.clear()
            return
        for point, bad in reading.unreadable.items():
            snap.source.drop(snap.line + bad.lineno, f"{point}: {bad.reason}")
        for bad in reading.orphans:
            snap.source.drop(snap.line + bad.lineno, bad.reason)
        for point, curr in reading.items():
            if curr.is_nfs:
                self._mount(snap, point, curr)
        self.last = (snap, reading)

    def _mount(self, snap: Snapshot, point: str, curr: MountStats) -> None:
        base = self.baselines.get(point)
        prev: MountStats | None = None
        if base is None:
            since = self._new_mount_span(snap, point, curr)
            if since is None:
                self.baselines[point] = (snap.moment, curr)
                return
            start = snap.moment - timedelta(seconds=since)
        else:
            start, prev = base
        if prev is not None and mount_reset(prev, curr) is None:
            missing = [op for op in prev.ops if op not in curr.ops]
            if missing:  # the kernel lists a mount's ops while it is mounted: a cut snapshot
                snap.source.drop(snap.line, f"{point}: op {missing[0]} of its baseline missing")
                return
            added = [op for op in curr.ops if op not in prev.ops]
            if added:  # so the baseline was the cut one: this reading is the new baseline
                snap.source.drop(snap.line, f"{point}: op {added[0]} missing from its baseline")
                self.baselines[point] = (snap.moment, curr)
                return
        figures = interval_figures(prev, curr, (snap.moment - start).total_seconds())
        self.baselines[point] = (snap.moment, curr)
        if figures.mount is None:
            snap.source.drop(snap.line, f"{point}: counter reset ({figures.reset}), no rate")
        else:
            self.rows.append((snap.moment, self.source, point, dict(figures.mount)))
        for op, values in figures.ops.items():
            if values["ops_s"] > 0:
                self.rows.append((snap.moment, self.source, f"{point}:{op}", dict(values)))
        for op, reset in figures.op_resets.items():
            snap.source.drop(snap.line, f"{point}:{op}: counter reset ({reset}), no rate")

    def _new_mount_span(self, snap: Snapshot, point: str, curr: MountStats) -> float | None:
        """The interval of a mount made since the snapshot before (absent from it, mounted
        for no longer than the interval, 1 s slack for ``age``'s whole seconds): its
        counters all fall within it, as the live collector counts them. None: a baseline."""
        if self.last is None or point in self.last[1] or point in self.last[1].unreadable:
            return None
        seconds = (snap.moment - self.last[0].moment).total_seconds()
        if curr.age_s is None or curr.age_s > seconds + 1:
            return None
        return seconds
