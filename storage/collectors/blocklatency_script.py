"""The ``blocklatency`` collector's bpftrace program and the arithmetic on what it prints.

Per device (kernel dev_t) and direction (read, write, other: flushes, discards) the program
counts, and prints and clears when the collector asks (:data:`PRINT_SIGNAL` sent by the
collector's process: ``blocklatency_reader.py``):

- ``@lat[dev, dir, e, m]``: completed requests by latency bucket (issue to completion; the
  nanoseconds halved ``e`` times until below 16 leave ``m`` in 8..15);
- ``@size[dev, dir, b]``: requests issued with data by size, bucket ``b`` being the first of
  :data:`SIZE_BOUNDS_KIB` the size is at most (9: above the last, 1 MiB);
- ``@seq[dev, dir]``: of those, the ones starting at the sector where the previous request
  with data on the device in the same direction ended;
- ``@depth[dev, dir]``: the sum, over the completed requests, of the requests in flight on
  the device when each was issued, itself included;
- ``@clamped[dev]``: how many of those came out below 1 and were counted as 1.

**Requests in flight.** bpftrace 0.17 updates a map value by reading it and writing it back,
not atomically, and the kernel skips a tracing program that fires while another runs on the
same CPU (an interrupt's completion during an issue's program). A counter incremented at
issue and decremented at completion therefore drifts: on this machine by hundreds within
seconds (a lost decrement is never given back). So the program keeps only a per-device count
of issues, and each request remembers that count at its issue. At its completion the count
has grown by the requests issued while it was in flight; with itself that is ``L``. Summed
over requests, ``sum(L)`` equals the sum over issues of the requests in flight at each issue
(each pair "x in flight when r was issued" counted once from either side), so ``sum(L) / n``
is the mean in flight at issue — and an event the kernel skipped costs one term, never a
drift. Requests issued before the program started are not counted (their completions find
no issue of theirs), nor is one of two requests in flight at the same sector (they share
the entry that remembers the issue). A count the racing updates left behind can make ``L`` come out below 1:
it is counted as 1 and the times are counted (``@clamped``).

The equality holds over a span that starts and ends with the device idle; over an interval,
requests in flight across its edges make its mean err either way (by about the requests then
in flight over the interval's count), unbiased over many intervals.

The single highest count at an issue cannot be kept this way (``L`` of a slow request counts
every request that came and went while it waited). ``inflight_max`` is therefore the
kernel's own count instead: ``/sys/class/block/<dev>/inflight`` (reads plus writes issued to
the driver and not completed), read by the collector every 100 ms and at each print, and
kept per print in :attr:`Tick.kernel_inflight`; the interval's highest reading.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: What the collector sends bpftrace to have it print: a signal bpftrace ignores, seen by the
#: program on the kernel's ``signal:signal_generate`` tracepoint.
PRINT_SIGNAL = signal.SIGWINCH
READY = "blocklatency-ready"
TICK = "blocklatency-tick"
#: Upper bounds (KiB) of the request-size buckets; a last bucket holds what is above 1 MiB.
SIZE_BOUNDS_KIB = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
SIZE_KEYS = (*(f"size_kib_le_{kib}" for kib in SIZE_BOUNDS_KIB), "size_kib_gt_1024")
#: The program's direction codes (the issue's rwbs: its first operation letter after an
#: optional F, preflush) -> the collector's directions.
DIRECTIONS = {1: "r", 2: "w", 0: "other"}
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}

_LINE = re.compile(r"^@(lat|size|seq|depth|clamped)\[([0-9, ]+)\]: (\d+)$")
_KEY_ARITY = {"lat": 4, "size": 3, "seq": 2, "depth": 2, "clamped": 1}


def kernel_dev(major: int, minor: int) -> int:
    """The device number as the block tracepoints carry it (the kernel's internal dev_t:
    major in the bits above 20, unlike userspace's encoding)."""
    return (major << 20) | minor


#: The fields the program reads, per tracepoint, and the size each must have.
TRACEPOINT_FIELDS: dict[str, dict[str, int]] = {
    "block/block_rq_issue": {"dev": 4, "sector": 8, "nr_sector": 4, "bytes": 4, "rwbs": 2},
    "block/block_rq_complete": {"dev": 4, "sector": 8},
    "signal/signal_generate": {"sig": 4},
}
_FORMAT_FIELD = re.compile(r"field:[^;]*?(\w+)(?:\[\d*\])?;\s*offset:(\d+);\s*size:(\d+);")


def field_offsets(format_text: str, wanted: Mapping[str, int]) -> dict[str, int]:
    """The offsets of the ``wanted`` fields (name -> least size) in a tracepoint's record, from
    its ``format`` file's text; ValueError naming a field missing or smaller."""
    found = {m[1]: (int(m[2]), int(m[3])) for m in _FORMAT_FIELD.finditer(format_text)}
    offsets = {}
    for name, size in wanted.items():
        if name not in found or found[name][1] < size:
            raise ValueError(f"tracepoint field {name!r} missing or under {size} bytes")
        offsets[name] = found[name][0]
    return offsets


def tracepoint_offsets(tracefs: Path) -> dict[str, dict[str, int]]:
    """:func:`field_offsets` of each of :data:`TRACEPOINT_FIELDS` as this kernel lays them
    out (``<tracefs>/events/<tracepoint>/format``); OSError or ValueError where it cannot."""
    return {
        point: field_offsets((tracefs / "events" / point / "format").read_text(), wanted)
        for point, wanted in TRACEPOINT_FIELDS.items()
    }


def _field_reads(offsets: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """The program's reads of the tracepoints' fields, at their ``offsets`` in the record.

    Not by name (``args->dev``): bpftrace 0.17 compiles a named field by turning the event's
    format into C, parsing that with clang and rereading the kernel's list of events
    (/sys/kernel/tracing/available_events, 62 KB) about ten times per field: 113 rereads at
    each start with the fields by name, 33 by offset. Start to ready, 3 prints and exit,
    median of 20 at load 5-12: 0.21 CPU-s by name, 0.17 by offset (0.06 without ``args``).
    ``$c`` is the record's address; the direction is the rwbs's first two letters
    (82 R, 87 W, 70 F)."""
    issue, done = offsets["block/block_rq_issue"], offsets["block/block_rq_complete"]
    return {
        "dev": f"*(uint32 *)($c + {issue['dev']})",
        "issued": f"$sector = *(uint64 *)($c + {issue['sector']});\n"
        f"    $bytes = (uint64)*(uint32 *)($c + {issue['bytes']});\n"
        f"    $nr_sector = *(uint32 *)($c + {issue['nr_sector']});\n"
        f"    $r0 = *(uint8 *)($c + {issue['rwbs']}); $r1 = *(uint8 *)($c + {issue['rwbs'] + 1});",
        "completed": f"$dev = *(uint32 *)($c + {done['dev']});\n"
        f"  $sector = *(uint64 *)($c + {done['sector']});",
        "sig": f"*(int32 *)((uint64)args + {offsets['signal/signal_generate']['sig']})",
    }


def bpftrace_script(
    devs: Sequence[int], requester: int, offsets: Mapping[str, Mapping[str, int]]
) -> str:
    """The program for the devices numbered ``devs`` (kernel dev_t), printing when process
    ``requester`` sends :data:`PRINT_SIGNAL`; ``offsets``: :func:`tracepoint_offsets`."""
    only = " || ".join(f"$dev == {dev}" for dev in devs) or "0"
    reads = _field_reads(offsets)  # each probe names ``args`` once, no field by name
    # The device filter is an ``if`` rather than a predicate.
    # @end holds the next sector plus one, so that a device without a previous request (the
    # map's zero) never matches sector 0.
    return f"""
BEGIN {{ printf("{READY}\\n"); }}
tracepoint:block:block_rq_issue {{
  $c = (uint64)args; $dev = {reads["dev"]};
  if ({only}) {{
    {reads["issued"]}
    $dir = 0;
    if ($r0 == 82 || ($r0 == 70 && $r1 == 82)) {{ $dir = 1; }}
    else if ($r0 == 87 || ($r0 == 70 && $r1 == 87)) {{ $dir = 2; }}
    @issued[$dev]++;
    @start[$dev, $sector] = (nsecs, @issued[$dev], $dir);
    if ($bytes > 0) {{
      $b = 0; $top = (uint64)4096;
      while ($b < 9 && $bytes > $top) {{ $top = $top * 2; $b = $b + 1; }}
      @size[$dev, $dir, $b] = count();
      if (@end[$dev, $dir] == $sector + 1) {{ @seq[$dev, $dir] = count(); }}
      @end[$dev, $dir] = $sector + $nr_sector + 1;
    }}
  }}
}}
tracepoint:block:block_rq_complete {{
  $c = (uint64)args; {reads["completed"]}
  $req = @start[$dev, $sector];
  if ($req.0) {{
    delete(@start[$dev, $sector]);
    $e = 0; $m = nsecs - $req.0;
    while ($m >= 16) {{ $m = $m >> 1; $e = $e + 1; }}
    @lat[$dev, $req.2, $e, $m] = count();
    $depth = (int64)@issued[$dev] - (int64)$req.1 + 1;
    if ($depth < 1) {{ $depth = 1; @clamped[$dev] = count(); }}
    @depth[$dev, $req.2] = sum($depth);
  }}
}}
tracepoint:signal:signal_generate /pid == {requester} && {reads["sig"]} == {int(PRINT_SIGNAL)}/ {{
  print(@lat); print(@size); print(@seq); print(@depth); print(@clamped);
  clear(@lat); clear(@size); clear(@seq); clear(@depth); clear(@clamped);
  printf("{TICK}\\n");
}}
END {{
  clear(@start); clear(@end); clear(@issued);
  clear(@lat); clear(@size); clear(@seq); clear(@depth); clear(@clamped);
}}
"""


@dataclass
class LatencyHistogram:
    """Request counts per bucket ``(exponent, mantissa)``: latencies in
    ``[m << e, (m + 1) << e)`` ns."""

    buckets: dict[tuple[int, int], int] = field(default_factory=dict)

    def add(self, bucket: tuple[int, int], count: int) -> None:
        self.buckets[bucket] = self.buckets.get(bucket, 0) + count

    def merge(self, other: LatencyHistogram) -> None:
        for bucket, count in other.buckets.items():
            self.add(bucket, count)

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def mean_ns(self) -> float | None:
        """The mean latency with each request at its bucket's midpoint (within ±6 %), or
        None without requests: the like-for-like figure beside iostat's mean await."""
        total = self.count
        if total == 0:
            return None
        weighted = sum(
            count * ((mantissa << exponent) + ((mantissa + 1) << exponent)) / 2
            for (exponent, mantissa), count in self.buckets.items()
        )
        return weighted / total

    def quantile_ns(self, q: float) -> float | None:
        """The midpoint of the bucket holding the ``q``-th request by latency (nearest rank),
        or None without requests."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total - 1e-9))
        seen = 0
        for exponent, mantissa in sorted(self.buckets, key=lambda b: b[1] << b[0]):
            seen += self.buckets[(exponent, mantissa)]
            if seen >= rank:
                return ((mantissa << exponent) + ((mantissa + 1) << exponent)) / 2
        raise AssertionError("unreachable: the ranks add up to the total")


@dataclass
class RequestCounts:
    """An entity's counts over one print or more: completions by latency, issues with data
    by size and how many of them were sequential, the in-flight sum over the completions
    and the highest of the kernel's in-flight counts read meanwhile."""

    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    sizes: list[int] = field(default_factory=lambda: [0] * len(SIZE_KEYS))
    sequential: int = 0
    depth_sum: int = 0
    inflight_peak: int | None = None

    def merge(self, other: RequestCounts) -> None:
        self.latency.merge(other.latency)
        self.sizes = [mine + theirs for mine, theirs in zip(self.sizes, other.sizes, strict=True)]
        self.sequential += other.sequential
        self.depth_sum += other.depth_sum
        if other.inflight_peak is not None:
            self.inflight_peak = max(self.inflight_peak or 0, other.inflight_peak)

    @property
    def issued_with_data(self) -> int:
        return sum(self.sizes)

    @property
    def empty(self) -> bool:
        return self.latency.count == 0 and self.issued_with_data == 0


@dataclass
class Tick:
    """What one print of the program holds: per device and direction the counts, and per
    device the in-flight counts clamped to 1; and the highest of the kernel's counts of
    requests in flight per device read since the print before (the collector's reader adds
    it)."""

    counts: dict[int, dict[str, RequestCounts]] = field(default_factory=dict)
    clamped: dict[int, int] = field(default_factory=dict)
    kernel_inflight: dict[int, int] = field(default_factory=dict)


def parse_tick(lines: Iterable[str]) -> Tick:
    """One tick's printed maps (lines that are not map entries are skipped: bpftrace's
    banner, blank lines, markers)."""
    tick = Tick()
    for line in lines:
        found = _LINE.match(line.strip())
        if found is None:
            continue
        name, key_text, value_text = found.groups()
        key = [int(part) for part in key_text.split(",")]
        value = int(value_text)
        if len(key) != _KEY_ARITY[name]:
            continue
        if name == "clamped":
            tick.clamped[key[0]] = tick.clamped.get(key[0], 0) + value
            continue
        per_dir = tick.counts.setdefault(key[0], {})
        counts = per_dir.setdefault(DIRECTIONS.get(key[1], "other"), RequestCounts())
        if name == "lat":
            counts.latency.add((key[2], key[3]), value)
        elif name == "size":
            counts.sizes[min(key[2], len(SIZE_KEYS) - 1)] += value
        elif name == "seq":
            counts.sequential += value
        else:
            counts.depth_sum += value
    return tick


def device_entities(device: str, per_dir: Mapping[str, RequestCounts]) -> dict[str, RequestCounts]:
    """The counts of a device's entities over the same span: the device (every request),
    its reads and its writes; those without requests left out."""
    every = RequestCounts()
    for direction_counts in per_dir.values():
        every.merge(direction_counts)
    entities = {device: every}
    for short, label in (("r", "read"), ("w", "write")):
        if short in per_dir:
            entities[f"{device}:{label}"] = per_dir[short]
    return {entity: counts for entity, counts in entities.items() if not counts.empty}


def tick_entities(device: str, tick: Tick, dev: int) -> dict[str, RequestCounts]:
    """:func:`device_entities` of device ``dev`` (named ``device``) in one tick, each with
    the kernel's in-flight count of that tick (copies: a tick's counts are merged into an
    interval's later)."""
    copies = {}
    for short, counts in tick.counts.get(dev, {}).items():
        copy = RequestCounts()
        copy.merge(counts)
        copies[short] = copy
    entities = device_entities(device, copies)
    for counts in entities.values():
        counts.inflight_peak = tick.kernel_inflight.get(dev)
    return entities


def latency_figures(hist: LatencyHistogram) -> dict[str, float]:
    """An entity's latency values: its mean and quantiles (ms) and how many requests they
    are of."""
    values: dict[str, float] = {"n": float(hist.count)}
    mean = hist.mean_ns()
    if mean is not None:
        values["mean_ms"] = round(mean / 1e6, 4)
    for name, q in QUANTILES.items():
        ns = hist.quantile_ns(q)
        if ns is not None:
            values[f"{name}_ms"] = round(ns / 1e6, 4)
    return values


def shape_figures(counts: RequestCounts) -> dict[str, float]:
    """An entity's request shape: issues by size (every bucket, zeros included: a count the
    program made), the sequential share of them, and the requests in flight (at issue: the
    mean over the completions; the highest of the kernel's counts read meanwhile). A figure
    without requests to be computed from is left out."""
    values = {key: float(count) for key, count in zip(SIZE_KEYS, counts.sizes, strict=True)}
    if counts.issued_with_data:
        values["seq_pct"] = round(100.0 * counts.sequential / counts.issued_with_data, 2)
    if counts.latency.count:
        values["inflight_mean"] = round(counts.depth_sum / counts.latency.count, 3)
    if counts.inflight_peak is not None:
        values["inflight_max"] = float(counts.inflight_peak)
    return values


def entity_figures(counts: RequestCounts) -> dict[str, float]:
    """Everything an entity's sample holds."""
    return {**latency_figures(counts.latency), **shape_figures(counts)}
