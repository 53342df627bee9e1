"""The ``psi`` collector: Linux pressure stall information for I/O, once per interval.

``/proc/pressure/io`` holds two lines, ``some`` (at least one task was stalled on I/O) and
``full`` (every non-idle task was), each with the kernel's running averages over 10, 60 and
300 s and ``total``, the cumulative stall time in microseconds. The share of an interval that
tasks stalled is the difference of two ``total`` readings over the interval's length — exact
for the interval, where ``avg10`` is a decaying average that lags and smears it; ``avg10`` is
kept beside it for reference. Where the run's cgroup is on the unified (v2) hierarchy and
offers ``io.pressure``, the same figures come for the cgroup alone: the system-wide file counts
every process on the host, the cgroup's only the run's own.

Figures per entity (``system``, ``cgroup:<path>``): ``some_pct`` and ``full_pct`` (percent of
the interval), ``some_avg10_pct`` and ``full_avg10_pct`` (the kernel's 10-s averages at the
end of the interval).

Gaps (sim.protocols ``Sample.gap``): a ``total`` that went down (a cgroup removed and made
again under the same name) is :data:`~sim.protocols.GAP_RESET` and the reading becomes the new
baseline; a file that cannot be read or parsed is :data:`~sim.protocols.GAP_UNREADABLE` and
the last good reading stays the baseline, so the next figures span the gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, Target, gap_sample
from sim.registry import (
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
    collector_options,
    register_collector,
)

SOURCE = "psi"
PRESSURE_IO = Path("/proc/pressure/io")
PROC_CGROUP = Path("/proc/self/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")
SYSTEM_ENTITY = "system"
CGROUP_ENTITY_PREFIX = "cgroup:"
KINDS = ("some", "full")


class MalformedPressure(ValueError):
    """A pressure file whose text is not what the kernel documents; the message says where."""


@dataclass(frozen=True)
class Pressure:
    """One reading of a pressure file: per kind (``some``, ``full``) the 10-s average (%) and
    the cumulative stall time (µs)."""

    avg10: Mapping[str, float]
    total_us: Mapping[str, int]


def parse_pressure(text: str) -> Pressure:
    """The ``some`` and ``full`` lines of a pressure file (``full`` may be absent)."""
    avg10: dict[str, float] = {}
    total: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        kind, _, rest = line.partition(" ")
        fields = dict(part.partition("=")[::2] for part in rest.split())
        try:
            if kind not in KINDS or kind in total:
                raise ValueError
            average, stalled = float(fields["avg10"]), int(fields["total"])
        except (KeyError, ValueError):
            raise MalformedPressure(f"unreadable line {line.strip()[:80]!r}") from None
        if stalled < 0 or not (math.isfinite(average) and 0 <= average <= 100):
            raise MalformedPressure(f"impossible figures in {line.strip()[:80]!r}")
        avg10[kind], total[kind] = average, stalled
    if "some" not in total:
        raise MalformedPressure("no 'some' line")
    return Pressure(avg10, total)


def pressure_reset(prev: Pressure, curr: Pressure) -> str | None:
    """The first ``total`` that went down between two readings, as ``"<kind> total: <old> ->
    <new>"``, or None. The totals are 64-bit microsecond counts that never wrap in practice:
    a decrease is a new counter, not a difference to turn into a share."""
    for kind in KINDS:
        if (
            kind in prev.total_us
            and kind in curr.total_us
            and (curr.total_us[kind] < prev.total_us[kind])
        ):
            return f"{kind} total: {prev.total_us[kind]} -> {curr.total_us[kind]}"
    return None


def stall_shares(prev: Pressure, curr: Pressure, interval_s: float) -> dict[str, float]:
    """The interval's figures: per kind the share of ``interval_s`` stalled (from the
    ``total`` deltas) and the kernel's ``avg10`` at its end. Raises ValueError when
    ``interval_s`` is not positive."""
    if not interval_s > 0:
        raise ValueError(f"interval must be positive, got {interval_s!r} s")
    values: dict[str, float] = {}
    for kind in KINDS:
        if kind in prev.total_us and kind in curr.total_us:
            stalled_us = curr.total_us[kind] - prev.total_us[kind]
            values[f"{kind}_pct"] = 100.0 * stalled_us / (interval_s * 1e6)
    for kind in KINDS:
        if kind in curr.avg10:
            values[f"{kind}_avg10_pct"] = curr.avg10[kind]
    return values


# --------------------------------------------------------------------------- the run's cgroup


def unified_cgroup(proc_cgroup_text: str) -> str | None:
    """The process's cgroup on the unified (v2) hierarchy, from ``/proc/self/cgroup`` (the
    ``0::<path>`` line), or None on a host with cgroup v1 controllers only."""
    for line in proc_cgroup_text.splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return None


def cgroup2_mount(mountinfo_text: str) -> tuple[str, str] | None:
    """(mount point, root within the hierarchy) of the first cgroup2 mount in
    ``/proc/self/mountinfo``, or None when the unified hierarchy is not mounted."""
    for line in mountinfo_text.splitlines():
        fields, sep, fs = line.partition(" - ")
        parts = fields.split()
        if sep and fs.split()[:1] == ["cgroup2"] and len(parts) >= 5:
            return _unescape(parts[4]), _unescape(parts[3])
    return None


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes (\040 …).
    return field.encode().decode("unicode_escape") if "\\" in field else field


def cgroup_pressure_file(proc_cgroup_text: str, mountinfo_text: str) -> tuple[str, Path] | str:
    """(cgroup path, its ``io.pressure``) for the process, or why there is none."""
    path = unified_cgroup(proc_cgroup_text)
    if path is None:
        return "no cgroup v2 hierarchy (cgroup v1 controllers only)"
    if path == "/":
        # The root cgroup's io.pressure is the system-wide file under another name.
        return "the process is in the root cgroup v2: its pressure is the system's"
    mount = cgroup2_mount(mountinfo_text)
    if mount is None:
        return f"cgroup v2 path {path} but no cgroup2 file system mounted"
    point, root = mount
    inside = path[len(root) :] if root != "/" and path.startswith(root) else path
    return path, Path(point) / inside.lstrip("/") / "io.pressure"


def _readable(path: Path) -> bool:
    try:
        parse_pressure(path.read_text())
    except (OSError, MalformedPressure):  # a kernel built without PSI, or booted psi=0
        return False
    return True


# --------------------------------------------------------------------------- the collector


class PsiCollector(Collector):
    """One sample per pressure file per interval (see the module's notes). ``files``: entity
    -> pressure file; ``cgroup_note`` says, for the bundle, why no cgroup is watched."""

    source: ClassVar[str] = SOURCE

    def __init__(self, files: Mapping[str, Path], cgroup_note: str = "") -> None:
        if not files:
            raise CollectorError("psi collector: no pressure file to read")
        self.files = dict(files)
        self.cgroup_note = cgroup_note
        #: Per entity: the last good reading and the ``now`` it was taken at.
        self._prev: dict[str, tuple[Pressure, float]] = {}
        self._started = False

    async def start(self, now: float) -> None:
        self._prev = {}
        for entity, path in self.files.items():
            try:
                self._prev[entity] = (parse_pressure(path.read_text()), now)
            except (OSError, MalformedPressure) as exc:
                raise CollectorError(f"psi collector: cannot read {path}: {exc}") from exc
        self._started = True

    async def sample(self, now: float) -> list[Sample]:
        if not self._started:
            raise CollectorError("psi collector: sample() called before start()")
        return [self._entity_sample(entity, path, now) for entity, path in self.files.items()]

    def _entity_sample(self, entity: str, path: Path, now: float) -> Sample:
        try:
            curr = parse_pressure(path.read_text())
        except (OSError, MalformedPressure) as exc:  # the baseline stays
            return gap_sample(self.source, entity, GAP_UNREADABLE, f"{path}: {exc}", now)
        prev, prev_now = self._prev[entity]
        if not now > prev_now:
            raise CollectorError(f"psi collector: clock did not advance ({prev_now} -> {now})")
        self._prev[entity] = (curr, now)
        reset = pressure_reset(prev, curr)
        if reset is not None:
            return gap_sample(self.source, entity, GAP_RESET, f"{path}: {reset}", now)
        return Sample(self.source, entity, stall_shares(prev, curr, now - prev_now), t=now)

    async def stop(self) -> None:
        self._prev = {}
        self._started = False

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "source": self.source,
            "files": {entity: str(path) for entity, path in self.files.items()},
            "load": "one read of each pressure file per interval",
        }
        if self.cgroup_note:
            facts["cgroup"] = self.cgroup_note
        return facts


class PsiOptions(BaseModel):
    """Which pressure files the psi collector reads besides the system-wide one."""

    model_config = ConfigDict(extra="forbid")

    cgroup: bool = Field(
        default=True,
        description="Also read the run's own cgroup io.pressure where cgroup v2 offers it.",
    )


def auto_psi(
    target: Target,
    options: dict[str, Any],
    pressure_file: Path = PRESSURE_IO,
    proc_cgroup: Path = PROC_CGROUP,
    mountinfo: Path = MOUNTINFO,
) -> list[Collector]:
    """The PSI collector when the kernel offers I/O pressure (none otherwise): the
    system-wide file and, with ``options["psi"].cgroup``, the run's cgroup's."""
    chosen = collector_options(PsiOptions, SOURCE, options)
    files: dict[str, Path] = {}
    if _readable(pressure_file):
        files[SYSTEM_ENTITY] = pressure_file
    note = "not asked for (collectors.psi.cgroup: false)"
    if chosen.cgroup:
        try:
            found = cgroup_pressure_file(proc_cgroup.read_text(), mountinfo.read_text())
        except OSError as exc:
            found = f"cannot read {proc_cgroup} or {mountinfo}: {exc}"
        if isinstance(found, str):
            note = found
        elif _readable(found[1]):
            files[CGROUP_ENTITY_PREFIX + found[0]] = found[1]
            note = ""
        else:
            note = f"{found[1]} is not readable (a kernel without cgroup PSI?)"
    return [PsiCollector(files, note)] if files else []


def _stall(kind: str, label: str) -> Figure:
    return Figure(f"{kind}_pct", label, digits=1, grouped=False)


_FIGURES = (
    _stall("some", "some %"),
    _stall("full", "full %"),
    Figure("some_avg10_pct", "some avg10 %", digits=2, grouped=False),
    Figure("full_avg10_pct", "full avg10 %", digits=2, grouped=False),
)

register_collector(
    CollectorEntry(
        source=SOURCE,
        auto=auto_psi,
        summary="share of time tasks stalled on I/O (Linux PSI: /proc/pressure/io and the "
        "run's cgroup io.pressure)",
        options_model=PsiOptions,
        display=Display(
            title="I/O pressure",
            entity_label="scope",
            live=_FIGURES[:2],
            console=_FIGURES,
            console_title="I/O pressure (% of time stalled, measured window)",
            report=_FIGURES,
            report_caption="I/O pressure (PSI: % of each interval tasks stalled on I/O, mean "
            "of the intervals; samples {samples})",
            ui=(
                UiFigure("io_some_pct", "I/O stall some %", "some_pct"),
                UiFigure("io_full_pct", "I/O stall full %", "full_pct"),
            ),
        ),
        correlate=(_stall("some", "I/O stall some %"), _stall("full", "I/O stall full %")),
    )
)
