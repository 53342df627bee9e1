"""Published envelopes as a model: load the data files, and read a ceiling at any read mix and
request size.

Loading validates every file with the pydantic models of :mod:`storage.envelopes.schema`.

**Between published read mixes** the model is *harmonic in service time*: on each segment
between two published mixes ``f1 < f < f2`` (f = read share of operations) the reciprocal of
the total rate is linear in f::

    1/T(f) = 1/T(f1) + (f - f1) / (f2 - f1) * (1/T(f2) - 1/T(f1))

and the per-direction rates are ``read = f T``, ``write = (1 - f) T``. At a published mix
(:func:`same_point`: within 0.05 points of it, or within its printed pair's own distance from
it) the published figures are used as they are. This is what a system
whose busy time per read and per write is fixed gives (T = 1 / (f s_r + (1 - f) s_w)); fitted
piecewise it passes through every published point exactly, it lies between the two
neighbouring totals (monotonic), and since 1/T is linear T is convex, so it lies *below* the
straight chord (lower than linear interpolation of the totals). That does not make it
conservative: on the seeds' own tables it overshoots published points it did not see (the
leave-one-out bands of :mod:`storage.envelopes.uncertainty`), and every interpolated limit
carries that band. At a published mix the published read and write figures are returned
unchanged. Outside the published mixes nothing is extrapolated: the nearest published total
is held, the limit's ``basis`` is ``outside`` and the answer carries an ``out_of_range`` flag.
A segment wider than 25 points (seeds that publish only pure read and pure write) is flagged
as an ``estimate``.

Every limit says what kind of number it is (``basis``): ``published`` (a stored point),
``interpolated`` (``rules``: ``mix``, ``size``; with its ``band``) or ``outside``.

**Between block sizes** the same service-time rule is used in the size: 1/T is linear in the
request size between two published sizes (a fixed cost per operation plus a cost per byte).
Two ceilings are kept apart so the answer can say which one binds:

* the IOPS ceiling comes from the random tables (4 and 8 KiB). Smaller requests get the
  smallest table's IOPS (*same-IOPS*, ``outside``). Between the largest random size
  and the smallest sequential size (8 to 64 KiB) it bridges the random table to the
  sequential one by service time: an ``estimate`` that mixes random and sequential results.
  From the smallest sequential size up, IOPS are governed by the bandwidth ceiling alone.
* the throughput ceiling comes from the sequential tables (64 and 256 KiB). Smaller requests
  are allowed the smallest sequential table's bandwidth (*same-bandwidth*, ``outside``, its
  flag an ``estimate`` since it never binds before the IOPS ceiling does when random tables
  exist); larger ones the largest table's bandwidth (*same-bandwidth*, ``outside``).

Database points (SLOB, SSB) state no request size: their IOPS apply at any size, flagged.
Capacity, service level and caps are applied by :mod:`storage.envelopes.scaling`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ValidationError

from sim.errors import ConfigError
from storage.envelopes.schema import (
    Caveat,
    EnvelopeSpec,
    Omitted,
    Point,
    ProfileFile,
    SeedInfo,
    Table,
    iter_sources,
)
from storage.envelopes.uncertainty import Band, band
from storage.envelopes.units import KIB, fmt, kib, to_ops

DATA_DIR = Path(__file__).parent / "data"
WIDE_MIX_GAP = 0.25  # wider segments than the seeds' 25-point steps are flagged as estimates
# A mix within 0.05 points of a published one is that one: published rows are themselves
# rounded (172.000 / 229.300 is 75.01 % read), and a workload of 250.000 + 83.333 IOPS means
# 75 %. A point whose printed pair lies further from its column's mix than that (2.284 / 3.048
# is 74.93 % under "75 %") widens its own tolerance to that distance: a workload asked at the
# page's own figures is that point (see same_point).
MIX_SNAP = 5e-4
_EPS = 1e-9

FlagKind = Literal["estimate", "out_of_range", "note"]
LimitKind = Literal["iops", "throughput"]
# published: a stored point (or a rule the seed states); derived: computed from published
# figures by arithmetic the page implies but does not print (Extreme's 128 MiBps per TiB =
# 25.600 MiBps / 200 TiB); interpolated: between published points by a stated rule; outside:
# no published point brackets it (held, not extrapolated).
Basis = Literal["published", "derived", "interpolated", "outside"]


@dataclass(frozen=True)
class Flag:
    """Something the answer's reader must know: an ``estimate`` (a gap the seeds do not
    cover, bridged by a stated assumption), ``out_of_range`` (beyond the published points,
    nothing extrapolated) or a ``note`` (a rule the seed states)."""

    kind: FlagKind
    message: str

    def __str__(self) -> str:
        return f"{self.kind.replace('_', ' ')}: {self.message}"


@dataclass(frozen=True)
class Limit:
    """One ceiling at the workload's mix and size: ``value`` in IOPS (kind ``iops``) or MiB/s
    (kind ``throughput``), split into ``read`` and ``write`` when known."""

    kind: LimitKind
    label: str
    value: float
    read: float | None
    write: float | None
    sources: tuple[str, ...]
    flags: tuple[Flag, ...] = ()
    scales_with: Literal["none", "capacity", "pool"] = "none"
    basis: Basis = "published"
    rules: tuple[str, ...] = ()  # the interpolation rules an interpolated figure went through
    band: Band | None = None  # their leave-one-out error on this envelope's tables
    latency: tuple[str, ...] = ()  # the latency published at the points it rests on
    derivation: str | None = None  # how a derived figure follows from the page's figures

    @property
    def unit(self) -> str:
        """``IOPS`` or ``MiB/s``."""
        return "IOPS" if self.kind == "iops" else "MiB/s"

    def describe(self) -> str:
        """``229,300 IOPS (172,000 read + 57,300 write)``."""
        digits = 0 if self.value >= 100 else 1
        text = f"{fmt(self.value, digits)} {self.unit}"
        if self.read is not None and self.write is not None and self.read and self.write:
            text += f" ({fmt(self.read, digits)} read + {fmt(self.write, digits)} write)"
        return text


@dataclass(frozen=True)
class Rate:
    """Operations per second of one table (or a blend) at one mix."""

    read: float
    write: float
    flags: tuple[Flag, ...] = ()
    published: bool = False
    cited: tuple[str, ...] = ()  # the published points the rate rests on, each cited
    used: tuple[Table, ...] = ()  # the tables those points belong to
    basis: Basis = "published"
    rules: tuple[str, ...] = ()
    latency: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        """Read plus write."""
        return self.read + self.write


@dataclass
class Envelope:
    """A loaded envelope: its validated spec and where it came from."""

    spec: EnvelopeSpec
    vendor: str
    file: str
    seeds: dict[str, SeedInfo]
    omitted: list[Omitted] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The envelope's name (``gcnv-extreme-nfsv3`` …)."""
        return self.spec.name

    def caveats(self) -> list[Caveat]:
        """What every answer must say: the caveats of the pages this envelope cites (in
        order), then the envelope's own."""
        cited = dict.fromkeys(s.seed for s in iter_sources(self.spec))
        page = [c for seed in cited if seed in self.seeds for c in self.seeds[seed].caveats]
        return [*page, *self.spec.caveats]

    def tables(self, access: str) -> list[Table]:
        """Tables of one access pattern by increasing block size."""
        found = [t for t in self.spec.tables if t.access == access]
        return sorted(found, key=lambda t: t.block_size_kib or 0.0)

    # ------------------------------------------------------------------ read mix

    def rate(self, table: Table, fraction: float) -> Rate:
        """Operations per second of ``table`` at read share ``fraction`` (0..1); see the module
        docstring for the rule."""
        points = table.sorted_points()

        def ops(value: float) -> float:
            return to_ops(value, table.unit, table.block_size_kib)

        for point in points:
            if same_point(point, fraction):
                return self._published(table, point, fraction)
        below = [p for p in points if p.fraction < fraction]
        above = [p for p in points if p.fraction > fraction]
        flags: list[Flag] = []
        if not below or not above:
            nearest = below[-1] if below else above[0]
            total = ops(nearest.sum)
            bound = [nearest]
            flags.append(
                Flag(
                    "out_of_range",
                    f"{fraction * 100:.1f} % read is outside the published mixes "
                    f"({points[0].read_pct:g}–{points[-1].read_pct:g} % read) of {table.id}: "
                    f"the {nearest.read_pct:g} % figure is used, not extrapolated",
                ),
            )
        else:
            lo, hi = below[-1], above[0]
            bound = [lo, hi]
            share = (fraction - lo.fraction) / (hi.fraction - lo.fraction)
            inverse = 1 / ops(lo.sum) + share * (1 / ops(hi.sum) - 1 / ops(lo.sum))
            total = 1 / inverse
            if hi.fraction - lo.fraction > WIDE_MIX_GAP + _EPS:
                flags.append(
                    Flag(
                        "estimate",
                        f"{table.id}: only {lo.read_pct:g} % and {hi.read_pct:g} % read are "
                        f"published; {fraction * 100:.1f} % read is interpolated between them",
                    ),
                )
        around = tuple(cite_point(table, p) for p in bound)
        basis: Basis = "interpolated" if len(bound) == 2 else "outside"
        rules = ("mix",) if len(bound) == 2 else ()
        return Rate(
            fraction * total,
            (1 - fraction) * total,
            tuple(flags),
            False,
            around,
            (table,),
            basis,
            rules,
            _latency(bound),
        )

    def _published(self, table: Table, point: Point, fraction: float) -> Rate:
        """A published point as it is printed (a total split by the workload's mix)."""
        cited, used, at = (cite_point(table, point),), (table,), _latency([point])
        if point.total is not None:
            total = to_ops(point.total, table.unit, table.block_size_kib)
            return Rate(fraction * total, (1 - fraction) * total, (), True, cited, used, latency=at)
        read = to_ops(point.read or 0.0, table.unit, table.block_size_kib)
        write = to_ops(point.write or 0.0, table.unit, table.block_size_kib)
        return Rate(read, write, (), True, cited, used, latency=at)

    # ------------------------------------------------------------------ request size

    def iops_limit(self, fraction: float, block_kib: float) -> Limit | None:
        """The IOPS ceiling from the random (or database) tables at this mix and size, or None
        where the sequential tables govern (request size at or above their smallest size)."""
        database = self.tables("database")
        if database:
            table = database[0]
            flag = Flag(
                "estimate",
                f"{table.id}: the seed states no request size; its IOPS are applied at "
                f"{kib(block_kib)} KiB",
            )
            return self._limit("iops", self.rate(table, fraction), (flag,))
        random, sequential = self.tables("random"), self.tables("sequential")
        if not random:
            return None
        smallest_seq = sequential[0] if sequential else None
        if smallest_seq is not None and block_kib >= _size(smallest_seq) - _EPS:
            return None
        sizes = [_size(t) for t in random]
        if block_kib < sizes[0] - _EPS:
            flag = Flag(
                "out_of_range",
                f"{kib(block_kib)} KiB is below the smallest published size "
                f"({sizes[0]:g} KiB): same IOPS as {sizes[0]:g} KiB assumed",
            )
            return self._limit("iops", self.rate(random[0], fraction), (flag,), outside=True)
        if block_kib <= sizes[0] + _EPS:
            return self._limit("iops", self.rate(random[0], fraction))
        for low, high in itertools.pairwise(random):
            if block_kib <= _size(high) + _EPS:
                return self._limit("iops", self.blend(low, high, fraction, block_kib))
        largest = random[-1]
        if smallest_seq is None:
            flag = Flag(
                "out_of_range",
                f"{kib(block_kib)} KiB is above the largest published size ({_size(largest):g} "
                f"KiB): same IOPS as {_size(largest):g} KiB assumed",
            )
            return self._limit("iops", self.rate(largest, fraction), (flag,), outside=True)
        rate = self.blend(largest, smallest_seq, fraction, block_kib)
        flag = Flag(
            "estimate",
            f"{kib(block_kib)} KiB lies between the random ({_size(largest):g} KiB) and "
            f"sequential ({_size(smallest_seq):g} KiB) tables: IOPS bridged by service time",
        )
        return self._limit("iops", rate, (flag,), bridged=True)

    def throughput_limit(self, fraction: float, block_kib: float) -> Limit | None:
        """The bandwidth ceiling (MiB/s) from the sequential tables, or None without them."""
        sequential = self.tables("sequential")
        if not sequential:
            return None
        sizes = [_size(t) for t in sequential]
        if block_kib < sizes[0] - _EPS:
            # Never binding where random tables exist (their IOPS bind first): flagged as an
            # estimate so it does not crowd every small-request answer, but not published.
            flag = Flag(
                "estimate",
                f"bandwidth published from {sizes[0]:g} KiB up: the {sizes[0]:g} KiB "
                f"bandwidth is assumed reachable at {kib(block_kib)} KiB",
            )
            rate = self.rate(sequential[0], fraction)
            return self._limit("throughput", rate, (flag,), outside=True, at_kib=sizes[0])
        if block_kib <= sizes[0] + _EPS:
            return self._limit("throughput", self.rate(sequential[0], fraction), at_kib=sizes[0])
        for low, high in itertools.pairwise(sequential):
            if block_kib <= _size(high) + _EPS:
                rate = self.blend(low, high, fraction, block_kib)
                return self._limit("throughput", rate, at_kib=block_kib)
        flag = Flag(
            "out_of_range",
            f"{kib(block_kib)} KiB is above the largest published size ({sizes[-1]:g} KiB): "
            f"same bandwidth as {sizes[-1]:g} KiB assumed",
        )
        rate = self.rate(sequential[-1], fraction)
        return self._limit("throughput", rate, (flag,), outside=True, at_kib=sizes[-1])

    def table_limits(self, fraction: float, block_kib: float) -> list[Limit]:
        """The ceilings the published tables set at this mix and size; an interpolated one
        carries the leave-one-out band of its rules on this envelope's tables."""
        found = (
            self.iops_limit(fraction, block_kib),
            self.throughput_limit(fraction, block_kib),
        )
        return [
            replace(limit, band=band(self, limit.rules)) if limit.basis == "interpolated" else limit
            for limit in found
            if limit is not None
        ]

    # ------------------------------------------------------------------ helpers

    def blend(self, low: Table, high: Table, fraction: float, block_kib: float) -> Rate:
        """Service time linear in the request size between two tables' rates."""
        if abs(block_kib - _size(low)) < _EPS:
            return self.rate(low, fraction)
        if abs(block_kib - _size(high)) < _EPS:
            return self.rate(high, fraction)
        a, b = self.rate(low, fraction), self.rate(high, fraction)
        share = (block_kib - _size(low)) / (_size(high) - _size(low))
        total = 1 / (1 / a.total + share * (1 / b.total - 1 / a.total))
        outside = "outside" in (a.basis, b.basis)
        return Rate(
            fraction * total,
            (1 - fraction) * total,
            a.flags + b.flags,
            False,
            a.cited + b.cited,
            a.used + b.used,
            "outside" if outside else "interpolated",
            () if outside else tuple(dict.fromkeys((*a.rules, *b.rules, "size"))),
            a.latency + b.latency,
        )

    def _limit(
        self,
        kind: LimitKind,
        rate: Rate,
        extra: tuple[Flag, ...] = (),
        *,
        outside: bool = False,
        bridged: bool = False,
        at_kib: float | None = None,
    ) -> Limit:
        # Only the tables the figure rests on are named (at exactly 8 KiB: the 8 KiB table).
        # A throughput limit turns operations into MiB/s at the size they were read at.
        sizes = "/".join(_label_size(t) for t in rate.used)
        basis: Basis = "outside" if outside else rate.basis
        unit = "IOPS" if kind == "iops" else "throughput"
        what = f"{unit} outside the published points" if basis == "outside" else f"{basis} {unit}"
        scale = 1.0 if at_kib is None else at_kib / KIB
        return Limit(
            kind=kind,
            label=f"{what}{', bridged' if bridged else ''} ({sizes})",
            value=rate.total * scale,
            read=rate.read * scale,
            write=rate.write * scale,
            sources=rate.cited,
            flags=tuple(dict.fromkeys(rate.flags + extra + _approximate(rate.used))),
            basis=basis,
            rules=() if basis == "outside" else rate.rules,
            latency=rate.latency,
        )


