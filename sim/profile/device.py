"""The storage's per-interval figures from the device source (iostat's arithmetic) and, where
it was captured, the device-latency source (eBPF: request sizes, sequential share, requests
in flight, latency percentiles).

The figures are for the *counted* devices together: every device of the time series except a
partition of another listed disk (its I/O is in the disk's counters already) and, when whole
disks are listed too, device-mapper and md devices (their I/O reaches the disks beneath
them). Which devices were counted, and why any was not, is part of the profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sim.profile.figures import DERIVED, column_info
from sim.profile.source import Table

#: The device source's columns (storage/collectors/diskstats.py), with the names an importer
#: following iostat's headings may have used instead.
READS_S, WRITES_S = ("r_s",), ("w_s",)
READ_KB_S, WRITE_KB_S = ("rkB_s",), ("wkB_s",)
READ_SIZE, WRITE_SIZE = ("rareq_sz_kB", "rareq_sz"), ("wareq_sz_kB", "wareq_sz")
READ_AWAIT, WRITE_AWAIT = ("r_await_ms", "r_await"), ("w_await_ms", "w_await")
QUEUE = ("aqu_sz",)
#: Reads and writes together, from a source without the split (sar -d's tps, areq-sz and
#: await; an old iostat's avgrq-sz and await).
ALL_IOS, ALL_SIZE, ALL_AWAIT = ("iops",), ("areq_sz_kB",), ("await_ms",)
BLOCK_COLUMNS = frozenset(
    {*READS_S, *WRITES_S, *READ_KB_S, *WRITE_KB_S, *READ_SIZE, *WRITE_SIZE}
    | {*READ_AWAIT, *WRITE_AWAIT, *QUEUE, "util_pct", *ALL_IOS, *ALL_SIZE, *ALL_AWAIT}
)
#: Request sizes by bucket (KiB): requests of at most the bound and more than the one before.
SIZE_BOUNDS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
SIZE_COLUMNS = (*(f"size_kib_le_{b}" for b in SIZE_BOUNDS), "size_kib_gt_1024")
LATENCY_COLUMNS = frozenset(
    [*SIZE_COLUMNS, "seq_pct", "inflight_mean", "inflight_max", "p99_ms", "n"]
)


def counted_devices(names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The devices whose I/O the totals add up, and why each other one is left out."""
    listed = set(names)
    left_out: dict[str, str] = {}
    for name in names:
        disk = _disk_of(name, listed)
        if disk is not None:
            left_out[name] = f"a partition of {disk}: its I/O is in {disk}'s figures"
    rest = [n for n in names if n not in left_out]
    upper = [n for n in rest if n.startswith(("dm-", "md"))]
    if upper and len(upper) < len(rest):
        for name in upper:
            left_out[name] = "device-mapper or md: its I/O reaches the disks listed beneath it"
    return [n for n in names if n not in left_out], left_out


def _disk_of(name: str, listed: set[str]) -> str | None:
    """The listed disk ``name`` is a partition of: ``sda`` for ``sda1``, ``nvme0n1`` for
    ``nvme0n1p2`` (a disk whose name ends in a digit puts a ``p`` before the number)."""
    base = name.rstrip("0123456789")
    if base == name or not base:
        return None
    if base in listed and not base[-1].isdigit():
        return base
    if base.endswith("p") and base[:-1] in listed and base[-2:-1].isdigit():
        return base[:-1]
    return None


@dataclass
class DeviceData:
    """The counted devices' figures, per interval of the device source."""

    block: Table
    latency: Table | None
    column_kind: str
    counted: list[str]
    left_out: dict[str, str]
    series: dict[str, list[float | None]] = field(default_factory=dict)
    info: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``sizes[direction][column]``: requests per interval in each size bucket (traced).
    sizes: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    @property
    def lengths(self) -> list[float]:
        return self.block.lengths


def _first(table: Table, entity: str, names: Sequence[str]) -> tuple[str, list[float | None]]:
    for name in names:
        if table.has(name, [entity]):
            return name, table.column(entity, name)
    return names[0], [None] * len(table.times)


def _sum(columns: Sequence[Sequence[float | None]]) -> list[float | None]:
    out: list[float | None] = []
    for values in zip(*columns, strict=True):
        known = [v for v in values if v is not None]
        out.append(sum(known) if known else None)
    return out


