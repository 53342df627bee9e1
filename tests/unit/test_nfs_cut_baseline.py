"""Issue #30 part 1: the NFS collector's first reading, cut at every byte, is never believed.

A baseline ``/proc/self/mountstats`` reading that stopped early used to be accepted: the next
interval counted the ops it lacked since the mount was made, unmarked (on procfs_26231, READ
169.5 ops/s instead of 39.7, the mount 292,743,072.9 instead of 3,442.4). Here the baseline
reading of every public sample (tests/data/mountstats: the recorded pairs, prometheus/procfs'
two samples; tests/data/mountstats_series: their first snapshots) is cut at every byte
boundary — every line boundary among them — and the collector is started on it, then sampled:

- A: on the whole later reading (the pair's second; for a single public sample a later
  reading made from it, helpers below): each NFS mount of the baseline gets exactly what the
  uncut baseline gives (its figures, or "no longer mounted" for the one unmounted in
  between), or one gap marker for the mount: never neither, never other figures. The start
  never refuses: the mount table lists the mounts (they were mounted), so a reading that
  lost one is waited out.
- B: on the whole baseline again, then on the later reading: the second interval is
  exactly the uncut pair's (the interval after a gap starts from the next whole reading).

No rate in either is above 10 × the largest total ops per second of age of the readings
(the bound the issue sets; every real rate here is far below it). The test counts the
outcomes, so a change in what the collector does shows up as a changed count.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import storage.collectors.nfs as nfs_module
from sim.errors import CollectorError
from sim.protocols import GAP_UNREADABLE, Sample
from storage.collectors.mountstats import MountstatsFile, parse_mountstats
from storage.collectors.nfs import NfsClientCollector
from tests.unit.test_nfs_resets import PROCFS, PROCFS_MOUNT, advance_line, advance_op, edit

DATA = Path(__file__).resolve().parent.parent / "data"
PAIRS = DATA / "mountstats"
SERIES = DATA / "mountstats_series"
PUBLIC = PAIRS / "public"


def drive(coro: Any) -> Any:
    """Run a coroutine that never waits (the collector only reads a file) without a loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("the collector awaited something")


def set_age(section: str, age: int) -> str:
    return re.sub(r"(?m)^(\tage:\s+)\d+", rf"\g<1>{age}", section)


def procfs_later(text: str) -> str:
    """procfs_26231 (its op list as the kernel prints it) 10 s later: 397 READ of 160 and
    932,428 bytes each (the published READ's own sizes), 34,027 ACCESS; 34,424 calls, 3,442.4
    ops/s. The deltas are the ones the issue's figures imply: (1,298 + 397) / 10 = 169.5 READ
    ops/s and (2,927,396,305 + 34,424) / 10 = 292,743,072.9 mount ops/s with a baseline cut
    before READ's line, 39.7 and 3,442.4 with a whole one."""

    def later(s: str) -> str:
        s = advance_op(s, "READ", (397, 397, 0, 397 * 160, 397 * 932428, 0, 397 * 61, 397 * 61))
        s = advance_op(s, "ACCESS", (34027, 34027, 0, 34027 * 180, 34027 * 124, 0, 34027, 34027))
        s = advance_line(s, "xprt", (34424, 34424), skip=6)  # sends, receives
        return set_age(s, 13968 + 10)

    return edit(text, PROCFS_MOUNT, later)


def at_average(text: str, mount: str, seconds: int) -> str:
    """``mount`` ``seconds`` later, each op with calls having made its average since mounting
    (at least one call; bytes and times per call as before; the sends follow)."""
    reading = parse_mountstats(text, 64)[mount]
    age = reading.age_s
    assert age
    calls = 0

    def later(section: str) -> str:
        nonlocal calls
        for name, op in reading.ops.items():
            if op.ops:
                d = max(1, op.ops * seconds // age)
                per = [v * d // op.ops for v in (op.transmissions, 0, op.bytes_sent,
                                                 op.bytes_recv, op.queue_ms, op.rtt_ms,
                                                 op.execute_ms)]  # fmt: skip
                section = advance_op(section, name, (d, *[max(0, v) for v in per]))
                calls += d
        section = advance_line(section, "xprt", (calls, calls), skip=6)
        return set_age(section, age + seconds)

    return edit(text, mount, later)


