"""The shape of ``storage/envelopes/data/*.yaml``: published performance, transcribed.

One file per vendor. Every figure keeps where it came from (:class:`Source`: the seed file,
the heading it sits under, the table's caption and rows or a verbatim quote) and, for prose
figures, how the seed printed it (``printed``), so a test can find it in the seed again.
Units are explicit: tables say ``IOPS`` or a bandwidth unit, block sizes are KiB, read shares
are percent of operations, latencies are milliseconds.

Validation is strict (unknown keys are errors) so a typo in a data file fails loudly.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from storage.envelopes.provenance import lines_text

TableUnit = Literal["IOPS", "MiB/s", "MB/s", "GB/s", "KB/s", "GiB/s"]
QUOTE_CHARS = 110  # a citation quotes this much of a prose source

BandwidthUnit = Literal["MiB/s", "MB/s", "GB/s", "KB/s", "GiB/s"]
CapacityUnit = Literal["GB", "TB", "PB", "GiB", "TiB", "PiB"]


def row_label(row: str) -> str:
    """A table row's label: its words before the first figure ('Ler IOPS 380.000 …')."""
    words: list[str] = []
    for word in row.split():
        if re.fullmatch(r"[~<]?[\d.,]+", word):
            break
        words.append(word)
    return " ".join(words)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """Where a figure is printed: ``seed`` file, the nearest ``section`` heading (with the
    enclosing headings in ``within``, outermost first), the table ``caption``, its ``rows``
    verbatim (label then figures) and/or verbatim ``quotes`` of the sentences."""

    seed: str = Field(pattern=r"^\d{3}_[0-9a-f]{16}\.txt$")
    section: str
    within: list[str] = []
    caption: str | None = None
    columns: Columns | None = None
    rows: list[str] = []
    quotes: list[str] = []

    @model_validator(mode="after")
    def _has_text(self) -> Source:
        if not self.rows and not self.quotes:
            raise ValueError("a source needs the table's rows or a quote from the seed")
        if self.rows and (self.columns is None or self.caption is None):
            raise ValueError("rows need their caption and columns (header, read % of each)")
        return self

    def path(self) -> str:
        """``seed 000_….txt › outer › section``: where the figure sits."""
        return f"seed {self.seed} › " + " › ".join([*self.within, self.section])

    def cite(self, quote: int = 0, column: str | None = None, focus: str | None = None) -> str:
        """One line: ``seed 000_….txt › outer › section: «caption» column «…» rows «…»`` (the
        ``column`` of the table the figure sits in, when given), or the ``quote``-th quote
        for prose, shortened around ``focus`` (the figure cited) when it is long."""
        within = " › ".join([*self.within, self.section])
        cited = self.rows or self.quotes[quote : quote + 1]
        text = self.path() + lines_text(self.seed, within, cited)
        if self.caption:
            text += f": «{self.caption}»"
        if self.rows:
            if column:
                text += f" column «{column}»"
            text += " rows " + ", ".join(f"«{row_label(row)}»" for row in self.rows)
        elif self.quotes:
            text += f": «{_excerpt(' '.join(self.quotes[quote].split()), focus)}»"
        return text

    def quote_for(self, printed: dict[str, str]) -> int:
        """The index of the first quote that prints every figure of ``printed`` (0 if none
        does, or when nothing is printed)."""
        for index, quote in enumerate(self.quotes):
            flat = " ".join(quote.split())
            if printed and all(" ".join(v.split()) in flat for v in printed.values()):
                return index
        return 0


def _excerpt(said: str, focus: str | None) -> str:
    """``said`` whole, or about :data:`QUOTE_CHARS` of it that contain ``focus``."""
    if len(said) <= QUOTE_CHARS:
        return said
    at = said.find(" ".join(focus.split())) if focus else -1
    start = 0 if at < QUOTE_CHARS // 2 else at - QUOTE_CHARS // 2
    start = min(start, len(said) - QUOTE_CHARS)
    if start > 0:
        start = said.rfind(" ", 0, start) + 1  # whole words
    end = said.find(" ", start + QUOTE_CHARS)
    end = len(said) if end < 0 else end
    return ("…" if start > 0 else "") + said[start:end] + ("…" if end < len(said) else "")


class Columns(_Strict):
    """A seed table's column header, verbatim, and the read % each column stands for."""

    header: str
    read_pct: list[float]
    labels: list[str] = []

    @model_validator(mode="after")
    def _labels(self) -> Columns:
        if self.labels and (
            len(self.labels) != len(self.read_pct) or " ".join(self.labels) != self.header
        ):
            raise ValueError("column labels must be one per read % and spell the header")
        return self

    def label(self, read_pct: float) -> str | None:
        """The header of the column of ``read_pct``, verbatim (None without labels)."""
        for pct, label in zip(self.read_pct, self.labels, strict=False):
            if pct == read_pct:
                return label
        return None


