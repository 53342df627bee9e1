"""Units of the envelopes: capacities, request sizes and bandwidths, parsed and converted.

Binary units (KiB, MiB, GiB, TiB, PiB) are powers of 1024; decimal ones (KB, MB, GB, TB, PB)
powers of 1000, as the seeds print them (OCI's "50 GB", "320 MBS"). Request sizes follow
iostat, whose ``kB`` is 1024 bytes: ``8k``, ``8kB`` and ``8KiB`` are all 8 KiB.
"""

from __future__ import annotations

import math
import re

from sim.errors import ConfigError

KIB = 1024
MIB = 1024**2
TIB = 1024**4

_CAPACITY_BYTES = {
    "b": 1,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "pib": 1024**5,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "pb": 1000**5,
}
# Request sizes: iostat's kB is a KiB, so the decimal spellings mean binary here.
_BLOCK_BYTES = {
    "b": 1,
    "k": KIB,
    "kb": KIB,
    "kib": KIB,
    "m": MIB,
    "mb": MIB,
    "mib": MIB,
}
_BANDWIDTH_MIBPS = {
    "MiB/s": 1.0,
    "GiB/s": 1024.0,
    "KB/s": 1e3 / MIB,
    "MB/s": 1e6 / MIB,
    "GB/s": 1e9 / MIB,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if not match:
        raise ConfigError(f"{what} {text!r}: expected a number and a unit, e.g. {example}")
    return float(match.group(1)), match.group(2)


def parse_capacity(text: str) -> float:
    """``10TiB``, ``500GiB``, ``1TB``, ``50GB`` … as TiB; anything else is a ConfigError."""
    value, unit = _split(text, "capacity", "10TiB or 500GiB")
    factor = _CAPACITY_BYTES.get(unit.lower())
    if factor is None or unit.lower() in ("b", "kib", "kb", "mib", "mb"):
        raise ConfigError(
            f"capacity {text!r}: unknown unit {unit!r} (use GiB, TiB, PiB, GB, TB or PB)"
        )
    if value <= 0:
        raise ConfigError(f"capacity {text!r}: must be positive")
    return value * factor / TIB


def parse_block_size(text: str) -> float:
    """``8KiB``, ``8k``, ``64KB``, ``1MiB``, ``4096B`` … as KiB (kB = 1024 bytes, as iostat)."""
    value, unit = _split(text, "block size", "8KiB")
    factor = _BLOCK_BYTES.get(unit.lower())
    if factor is None:
        raise ConfigError(f"block size {text!r}: unknown unit {unit!r} (use B, KiB or MiB)")
    if value <= 0:
        raise ConfigError(f"block size {text!r}: must be positive")
    return value * factor / KIB


def to_mibps(value: float, unit: str) -> float:
    """A bandwidth in MiB/s."""
    return value * _BANDWIDTH_MIBPS[unit]


def to_ops(value: float, unit: str, block_kib: float | None) -> float:
    """A table figure as operations per second: IOPS as is, a bandwidth divided by the size."""
    if unit == "IOPS":
        return value
    if block_kib is None:
        raise ValueError(f"a {unit} figure needs a block size to become IOPS")
    return to_mibps(value, unit) * KIB / block_kib


def capacity_tib(value: float, unit: str) -> float:
    """A capacity as the seed states it, in TiB."""
    return value * _CAPACITY_BYTES[unit.lower()] / TIB


def from_tib(tib: float, unit: str) -> float:
    """TiB in the given capacity unit."""
    return tib * TIB / _CAPACITY_BYTES[unit.lower()]


def kib(value: float) -> str:
    """A request size for messages: ``4``, ``27.7``, ``1024``."""
    return f"{round(value, 1):g}"


def fmt(value: float, digits: int = 0) -> str:
    """``229,300`` / ``895.7``: thousands separated, fixed decimals."""
    return f"{value:,.{digits}f}"


def fmt_capacity(tib: float, unit: str) -> str:
    """A capacity in the envelope's unit (GiB below 1 TiB when the unit is TiB)."""
    if unit == "TiB" and tib < 1:
        return f"{fmt(from_tib(tib, 'GiB'))} GiB"
    value = from_tib(tib, unit)
    whole = abs(value - round(value)) < 1e-6 or value >= 100
    return f"{fmt(value, 0 if whole else 2)} {unit}"


def pct(value: float) -> str:
    """A percentage as a person writes it: ``87.2 %``, ``under 0.1 %``, ``over 99.9 %``,
    ``1,250 %`` (no decimals from 1,000 up)."""
    if not math.isfinite(value):
        return "unbounded"
    if value == 0:
        return "0 %"
    if 0 < value < 0.1:
        return "under 0.1 %"
    if 99.9 < value < 100:
        return "over 99.9 %"
    if 100 < value < 100.1:  # over the limit, if by little: never printed as "100.0 %"
        return "just over 100 %"
    if -0.1 < value < 0:  # a headroom just below zero: never "-0.0 %"
        return "just under 0 %"
    if abs(value) >= 1000:
        return f"{value:,.0f} %"
    return f"{value:.1f} %"


def growth(utilisation: float) -> str:
    """How much a load at ``utilisation`` (0..1] of a limit could grow, bounded and rounded:
    ``can grow 14.7 %`` below doubling, ``could carry about 3.4 times its load``, ``about 290
    times``, ``more than 1,000 times`` (a ratio that large says only: far from the limit)."""
    if utilisation <= 0 or not math.isfinite(utilisation):
        return "could carry more than 1,000 times its load"
    factor = 1 / utilisation
    if factor < 2:
        return f"can grow {(factor - 1) * 100:.1f} %"
    if factor > 1000:
        return "could carry more than 1,000 times its load"
    digits = 1 if factor < 10 else 0
    shown = round(factor, digits) if factor < 100 else round(factor, -1)
    return f"could carry about {shown:,.{digits}f} times its load"