def snapshots(series: str) -> list[str]:
    """The snapshots of a series file: the text under each time line (a line that starts
    neither with white space nor with a mount header, and is not blank)."""
    out: list[list[str]] = []
    for line in series.splitlines(keepends=True):
        header = line.startswith(("device ", "no device "))
        if line[:1] not in (" ", "\t") and line.strip() and not header:
            out.append([])
        else:
            out[-1].append(line)
    return ["".join(lines) for lines in out]


@dataclass
class Case:
    name: str
    before: str
    after: str
    interval: float  # between the two readings (their age moved by as much)


def cases() -> list[Case]:
    out = [
        Case(stem, (PAIRS / f"{stem}.before").read_text(), (PAIRS / f"{stem}.after").read_text(), t)
        for stem, t in (
            ("mixed_mounts", 10.0), ("nfsv3_nconnect8", 10.0), ("nfsv3_statvers10", 10.0),
            ("nfsv41_errors", 5.0),
        )
    ]  # fmt: skip
    published = (PUBLIC / "procfs_26231.mountstats").read_text()  # refused whole: 4 ops
    out.append(Case("procfs_26231 as published", published, procfs_later(published), 10.0))
    out.append(Case("procfs_26231 kernel-listed", PROCFS, procfs_later(PROCFS), 10.0))
    extended = (PUBLIC / "procfs_extended_ops.mountstats").read_text()
    ((k8s,),) = [[m for m, s in parse_mountstats(extended, 64).items() if s.is_nfs]]
    out.append(Case("procfs_extended_ops", extended, at_average(extended, k8s, 10), 10.0))
    return out


def series_cases() -> list[tuple[str, str, str]]:
    """(name, first snapshot, second) of every series sample."""
    found = []
    for path in sorted(SERIES.glob("*.series")):
        first, second, *_ = snapshots(path.read_text())
        found.append((path.name, first, second))
    files = sorted((SERIES / "dir_nfsv41").iterdir())
    found.append(("dir_nfsv41", files[0].read_text(), files[1].read_text()))
    return found


def bound(case: Case, mount: str) -> float:
    """10 × the largest total ops per second of age of the two whole readings."""
    rates = [
        sum(op.ops for op in stats.ops.values()) / stats.age_s
        for text in (case.before, case.after)
        if (stats := parse_mountstats(text, 64).get(mount)) is not None and stats.age_s
    ]
    return 10 * max(rates, default=0.0)


