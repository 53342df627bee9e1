"""Mutated mountstats text (issue #13): one bad mount never blinds the others, nothing escapes.

The base is a pair of recorded readings with three NFS mounts seen in both (tests/data/
mountstats: ``mixed_mounts`` — /home over NFSv4.2, /scratch over UDP, non-NFS mounts, a
``no device`` line, a mount point written with ``\\040`` — and ``nfsv41_errors``'s
/var/lib/postgresql appended). One mount's section of the later reading is mutated: cut at
every byte (an explicit loop, two ways: the file ends there, or the rest of the file follows),
and, generated, numbers made huge, negative or not numbers, lines dropped, doubled, swapped or
inserted, odd mount names (raw spaces, octal escapes), non-NFS mounts with odd names after it.

Shown for every case: no exception but the collector's own ``CollectorError`` (for a mount
that is not there, or not NFS) escapes the collector; every other mount's samples are
identical, to the last bit, to those of the unmutated text, which agree with nfs-utils'
``nfsiostat`` on that text within its print rounding. Cut at the end of the file, the mutated
mount itself is always reported unreadable; cut with the rest following, it is never given a
figure that differs from the unmutated one.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage.collectors.nfs as nfs_module
from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample
from storage.collectors.mountstats import MountstatsFile, parse_mountstats
from storage.collectors.nfs import NfsClientCollector
from tests.integration.test_nfsiostat_agreement import (
    HALF_UNIT,
    HARNESS,
    NFSIOSTAT,
    parse_report,
    report_for,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "mountstats"
INTERVAL = 10.0


def split(text: str) -> list[str]:
    """The file cut before every line that does not start with white space (a header)."""
    return [s for s in re.split(r"(?m)^(?=\S)", text) if s]


def section_of(text: str, mount: str) -> str:
    (found,) = [s for s in split(text) if f" mounted on {mount} " in s.split("\n", 1)[0]]
    return found.rstrip("\n") + "\n"


def recorded(stem: str, which: str, mount: str) -> str:
    return section_of((DATA / f"{stem}.{which}").read_text(), mount)


def drive(coro: Any) -> Any:
    """Run a coroutine that never waits (the collector only reads a file) without a loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("the collector awaited something")


class Base:
    """A pair of readings, a started collector per NFS mount on the first, and each mount's
    samples on the unmutated second (checked against nfsiostat once)."""

    def __init__(self, before: str, after: str, mounts: tuple[str, ...], tmp: Path) -> None:
        self.before, self.after, self.mounts, self.tmp = before, after, mounts, tmp
        (tmp / "before").write_text(before)
        self.started = {m: NfsClientCollector(m, tmp / "before", {}, 64) for m in mounts}
        for collector in self.started.values():
            drive(collector.start(0.0))
        with pytest.MonkeyPatch.context() as mp:
            clean = self.sample(after, mp)
        self.reference: dict[str, dict[str, Sample]] = {}
        for mount, samples in clean.items():
            assert isinstance(samples, list) and not any(s.gap for s in samples), mount
            self.reference[mount] = {s.entity: s for s in samples}

    def sample(self, text: str, mp: pytest.MonkeyPatch) -> dict[str, list[Sample] | Exception]:
        """Every mount's answer for ``text``: parsed once and handed to each collector (their
        file read replaced, so a loop over thousands of texts stays fast)."""
        reading = parse_mountstats(text, 64)
        mp.setattr(nfs_module, "read_mountstats", lambda path, bits: reading)
        out: dict[str, list[Sample] | Exception] = {}
        for mount, collector in self.started.items():
            try:
                out[mount] = drive(copy.copy(collector).sample(INTERVAL))
            except CollectorError as exc:  # anything else fails the test where it is raised
                out[mount] = exc
        return out

    def check_against_nfs_utils(self) -> None:
        if not NFSIOSTAT.exists():
            pytest.skip(f"!!! NOT RUN: {NFSIOSTAT} missing; apt-get install -y nfs-common")
        (self.tmp / "after").write_text(self.after)
        compared = 0
        for flags in ([], ["-a"], ["-d"]):
            args = [sys.executable, "-c", HARNESS, str(NFSIOSTAT), str(self.tmp / "before")]
            args += [str(self.tmp / "after"), str(int(INTERVAL)), "2", *flags, *self.mounts]
            done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            for mount in self.mounts:
                mount_line, ops = parse_report(report_for(done.stdout, mount))
                mine = self.reference[mount][mount].values  # one connection each: the same
                assert mount_line == pytest.approx(
                    [mine["rpc_sends_s"], mine["rpc_bklog"]], abs=0.0005 + 1e-9
                )
                for op, printed in ops.items():
                    sample = self.reference[mount].get(f"{mount}:{op}")
                    values = sample.values if sample else {}  # no sample: no calls, all zero
                    for key, value in printed.items():
                        tolerance = HALF_UNIT.get(key, 0.0005) + 1e-9
                        assert abs(values.get(key, 0.0) - value) <= tolerance, (mount, op, key)
                        compared += 1
        assert compared > 50 * len(self.mounts)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """mixed_mounts (/home, /scratch and non-NFS mounts) and nfsv41_errors' mount after it."""
    v41 = "/var/lib/postgresql"
    base = Base(
        (DATA / "mixed_mounts.before").read_text() + recorded("nfsv41_errors", "before", v41),
        (DATA / "mixed_mounts.after").read_text() + recorded("nfsv41_errors", "after", v41),
        ("/home", "/scratch", v41),
        tmp_path_factory.mktemp("three"),
    )
    base.check_against_nfs_utils()
    return base


