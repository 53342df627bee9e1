"""Issue #30 part 1: the first reading mutated as the later ones are, and cuts between sections.

tests/unit/test_mountstats_properties.py mutates the *later* reading; here the same generated
mutations (lines dropped, doubled, swapped, inserted, a header lost, odd names, a line cut,
numbers made bad) hit the *baseline* the collector starts on, the later reading whole
(the recorded ``mixed_mounts`` pair with ``nfsv41_errors``' mount after it). Shown: nothing
but the collector's own ``CollectorError`` escapes; every other mount's samples are the
unmutated ones to the last bit; the mutated mount's interval ends with its figures or a gap
marker, never neither, and — the mutation changing the text's structure — with exactly the
unmutated figures or a gap; no rate above 10 × the largest total ops per second of age. A
number that is wrong but well formed cannot be told from a right one: for those only the
accounting is asserted.

Then the kernel's per-op lists (storage/collectors/mountstats_ops.py), a later reading cut
at a section boundary (a gap, not "no longer mounted"), a baseline cut where an NFSv4 list
may end, and the mount table consulted at start.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage.collectors.nfs as nfs_module
from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE
from storage.collectors.mountstats import MountstatsFile, parse_mountstats
from storage.collectors.mountstats_ops import (
    NFS2_OPS,
    NFS3_OPS,
    NFS4_CORE,
    NFS4_OPS,
    op_list_problem,
)
from storage.collectors.nfs import NfsClientCollector
from tests.unit.test_mountstats_properties import (
    DATA,
    INTERVAL,
    KINDS,
    Base,
    drive,
    mutated,
    recorded,
    section_of,
)
from tests.unit.test_nfs_resets import advance_op, edit, set_age

STRUCTURE = tuple(k for k in KINDS if k not in ("number", "cut"))
V41 = "/var/lib/postgresql"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """/home (NFSv4.2), /scratch (NFSv3 over UDP) and /var/lib/postgresql (NFSv4.1); the
    unmutated figures (checked against nfsiostat in test_mountstats_properties)."""
    return Base(
        (DATA / "mixed_mounts.before").read_text() + recorded("nfsv41_errors", "before", V41),
        (DATA / "mixed_mounts.after").read_text() + recorded("nfsv41_errors", "after", V41),
        ("/home", "/scratch", V41),
        tmp_path_factory.mktemp("baseline"),
    )


def bounds(base: Base) -> dict[str, float]:
    """10 × the largest total ops per second of age of the two unmutated readings."""
    return _bounds(base.before, base.after, tuple(base.mounts))


# The unmutated readings are the same in every example: their bounds and the later reading's
# parse (frozen dataclasses, never changed by a collector) are worked out once, not per
# example (six whole parses of each example's ~10 were these).
@functools.cache
def _bounds(before: str, after: str, mounts: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for mount in mounts:
        stats = [parse_mountstats(t, 64)[mount] for t in (before, after)]
        out[mount] = 10 * max(sum(o.ops for o in s.ops.values()) / (s.age_s or 1) for s in stats)
    return out


@functools.cache
def _parsed(text: str) -> MountstatsFile:
    return parse_mountstats(text, 64)


def from_baseline(base: Base, before: str, mp: pytest.MonkeyPatch) -> dict[str, Any]:
    """Each mount's outcome: started on ``before`` (the mount table listing the three, as it
    did), sampled on the whole later reading INTERVAL s later."""
    mp.setattr(nfs_module, "nfs_mounted", lambda path, point: point in base.mounts)
    first, later = parse_mountstats(before, 64), _parsed(base.after)
    out: dict[str, Any] = {}
    for mount in base.mounts:
        collector = NfsClientCollector(mount, base.tmp / "unread", {}, 64)
        try:
            mp.setattr(nfs_module, "read_mountstats", lambda path, bits: first)
            drive(collector.start(0.0))
            mp.setattr(nfs_module, "read_mountstats", lambda path, bits: later)
            out[mount] = {s.entity: s for s in drive(collector.sample(INTERVAL))}
        except CollectorError as exc:  # anything else fails the test where it is raised
            out[mount] = exc
    return out


def check(base: Base, target: str, got: dict[str, Any], exact: bool) -> str:
    """Assert what the module docstring says of one outcome; returns its kind."""
    for mount in base.mounts:
        if mount != target:
            assert got[mount] == base.reference[mount], mount
    mine = got[target]
    assert isinstance(mine, dict), mine  # the mount is listed later: never an error
    assert target in mine, mine  # figures or a gap: never neither
    limit = bounds(base)[target]
    assert all(s.values.get("ops_s", 0.0) <= limit for s in mine.values()), mine
    if mine[target].gap:
        (gap,) = mine.values()
        assert gap.gap in (GAP_UNREADABLE, GAP_RESET) and gap.values == {} and gap.detail
        return "gap"
    if exact:
        assert mine == base.reference[target]
    return "figures"


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data())
def test_a_mutated_baseline_gives_the_figures_or_a_gap(
    base: Base, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    target, text = data.draw(mutated(base, base.before, STRUCTURE))
    check(base, target, from_baseline(base, text, monkeypatch), exact=True)


@SETTINGS
@given(data=st.data())
def test_a_baseline_with_bad_numbers_or_a_cut_line_is_accounted_for(
    base: Base, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    kind = data.draw(st.sampled_from(["number", "cut"]))
    target, text = data.draw(mutated(base, base.before, (kind,)))
    got = from_baseline(base, text, monkeypatch)
    if kind == "cut":  # the count of calls is the first number: a cut never shortens it
        check(base, target, got, exact=False)
        return
    for mount in base.mounts:
        if mount != target:
            assert got[mount] == base.reference[mount], mount
    mine = got[target]
    if isinstance(mine, CollectorError):  # a number in the header: 'fstype nfs-1'
        assert "not NFS" in str(mine), mine
    else:
        assert isinstance(mine, dict) and target in mine, mine


def test_every_structural_kind_is_seen_on_the_baseline(
    base: Base, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Explicit cases of each kind, so the generated ones cannot all miss one: a dropped
    op line (NFSv3: refused; NFSv4 past the first 32: found by the later reading), a dropped
    transport, a doubled line, two op lines swapped, a lost header."""
    home = section_of(base.before, "/home")
    scratch = section_of(base.before, "/scratch")

    def outcome(target: str, section: str, new: str) -> str:
        text = base.before.replace(section, new)
        assert text != base.before
        return check(base, target, from_baseline(base, text, monkeypatch), exact=True)

    drop_v3 = scratch.replace(next(ln for ln in scratch.splitlines(True) if "WRITE:" in ln), "")
    assert outcome("/scratch", scratch, drop_v3) == "gap"
    late_op = next(ln for ln in home.splitlines(True) if "LAYOUTSTATS:" in ln)
    assert outcome("/home", home, home.replace(late_op, "")) == "gap"
    xprt = next(ln for ln in home.splitlines(True) if "\txprt:" in ln)
    assert outcome("/home", home, home.replace(xprt, "")) == "gap"
    assert outcome("/home", home, home.replace(xprt, xprt * 2)) == "gap"  # 2 -> 1: a reset
    lines = scratch.splitlines(True)
    i = next(n for n, ln in enumerate(lines) if "READ:" in ln)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    assert outcome("/scratch", scratch, "".join(lines)) == "gap"
    assert outcome("/scratch", scratch, scratch.split("\n", 1)[1]) == "gap"


