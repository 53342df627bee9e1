"""``BlockDeviceCollector``: ``iostat -x`` figures for chosen block devices, once per interval.

Load on the target: one read of ``/proc/diskstats`` (a few kilobytes from kernel memory) per
interval, nothing at all on the devices themselves. The file is read on the event loop: it is
served from memory and does not block.

Where the interval ends: the engine has the file read at the very instant it closes an
interval (:meth:`BlockDeviceCollector.read_at`), so the rates are the counts between two
readings over the span between them, and the interval's end in the bundle is where the
counters were read. Read later, in ``sample``, the reading waited for the sampler's turn on the
event loop (2-80 ms after the close measured under load, more under libfaketime) and a burst
of I/O in that wait was counted in the interval but spread over it as if the rate were even
(issue #25). ``dbsim capture`` and the storage baseline call ``read_at`` the same way; a caller
that does not (a test on a fake clock) gets the reading taken in ``sample``.

Each device stands alone (see :mod:`storage.collectors.diskstats` for the rules):

- its counters went down (re-attached under the same name, a reboot), or its device number
  changed: a :data:`~sim.protocols.GAP_RESET` sample for that interval, naming the counter and
  its two readings; the new reading is the baseline, so the next interval has figures again;
- its line is malformed or cut short: a :data:`~sim.protocols.GAP_UNREADABLE` sample with the
  line; the last good reading stays the baseline, so the next good one gives the figures of
  the whole span since (``meta["span_s"]`` says how long it is);
- it is no longer listed (detached): ``GAP_UNREADABLE`` while it is away; when it is listed
  again its counters started afresh, so that interval is a ``GAP_RESET``.

The other devices' figures are computed exactly as if nothing had happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, gap_sample
from storage.collectors.diskstats import (
    DISKSTATS,
    KERNEL_LONG_BITS,
    DiskCounters,
    DiskstatsTable,
    counter_break,
    iostat_rates,
    read_diskstats_table,
)
from storage.devices import BlockDevice


class BlockDeviceCollector(Collector):
    """One :class:`~sim.protocols.Sample` per device per interval, keyed as in
    :mod:`storage.collectors.diskstats` (``r_s``, ``r_await_ms``, ``util_pct`` …), or a gap
    sample for a device that gives no figures this interval (see the module's notes).

    ``devices`` are names as ``/proc/diskstats`` prints them, or :class:`BlockDevice` objects
    (then ``describe()`` and each sample's ``meta`` also carry the role and backing file).
    The interval is the difference of the ``now`` values given to ``start``/``sample``.
    """

    source: ClassVar[str] = "block"

    def __init__(
        self,
        devices: Sequence[str | BlockDevice],
        diskstats_path: Path = DISKSTATS,
        long_bits: int = KERNEL_LONG_BITS,
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
        self.long_bits = long_bits
        #: Per device: the reading rates are taken from, and the ``now`` it was taken at.
        self._prev: dict[str, tuple[DiskCounters, float]] = {}
        #: Devices seen once and no longer listed: their next reading starts afresh.
        self._away: set[str] = set()
        self._prev_now: float | None = None
        #: Readings taken by ``read_at``, by the ``now`` of the sample that will use them.
        self._readings: dict[float, DiskstatsTable] = {}
        self._sampled = False

    def _read(self, what: str) -> DiskstatsTable:
        try:
            return read_diskstats_table(self.diskstats_path)
        except OSError as exc:
            raise CollectorError(
                f"block collector: cannot read {self.diskstats_path} ({what}): {exc}"
            ) from exc

    async def start(self, now: float) -> None:
        table = self._read("baseline")
        listed = set(table.counters) | set(table.unreadable)
        missing = [name for name in self.names if name not in listed]
        if missing:  # a name that is not there at all is a mistake in the scenario
            raise CollectorError(
                f"block collector: device(s) {', '.join(missing)} not found in "
                f"{self.diskstats_path}"
            )
        # A device whose first line is unreadable gets its baseline from its first good one.
        self._prev = {n: (table.counters[n], now) for n in self.names if n in table.counters}
        self._away = set()
        self._prev_now = now
        self._readings = {}
        self._sampled = False

    def read_at(self, now: float) -> None:
        """Read the file now, for ``sample(now)``; at the ``now`` of ``start`` (before any
        sample), the reading is the baseline. A failed read is left to ``sample``, which
        reads again and reports it."""
        if self._prev_now is None:
            return
        try:
            table = read_diskstats_table(self.diskstats_path)
        except OSError:
            return
        if now == self._prev_now and not self._sampled:
            self._prev = {n: (table.counters[n], now) for n in self.names if n in table.counters}
        else:
            self._readings[now] = table

    async def sample(self, now: float) -> list[Sample]:
        if self._prev_now is None:
            raise CollectorError("block collector: sample() called before start()")
        if not now > self._prev_now:
            raise CollectorError(
                f"block collector: clock did not advance ({self._prev_now} -> {now})"
            )
        table = self._readings.pop(now, None)
        # Readings of intervals never sampled (a stage boundary's fragment of a few ms) are
        # covered by this one, as iostat's next report covers them.
        self._readings = {t: r for t, r in self._readings.items() if t > now}
        if table is None:
            table = self._read("sample")
        self._sampled = True
        last, self._prev_now = self._prev_now, now
        samples = []
        for device in self.devices:
            meta: dict[str, str] = {"role": device.role} if isinstance(device, BlockDevice) else {}
            name = device.name if isinstance(device, BlockDevice) else device
            sample = self._device_sample(name, table, now, last, meta)
            if sample is not None:
                samples.append(sample)
        return samples

    def _device_sample(
        self, name: str, table: DiskstatsTable, now: float, last: float, meta: dict[str, str]
    ) -> Sample | None:
        """``name``'s sample; ``last``: the ``now`` of the previous sample of the collector."""
        curr = table.counters.get(name)
        if curr is None:
            if name in table.unreadable:  # the baseline stays: the counters went on
                return gap_sample(self.source, name, GAP_UNREADABLE, table.unreadable[name], now)
            self._prev.pop(name, None)
            self._away.add(name)
            detail = f"not listed in {self.diskstats_path} (detached?)"
            if "" in table.unreadable:  # a line naming no device may have been this one's
                detail += f"; unreadable: {table.unreadable['']}"
            return gap_sample(self.source, name, GAP_UNREADABLE, detail, now)
        if name in self._away:
            self._away.discard(name)
            self._prev[name] = (curr, now)
            return gap_sample(
                self.source, name, GAP_RESET, "listed again after being away: counters restart", now
            )
        if name not in self._prev:  # unreadable since start: this is its first baseline
            self._prev[name] = (curr, now)
            return None
        prev, prev_now = self._prev[name]
        self._prev[name] = (curr, now)
        interval = now - prev_now
        broken = counter_break(prev, curr, interval, self.long_bits)
        if broken is not None:
            return gap_sample(self.source, name, GAP_RESET, broken, now)
        values = iostat_rates(prev, curr, interval, self.long_bits)
        if prev_now < last:  # the intervals in between were unreadable: these figures span them
            meta = meta | {"span_s": f"{interval:g}"}
        return Sample(source=self.source, entity=name, values=values, t=now, meta=meta)

    async def stop(self) -> None:
        self._prev = {}
        self._away = set()
        self._prev_now = None
        self._readings = {}

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "diskstats": str(self.diskstats_path),
            "devices": [
                d.describe() if isinstance(d, BlockDevice) else {"name": d} for d in self.devices
            ],
            "load": f"one read of {self.diskstats_path} per interval; no I/O on the devices",
        }