ODD_NON_NFS = "device odd\\040one mounted on /mnt/odd\\040one\\011x with fstype fuse.sshfs \n"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """A small file for the byte-by-byte loops: /u02/oradata (statvers 1.0), an odd non-NFS
    mount, /scratch (UDP) last."""

    def text(which: str) -> str:
        return (
            "device proc mounted on /proc with fstype proc\n"
            + recorded("nfsv3_statvers10", which, "/u02/oradata")
            + ODD_NON_NFS
            + recorded("mixed_mounts", which, "/scratch")
        )

    base = Base(
        text("before"), text("after"), ("/u02/oradata", "/scratch"), tmp_path_factory.mktemp("two")
    )
    base.check_against_nfs_utils()
    return base


def assert_untouched(base: Base, result: dict[str, list[Sample] | Exception], target: str) -> None:
    for mount in base.mounts:
        if mount != target:
            got = result[mount]
            assert isinstance(got, list), (mount, got)
            assert {s.entity: s for s in got} == base.reference[mount], mount


def with_section(text: str, target: str, new: str) -> str:
    parts = split(text)
    (i,) = [i for i, s in enumerate(parts) if f" mounted on {target} " in s.split("\n", 1)[0]]
    return "".join(parts[:i]) + new + "".join(parts[i + 1 :])


def fstype_cut(section: str, k: int) -> bool:
    """True when a cut at ``k`` falls inside the header's file system type word, leaving a
    shorter word (``nf`` for ``nfs4``): a mount of another type, not NFS, as far as the text
    says."""
    header = section.split("\n", 1)[0]
    at = header.index(" with fstype ") + len(" with fstype ")
    word = header[at:].split(" ", 1)[0]
    return at < k < at + len(word) and header[at:k] not in ("nfs", "nfs4")


# ------------------------------------------------------------------ every byte, explicitly


def test_cut_at_every_byte_of_the_last_mount(two: Base, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file ends inside the last mount (a read cut short): that mount is unreadable at
    every cut, the others keep their exact figures."""
    target = "/scratch"
    section = section_of(two.after, target)
    head = two.after[: two.after.index(section)]
    assert head + section == two.after
    for k in range(1, len(section)):
        result = two.sample(head + section[:k], monkeypatch)
        assert_untouched(two, result, target)
        got = result[target]
        assert isinstance(got, list) and len(got) == 1, (k, got)
        assert (got[0].entity, got[0].gap) == (target, GAP_UNREADABLE), (k, section[:k][-40:])


def test_cut_at_every_byte_of_a_mount_in_the_middle(
    two: Base, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount's section cut anywhere, the rest of the file following on the next line: the
    others keep their exact figures; the cut mount gets a gap, or (cut inside its file system
    type) is not an NFS mount any more; a figure it is still given is the unmutated one."""
    target = "/u02/oradata"
    section = section_of(two.after, target)
    gaps = 0
    for k in range(1, len(section) - 1):
        result = two.sample(with_section(two.after, target, section[:k] + "\n"), monkeypatch)
        assert_untouched(two, result, target)
        got = result[target]
        if isinstance(got, Exception):
            assert fstype_cut(section, k) and "not NFS" in str(got), (k, got)
            continue
        assert any(s.gap in (GAP_RESET, GAP_UNREADABLE) for s in got), (k, section[:k][-40:])
        gaps += 1
        for s in got:
            assert s.gap or s == two.reference[target][s.entity], (k, s)
    assert gaps >= len(section) - 5


# ------------------------------------------------------------------ generated mutations


ODD_NAMES = st.sampled_from(
    [
        "/mnt/raw space",  # unescaped: the kernel never prints this
        "/mnt/new\\040disk", "/mnt/tab\\011x", "/mnt/back\\134slash", "/mnt/nl\\012x",
        "/mnt/\\777", "/mnt/ünïcode", "/mnt/a\rb", "/mnt/a:b", "/", "",
    ]
)  # fmt: skip
BAD_NUMBERS = st.one_of(
    st.sampled_from(
        ["", "-1", "x", "1e5", "0x1f", "+7", "３", "007", "1.5", "18446744073709551616",
         "9" * 40, "4294967296", "-9223372036854775809", "١٢"]
    ),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=6),
)  # fmt: skip
KINDS = (
    "number",
    "drop",
    "no header",
    "double",
    "swap",
    "insert",
    "odd name",
    "odd neighbour",
    "cut",
)


