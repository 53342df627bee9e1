"""Sizing a workload against a published envelope: does it fit, which limit binds, how much
headroom is left, and the smallest capacity or service level that fits.

A workload is read and write IOPS and MiB/s (from the command line or a run bundle's block
device means). The envelope is read at the workload's read share of operations and its mean
request size (total KiB / total operations, as iostat's average request size); every ceiling
(:class:`~storage.envelopes.model.Limit`) is compared with the demand in its own unit (IOPS or
MiB/s). The binding limit is the one with the highest utilisation; ``headroom_pct`` is the
share of that limit left unused (negative when the workload does not fit) and ``growth_pct``
how much the workload could grow before reaching it.

The verdict rests on the binding limit, and says how certain it is (``certainty``): one word,
the weakest of its inputs (:mod:`storage.envelopes.certainty`): ``published``, ``derived``,
``interpolated``, ``within_uncertainty``, ``estimate``, ``untested`` or ``outside``. Outside
the published points there is no verdict without ``allow_extrapolation`` (``verdict ==
"no_verdict"``, ``fits`` is None), whatever the utilisation. A demand equal to its limit
(within :data:`~storage.envelopes.certainty.AT_LIMIT_REL`) is at it: utilisation exactly 100 %,
headroom 0, and it fits ("at the published limit" on a published point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from sim.errors import ConfigError
from storage.envelopes.certainty import (
    AT_LIMIT,
    AT_LIMIT_REL,
    caveat,
    certainty_of,
    verdict_suffix,
)
from storage.envelopes.model import Envelope, Flag, Limit
from storage.envelopes.pages import pages_json
from storage.envelopes.scaling import (
    Setting,
    borrowed_tables,
    capacity_limits,
    capacity_unit,
    default_capacity,
    levels,
    resolve_level,
)
from storage.envelopes.smallest import smallest_capacity
from storage.envelopes.units import KIB, fmt, fmt_capacity

SIZE_RATIO_FLAG = 2.0  # read and write sizes further apart than this are flagged


@dataclass(frozen=True)
class Workload:
    """Measured or intended load: per-direction IOPS and MiB/s, and where they came from."""

    read_iops: float
    write_iops: float
    read_mibps: float
    write_mibps: float
    origin: str = "command line"
    block_kib_given: float | None = None
    #: What one operation is: ``IOPS`` (block requests), or for a file workload ``file ops/s``
    #: (the workload's file operations) or ``NFS ops/s`` (the NFS client's calls).
    op_unit: str = "IOPS"
    #: How a file workload's figure was taken (which operations, which load point).
    note: str = ""

    @classmethod
    def from_numbers(
        cls,
        *,
        read_iops: float | None = None,
        write_iops: float | None = None,
        read_mibps: float | None = None,
        write_mibps: float | None = None,
        block_kib: float | None = None,
        origin: str = "command line",
    ) -> Workload:
        """Fill in each direction's IOPS or MiB/s from the other and ``block_kib``; raises
        ConfigError when the numbers do not determine the workload."""
        values = {"read": (read_iops, read_mibps), "write": (write_iops, write_mibps)}
        for name, pair in values.items():
            for number in pair:
                if number is not None and (number < 0 or not math.isfinite(number)):
                    raise ConfigError(f"--{name}-iops/--{name}-mibps must be ≥ 0, got {number}")
        if all(v is None for pair in values.values() for v in pair):
            raise ConfigError(
                "size: no workload: give --bundle RUN_DIR, or --read-iops/--write-iops with "
                "--block-size (or --read-mibps/--write-mibps)"
            )
        done: dict[str, tuple[float, float]] = {}
        for name, (iops, mibps) in values.items():
            if iops is None and mibps is None:
                done[name] = (0.0, 0.0)
            elif iops is not None and mibps is not None:
                if (iops > 0) != (mibps > 0):
                    raise ConfigError(
                        f"--{name}-iops {iops:g} and --{name}-mibps {mibps:g} disagree"
                    )
                done[name] = (iops, mibps)
            elif block_kib is None:
                raise ConfigError(
                    f"size: --{name}-{'iops' if iops is not None else 'mibps'} alone does not "
                    f"fix the request size: add --block-size (e.g. 8KiB) or the "
                    f"{'MiB/s' if iops is not None else 'IOPS'}"
                )
            elif iops is not None:
                done[name] = (iops, iops * block_kib / KIB)
            else:
                assert mibps is not None
                done[name] = (mibps * KIB / block_kib, mibps)
        workload = cls(
            read_iops=done["read"][0],
            write_iops=done["write"][0],
            read_mibps=done["read"][1],
            write_mibps=done["write"][1],
            origin=origin,
            block_kib_given=block_kib,
        )
        if workload.total_iops <= 0:
            raise ConfigError("size: the workload has no I/O (read and write IOPS are 0)")
        return workload

    @property
    def total_iops(self) -> float:
        """Read plus write operations per second."""
        return self.read_iops + self.write_iops

    @property
    def total_mibps(self) -> float:
        """Read plus write MiB/s."""
        return self.read_mibps + self.write_mibps

    @property
    def read_fraction(self) -> float:
        """Read share of operations (0..1)."""
        return self.read_iops / self.total_iops

    @property
    def block_kib(self) -> float:
        """The request size the envelope is read at: ``--block-size`` if given, else the mean
        (total KiB / total operations)."""
        if self.block_kib_given is not None:
            return self.block_kib_given
        return self.total_mibps * KIB / self.total_iops

    def size_kib(self, direction: str) -> float | None:
        """Mean read or write request size in KiB, None without such requests."""
        iops = self.read_iops if direction == "read" else self.write_iops
        mibps = self.read_mibps if direction == "read" else self.write_mibps
        return mibps * KIB / iops if iops > 0 else None

    def describe(self) -> str:
        """One line: IOPS (or file operations), mix, MiB/s, request size."""
        if self.op_unit != "IOPS":
            return (
                f"{fmt(self.total_iops, 1)} {self.op_unit} ({fmt(self.read_iops, 1)} reading + "
                f"{fmt(self.write_iops, 1)} changing, {self.read_fraction * 100:.1f} % reading), "
                f"{fmt(self.total_mibps, 1)} MiB/s, {self.block_kib:.1f} KiB per operation "
                f"[{self.origin}]" + (f"; {self.note}" if self.note else "")
            )
        return (
            f"{fmt(self.read_iops)} read + {fmt(self.write_iops)} write IOPS "
            f"({self.read_fraction * 100:.1f} % read), {fmt(self.read_mibps, 1)} + "
            f"{fmt(self.write_mibps, 1)} MiB/s, {self.block_kib:.1f} KiB requests "
            f"[{self.origin}]"
        )


@dataclass(frozen=True)
class Check:
    """One limit against the workload's demand in the limit's unit."""

    limit: Limit
    demand: float

    @property
    def utilisation(self) -> float:
        """Demand over limit (1.0 = exactly at the limit, within AT_LIMIT_REL)."""
        if self.limit.value <= 0:
            return math.inf
        ratio = self.demand / self.limit.value
        return 1.0 if abs(ratio - 1.0) <= AT_LIMIT_REL else ratio

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "kind": self.limit.kind,
            "label": self.limit.label,
            "limit": self.limit.value,
            "limit_read": self.limit.read,
            "limit_write": self.limit.write,
            "unit": self.limit.unit,
            "demand": self.demand,
            "utilisation_pct": round(self.utilisation * 100, 3),
            "scales_with": self.limit.scales_with,
            "basis": self.limit.basis,
            "band": self.limit.band.to_dict() if self.limit.band else None,
            "derivation": self.limit.derivation,
            "latency": list(self.limit.latency),
            "sources": list(self.limit.sources),
            "flags": [{"kind": f.kind, "message": f.message} for f in self.limit.flags],
        }


@dataclass
class SizingAnswer:
    """The verdict, its evidence and its sources."""

    envelope: Envelope
    workload: Workload
    capacity_tib: float | None
    service_level: str | None
    checks: list[Check]
    binding: Check
    fits: bool | None
    smallest_capacity_tib: float | None
    smallest_capacity: str
    smallest_level: str | None
    smallest_level_text: str
    flags: list[Flag] = field(default_factory=list)
    certainty: str = "published"
    extrapolated: bool = False
    smallest_capacity_basis: str | None = None  # "computed" when a capacity was computed

    @property
    def at_limit(self) -> bool:
        """The demand equals the binding limit (utilisation exactly 100 %)."""
        return self.binding.utilisation == 1.0

    @property
    def certainty_caveat(self) -> str | None:
        """The caveat a verdict on an estimate or an untested interpolation carries."""
        return caveat(self.certainty, self.fits)

    @property
    def verdict(self) -> str:
        """``fits``, ``does_not_fit`` or ``no_verdict`` (outside the published points)."""
        if self.fits is None:
            return "no_verdict"
        return "fits" if self.fits else "does_not_fit"

    def verdict_text(self) -> str:
        """``FITS``, ``FITS, within the interpolation's uncertainty``, ``DOES NOT FIT`` … or
        ``NO VERDICT``."""
        if self.fits is None:
            return "NO VERDICT (outside the published points)"
        text = "FITS" if self.fits else "DOES NOT FIT"
        if self.at_limit and self.binding.limit.sources == ("command line",):
            text += ", at the provisioned limit"  # --pool-iops / --pool-mibps: the user's
        elif self.at_limit:
            text += f", {AT_LIMIT[self.certainty]}"
        return text + verdict_suffix(self.certainty, self.extrapolated)

    @property
    def utilisation_pct(self) -> float:
        """Utilisation of the binding limit, percent."""
        return self.binding.utilisation * 100

    @property
    def headroom_pct(self) -> float:
        """Share of the binding limit left unused, percent (negative: over the limit)."""
        return 100 - self.utilisation_pct

    @property
    def growth_pct(self) -> float:
        """How much the workload could grow before the binding limit, percent."""
        return (1 / self.binding.utilisation - 1) * 100

    @property
    def source(self) -> tuple[str, ...]:
        """The citation of the binding limit."""
        return self.binding.limit.sources

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        spec = self.envelope.spec
        w = self.workload
        return {
            "envelope": spec.name,
            "title": spec.title,
            "vendor": self.envelope.vendor,
            "data_file": self.envelope.file,
            "conditions": spec.conditions.model_dump(exclude_none=True),
            "capacity_tib": self.capacity_tib,
            "service_level": self.service_level,
            "workload": {
                "origin": w.origin,
                "unit": w.op_unit,
                "note": w.note,
                "read_iops": w.read_iops,
                "write_iops": w.write_iops,
                "read_mibps": w.read_mibps,
                "write_mibps": w.write_mibps,
                "read_pct": w.read_fraction * 100,
                "block_kib": w.block_kib,
                "read_kib": w.size_kib("read"),
                "write_kib": w.size_kib("write"),
            },
            "fits": self.fits,
            "verdict": self.verdict,
            "certainty": self.certainty,
            "certainty_caveat": self.certainty_caveat,
            "at_limit": self.at_limit,
            "extrapolated": self.extrapolated,
            "basis": self.binding.limit.basis,
            "derivation": self.binding.limit.derivation,
            "band": band.to_dict() if (band := self.binding.limit.band) else None,
            "binding": self.binding.limit.kind,
            "binding_label": self.binding.limit.label,
            "binding_latency": list(self.binding.limit.latency),
            "caveats": [
                {"text": c.text, "source": c.source.cite(focus=None) if c.source else None}
                for c in self.envelope.caveats()
            ],
            "utilisation_pct": round(self.utilisation_pct, 3),
            "headroom_pct": round(self.headroom_pct, 3),
            "growth_pct": round(self.growth_pct, 3),
            "limits": [c.to_dict() for c in self.checks],
            "smallest_capacity_tib": self.smallest_capacity_tib,
            "smallest_capacity": self.smallest_capacity,
            "smallest_capacity_basis": self.smallest_capacity_basis,
            "smallest_service_level": self.smallest_level,
            "smallest_service_level_text": self.smallest_level_text,
            "flags": [{"kind": f.kind, "message": f.message} for f in self.flags],
            "source": list(self.source),
            "pages": pages_json(self.envelope, self.source),
        }


def evaluate(env: Envelope, workload: Workload, setting: Setting) -> tuple[list[Check], list[Flag]]:
    """Every limit of ``env`` under ``setting`` against ``workload``, and the provisioning
    flags."""
    fraction, block = workload.read_fraction, workload.block_kib
    limits = env.table_limits(fraction, block)
    borrowed = borrowed_tables(env, setting.level)
    if borrowed is not None:  # Premium read against the Extreme tables: each says so
        limits = [replace(limit, flags=(*limit.flags, borrowed)) for limit in limits]
    extra, flags = capacity_limits(env, fraction, block, setting)
    checks = [
        Check(limit, workload.total_iops if limit.kind == "iops" else workload.total_mibps)
        for limit in [*limits, *extra]
    ]
    if not checks:  # pragma: no cover - the schema requires figures
        raise ConfigError(f"{env.name}: no limit applies")
    return checks, flags


def size(
    env: Envelope,
    workload: Workload,
    *,
    capacity_tib: float | None = None,
    service_level: str | None = None,
    pool_iops: float | None = None,
    pool_mibps: float | None = None,
    allow_extrapolation: bool = False,
) -> SizingAnswer:
    """Size ``workload`` against ``env`` at a capacity (default: the tested one) and level;
    no verdict on a figure outside the published points unless ``allow_extrapolation``."""
    level = resolve_level(env, service_level)
    if (
        pool_iops is not None or pool_mibps is not None
    ) and env.spec.capacity.kind != "independent":
        raise ConfigError(f"--pool-iops/--pool-mibps: {env.name} has no custom performance")
    setting = Setting(capacity_tib, level.level if level else None, pool_iops, pool_mibps)
    checks, flags = evaluate(env, workload, setting)
    binding = max(checks, key=lambda c: c.utilisation)
    certainty = certainty_of(binding.limit, binding.demand, _reading_flags(workload))
    fits: bool | None = binding.utilisation <= 1.0
    if certainty == "outside" and not allow_extrapolation:
        fits = None
    capacity = capacity_tib if capacity_tib is not None else default_capacity(env)
    smallest_tib, smallest_text = smallest_capacity(env, workload, checks, setting)
    level_name, level_text = _smallest_level(env, workload, setting, capacity)
    return SizingAnswer(
        envelope=env,
        workload=workload,
        capacity_tib=capacity,
        service_level=level.level if level else None,
        checks=checks,
        binding=binding,
        fits=fits,
        smallest_capacity_tib=smallest_tib,
        smallest_capacity=smallest_text,
        smallest_level=level_name,
        smallest_level_text=level_text,
        flags=_answer_flags(env, workload, checks, binding, flags),
        certainty=certainty,
        extrapolated=certainty == "outside",
        smallest_capacity_basis="computed" if smallest_tib is not None else None,
    )


def _answer_flags(
    env: Envelope, workload: Workload, checks: list[Check], binding: Check, flags: list[Flag]
) -> list[Flag]:
    # The binding limit's flags, and every out-of-range flag: nothing is extrapolated silently.
    found = [*flags, *binding.limit.flags]
    found += [f for c in checks for f in c.limit.flags if f.kind == "out_of_range"]
    found += _reading_flags(workload)
    cap = env.spec.capacity.volume_limit
    if cap is not None and workload.total_mibps > cap.gibps * KIB:
        found.append(
            Flag(
                "note",
                f"{fmt(workload.total_mibps, 1)} MiB/s is above the {cap.gibps:g} GiBps "
                f"single-volume limit stated for manual QoS ({cap.large_volume_gibps:g} GiBps "
                f"for large volumes; {cap.source.seed}), although seed 000's measurements "
                f"exceed it",
            )
        )
    return list(dict.fromkeys(found))


def _reading_flags(workload: Workload) -> list[Flag]:
    """The estimates in how the workload is read: at a mean size between read and write
    sizes far apart, or at a --block-size its numbers contradict."""
    found: list[Flag] = []
    read, write = workload.size_kib("read"), workload.size_kib("write")
    if (
        workload.op_unit == "IOPS"
        and read
        and write
        and max(read, write) / min(read, write) > SIZE_RATIO_FLAG
    ):
        found.append(
            Flag(
                "estimate",
                f"read and write requests differ in size ({read:.1f} and {write:.1f} KiB): the "
                f"envelope is read at the mean size {workload.block_kib:.1f} KiB",
            )
        )
    implied = workload.total_mibps * KIB / workload.total_iops
    if workload.block_kib_given is not None and abs(implied / workload.block_kib - 1) > 0.1:
        found.append(
            Flag(
                "estimate",
                f"--block-size {workload.block_kib:.1f} KiB differs from the {implied:.1f} KiB "
                f"implied by the IOPS and MiB/s given: the envelope is read at "
                f"{workload.block_kib:.1f} KiB",
            )
        )
    return found


def _smallest_level(
    env: Envelope, workload: Workload, setting: Setting, capacity: float | None
) -> tuple[str | None, str]:
    known = levels(env)
    if not known or capacity is None:
        return None, "not applicable: the seeds give no service-level rule for this envelope"
    shown = fmt_capacity(capacity, capacity_unit(env))
    for level in known:
        checks, _ = evaluate(env, workload, replace(setting, level=level.level))
        if all(c.utilisation <= 1.0 for c in checks):
            text = f"{level.level} at {shown}"
            if level.level.lower() != env.spec.service_level.lower():
                text += f" (estimate: {env.spec.service_level} tables used as its ceiling)"
            return level.level, text
    return None, f"none at {shown}"