def same_point(point: Point, fraction: float) -> bool:
    """Whether read share ``fraction`` is the published ``point``'s mix: within
    :data:`MIX_SNAP` (0.05 points) of its column's nominal mix, or within the distance of the
    point's own printed pair from it, whichever is larger (the page's rounding; at most 0.086
    points on the stored tables, against 10 or more points between two columns)."""
    radius = max(MIX_SNAP, abs(point.printed_fraction - point.fraction))
    return abs(fraction - point.fraction) <= radius + _EPS


def _latency(points: list[Point]) -> tuple[str, ...]:
    """``90 % read: 0.38 ms`` for each point that publishes its latency, with where the page's
    curve started when it prints that too (``at the peak; the curve started at 139,989 IOPS``)."""
    found = []
    for point in points:
        shown = f"{point.latency_ms:g} ms" if point.latency_ms else point.latency_text
        if not shown:
            continue
        text = f"{point.read_pct:g} % read: {shown}"
        if point.start_iops is not None:
            at = f" at {point.start_latency_us:g} µs" if point.start_latency_us else ""
            text += f" at the peak (the curve started at {fmt(point.start_iops)} IOPS{at})"
        found.append(text)
    return tuple(found)


def cite_point(table: Table, point: Point) -> str:
    """The citation of one published point: its own source when it has one, else its table's;
    the column it sits in (tables) or the quote that prints it (prose)."""
    source = point.source or table.source
    column = None
    if source.rows:
        labelled = source.columns.label(point.read_pct) if source.columns else None
        column = labelled or f"{point.read_pct:g} % read"
    focus = next(iter(point.printed.values()), None)
    return source.cite(source.quote_for(point.printed), column, focus)