@st.composite
def mutated(
    draw: st.DrawFn, base: Base, text: str | None = None, kinds: tuple[str, ...] = KINDS
) -> tuple[str, str]:
    """(target mount, ``text`` — the later reading by default — with that mount's section
    mutated by one of ``kinds``)."""
    text = base.after if text is None else text
    target = draw(st.sampled_from(base.mounts))
    lines = section_of(text, target).split("\n")[:-1]
    kind = draw(st.sampled_from(kinds))
    if kind == "number":
        spots = [(i, m.span()) for i, line in enumerate(lines) for m in re.finditer(r"\d+", line)]
        i, (a, b) = draw(st.sampled_from(spots))
        lines[i] = lines[i][:a] + draw(BAD_NUMBERS) + lines[i][b:]
    elif kind == "drop":
        del lines[draw(st.integers(1, len(lines) - 1))]
    elif kind == "no header":  # its lines must not be read as the mount above's
        del lines[0]
    elif kind in ("double", "swap"):  # below the header: a line moved above it would be the
        i = draw(st.integers(1, len(lines) - 1))  # mount above's, by the file's own rule
        j = draw(st.integers(1, len(lines) - 1))
        if kind == "double":
            lines.insert(i, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
    elif kind == "insert":
        junk = draw(st.text(st.characters(codec="utf-8"), max_size=40))
        at = draw(st.integers(1, len(lines)))
        lines.insert(at, draw(st.sampled_from(["\t", ""])) + junk)
    elif kind == "odd name":
        lines[0] = lines[0].replace(f" mounted on {target} ", f" mounted on {draw(ODD_NAMES)} ")
    elif kind == "odd neighbour":
        name = draw(ODD_NAMES)
        fstype = draw(st.sampled_from(["fuse.sshfs", "ext4 ", "tmpfs", "cifs ", "nfs", "nfs4"]))
        lines.append(f"device weird {name} mounted on {name} with fstype {fstype}")
    else:
        k = draw(st.integers(1, len(lines) - 1))
        lines = [*lines[:k], lines[k][: draw(st.integers(0, len(lines[k])))]]
    return target, with_section(text, target, "".join(f"{line}\n" for line in lines))


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_mutated_mount_never_changes_the_others(
    three: Base, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    target, text = data.draw(mutated(three))
    result = three.sample(text, monkeypatch)
    assert_untouched(three, result, target)
    got = result[target]
    if isinstance(got, Exception):
        assert re.search(r"no longer mounted|not NFS", str(got)), got
    else:
        for sample in got:
            assert sample.gap in ("", GAP_RESET, GAP_UNREADABLE)
            assert not sample.gap or (sample.values == {} and sample.detail)


TEXTS = st.text(st.characters(codec="utf-8"), max_size=400) | st.binary(max_size=400).map(
    lambda b: b.decode("utf-8", "surrogateescape")
)


@settings(max_examples=200, deadline=None)
@given(text=TEXTS)
def test_any_text_parses_without_raising(text: str) -> None:
    assert isinstance(parse_mountstats(text), MountstatsFile)
    after = (DATA / "mixed_mounts.after").read_text()
    # Whatever replaces /home's per-op header, /scratch below it reads the same.
    spliced = parse_mountstats(after.replace("\tper-op statistics\n", text, 1))
    assert spliced["/scratch"] == parse_mountstats(after)["/scratch"]
