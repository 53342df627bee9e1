"""``NfsClientCollector``: nfsiostat's figures for one NFS mount, once per interval.

Load on the target: one read of ``/proc/self/mountstats`` per interval (kernel memory, a few
kilobytes per mount); nothing at all reaches the NFS server, since the kernel keeps these
counters on the client. ``describe()`` also reads three host tunables once (``/proc/sys``,
``/sys/module``). The file is read on the event loop, like ``/proc/diskstats``: it is served
from memory and does not wait on the server.

Samples per interval (arithmetic in :mod:`storage.collectors.nfs_rates`): one per NFS
operation that completed calls in the interval, entity ``"<mount>:<OP>"`` (``READ``,
``GETATTR``, NFSv4 ``SEQUENCE`` …) with ``ops_s``, ``kB_s``, ``kB_per_op``, ``retrans``,
``retrans_pct``, ``avg_rtt_ms``, ``avg_exe_ms``, ``avg_queue_ms``, ``timeouts`` and, with RPC
iostats 1.1, ``errors`` and ``errors_pct``; and one for the mount, entity ``"<mount>"``, with
``read_kB_s``, ``write_kB_s``, ``ops_s`` and the transport counts (``connections``,
``connects``, ``bad_xids``, ``max_slots``, ``rpc_sends_s``, ``rpc_bklog`` …).

Gaps (:func:`sim.protocols.gap_sample`) instead of figures:

- ``GAP_RESET`` for the mount when a counter it is computed from went down (a remount, a
  reboot, a transport replaced: :func:`~storage.collectors.nfs_rates.mount_reset`), its ops
  then not reported; for ``"<mount>:<OP>"`` when only that op's bytes or times went down.
  The detail is ``"<counter>: <old> -> <new>"``; the reading is the new baseline.
- ``GAP_UNREADABLE`` for the mount when its section of the file is malformed, cut short or
  lacks an op the previous reading had; the detail quotes the line. The baseline stays, so
  the next readable interval's figures span the time since the last good reading.

Other mounts are never affected: each section of the file is read on its own
(:mod:`storage.collectors.mountstats`). A mount point that is not mounted, or not with NFS,
fails the sample with a ``CollectorError``.

``describe()`` lists the mount options and ``warnings``: plain sentences where the options
(or the host's NFS tunables) differ from the vendor advice in seed 002
(:mod:`storage.collectors.nfs_advice`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, Target, gap_sample
from sim.registry import (
    ROLE_NFS,
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
    collector_options,
    register_collector,
)
from storage.collectors.mountstats import (
    KERNEL_LONG_BITS,
    MOUNTSTATS,
    MountStats,
    MountstatsFile,
    read_mountstats,
)
from storage.collectors.nfs_advice import (
    SEED_SOURCE,
    option_summary,
    option_warnings,
    read_tunables,
)
from storage.collectors.nfs_rates import Figures, interval_figures, mount_reset
from storage.devices import DeviceResolver

LOAD = "one read of /proc/self/mountstats per interval; nothing on the NFS server"


class NfsClientCollector(Collector):
    """nfsiostat's figures for the NFS mount at ``mount_point`` (see the module docstring).

    ``mountstats_path`` is read instead of ``/proc/self/mountstats`` (tests rewrite a file);
    ``tunables`` replaces :func:`read_tunables` in ``describe()``; ``long_bits`` is the width
    of the kernel's ``unsigned long`` (this host's by default). The interval is the difference
    of the ``now`` values given to ``start``/``sample``.
    """

    source: ClassVar[str] = "nfs"

    def __init__(
        self,
        mount_point: str | Path,
        mountstats_path: Path = MOUNTSTATS,
        tunables: dict[str, int] | None = None,
        long_bits: int = KERNEL_LONG_BITS,
    ) -> None:
        self.mount_point = os.path.normpath(str(mount_point))
        self.mountstats_path = Path(mountstats_path)
        self.long_bits = long_bits
        self._tunables = tunables
        self._where = f"nfs collector ({self.mount_point})"
        self._prev: MountStats | None = None  # the baseline: the last readable reading
        self._prev_now: float | None = None
        self._absent = False  # at _prev_now the mount point was not mounted
        self._last: MountStats | None = None

    def _reading(self, what: str) -> MountstatsFile:
        try:
            return read_mountstats(self.mountstats_path, self.long_bits)
        except OSError as exc:
            raise CollectorError(
                f"{self._where}: cannot read {self.mountstats_path} ({what}): {exc}"
            ) from exc

    def _gone(self, reading: MountstatsFile, verb: str) -> CollectorError:
        why = f"{self._where}: {verb} (not in {self.mountstats_path})"
        if reading.orphans:
            why += f"; unreadable: {reading.orphans[0].detail}"
        return CollectorError(why)

    def _mount(self, reading: MountstatsFile, what: str) -> MountStats | None:
        """The mount in ``reading``; None when its section is unreadable. Raises when the
        mount point is not mounted, or not with NFS."""
        stats = reading.get(self.mount_point)
        if stats is None:
            if self.mount_point in reading.unreadable:
                return None
            raise self._gone(reading, "not mounted" if what != "sample" else "no longer mounted")
        if not stats.is_nfs:
            raise CollectorError(f"{self._where}: a {stats.fstype} mount, not NFS")
        self._last = stats
        return stats

    async def start(self, now: float) -> None:
        # An unreadable section leaves no baseline: the first readable sample takes it.
        self._prev = self._mount(self._reading("baseline"), "baseline")
        self._prev_now, self._absent = now, False

    async def sample(self, now: float) -> list[Sample]:
        if self._prev_now is None:
            raise CollectorError("nfs collector: sample() called before start()")
        interval = now - self._prev_now
        if not interval > 0:
            raise CollectorError(
                f"nfs collector: clock did not advance ({self._prev_now} -> {now})"
            )
        reading = self._reading("sample")
        try:
            curr = self._mount(reading, "sample")
        except CollectorError:
            if self.mount_point not in reading and reading.orphans:
                # A header too broken to name its mount point may be this mount's.
                bad = reading.orphans[0].detail
                return [self._gap(GAP_UNREADABLE, f"not listed; unreadable: {bad}", now)]
            # Unmounted: whatever appears there next is a new mount.
            self._prev, self._prev_now, self._absent = None, now, True
            raise
        if curr is None:  # the baseline stays: the counters went on
            return [self._gap(GAP_UNREADABLE, reading.unreadable[self.mount_point].detail, now)]
        prev = self._prev
        if prev is None:
            # A mount made since the last reading: its counters all fall within the interval
            # (age is in whole seconds, hence the 1 s slack). Otherwise take a baseline.
            if not self._absent or curr.age_s is None or curr.age_s > interval + 1:
                self._prev, self._prev_now, self._absent = curr, now, False
                return []
        elif mount_reset(prev, curr) is None:
            missing = [op for op in prev.ops if op not in curr.ops]
            if missing:  # the kernel lists a mount's ops for as long as it is mounted
                why = f"op {missing[0]} of the previous reading is missing (a cut read?)"
                return [self._gap(GAP_UNREADABLE, why, now)]
        figures = interval_figures(prev, curr, interval)
        self._prev, self._prev_now, self._absent = curr, now, False  # resets re-baseline too
        return self._samples(figures, curr, now)

    def _gap(self, gap: str, detail: str, now: float, op: str = "") -> Sample:
        entity = f"{self.mount_point}:{op}" if op else self.mount_point
        return gap_sample(self.source, entity, gap, detail, now)

    def _samples(self, figures: Figures, curr: MountStats, now: float) -> list[Sample]:
        meta = {"device": curr.device, "fstype": curr.fstype, "vers": curr.options.get("vers", "")}
        if figures.mount is None:
            samples = [self._gap(GAP_RESET, str(figures.reset), now)]
        else:
            samples = [Sample(self.source, self.mount_point, figures.mount, t=now, meta=meta)]
        samples.extend(
            Sample(self.source, f"{self.mount_point}:{op}", values, t=now, meta={**meta, "op": op})
            for op, values in figures.ops.items()
            if values["ops_s"] > 0
        )
        samples.extend(
            self._gap(GAP_RESET, str(reset), now, op) for op, reset in figures.op_resets.items()
        )
        return samples

    async def stop(self) -> None:
        self._prev = None
        self._prev_now = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "mount_point": self.mount_point,
            "mountstats": str(self.mountstats_path),
            "load": LOAD,
        }
        try:
            if self._last is not None:
                stats: MountStats | None = self._last
            else:
                reading = self._reading("describe")
                stats = self._mount(reading, "describe")
                if stats is None:
                    bad = reading.unreadable[self.mount_point].detail
                    raise CollectorError(f"{self._where}: unreadable: {bad}")
        except CollectorError as exc:
            return out | {"error": str(exc), "warnings": []}
        assert stats is not None
        tunables = self._tunables if self._tunables is not None else read_tunables()
        return out | {
            "device": stats.device,
            "fstype": stats.fstype,
            "statvers": stats.statvers,
            "rpc_iostats": stats.rpc_iostats,
            "program": stats.program,
            "connections": stats.connections,
            "options": option_summary(stats),
            "opts": dict(stats.options),
            "tunables": tunables,
            "warnings": option_warnings(stats, tunables),
            "advice_source": SEED_SOURCE,
        }


class NfsOptions(BaseModel):
    """Which NFS mounts the nfs collector watches."""

    model_config = ConfigDict(extra="forbid")

    mounts: list[str] = Field(
        default_factory=list,
        description="Watch these NFS mount points instead of resolving the target's paths.",
    )


def auto_nfs(
    target: Target,
    options: dict[str, Any],
    resolver: DeviceResolver | None = None,
    mountstats_path: Path = MOUNTSTATS,
) -> list[Collector]:
    """One collector per NFS mount under ``target.storage_paths()`` (each mount once).

    ``options["nfs"].mounts`` (mount points) wins over resolution. Returns ``[]`` when no
    storage path is on NFS.
    """
    mounts = collector_options(NfsOptions, "nfs", options).mounts
    if mounts:
        points = [os.path.normpath(m) for m in mounts]
    else:
        resolver = resolver or DeviceResolver()
        points = []
        for path in target.storage_paths():
            try:
                resolved = resolver.resolve(path)
            except OSError as exc:
                raise CollectorError(f"collector nfs: cannot resolve {path}: {exc}") from exc
            if resolved.kind == "nfs" and resolved.mount_point:
                points.append(resolved.mount_point)
    return [NfsClientCollector(p, mountstats_path) for p in dict.fromkeys(points)]


def _auto(target: Target, options: dict[str, Any]) -> list[Collector]:
    return auto_nfs(target, options)


register_collector(
    CollectorEntry(
        source="nfs",
        auto=_auto,
        summary="nfsiostat figures per NFS op and mount under the target, from "
        "/proc/self/mountstats",
        options_model=NfsOptions,
        role=ROLE_NFS,
        display=Display(
            title="NFS client",
            ui=(
                UiFigure("iops", "IOPS", "ops_s"),
                UiFigure("read_mb_s", "Read MB/s", "read_kB_s", 1 / 1024),
                UiFigure("write_mb_s", "Write MB/s", "write_kB_s", 1 / 1024),
                # per operation: the client's time per call (queue + round trip) …
                UiFigure("read_await_ms", "Read await (ms)", "avg_exe_ms"),
                # … and the round trip alone (the server and the network): where the two part,
                # the calls queued in the client (slots, nconnect)
                UiFigure("rtt_ms", "RTT (ms)", "avg_rtt_ms"),
            ),
        ),
        correlate=(
            Figure("avg_rtt_ms", "avg RTT", "ms", 2),
            Figure("avg_exe_ms", "avg exe", "ms", 2),
        ),
        ios_figure="ops_s",
        legacy_keys={"nfs_mounts": "mounts"},
    )
)