# ------------------------------------------------------------------ the kernel's op lists


def test_the_kernels_op_lists() -> None:
    assert (len(NFS2_OPS), len(NFS3_OPS), len(NFS4_CORE), len(NFS4_OPS)) == (18, 22, 32, 69)
    assert op_list_problem("100003/3", NFS3_OPS) is None
    assert op_list_problem("100003/3", [*NFS3_OPS, "22"]) is None  # a newer kernel's, by number
    assert op_list_problem("100003/3", NFS3_OPS[:7]) == (
        "the kernel lists NFSv3's 22 ops; 15 missing: WRITE, CREATE, MKDIR and 12 more "
        "(a cut read?)"
    )
    swapped = [*NFS3_OPS[:6], NFS3_OPS[7], NFS3_OPS[6], *NFS3_OPS[8:]]
    assert op_list_problem("100003/3", swapped) == "NFSv3 ops out of the kernel's order"
    assert op_list_problem("100003/2", NFS2_OPS) is None
    assert op_list_problem("100003/2", NFS2_OPS[:-1]) is not None
    for end in range(len(NFS4_CORE), len(NFS4_OPS) + 1):  # any kernel's length past the core
        assert op_list_problem("100003/4", NFS4_OPS[:end]) is None
    assert op_list_problem("100003/4", NFS4_OPS[: len(NFS4_CORE) - 1]) == (
        "every kernel lists NFSv4's first 32 ops; 1 missing: DELEGRETURN (a cut read?)"
    )
    # A kernel without some later procedure (configured out) still lists the rest in order.
    assert op_list_problem("100003/4", [*NFS4_CORE, "SEQUENCE", "READ_PLUS"]) is None
    assert op_list_problem("100003/4", [*NFS4_CORE, "READ_PLUS", "SEQUENCE"]) == (
        "NFSv4 ops out of the kernel's order"
    )
    assert op_list_problem("100227/3", ["NULL"]) is None  # another program: not checked