def _per(
    part: Sequence[Sequence[float | None]], counts: Sequence[Sequence[float | None]]
) -> list[float | None]:
    """Per interval: the count-weighted mean of ``part`` over the devices."""
    out: list[float | None] = []
    for values, weights in zip(zip(*part, strict=True), zip(*counts, strict=True), strict=True):
        pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w]
        total = sum(w for _, w in pairs)
        out.append(sum(v * w for v, w in pairs) / total if total else None)
    return out


class _Builder:
    """Puts one figure's series and its description into the :class:`DeviceData`."""

    def __init__(self, data: DeviceData, column_kind: str) -> None:
        self.data = data
        self.kind = column_kind
        self.single = len(data.counted) == 1

    def direct(self, key: str, names: Sequence[str], unit: str, *, scale: float = 1.0) -> None:
        """The sum of one column over the counted devices (one device: the column itself)."""
        block = self.data.block
        found = [_first(block, d, names) for d in self.data.counted]
        values = _sum([col for _, col in found])
        self.data.series[key] = [None if v is None else v * scale for v in values]
        column = found[0][0] if found else names[0]
        how = f"{column} / 1024" if scale != 1.0 else column
        self.note(key, unit, f"{block.name}: {how}", plain=scale == 1.0)

    def note(self, key: str, unit: str, source: str, *, plain: bool = False) -> None:
        if not self.single:
            source += f", summed over {', '.join(self.data.counted)}"
        what = self.kind if plain and self.single else DERIVED
        self.data.info[key] = column_info(unit, what, source)

    def per_request(
        self, key: str, names: Sequence[str], counts: Sequence[str] | None, unit: str
    ) -> None:
        """A per-request mean (size, await) over the devices, weighted by their requests
        (``counts``: a column of them; None: reads and writes together)."""
        block = self.data.block
        found = [_first(block, d, names) for d in self.data.counted]
        weights = [
            _first(block, d, counts)[1] if counts else _ios(block, d) for d in self.data.counted
        ]
        self.data.series[key] = _per([col for _, col in found], weights)
        column = found[0][0] if found else names[0]
        source = f"{block.name}: {column}"
        if not self.single:
            by = counts[0] if counts else "r_s + w_s"
            source += f", weighted by {by} over {', '.join(self.data.counted)}"
        what = self.kind if self.single else DERIVED
        self.data.info[key] = column_info(unit, what, source)


def _ios(block: Table, device: str) -> list[float | None]:
    """A device's reads plus writes per second, or its ``iops`` column without the split."""
    reads, writes = _first(block, device, READS_S)[1], _first(block, device, WRITES_S)[1]
    if any(v is not None for v in (*reads, *writes)):
        return _sum([reads, writes])
    return _first(block, device, ALL_IOS)[1]


def device_data(block: Table, latency: Table | None, column_kind: str) -> DeviceData:
    """The counted devices' per-interval figures (see the module docstring)."""
    counted, left_out = counted_devices(sorted(block.values))
    data = DeviceData(block, latency, column_kind, counted, left_out)
    build = _Builder(data, column_kind)
    build.direct("read_iops", READS_S, "1/s")
    build.direct("write_iops", WRITES_S, "1/s")
    build.direct("read_mb_s", READ_KB_S, "MB/s", scale=1 / 1024)
    build.direct("write_mb_s", WRITE_KB_S, "MB/s", scale=1 / 1024)
    build.direct("queue", QUEUE, "requests")
    build.per_request("read_kib", READ_SIZE, READS_S, "KiB")
    build.per_request("write_kib", WRITE_SIZE, WRITES_S, "KiB")
    build.per_request("read_await_ms", READ_AWAIT, READS_S, "ms")
    build.per_request("write_await_ms", WRITE_AWAIT, WRITES_S, "ms")
    _totals(data, build)
    if latency is not None:
        _traced(data, latency, column_kind)
    for key in [k for k, values in data.series.items() if all(v is None for v in values)]:
        del data.series[key]  # a figure the bundle does not have is absent, never 0
        data.info.pop(key, None)
    return data