def _approximate(tables: tuple[Table, ...]) -> tuple[Flag, ...]:
    return tuple(
        Flag("note", f"{t.id}: the seed gives these figures as approximate (~, about)")
        for t in tables
        if t.approximate
    )


def _size(table: Table) -> float:
    assert table.block_size_kib is not None  # random and sequential tables always state it
    return table.block_size_kib


def _label_size(table: Table) -> str:
    if table.block_size_kib is None:
        return table.id
    return f"{table.block_size_kib:g} KiB {table.access}"


def load_file(path: Path) -> list[Envelope]:
    """The envelopes of one data file; a malformed file is a ConfigError naming it."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        data = ProfileFile.model_validate(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"envelope data {path.name}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"envelope data {path.name}: {problems}") from exc
    seeds = {seed.file: seed for seed in data.seeds}
    return [
        Envelope(spec, data.vendor, path.name, seeds, list(data.omitted)) for spec in data.envelopes
    ]


@cache
def load_all(directory: Path = DATA_DIR) -> dict[str, Envelope]:
    """Every envelope of every data file, by name (names are unique across files)."""
    found: dict[str, Envelope] = {}
    for path in sorted(directory.glob("*.yaml")):
        for envelope in load_file(path):
            if envelope.name in found:
                raise ConfigError(
                    f"envelope {envelope.name} defined in {found[envelope.name].file} "
                    f"and {path.name}"
                )
            found[envelope.name] = envelope
    return found