# ------------------------------------------------------------------ cuts between sections


def pair(tmp: Path, mount: str, text: str) -> tuple[NfsClientCollector, Path]:
    path = tmp / "mountstats"
    path.write_text(text)
    collector = NfsClientCollector(mount, path, {}, 64, mountinfo_path=tmp / "no-mountinfo")
    drive(collector.start(0.0))
    return collector, path


def samples(collector: NfsClientCollector, path: Path, text: str, now: float) -> dict[str, Any]:
    path.write_text(text)
    return {s.entity: s for s in drive(collector.sample(now))}


def test_a_later_reading_cut_between_sections(tmp_path: Path) -> None:
    """A reading that ends after /home's section (whole), before /scratch's: /scratch gets a
    gap, not "no longer mounted", and keeps its baseline; the next whole reading gives the
    figures of the 20 s since it. Not listed twice running, it is no longer mounted."""
    before = (DATA / "mixed_mounts.before").read_text()
    after = (DATA / "mixed_mounts.after").read_text()
    cut = after[: after.index("device 10.2.0.9:/scratch")]
    collector, path = pair(tmp_path, "/scratch", before)
    (gap,) = samples(collector, path, cut, 10.0).values()
    assert (gap.entity, gap.gap) == ("/scratch", GAP_UNREADABLE)
    assert gap.detail == "not listed; the reading ends after '/home': cut before it?"
    read = samples(collector, path, after, 20.0)["/scratch:READ"].values
    assert read["ops_s"] == pytest.approx(100 / 20)  # README: READ +100 between the pair
    samples(collector, path, cut, 30.0)
    with pytest.raises(CollectorError, match="no longer mounted"):
        samples(collector, path, cut, 40.0)


def test_an_unmount_the_kernel_shows_is_no_longer_mounted(tmp_path: Path) -> None:
    """/mnt/gone is gone from the later reading while the mounts listed after it remain."""
    collector, path = pair(tmp_path, "/mnt/gone", (DATA / "mixed_mounts.before").read_text())
    with pytest.raises(CollectorError, match="no longer mounted"):
        samples(collector, path, (DATA / "mixed_mounts.after").read_text(), 10.0)


