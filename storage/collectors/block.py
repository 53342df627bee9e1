"""``BlockDeviceCollector``: ``iostat -x`` figures for chosen block devices, once per interval.

Load on the target: one read of ``/proc/diskstats`` (a few kilobytes from kernel memory) per
interval, nothing at all on the devices themselves. The file is read on the event loop: it is
served from memory and does not block.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Sample
from storage.collectors.diskstats import DISKSTATS, DiskCounters, iostat_rates, read_diskstats
from storage.devices import BlockDevice


class BlockDeviceCollector(Collector):
    """One :class:`~sim.protocols.Sample` per device per interval, keyed as in
    :mod:`storage.collectors.diskstats` (``r_s``, ``r_await_ms``, ``util_pct`` …).

    ``devices`` are names as ``/proc/diskstats`` prints them, or :class:`BlockDevice` objects
    (then ``describe()`` and each sample's ``meta`` also carry the role and backing file).
    The interval is the difference of the ``now`` values given to ``start``/``sample``.
    """

    source: ClassVar[str] = "block"

    def __init__(
        self, devices: Sequence[str | BlockDevice], diskstats_path: Path = DISKSTATS
    ) -> None:
        if not devices:
            raise CollectorError("block collector: no devices to watch")
        self.devices: tuple[BlockDevice | str, ...] = tuple(devices)
        self.names: tuple[str, ...] = tuple(
            d.name if isinstance(d, BlockDevice) else d for d in devices
        )
        if len(set(self.names)) != len(self.names):
            raise CollectorError(f"block collector: devices listed twice in {list(self.names)}")
        self.diskstats_path = Path(diskstats_path)
        self._prev: dict[str, DiskCounters] | None = None
        self._prev_now: float | None = None

    def _read(self, what: str) -> dict[str, DiskCounters]:
        try:
            table = read_diskstats(self.diskstats_path)
        except OSError as exc:
            raise CollectorError(
                f"block collector: cannot read {self.diskstats_path} ({what}): {exc}"
            ) from exc
        missing = [name for name in self.names if name not in table]
        if missing:
            verb = "not found" if what == "baseline" else "vanished"
            raise CollectorError(
                f"block collector: device(s) {', '.join(missing)} {verb} in {self.diskstats_path}"
            )
        return {name: table[name] for name in self.names}

    async def start(self, now: float) -> None:
        self._prev = self._read("baseline")
        self._prev_now = now

    async def sample(self, now: float) -> list[Sample]:
        if self._prev is None or self._prev_now is None:
            raise CollectorError("block collector: sample() called before start()")
        interval = now - self._prev_now
        if not interval > 0:
            raise CollectorError(
                f"block collector: clock did not advance ({self._prev_now} -> {now})"
            )
        curr = self._read("sample")
        prev = self._prev
        self._prev, self._prev_now = curr, now
        samples = []
        for device in self.devices:
            name = device.name if isinstance(device, BlockDevice) else device
            meta = {"role": device.role} if isinstance(device, BlockDevice) else {}
            values = iostat_rates(prev[name], curr[name], interval)
            samples.append(Sample(source=self.source, entity=name, values=values, t=now, meta=meta))
        return samples

    async def stop(self) -> None:
        self._prev = None
        self._prev_now = None

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "diskstats": str(self.diskstats_path),
            "devices": [
                d.describe() if isinstance(d, BlockDevice) else {"name": d} for d in self.devices
            ],
            "load": f"one read of {self.diskstats_path} per interval; no I/O on the devices",
        }
