"""Sizes written like ``"80M"``: read by the workloads' parameter models, which a start imports
to validate any scenario, so this module imports nothing heavy (workloads.common, the SQL
workloads' DDL helpers, needs SQLAlchemy)."""

from __future__ import annotations

import re

SIZE_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT])?B?\s*$", re.IGNORECASE)


def parse_size_bytes(value: int | str) -> int:
    """Bytes from an int or a string like ``"512"``, ``"80M"``, ``"1G"`` (binary units)."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a size: use bytes or a number with K, M, G or T")
    number, unit = int(match.group(1)), match.group(2)
    return number * SIZE_UNITS[unit.upper()] if unit else number
