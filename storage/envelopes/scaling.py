"""Capacity, service level and stated caps: the ceilings that depend on how the storage is
provisioned rather than on the benchmark tables.

Only the rules the seeds state are modelled:

* ``per_tib`` (Google Cloud NetApp Volumes Standard/Premium/Extreme): throughput = the
  level's MiBps per TiB x capacity (seed 002: Premium 64, Extreme 25.600 MiBps / 200 TiB =
  128). The published tables stay the ceiling: seed 000 says capacity beyond the tested one
  brings no further performance. A level without its own table (Premium) borrows the Extreme
  tables as its ceiling, flagged as an estimate.
* ``independent`` (Flex custom performance): capacity does not set performance; the pool's
  custom IOPS and MiB/s do, up to the maxima the seed states.
* ``points`` (OCI Balanced): IOPS and bandwidth published at a few volume sizes; linear in
  between (an estimate), proportional below the smallest and held above the largest (both
  out of range).
* ``none``: the figures are for the tested configuration; a capacity given is not used.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from sim.errors import ConfigError
from storage.envelopes.model import Basis, Envelope, Flag, Limit
from storage.envelopes.provenance import line_of
from storage.envelopes.schema import CapacityPoint, CapacityRule, Level
from storage.envelopes.uncertainty import Band
from storage.envelopes.units import capacity_tib, fmt, fmt_capacity, from_tib, kib, to_mibps

_EPS = 1e-9


@dataclass(frozen=True)
class Setting:
    """How the storage is provisioned for one evaluation."""

    capacity_tib: float | None = None
    level: str | None = None
    pool_iops: float | None = None
    pool_mibps: float | None = None


def capacity_unit(env: Envelope) -> str:
    """The unit capacities of this envelope are shown in (the seed's)."""
    rule = env.spec.capacity
    if rule.kind == "points":
        return rule.points[0].capacity.unit
    return rule.tested.unit if rule.tested else "TiB"


def default_capacity(env: Envelope) -> float | None:
    """The capacity the figures were measured at, in TiB (the largest published point for a
    ``points`` rule); None when the seed states none."""
    rule = env.spec.capacity
    if rule.kind == "points":
        return max(_point_tib(p) for p in rule.points)
    if rule.tested is not None:
        return capacity_tib(rule.tested.value, rule.tested.unit)
    return None


def levels(env: Envelope) -> list[Level]:
    """The service levels a ``per_tib`` envelope can be evaluated at, lowest rate first."""
    return sorted(env.spec.capacity.levels, key=lambda lv: lv.mibps_per_tib)


def resolve_level(env: Envelope, level: str | None) -> Level | None:
    """The chosen level (default: the level the tables were measured at); ConfigError for a
    level the envelope does not know or a level given to an envelope without levels."""
    known = levels(env)
    if not known:
        if level is not None:
            raise ConfigError(
                f"--service-level: {env.name} has no service levels to choose from "
                f"(its seed gives no per-level rule)"
            )
        return None
    wanted = (level or env.spec.service_level).lower()
    for candidate in known:
        if candidate.level.lower() == wanted:
            return candidate
    names = ", ".join(lv.level for lv in known)
    raise ConfigError(f"--service-level {level!r}: {env.name} knows {names}")


def capacity_limits(
    env: Envelope, fraction: float, block_kib: float, setting: Setting
) -> tuple[list[Limit], list[Flag]]:
    """The provisioning ceilings and the flags that come with them."""
    rule = env.spec.capacity
    capacity = setting.capacity_tib if setting.capacity_tib is not None else default_capacity(env)
    limits: list[Limit]
    flags: list[Flag]
    if rule.kind == "per_tib":
        assert capacity is not None
        limits, flags = _per_tib_limits(env, rule, capacity, setting.level)
    elif rule.kind == "independent":
        limits = _pool_limits(env, rule, setting)
        flags = []
        if setting.capacity_tib is not None:
            flags.append(
                Flag("note", "capacity does not set performance at this service level (seed)")
            )
    elif rule.kind == "points":
        assert capacity is not None
        limits, flags = _points_limits(env, rule, capacity, fraction, block_kib)
    else:
        limits, flags = [], []
        if setting.capacity_tib is not None:
            flags.append(
                Flag(
                    "note",
                    "the seed gives no capacity rule for this envelope: its figures are for the "
                    "tested configuration and the capacity given is not used",
                )
            )
    return [*limits, *_stated_caps(env)], flags


def _per_tib_limits(
    env: Envelope, rule: CapacityRule, capacity: float, level_name: str | None
) -> tuple[list[Limit], list[Flag]]:
    """The chosen level's throughput at ``capacity``; flagged when the level borrows another
    level's tables, or when the capacity is past the tested one (which adds nothing)."""
    assert rule.tested is not None and rule.source is not None
    level = resolve_level(env, level_name)
    assert level is not None
    shown = fmt_capacity(capacity, capacity_unit(env))
    # A rate the page states is published; one it only implies (Extreme: a pool example) is
    # derived, and says how.
    how = f"{level.mibps_per_tib:g} MiBps per TiB" + (
        f" = {level.derived}" if level.derived else ", as stated"
    )
    basis: Basis = "derived" if level.derived else "published"
    limit = Limit(
        kind="throughput",
        label=f"{basis} {level.level} throughput at {shown} ({how})",
        value=level.mibps_per_tib * capacity,
        read=None,
        write=None,
        sources=(level.source.cite(), rule.source.cite()),
        scales_with="capacity",
        basis=basis,
        derivation=_derivation(level),
    )
    borrowed = borrowed_tables(env, level.level)
    flags: list[Flag] = [borrowed] if borrowed else []
    tested = capacity_tib(rule.tested.value, rule.tested.unit)
    if capacity > tested + _EPS:
        flags.append(
            Flag(
                "note",
                f"{shown} is above the tested {fmt_capacity(tested, 'TiB')}: the seed says "
                f"more capacity brings no further performance, so the tables stay the "
                f"ceiling",
            )
        )
    return [limit], flags


def borrowed_tables(env: Envelope, level_name: str | None) -> Flag | None:
    """The estimate a level without tables of its own rests on (Premium read against the
    Extreme tables), or None at the level the tables were measured at."""
    level = resolve_level(env, level_name)
    if level is None or level.level.lower() == env.spec.service_level.lower():
        return None
    return Flag(
        "estimate",
        f"no {level.level} table is published: the {env.spec.service_level} tables are used "
        f"as its ceiling",
    )


def _derivation(level: Level) -> str | None:
    """``128 MiBps per TiB = 25,600 MiBps / 200 TiB …: the page gives a pool example (seed
    002_….txt, line 139), not the rate`` for a derived level; None for a stated one."""
    if not level.derived:
        return None
    source = level.source
    line = line_of(source.seed, " › ".join([*source.within, source.section]), source.quotes[0])
    where = f"seed {source.seed}" + (f", line {line}" if line else "")
    return (
        f"{level.mibps_per_tib:g} MiBps per TiB = {level.derived}: the page gives this "
        f"{level.level} pool example ({where}), not a rate per TiB"
    )


def _stated_caps(env: Envelope) -> list[Limit]:
    """The envelope's 'up to' caps, each flagged as the estimate it is."""
    limits = []
    for cap in env.spec.caps:
        value = cap.value if cap.kind == "iops" else to_mibps(cap.value, cap.unit)
        unstated = ", ".join(cap.unstated) or "nothing"
        flag = Flag(
            "estimate",
            f"{cap.label}: an 'up to' figure of one mixed run; the page leaves unstated "
            f"{unstated}: applied to any workload",
        )
        label = f"{cap.label}; not stated: {unstated}" if cap.unstated else cap.label
        limits.append(Limit(cap.kind, label, value, None, None, (cap.source.cite(),), (flag,)))
    return limits


def _pool_limits(env: Envelope, rule: CapacityRule, setting: Setting) -> list[Limit]:
    out: list[Limit] = []
    pairs = (
        ("iops", setting.pool_iops, rule.max_iops, "--pool-iops"),
        ("throughput", setting.pool_mibps, rule.max_mibps, "--pool-mibps"),
    )
    for kind, given, maximum, option in pairs:
        if given is not None and maximum is not None and given > maximum:
            raise ConfigError(
                f"{option} {fmt(given)}: above the maximum {fmt(maximum)} of {env.name}"
            )
        value = given if given is not None else maximum
        if value is None:
            continue
        source = rule.max_source.cite() if rule.max_source else "seed: maximum not stated"
        label = "custom performance " + ("as provisioned" if given is not None else "maximum")
        out.append(
            Limit(
                kind,  # type: ignore[arg-type]
                label,
                value,
                None,
                None,
                ("command line",) if given is not None else (source,),
                scales_with="pool",
            )
        )
    return out


def _point_tib(point: CapacityPoint) -> float:
    return capacity_tib(point.capacity.value, point.capacity.unit)


def _interpolate(
    points: list[tuple[float, float]], capacity: float
) -> tuple[float, str | None, bool]:
    """Linear in capacity between published (capacity, value) points: (value, flag kind,
    exact). Below the smallest point the value is proportional to capacity; above the largest
    it is held."""
    first, last = points[0], points[-1]
    for cap, value in points:
        if abs(cap - capacity) < _EPS * max(1.0, cap):
            return value, None, True
    if capacity < first[0]:
        return first[1] * capacity / first[0], "out_of_range", False
    if capacity > last[0]:
        return last[1], "out_of_range", False
    for (c0, v0), (c1, v1) in itertools.pairwise(points):
        if c0 <= capacity <= c1:
            return v0 + (capacity - c0) / (c1 - c0) * (v1 - v0), "estimate", False
    raise AssertionError("capacity not bracketed")  # pragma: no cover


def _points_limits(
    env: Envelope, rule: CapacityRule, capacity: float, fraction: float, block_kib: float
) -> tuple[list[Limit], list[Flag]]:
    points = sorted(rule.points, key=_point_tib)
    iops = [(_point_tib(p), p.iops) for p in points]
    mibps = [(_point_tib(p), to_mibps(p.throughput.value, p.throughput.unit)) for p in points]
    unit = capacity_unit(env)
    shown = fmt_capacity(capacity, unit)
    iops_value, kind, _ = _interpolate(iops, capacity)
    mibps_value, _, _ = _interpolate(mibps, capacity)
    flags = _published_sizes_flags(kind, capacity, [c for c, _ in iops], unit)
    iops_flags, mibps_flags = _request_size_flags(rule, block_kib)
    # On a published size: published; between two: interpolated (untested: two sizes only);
    # beyond them, or at a request size the seed did not state the figure for: outside.
    at_size: Basis = "published" if kind is None else "interpolated"
    if kind == "out_of_range":
        at_size = "outside"
    off_iops = rule.iops_block_kib is not None and abs(block_kib - rule.iops_block_kib) > _EPS
    off_mibps = (
        rule.throughput_min_block_kib is not None
        and block_kib < rule.throughput_min_block_kib - _EPS
    )
    band = Band(("capacity",), 0.0, 0.0, 0, 0) if at_size == "interpolated" else None
    # Only the published sizes the figures rest on are cited, each figure where it is printed.
    used = _used_points(points, capacity)
    sources = tuple(_cite_figure(p, "iops") for p in used)
    bandwidth_sources = tuple(_cite_figure(p, "throughput") for p in used)
    limits = [
        Limit(
            "iops",
            f"volume IOPS at {shown}",
            iops_value,
            fraction * iops_value,
            (1 - fraction) * iops_value,
            sources,
            iops_flags,
            "capacity",
            "outside" if off_iops else at_size,
            ("capacity",) if band and not off_iops else (),
            band if not off_iops else None,
        ),
        Limit(
            "throughput",
            f"volume bandwidth at {shown}",
            mibps_value,
            None,
            None,
            bandwidth_sources,
            mibps_flags,
            "capacity",
            "outside" if off_mibps else at_size,
            ("capacity",) if band and not off_mibps else (),
            band if not off_mibps else None,
        ),
    ]
    return limits, flags


def _used_points(points: list[CapacityPoint], capacity: float) -> list[CapacityPoint]:
    """The published sizes a capacity's figures come from: the one it equals, the nearest
    when outside, the two around it when between."""
    for point in points:
        if abs(_point_tib(point) - capacity) < _EPS * max(1.0, capacity):
            return [point]
    if capacity < _point_tib(points[0]):
        return [points[0]]
    if capacity > _point_tib(points[-1]):
        return [points[-1]]
    for low, high in itertools.pairwise(points):
        if _point_tib(low) <= capacity <= _point_tib(high):
            return [low, high]
    raise AssertionError("capacity not bracketed")  # pragma: no cover


def _cite_figure(point: CapacityPoint, field: str) -> str:
    source = point.source_of(field)
    shown = point.printed.get(field)
    return source.cite(source.quote_for({field: shown} if shown else {}), focus=shown)


def _published_sizes_flags(
    kind: str | None, capacity: float, sizes: list[float], unit: str
) -> list[Flag]:
    """Where ``capacity`` sits among the published ``sizes`` (TiB, ascending): between two
    (interpolated), outside them (proportional below, held above), or on one (no flag)."""
    shown = fmt_capacity(capacity, unit)
    published = ", ".join(fmt_capacity(c, unit) for c in sizes)
    if kind == "estimate":
        return [Flag("estimate", f"{shown} lies between the published sizes ({published}): linear")]
    if kind == "out_of_range":
        how = "proportional to capacity" if capacity < sizes[0] else "held at the largest"
        return [
            Flag("out_of_range", f"{shown} is outside the published sizes ({published}): {how}")
        ]
    return []


def _request_size_flags(
    rule: CapacityRule, block_kib: float
) -> tuple[tuple[Flag, ...], tuple[Flag, ...]]:
    """The assumptions the IOPS and the bandwidth figures rest on for this request size."""
    mix = Flag("estimate", "the seed states no read/write mix for these figures: any mix")
    iops_flags = [mix]
    if rule.iops_block_kib and abs(block_kib - rule.iops_block_kib) > _EPS:
        iops_flags.append(
            Flag(
                "estimate",
                f"IOPS published at {rule.iops_block_kib:g} KiB: the same IOPS assumed at "
                f"{kib(block_kib)} KiB",
            )
        )
    mibps_flags = [mix]
    if rule.throughput_min_block_kib and block_kib < rule.throughput_min_block_kib - _EPS:
        mibps_flags.append(
            Flag(
                "estimate",
                f"bandwidth published for requests of {rule.throughput_min_block_kib:g} KiB "
                f"and more: assumed reachable at {kib(block_kib)} KiB",
            )
        )
    return tuple(iops_flags), tuple(mibps_flags)


def smallest_points_capacity(env: Envelope, demand_iops: float, demand_mibps: float) -> float:
    """The smallest volume (TiB) whose interpolated IOPS and bandwidth cover the demand; inf
    when even the largest published size does not."""
    rule = env.spec.capacity
    points = sorted(rule.points, key=_point_tib)
    series = (
        ([(_point_tib(p), p.iops) for p in points], demand_iops),
        (
            [(_point_tib(p), to_mibps(p.throughput.value, p.throughput.unit)) for p in points],
            demand_mibps,
        ),
    )
    needed = 0.0
    for pts, demand in series:
        needed = max(needed, _invert(pts, demand))
    return needed


def _invert(points: list[tuple[float, float]], demand: float) -> float:
    """The capacity at which the piecewise-linear series reaches ``demand`` (see
    :func:`_interpolate`): proportional below the first point, inf above the last value."""
    c0, v0 = points[0]
    if demand <= v0:
        return demand / v0 * c0
    for (ca, va), (cb, vb) in itertools.pairwise(points):
        if va < demand <= vb:
            return ca + (demand - va) / (vb - va) * (cb - ca)
    return math.inf


def round_capacity(tib: float, env: Envelope) -> tuple[float, str]:
    """A needed capacity rounded up to a whole GiB (or GB for decimal seeds), and its text."""
    unit = capacity_unit(env)
    step_unit = "GB" if unit in ("GB", "TB", "PB") else "GiB"
    steps = math.ceil(from_tib(tib, step_unit) - 1e-6)
    rounded = capacity_tib(steps, step_unit)
    text = f"{fmt(steps)} {step_unit}"
    if unit not in (step_unit,):
        text += f" ({fmt_capacity(rounded, unit)})"
    return rounded, text


def pool_requirement(env: Envelope, demand_iops: float, demand_mibps: float) -> str:
    """What custom performance an ``independent`` envelope must be provisioned with."""
    rule = env.spec.capacity
    need = f"≥ {fmt(math.ceil(demand_iops))} IOPS and ≥ {fmt(math.ceil(demand_mibps))} MiB/s"
    if rule.max_iops and demand_iops > rule.max_iops:
        return f"none: {fmt(demand_iops)} IOPS exceed the maximum {fmt(rule.max_iops)}"
    if rule.max_mibps and demand_mibps > rule.max_mibps:
        return f"none: {fmt(demand_mibps, 1)} MiB/s exceed the maximum {fmt(rule.max_mibps)}"
    maxima = ""
    if rule.max_iops or rule.max_mibps:
        maxima = f" (maximum {fmt(rule.max_iops or 0)} IOPS / {fmt(rule.max_mibps or 0)} MiB/s)"
    return f"any capacity (performance does not scale with it); provision {need}{maxima}"


__all__ = [
    "Setting",
    "borrowed_tables",
    "capacity_limits",
    "capacity_unit",
    "default_capacity",
    "levels",
    "pool_requirement",
    "resolve_level",
    "round_capacity",
    "smallest_points_capacity",
]