def test_a_baseline_cut_where_an_nfsv4_list_may_end(tmp_path: Path) -> None:
    """nfsv41_errors' baseline cut after SEQUENCE (a list some kernel could print): accepted,
    then the next reading lists the ops it lacked: a gap, that reading the new baseline, and
    the interval after it the pair's own figures."""
    before = (DATA / "nfsv41_errors.before").read_text()
    after = (DATA / "nfsv41_errors.after").read_text()
    end = before.index("\n", before.index("SEQUENCE:")) + 1
    collector, path = pair(tmp_path, V41, before[:end])
    (gap,) = samples(collector, path, before, 5.0).values()
    assert (gap.entity, gap.gap) == (V41, GAP_UNREADABLE)
    assert gap.detail == (
        "op GET_LEASE_TIME was not in the baseline reading (cut short?): no rate; "
        "this reading is the new baseline"
    )
    read = samples(collector, path, after, 10.0)[f"{V41}:READ"].values
    assert read["ops_s"] == pytest.approx(2500 / 5)  # README: READ +2500 in the pair's 5 s


def test_start_asks_the_mount_table_before_refusing(tmp_path: Path) -> None:
    """A first reading that does not list the mount: refused when the mount table does not
    list it either; waited out (a gap, then the first whole reading is the baseline) when it
    lists it mounted with NFS."""
    before = (DATA / "mixed_mounts.before").read_text()
    cut = before[: before.index("device 10.2.0.9:/scratch")]
    path = tmp_path / "mountstats"
    path.write_text(cut)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "36 25 0:45 / /home rw,relatime shared:1 - nfs4 homes.example.com:/home rw\n"
    )
    refused = NfsClientCollector("/scratch", path, {}, 64, mountinfo_path=mountinfo)
    with pytest.raises(CollectorError, match="not mounted"):
        drive(refused.start(0.0))
    mountinfo.write_text(
        mountinfo.read_text()
        + "37 25 0:46 / /scratch rw,relatime shared:2 - nfs 10.2.0.9:/scratch rw,vers=3\n"
    )
    waits = NfsClientCollector("/scratch", path, {}, 64, mountinfo_path=mountinfo)
    drive(waits.start(0.0))
    (gap,) = samples(waits, path, before, 10.0).values()
    assert gap.gap == GAP_UNREADABLE and gap.detail == (
        f"no whole reading before (not listed, though {mountinfo} lists it with NFS): "
        "this reading is the baseline"
    )
    after = edit(before, "/scratch", lambda s: set_age(advance_op(s, "READ", (30, 30)), 20010))
    read = samples(waits, path, after, 20.0)["/scratch:READ"].values
    assert read["ops_s"] == pytest.approx(3.0)  # 30 READ in the 10 s since the baseline


def test_a_mount_lost_from_the_middle_of_a_reading(tmp_path: Path) -> None:
    """A reading that lost /scratch's section while listing the mounts after it (a read raced
    by a mount elsewhere): "no longer mounted", as the kernel's list says. The next reading
    lists it with an age that says it was mounted all along: the baseline from before serves,
    and the figures span both intervals."""
    before = (DATA / "mixed_mounts.before").read_text()
    after = (DATA / "mixed_mounts.after").read_text()
    collector, path = pair(tmp_path, "/scratch", before)
    with pytest.raises(CollectorError, match="no longer mounted"):
        samples(collector, path, edit(after, "/scratch", lambda s: ""), 10.0)
    back = edit(after, "/scratch", lambda s: set_age(s, 20020))  # 20 s after the baseline
    got = samples(collector, path, back, 20.0)
    assert not any(s.gap for s in got.values())
    assert got["/scratch:READ"].values["ops_s"] == pytest.approx(100 / 20)  # README: +100
    # Younger than the time since that baseline: remounted, not lost; a gap and a baseline.
    collector, path = pair(tmp_path, "/scratch", before)
    with pytest.raises(CollectorError, match="no longer mounted"):
        samples(collector, path, edit(after, "/scratch", lambda s: ""), 10.0)
    (gap,) = samples(
        collector, path, edit(after, "/scratch", lambda s: set_age(s, 15)), 20.0
    ).values()
    assert gap.gap == GAP_UNREADABLE and gap.detail.startswith("mounted 15 s ago, not listed")