class Reader:
    """Serves the collector's file read from text parsed once per cut; the mount table lists
    ``mounted`` (the uncut baseline's NFS mounts: they were mounted when it was cut)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mounted: list[str]) -> None:
        self.reading: MountstatsFile | None = None
        monkeypatch.setattr(nfs_module, "read_mountstats", lambda path, bits: self.reading)
        monkeypatch.setattr(nfs_module, "nfs_mounted", lambda path, point: point in mounted)

    def outcome(self, collector: NfsClientCollector, now: float | None) -> Any:
        """Samples by entity, or the CollectorError: ``now`` None starts the collector."""
        try:
            if now is None:
                return drive(collector.start(0.0))
            return {s.entity: s for s in drive(collector.sample(now))}
        except CollectorError as exc:
            return exc


def nfs_mounts(text: str) -> list[str]:
    return [m for m, s in parse_mountstats(text, 64).items() if s.is_nfs] + [
        m for m in parse_mountstats(text, 64).unreadable
    ]


def cuts(text: str) -> Iterator[tuple[int, str]]:
    """The text cut at every byte boundary (0 … its length in bytes: the line boundaries are
    among them), decoded as the collector decodes the file."""
    data = text.encode("utf-8", "surrogateescape")
    for k in range(len(data) + 1):
        yield k, data[:k].decode("utf-8", "surrogateescape")


def sweep(case: Case, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Both sequences (module docstring) at every cut of ``case.before``; returns the count of
    each outcome per kind, asserting what the issue asks of each."""
    mounts = nfs_mounts(case.before)
    reader = Reader(monkeypatch, mounts)
    whole, later = parse_mountstats(case.before, 64), parse_mountstats(case.after, 64)
    reference: dict[str, Any] = {}
    limits = {m: bound(case, m) for m in mounts}
    for mount in mounts:
        collector = NfsClientCollector(mount, Path("unread"), {}, 64)
        reader.reading = whole
        started = reader.outcome(collector, None)
        reader.reading = later
        reference[mount] = started if started else reader.outcome(collector, case.interval)
    seen: Counter[str] = Counter()
    memo = Memo(reader, whole)
    for k, text in cuts(case.before):
        cut = parse_mountstats(text, 64)
        for mount in mounts:
            collector = NfsClientCollector(mount, Path("unread"), {}, 64)
            reader.reading = cut
            assert reader.outcome(collector, None) is None, k  # started: waits if need be
            state = memo.state(collector, mount)  # A and B1 sample the same started state
            got, _ = memo.run(("A", mount), collector, later, case.interval, state)
            seen["A: " + judge(got, reference[mount], mount, limits[mount], k)] += 1
            first, b = memo.run(("B1", mount), collector, whole, 5.0, state)
            seen["B1: " + judge(first, None, mount, limits[mount], k)] += 1
            second, _ = memo.run(("B2", mount), b, later, 5.0 + case.interval, memo.state(b, mount))
            assert comparable(second) == comparable(reference[mount]), (k, mount, second)
            seen["B2: the uncut pair's figures"] += 1
    return seen


class Memo:
    """The collector is a function of its state and the reading it is given: a sample from
    a state already seen (most cuts outside a mount's section leave the same state after
    start) is taken once and its outcome and next state reused. Every cut is still parsed
    and started on its own."""

    def __init__(self, reader: Reader, whole: MountstatsFile) -> None:
        self.reader, self.whole = reader, whole
        self.done: dict[tuple[Any, ...], tuple[Any, NfsClientCollector]] = {}

    def state(self, collector: NfsClientCollector, mount: str) -> tuple[Any, ...] | None:
        """The state: every attribute, the baseline named as none or the uncut one (``_last``
        serves describe() only); None for a baseline that is neither (not memoised)."""
        prev = vars(collector)["_prev"]
        if prev is not None and prev != self.whole.get(mount):
            return None
        rest = [
            (k, v if isinstance(v, (str, int, float, frozenset, Path, type(None))) else repr(v))
            for k, v in sorted(vars(collector).items())
            if k not in ("_prev", "_last")
        ]
        return (prev is None, *rest)

    def run(
        self, key: tuple[str, str], collector: NfsClientCollector, reading: MountstatsFile,
        now: float, state: tuple[Any, ...] | None,
    ) -> tuple[Any, NfsClientCollector]:  # fmt: skip
        """The outcome of sampling a copy of ``collector`` (whose :meth:`state` is ``state``)
        at ``now``, and the copy after it."""
        if state is None:
            after = copy.copy(collector)
            self.reader.reading = reading
            return self.reader.outcome(after, now), after
        memo = (*key, *state)
        if memo not in self.done:
            after = copy.copy(collector)
            self.reader.reading = reading
            self.done[memo] = (self.reader.outcome(after, now), after)
        return self.done[memo]


def comparable(outcome: Any) -> Any:
    """An outcome without its time: the samples' entities, figures, gaps and details."""
    if isinstance(outcome, Exception):
        return str(outcome)
    return {e: (s.values, s.gap, s.detail, s.meta) for e, s in outcome.items()}


