"""The ``blocklatency`` collector: per-device p50/p95/p99 of block I/O latency, from eBPF.

One ``bpftrace`` process per run traces the kernel's ``block:block_rq_issue`` and
``block:block_rq_complete`` tracepoints for the devices under the target. Each request's
latency is the time from its issue to the driver to its completion — the device's service
time as the kernel sees it, without the time the request waited in the I/O scheduler before
issue. iostat's ``r_await``/``w_await`` (the block collector) count from the request's start
in the block layer, before that queue, so they are the larger of the two under queueing.

Latencies are counted in buckets of 1/8 of a power of two of nanoseconds (the script divides
by two until the value is below 16: the exponent and the remaining 8..15 name the bucket), so
a quantile is known to ±6 % of its value. bpftrace prints and clears the counts when the
collector asks, at each interval's close (``blocklatency_reader.py``); the collector waits for
that print (:data:`PRINT_WAIT_S` at most: counts printed later go to the next interval), so
an interval's edges are off by the moment bpftrace takes to print, under a millisecond here.

Figures per interval: ``mean_ms`` (to compare with iostat's await, which is a mean too),
``p50_ms``, ``p95_ms``, ``p99_ms`` and ``n`` (the requests completed), and the request shape
iostat's means cannot give (the program and its arithmetic: ``blocklatency_script.py``):
``size_kib_le_4`` … ``size_kib_le_1024``, ``size_kib_gt_1024`` (requests issued with data,
by size), ``seq_pct`` (the share of them that started where the previous one on the device
in the same direction ended), ``inflight_mean`` and ``inflight_max`` (requests in flight on
the device: the mean at each issue, itself included; the max the highest of the kernel's
``inflight`` counts read every 100 ms)
for each device (the names ``/proc/diskstats`` uses: all its requests, discards and flushes
included) and for its reads and its writes apart (entities ``<device>:read``,
``<device>:write``). An entity without requests in an interval has no sample for it, so the
bundle's means are over the intervals that had requests, not diluted by idle ones.

Where eBPF cannot be used (not root, no ``bpftrace``, no tracefs, the kernel refuses the
program) the collector stays in the run without figures and the summary says why; the block
collector's mean awaits and mean request sizes stand in (:func:`request_shape_captured`
tells a capture's summary whether to say so, in the words of :data:`MEANS_ONLY`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import Collector, Sample, Target
from sim.registry import (
    ROLE_DEVICE_LATENCY,
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
    collector_options,
    register_collector,
)
from storage.collectors import BlockOptions
from storage.collectors.blocklatency_reader import INFLIGHT_MS, BpftraceReader
from storage.collectors.blocklatency_script import (
    RequestCounts,
    bpftrace_script,
    entity_figures,
    kernel_dev,
    tick_entities,
    tracepoint_offsets,
)
from storage.devices import DeviceResolver

SOURCE = "blocklatency"
TRACEFS = Path("/sys/kernel/tracing")
SYS_CLASS_BLOCK = Path("/sys/class/block")
#: How long a sample waits for bpftrace's print (a print takes under a millisecond here; the
#: sampler allows a sample 2 s by default).
PRINT_WAIT_S = 0.5
FALLBACK = "iostat mean await used"
#: What the bundle says instead of the request shape where eBPF could not be used.
MEANS_ONLY = "block: no request-size distribution (iostat means only)"


# --------------------------------------------------------------------------- availability


def ebpf_unavailable(tracefs: Path = TRACEFS) -> str | None:
    """Why bpftrace cannot trace the block layer here, or None when it can (mounting tracefs
    first where it is not mounted)."""
    if os.geteuid() != 0:
        return "not running as root (eBPF tracing needs CAP_BPF and CAP_PERFMON)"
    if shutil.which("bpftrace") is None:
        return "bpftrace not found on PATH (Debian package bpftrace)"
    if not (tracefs / "events" / "block" / "block_rq_issue").exists():
        mounted = subprocess.run(
            ["mount", "-t", "tracefs", "nodev", str(tracefs)], capture_output=True, text=True
        )
        if mounted.returncode != 0:
            why = mounted.stderr.strip() or f"exit {mounted.returncode}"
            return f"tracefs is not mounted at {tracefs} and mounting it failed: {why}"
        if not (tracefs / "events" / "block" / "block_rq_issue").exists():
            return f"the kernel offers no block:block_rq_issue tracepoint under {tracefs}"
    if not (tracefs / "events" / "signal" / "signal_generate").exists():
        return f"the kernel offers no signal:signal_generate tracepoint under {tracefs}"
    return None


# --------------------------------------------------------------------------- the collector


class BlockLatencyCollector(Collector):
    """Per-device latency quantiles each interval (see the module's notes). ``devices``:
    name -> (major, minor) as ``/sys/class/block/<name>/dev`` gives them."""

    source: ClassVar[str] = SOURCE

    def __init__(
        self, devices: Mapping[str, tuple[int, int]], sys_class_block: Path = SYS_CLASS_BLOCK
    ) -> None:
        self.devices = dict(devices)
        self.sys_class_block = sys_class_block
        self.names = {kernel_dev(*numbers): name for name, numbers in self.devices.items()}
        self.unavailable: str | None = None
        #: Per device (kernel dev_t): completions whose count in flight came out below 1.
        self.clamped: dict[int, int] = {}
        self._reader: BpftraceReader | None = None

    async def start(self, now: float) -> None:
        if self._reader is not None:
            raise CollectorError("blocklatency collector: started twice")
        self.unavailable = ebpf_unavailable()
        if self.unavailable is not None:
            return
        try:
            inflight = {
                dev: self.sys_class_block / name / "inflight" for dev, name in self.names.items()
            }
            offsets = tracepoint_offsets(TRACEFS)
            script = bpftrace_script(sorted(self.names), os.getpid(), offsets)
            self._reader = BpftraceReader(script, inflight)
        except (OSError, ValueError) as exc:
            self.unavailable = f"cannot start bpftrace: {exc}"
        # Not waiting for bpftrace to attach (about a second): that overlaps the run's
        # connecting and loading, and intervals closed before it has attached have no figures.

    async def sample(self, now: float) -> list[Sample]:
        reader = self._reader
        if reader is None:
            return []
        if reader.ready.is_set() and reader.failure is None:
            await _print_now(reader)
        ticks = reader.take()
        if reader.failure is not None and self.unavailable is None:
            self.unavailable = reader.failure
        if not reader.ready.is_set() or self.unavailable is not None:
            return []
        interval: dict[str, RequestCounts] = {}
        for tick in ticks:
            for dev, clamped in tick.clamped.items():
                self.clamped[dev] = self.clamped.get(dev, 0) + clamped
            for dev in tick.counts:
                if (name := self.names.get(dev)) is None:
                    continue
                for entity, counts in tick_entities(name, tick, dev).items():
                    interval.setdefault(entity, RequestCounts()).merge(counts)
        return [
            Sample(self.source, entity, entity_figures(counts), t=now)
            for entity, counts in sorted(interval.items())
        ]

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            import asyncio  # here: see _print_now

            await asyncio.to_thread(reader.stop)
            if reader.failure is not None and self.unavailable is None:
                self.unavailable = reader.failure

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "source": self.source,
            "devices": {name: f"{ma}:{mi}" for name, (ma, mi) in self.devices.items()},
            "measures": "block request issue (to the driver) to completion, per device and "
            "direction; excludes I/O scheduler queueing, which iostat's await includes",
            "resolution": "buckets of 1/8 of a power of two (quantiles within ±6 %)",
            "request_shape": "requests issued per size bucket (KiB, powers of two to 1,024), "
            "the share starting where the previous one in the same direction ended, and the "
            "requests in flight (mean: at each issue; max: the kernel's inflight count read "
            f"every {INFLIGHT_MS} ms)",
            "load": "one bpftrace process: two block tracepoints, counts printed at each "
            "interval's close (asked by a signal, seen on signal:signal_generate); the "
            f"kernel's inflight files read every {INFLIGHT_MS} ms",
            "inflight_clamped": {
                name: self.clamped.get(dev, 0) for dev, name in sorted(self.names.items())
            },
        }
        if self.unavailable is not None:
            facts["unavailable"] = self.unavailable
        return facts

    def findings(
        self,
        means: Mapping[str, Mapping[str, float]],
        op_counts: Mapping[str, int],
        measured_s: float,
    ) -> tuple[dict[str, Any], list[str]]:
        if self.unavailable is not None:
            why = f"device latency percentiles unavailable: {self.unavailable}; {FALLBACK}"
            return {"unavailable": self.unavailable}, [why]
        return {}, []


async def _print_now(reader: BpftraceReader) -> None:
    """Have bpftrace print its counts and wait for the print, :data:`PRINT_WAIT_S` at most."""
    # Imported here: the registry imports every collector to read a scenario, which needs no
    # event loop (dbsim validate, report, import; issue #25).
    import asyncio

    loop = asyncio.get_running_loop()
    printed: asyncio.Future[None] = loop.create_future()

    def done() -> None:
        if not printed.done():
            printed.set_result(None)

    def wake() -> None:  # called from the reading thread, maybe after the loop closed
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(done)

    reader.request_print(wake)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(printed, PRINT_WAIT_S)


def request_shape_captured(collectors: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a summary's ``collectors`` descriptions say the request shape (sizes,
    sequential share, requests in flight) was traced: this source ran with eBPF throughout.
    Where not, a capture says :data:`MEANS_ONLY`."""
    return any(d.get("source") == SOURCE and "unavailable" not in d for d in collectors)


def _device_numbers(name: str, sys_class_block: Path) -> tuple[int, int] | None:
    try:
        major, _, minor = (sys_class_block / name / "dev").read_text().strip().partition(":")
        return int(major), int(minor)
    except (OSError, ValueError):
        return None


def auto_blocklatency(
    target: Target,
    options: dict[str, Any],
    resolver: DeviceResolver | None = None,
    sys_class_block: Path = SYS_CLASS_BLOCK,
) -> list[Collector]:
    """The collector for the block devices the block collector watches: the names of
    ``collectors.block.devices`` when given, else the devices under the target's paths."""
    names = collector_options(BlockOptions, "block", options).devices
    devices: dict[str, tuple[int, int]] = {}
    if names:
        for name in names:
            if (numbers := _device_numbers(name, sys_class_block)) is not None:
                devices[name] = numbers
    else:
        resolver = resolver or DeviceResolver()
        for path in target.storage_paths():
            try:
                resolved = resolver.resolve(path)
            except OSError:  # the block collector reports the path it cannot resolve
                continue
            for device in resolved.devices:
                devices.setdefault(device.name, (device.major, device.minor))
    return [BlockLatencyCollector(devices, sys_class_block)] if devices else []


def _ms(key: str, label: str) -> Figure:
    return Figure(key, label, "ms", 3, grouped=False)


_FIGURES = (
    _ms("mean_ms", "mean"),
    _ms("p50_ms", "p50"),
    _ms("p95_ms", "p95"),
    _ms("p99_ms", "p99"),
    Figure("n", "requests per interval"),
)
_SHAPE = (
    Figure("seq_pct", "sequential", "%", 1, grouped=False),
    Figure("inflight_mean", "in flight at issue", "", 2, grouped=False),
)

register_collector(
    CollectorEntry(
        source=SOURCE,
        auto=auto_blocklatency,
        summary="per-device p50/p95/p99 of block I/O latency (issue to completion) from the "
        "kernel's block tracepoints, with bpftrace (root)",
        display=Display(
            title="device latency",
            entity_label="device",
            live=_FIGURES[1:4],
            console=_FIGURES,
            console_title="device latency percentiles (eBPF, issue to completion; mean of "
            "the intervals' quantiles, measured window)",
            report=_FIGURES + _SHAPE,
            report_caption="Device latency percentiles and request shape (eBPF, block "
            "request issue to completion; time-weighted mean of each interval's quantile, "
            "sequential share and mean requests in flight at issue; samples {samples})",
            ui=(UiFigure("device_p99_ms", "Device p99 (ms)", "p99_ms"),),
        ),
        role=ROLE_DEVICE_LATENCY,
        correlate=(_ms("p99_ms", "device p99"), _ms("p50_ms", "device p50")),
    )
)