class Point(_Strict):
    """One published mix: per-direction figures (``read``, ``write``) or only a ``total``."""

    read_pct: float = Field(ge=0, le=100)
    read: float | None = Field(default=None, ge=0)
    write: float | None = Field(default=None, ge=0)
    total: float | None = Field(default=None, gt=0)
    latency_ms: float | None = Field(default=None, gt=0)
    latency_text: str | None = None
    #: Where the page's curve started (its first, lowest load step), when it prints it: the
    #: peak above is the figure sized against; the start is shown beside its latency.
    start_iops: float | None = Field(default=None, gt=0)
    start_latency_us: float | None = Field(default=None, gt=0)
    printed: dict[str, str] = {}
    source: Source | None = None

    @model_validator(mode="after")
    def _directions(self) -> Point:
        split = self.read is not None and self.write is not None
        if split == (self.total is not None):
            raise ValueError("give either read and write, or total")
        if self.read_pct == 100 and self.write:
            raise ValueError("a 100 % read point cannot have writes")
        if self.read_pct == 0 and self.read:
            raise ValueError("a 0 % read point cannot have reads")
        if split and (self.read or 0) + (self.write or 0) <= 0:
            raise ValueError("read + write must be positive")
        if self.start_iops is not None and self.start_iops >= self.sum:
            raise ValueError("a curve's start must lie below its peak")
        return self

    @property
    def fraction(self) -> float:
        """The read share as a fraction of operations."""
        return self.read_pct / 100.0

    @property
    def printed_fraction(self) -> float:
        """The read share the printed pair itself gives (``read / (read + write)``): off the
        column's nominal mix by the page's rounding (2.284 / 3.048 is 74.93 %, printed under
        75 %); the nominal mix for a point published as a total."""
        if self.total is not None:
            return self.fraction
        return (self.read or 0.0) / self.sum

    @property
    def sum(self) -> float:
        """Read plus write (or the published total), in the table's unit."""
        if self.total is not None:
            return self.total
        return (self.read or 0.0) + (self.write or 0.0)


class Table(_Strict):
    """Published figures for one access pattern and block size at several read mixes."""

    id: str
    access: Literal["random", "sequential", "database"]
    block_size_kib: float | None = Field(gt=0)
    unit: TableUnit
    approximate: bool = False
    source: Source
    points: list[Point] = Field(min_length=1)
    notes: list[str] = []

    @model_validator(mode="after")
    def _consistent(self) -> Table:
        pcts = [p.read_pct for p in self.points]
        if len(set(pcts)) != len(pcts):
            raise ValueError(f"table {self.id}: read % listed twice")
        if self.unit != "IOPS" and self.block_size_kib is None:
            raise ValueError(f"table {self.id}: a bandwidth table needs its block size")
        if self.access == "database" and self.block_size_kib is not None:
            raise ValueError(f"table {self.id}: database points state no block size")
        return self

    def sorted_points(self) -> list[Point]:
        """Points by increasing read share."""
        return sorted(self.points, key=lambda p: p.read_pct)


class Quantity(_Strict):
    """A capacity as the seed states it."""

    value: float = Field(gt=0)
    unit: CapacityUnit


class Bandwidth(_Strict):
    """A bandwidth as the seed states it."""

    value: float = Field(gt=0)
    unit: BandwidthUnit


class Level(_Strict):
    """A service level's throughput per TiB of capacity."""

    level: str
    mibps_per_tib: float = Field(gt=0)
    derived: str | None = None
    source: Source
    printed: dict[str, str] = {}


class VolumeLimit(_Strict):
    """A stated per-volume throughput limit (reported as a flag, see the data file)."""

    gibps: float = Field(gt=0)
    large_volume_gibps: float | None = None
    source: Source


class CapacityPoint(_Strict):
    """Published IOPS and bandwidth of one volume size."""

    capacity: Quantity
    iops: float = Field(gt=0)
    throughput: Bandwidth
    source: Source
    throughput_source: Source | None = None
    printed: dict[str, str] = {}

    def source_of(self, field: str) -> Source:
        """Where the figure ``field`` (``iops`` or ``throughput``) is printed."""
        if field == "throughput" and self.throughput_source is not None:
            return self.throughput_source
        return self.source


class CapacityRule(_Strict):
    """How performance follows capacity and service level, as the seeds state it.

    ``per_tib``: throughput = rate x capacity per service level, never above the published
    tables; ``independent``: capacity does not set performance (custom IOPS and MiB/s up to
    ``max_iops``/``max_mibps``); ``points``: published figures at a few sizes; ``none``: the
    seed gives no rule.
    """

    kind: Literal["per_tib", "independent", "points", "none"]
    tested: Quantity | None = None
    source: Source | None = None
    levels: list[Level] = []
    volume_limit: VolumeLimit | None = None
    max_iops: float | None = None
    max_mibps: float | None = None
    max_source: Source | None = None
    printed: dict[str, str] = {}
    iops_block_kib: float | None = None
    throughput_min_block_kib: float | None = None
    points: list[CapacityPoint] = []
    note: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> CapacityRule:
        if self.kind == "per_tib" and not (self.levels and self.tested):
            raise ValueError("a per_tib rule needs levels and the tested capacity")
        if self.kind == "points" and len(self.points) < 1:
            raise ValueError("a points rule needs published points")
        if self.kind != "none" and self.source is None:
            raise ValueError(f"a {self.kind} rule needs its source")
        return self