def judge(got: Any, reference: Any, mount: str, limit: float, k: int) -> str:
    """The kind of one interval's outcome, after checking it is one the issue allows."""
    if isinstance(got, Exception):
        assert isinstance(reference, Exception) and "no longer mounted" in str(got), (k, got)
        return "no longer mounted (as uncut)"
    assert isinstance(got, dict) and mount in got, (k, got)  # figures or a gap: never neither
    for sample in got.values():
        assert sample.values.get("ops_s", 0.0) <= limit, (k, sample)
    gap: Sample = got[mount]
    if gap.gap:
        assert (list(got), gap.gap, gap.values) == ([mount], GAP_UNREADABLE, {}), (k, got)
        assert gap.detail, k
        return "gap"
    if reference is None:  # B1: the whole baseline read again: nothing moved
        assert gap.values["ops_s"] == 0.0 and list(got) == [mount], (k, got)
        return "no calls (whole baseline again)"
    assert comparable(got) == comparable(reference), (k, got)
    return "the uncut pair's figures"


# ------------------------------------------------------------------ the issue's figures


def test_the_issues_figures_before_and_after(tmp_path: Path) -> None:
    """procfs_26231, cut before READ's line: the issue's 169.5 and 292,743,072.9 ops/s were
    this interval's figures; now it is a gap, and the next whole reading starts the next
    interval, whose figures are the uncut baseline's: 39.7 READ and 3,442.4 mount ops/s."""
    path = tmp_path / "mountstats"
    after = procfs_later(PROCFS)
    whole = NfsClientCollector(PROCFS_MOUNT, path, {}, 64)
    path.write_text(PROCFS)
    drive(whole.start(0.0))
    path.write_text(after)
    right = {s.entity: s.values for s in drive(whole.sample(10.0))}
    assert right[f"{PROCFS_MOUNT}:READ"]["ops_s"] == pytest.approx(39.7)  # 397 / 10
    assert right[PROCFS_MOUNT]["ops_s"] == pytest.approx(3442.4)  # 34424 / 10
    cut = NfsClientCollector(PROCFS_MOUNT, path, {}, 64)
    path.write_text(PROCFS[: PROCFS.index("\t        READ:")])
    drive(cut.start(0.0))
    path.write_text(after)
    (gap,) = drive(cut.sample(10.0))
    assert (gap.entity, gap.gap, gap.values) == (PROCFS_MOUNT, GAP_UNREADABLE, {})
    assert gap.detail.startswith("no whole reading before (line 16: the per-op list ends here")
    path.write_text(procfs_later(after))  # 10 s later again, the same calls
    again = {s.entity: s.values for s in drive(cut.sample(20.0))}
    assert again[f"{PROCFS_MOUNT}:READ"]["ops_s"] == pytest.approx(39.7)
    assert again[PROCFS_MOUNT]["ops_s"] == pytest.approx(3442.4)


# ------------------------------------------------------------------ every cut


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_every_cut_of_the_baseline(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = sweep(case, monkeypatch)
    boundaries = len(case.before.encode()) + 1
    mounts = len(nfs_mounts(case.before))
    a = sum(n for kind, n in seen.items() if kind.startswith("A: "))
    assert a == boundaries * mounts  # every cut, every mount: one outcome each
    assert seen["B2: the uncut pair's figures"] == a
    if case.name != "procfs_26231 as published":  # refused whole: gaps only
        assert seen["A: the uncut pair's figures"] > 0 and seen["A: gap"] > 0


def test_the_series_first_snapshots_are_the_pairs() -> None:
    """tests/data/mountstats_series holds the recorded pairs byte for byte (its README), so
    the sweep above covers their first snapshots (and swept again, they gave the same)."""
    befores = {(PAIRS / p.name).read_text() for p in PAIRS.glob("*.before")}
    afters = {(PAIRS / p.name).read_text() for p in PAIRS.glob("*.after")}
    found = series_cases()
    assert len(found) == 4
    for name, first, second in found:
        assert first in befores and second in afters, name