def _totals(data: DeviceData, build: _Builder) -> None:
    series, name = data.series, data.block.name
    series["iops"] = _sum([series["read_iops"], series["write_iops"]])
    series["mb_s"] = _sum([series["read_mb_s"], series["write_mb_s"]])
    series["read_pct"] = [
        None if r is None or not t else 100 * r / t
        for r, t in zip(series["read_iops"], series["iops"], strict=True)
    ]
    data.info["iops"] = column_info("1/s", DERIVED, f"{name}: r_s + w_s")
    data.info["mb_s"] = column_info("MB/s", DERIVED, f"{name}: (rkB_s + wkB_s) / 1024")
    data.info["read_pct"] = column_info("%", DERIVED, f"{name}: 100 r_s / (r_s + w_s)")
    if all(v is None for v in series["iops"]):  # no split: the source's own total
        build.direct("iops", ALL_IOS, "1/s")
    # A per-request mean from a source without its column (an old iostat's avgrq-sz only):
    for key, kb, ios in (
        ("read_kib", "read_mb_s", "read_iops"),
        ("write_kib", "write_mb_s", "write_iops"),
    ):
        if not any(v is not None for v in series[key]) and any(series[kb]):
            series[key] = [
                None if m is None or not n else m * 1024 / n
                for m, n in zip(series[kb], series[ios], strict=True)
            ]
            data.info[key] = column_info("KiB", DERIVED, f"{name}: {kb} × 1024 / {ios}")
    # Reads and writes together, where the source has them so and not apart:
    for key, names, side in (("io_kib", ALL_SIZE, "kib"), ("await_ms", ALL_AWAIT, "await_ms")):
        apart = (series[f"read_{side}"], series[f"write_{side}"])
        if all(v is None for values in apart for v in values):
            build.per_request(key, names, None, "KiB" if side == "kib" else "ms")


def _aligned(
    latency: Table, at: Sequence[int | None], entity: str, column: str
) -> list[float | None]:
    """``latency``'s column for ``entity`` at the device source's intervals: ``at`` holds,
    per device interval, the latency source's interval with the same ``t``."""
    values = latency.column(entity, column)
    return [None if i is None else values[i] for i in at]


def _traced(data: DeviceData, latency: Table, column_kind: str) -> None:
    """The traced figures: in flight, sequential share, p99 and the size histograms."""
    devices, name = data.counted, latency.name
    plural = len(devices) > 1
    position = {t: i for i, t in enumerate(latency.times)}
    at = [position.get(t) for t in data.block.times]
    per_device = {
        c: [_aligned(latency, at, d, c) for d in devices]
        for c in ("n", "seq_pct", "inflight_mean", "inflight_max")
    }
    series = data.series
    series["requests"] = _sum(per_device["n"])
    series["seq_pct"] = _per(per_device["seq_pct"], per_device["n"])
    series["inflight_mean"] = _sum(per_device["inflight_mean"])
    series["inflight_max"] = [
        max((v for v in vs if v is not None), default=None)
        for vs in zip(*per_device["inflight_max"], strict=True)
    ]
    kind = DERIVED if plural else column_kind
    over = f" over {', '.join(devices)}" if plural else ""
    data.info["requests"] = column_info("requests", kind, f"{name}: n{over}")
    data.info["seq_pct"] = column_info("%", kind, f"{name}: seq_pct{over}")
    data.info["inflight_mean"] = column_info("requests", kind, f"{name}: inflight_mean{over}")
    data.info["inflight_max"] = column_info("requests", kind, f"{name}: inflight_max{over}")
    for direction, key in (("read", "read_p99_ms"), ("write", "write_p99_ms")):
        values = [_aligned(latency, at, f"{d}:{direction}", "p99_ms") for d in devices]
        series[key] = [
            max((v for v in vs if v is not None), default=None) for vs in zip(*values, strict=True)
        ]
        source = f"{name}: p99_ms of <device>:{direction}"
        data.info[key] = column_info(
            "ms", kind, source + (", the highest device" if plural else "")
        )
        sizes = {
            c: _sum([_aligned(latency, at, f"{d}:{direction}", c) for d in devices])
            for c in SIZE_COLUMNS
        }
        if any(v is not None for col in sizes.values() for v in col):
            data.sizes[direction] = sizes
    for key in (
        "requests",
        "seq_pct",
        "inflight_mean",
        "inflight_max",
        "read_p99_ms",
        "write_p99_ms",
    ):
        if not any(v is not None for v in series[key]):
            del series[key]
            del data.info[key]