class Cap(_Strict):
    """A published ceiling that holds for any mix and block size (e.g. an 'up to' figure)."""

    kind: Literal["iops", "throughput"]
    value: float = Field(gt=0)
    unit: TableUnit
    label: str
    #: What the page leaves unstated about this 'up to' figure (the mix, the request size …):
    #: said with the figure wherever it is shown.
    unstated: list[str] = []
    source: Source
    printed: dict[str, str] = {}


class Caveat(_Strict):
    """Something every answer must say: a caveat the page states (``source`` quotes it) or
    one that follows from the test set-up or the transcription (no source)."""

    text: str
    source: Source | None = None


class Conditions(_Strict):
    """The test conditions as the seed states them ('not stated' where it does not)."""

    clients: str
    client_count: int | None = None
    os: str | None = None
    tool: str | None = None
    jobs: str | None = None
    iodepth: str | None = None
    volume: str | None = None
    working_set: str | None = None
    mount: str | None = None


class EnvelopeSpec(_Strict):
    """One named envelope: a product, protocol and service level under stated conditions."""

    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    title: str
    protocol: str
    service_level: str
    scope: str
    conditions: Conditions
    capacity: CapacityRule
    tables: list[Table] = []
    caps: list[Cap] = []
    caveats: list[Caveat] = []
    notes: list[str] = []

    @model_validator(mode="after")
    def _has_figures(self) -> EnvelopeSpec:
        if not (self.tables or self.caps or self.capacity.kind == "points"):
            raise ValueError(f"envelope {self.name}: no published figures")
        blocks = [(t.access, t.block_size_kib) for t in self.tables]
        if len(set(blocks)) != len(blocks):
            raise ValueError(f"envelope {self.name}: two tables for the same access and size")
        return self


class SeedInfo(_Strict):
    """A seed file, how it prints numbers, its headings and the caveats it states for every
    result on the page."""

    file: str = Field(pattern=r"^\d{3}_[0-9a-f]{16}\.txt$")
    title: str  # as the seed prints it (its own language)
    title_en: str  # the vendor page's English title, which a reader searches for
    publisher: str  # whose page it is (the documentation set or site)
    url: str | None = Field(default=None, pattern=r"^https://")  # where known
    headings_en: dict[str, str] = {}  # a heading as stored → the same heading in English
    language: str
    decimal: Literal[".", ","]
    thousands: Literal[".", ","]
    headings: list[str] = []  # the page's other headings: a cited section ends at any heading
    caveats: list[Caveat] = []

    @model_validator(mode="after")
    def _translated_headings_exist(self) -> SeedInfo:
        unknown = [h for h in self.headings_en if self.headings and h not in self.headings]
        if unknown:
            raise ValueError(f"{self.file}: headings_en names no heading of the page: {unknown}")
        return self


class Omitted(_Strict):
    """Something in the seed that is not transcribed, and why."""

    what: str
    why: str


class ProfileFile(_Strict):
    """A whole data file."""

    vendor: str
    seeds: list[SeedInfo] = Field(min_length=1)
    anchors: dict[str, Any] = {}
    envelopes: list[EnvelopeSpec] = Field(min_length=1)
    omitted: list[Omitted] = []

    @field_validator("envelopes")
    @classmethod
    def _unique(cls, value: list[EnvelopeSpec]) -> list[EnvelopeSpec]:
        names = [e.name for e in value]
        if len(set(names)) != len(names):
            raise ValueError("envelope names must be unique")
        return value

    @model_validator(mode="after")
    def _seeds_known(self) -> ProfileFile:
        known = {s.file: s for s in self.seeds}
        page = [c.source for s in self.seeds for c in s.caveats if c.source is not None]
        for env in self.envelopes:
            for source in [*iter_sources(env), *page]:
                if source.seed not in known:
                    raise ValueError(f"{env.name}: cites {source.seed}, not listed in seeds")
                outline = known[source.seed].headings
                for heading in [*source.within, source.section]:
                    if outline and heading not in outline:
                        raise ValueError(
                            f"{env.name}: heading {heading!r} is not in the headings of "
                            f"{source.seed}"
                        )
        return self


def iter_sources(env: EnvelopeSpec) -> list[Source]:
    """Every :class:`Source` an envelope cites (tables, points, rules, caps)."""
    out: list[Source] = []
    for table in env.tables:
        out.append(table.source)
        out.extend(p.source for p in table.points if p.source is not None)
    rule = env.capacity
    out.extend(s for s in (rule.source, rule.max_source) if s is not None)
    out.extend(level.source for level in rule.levels)
    out.extend(point.source for point in rule.points)
    out.extend(p.throughput_source for p in rule.points if p.throughput_source is not None)
    if rule.volume_limit is not None:
        out.append(rule.volume_limit.source)
    out.extend(cap.source for cap in env.caps)
    out.extend(c.source for c in env.caveats if c.source is not None)
    return out


Source.model_rebuild()
