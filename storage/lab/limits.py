"""The ranges the lab's options accept, checked before anything is made.

Every refusal is one line naming the option (``--size``, ``--volume old: read-iops=…``) and
the range; a number is never parsed before its length is checked, so a 5,000-digit value is
refused like any other instead of escaping as Python's integer-conversion error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sim.errors import ConfigError

MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
#: An image holds ext4 and its journal; below this mkfs makes a file system with no room.
MIN_SIZE = 16 * MiB
#: mkfs writes the inode tables at once (about 1.6 % of the size: 16 GiB at 1 TiB).
MAX_SIZE = 1 * TiB
#: PostgreSQL's 16 MiB of shared buffers and its processes must fit under the memory limit.
MIN_MEMORY = 32 * MiB
MAX_IOPS = 10_000_000
MAX_BPS = 1 * TiB
MAX_SERVICE_US = 1_000_000
MAX_DIGITS = 20
#: The defaults of ``dbsim lab up``'s --mount and --pg-port, here rather than in
#: storage.lab.lifecycle (which uses them) so the command's options import no lab machinery.
DEFAULT_MOUNT = Path("/mnt/dbsim-lab")
DEFAULT_PG_PORT = 55432
_WHOLE = re.compile(r"^\d+$")
_SHOWN = 24


def shown(text: str) -> str:
    """``text`` as an error line quotes it: at most a few dozen characters."""
    if len(text) <= _SHOWN:
        return text
    return f"{text[:_SHOWN]}… ({len(text):,} characters)"


def human(n: int) -> str:
    """``16777216`` -> ``16 MiB`` (whole units only; the ranges are powers of two)."""
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} B"


def physical_memory() -> int:
    """The host's memory: a limit above it limits nothing."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def whole(option: str, text: str, low: int, high: int, zero: str = "") -> int:
    """``text`` as a whole number from ``low`` to ``high``, else one line naming ``option``;
    ``zero`` says what 0 means where it is allowed (``unlimited``)."""
    value = text.strip()
    if len(value) <= MAX_DIGITS and _WHOLE.match(value) and low <= int(value) <= high:
        return int(value)
    note = f" (0 = {zero})" if zero else ""
    raise ConfigError(f"{option}={shown(value)}: not a whole number from {low:,} to {high:,}{note}")


def in_range(option: str, value: int, low: int, high: int, zero: str = "") -> int:
    """``value`` (bytes, or a count) if ``low <= value <= high`` (or 0 where ``zero`` says
    what 0 means), else one line naming ``option`` and the range."""
    if low <= value <= high or (zero and value == 0):
        return value
    span = f"from {human(low)} to {human(high)}" if high >= MiB else f"from {low:,} to {high:,}"
    note = f" (or 0 = {zero})" if zero else ""
    raise ConfigError(f"{option} {value:,}: must be {span}{note}")


def size(option: str, value: int) -> int:
    """An image size."""
    return in_range(option, value, MIN_SIZE, MAX_SIZE)


def memory(value: int, option: str = "--memory-limit") -> int:
    """``--memory-limit`` (or ``option``): at least :data:`MIN_MEMORY`, at most the host's
    memory."""
    host = physical_memory()
    if MIN_MEMORY <= value <= host:
        return value
    raise ConfigError(
        f"{option} {value:,}: must be from {human(MIN_MEMORY)} to the host's memory "
        f"({host / GiB:.1f} GiB)"
    )


def ceiling(option: str, kind: str, value: int | None) -> int | None:
    """A blkio ceiling (IOPS or bytes per second); None or 0 = unlimited."""
    if value is None:
        return None
    high = MAX_BPS if kind.endswith("_bps") else MAX_IOPS
    return in_range(option, value, 1, high, zero="unlimited")
