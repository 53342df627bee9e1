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
- ``GAP_UNREADABLE`` for the mount when its section of the file is malformed, cut short,
  lists fewer ops than the kernel does (:mod:`storage.collectors.mountstats_ops`) or than the
  previous reading; the detail quotes the line. The baseline stays, so the next readable
  interval's figures span the time since the last whole reading. Also when the reading may
  have been cut before the mount (:func:`~storage.collectors.nfs_listing.unlisted_why`): it is "no longer mounted" only when
  the kernel plainly dropped it.
- ``GAP_UNREADABLE`` too for an interval that has no whole reading to start from (issue #30):
  the first reading was unreadable or cut (the collector then waits for a whole one, which
  becomes the baseline); the baseline lacked ops this reading lists (it was cut where the
  kernel's list may end: this reading replaces it); a mount not listed by the reading
  before, mounted for longer than the interval. Every interval of a listed mount ends with
  its figures or a gap marker, never neither.

The first reading is held to what every later one is: a baseline is only ever a whole
reading, so no interval counts calls made before it.

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
from storage.collectors.nfs_listing import MOUNTINFO, nfs_mounted, unlisted_why
from storage.collectors.nfs_rates import Figures, interval_figures, mount_reset
from storage.devices import DeviceResolver

LOAD = "one read of /proc/self/mountstats per interval; nothing on the NFS server"


class NfsClientCollector(Collector):
    """nfsiostat's figures for the NFS mount at ``mount_point`` (see the module docstring).

    ``mountstats_path`` is read instead of ``/proc/self/mountstats`` (tests rewrite a file),
    ``mountinfo_path`` instead of ``/proc/self/mountinfo`` (read by ``start`` only, when the
    mount is not listed: mounted with NFS there, the collector waits for a whole reading
    instead of refusing); ``tunables`` replaces :func:`read_tunables` in ``describe()``; ``long_bits`` is the width
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
        mountinfo_path: Path = MOUNTINFO,
    ) -> None:
        self.mount_point = os.path.normpath(str(mount_point))
        self.mountstats_path = Path(mountstats_path)
        self.mountinfo_path = Path(mountinfo_path)
        self.long_bits = long_bits
        self._tunables = tunables
        self._where = f"nfs collector ({self.mount_point})"
        self._prev: MountStats | None = None  # the baseline: the last whole reading
        self._prev_now: float | None = None
        self._absent = False  # at _prev_now the mount point was not mounted
        self._waiting = ""  # why there is no baseline yet (start found no whole reading)
        self._followers: frozenset[str] | None = None  # listed after it when last listed
        self._unlisted = False  # the last reading did not list it (a gap was given)
        self._lost: tuple[MountStats, float] | None = None  # before "no longer mounted"
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

    def _cut_before(self, reading: MountstatsFile) -> str | None:
        """Why ``reading``, which does not list the mount, may have lost it rather than the
        kernel (:func:`~storage.collectors.nfs_listing.unlisted_why`); None: not mounted."""
        return unlisted_why(reading, self._followers, again=self._unlisted)

    def _mount(self, reading: MountstatsFile, what: str) -> MountStats | None:
        """The mount in ``reading``; None when its section is unreadable or the reading may
        have been cut before it. Raises when the mount point is not mounted, or not NFS."""
        stats = reading.get(self.mount_point)
        if stats is None:
            if self.mount_point in reading.unreadable or self._cut_before(reading):
                return None
            raise self._gone(reading, "not mounted" if what != "sample" else "no longer mounted")
        if not stats.is_nfs:
            raise CollectorError(f"{self._where}: a {stats.fstype} mount, not NFS")
        self._last = stats
        order = reading.order
        self._followers = frozenset(order[order.index(self.mount_point) + 1 :])
        return stats

    def _unreadable_why(self, reading: MountstatsFile) -> str:
        bad = reading.unreadable.get(self.mount_point)
        if bad is not None:
            return bad.detail
        return f"not listed; {self._cut_before(reading)}"

    async def start(self, now: float) -> None:
        # No whole reading (its section unreadable, or the read cut before it): no baseline;
        # the first whole reading of a sample takes it.
        reading = self._reading("baseline")
        self._prev_now, self._absent, self._unlisted, self._lost = now, False, False, None
        try:
            self._prev = self._mount(reading, "baseline")
        except CollectorError:
            if self.mount_point in reading or not nfs_mounted(
                self.mountinfo_path, self.mount_point
            ):
                raise
            # Mounted with NFS, says the mount table, yet not listed: the reading lost it.
            self._prev, self._prev_now = None, now
            self._waiting = f"not listed, though {self.mountinfo_path} lists it with NFS"
            return
        self._waiting = "" if self._prev is not None else self._unreadable_why(reading)

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
            # Unmounted: whatever appears there next is a new mount, unless its age says it
            # never went away (the baseline is kept for that).
            if self._prev is not None:
                self._lost = (self._prev, now - interval)
            self._prev, self._prev_now, self._absent = None, now, True
            self._waiting, self._unlisted = "", False
            raise
        if curr is None:  # the baseline stays: the counters went on
            why = self._unreadable_why(reading)
            self._unlisted = self.mount_point not in reading.unreadable
            if self._prev is None:
                self._waiting = why
            return [self._gap(GAP_UNREADABLE, why, now)]
        self._unlisted = False
        prev, interval = self._baseline_for(curr, now, interval)
        if prev is None:
            # A mount made since the last reading: its counters all fall within the interval
            # (age is in whole seconds, hence the 1 s slack). Otherwise take a baseline.
            if not self._absent or curr.age_s is None or curr.age_s > interval + 1:
                why = self._no_baseline_why(curr, interval)
                self._prev, self._prev_now, self._absent, self._waiting = curr, now, False, ""
                return [self._gap(GAP_UNREADABLE, why, now)]
        else:
            gap = self._op_list_gap(prev, curr, now)
            if gap is not None:
                return [gap]
        figures = interval_figures(prev, curr, interval)
        self._prev, self._prev_now, self._absent, self._lost = curr, now, False, None
        return self._samples(figures, curr, now)  # resets re-baseline too

    def _baseline_for(
        self, curr: MountStats, now: float, interval: float
    ) -> tuple[MountStats | None, float]:
        """The baseline and the interval since it. A mount reported no longer mounted whose
        age says it was mounted all along (older than the time since that reading) was lost
        by that reading: its last baseline serves, if no counter went down since."""
        lost = self._lost
        if self._prev is None and self._absent and lost is not None and curr.age_s is not None:
            old, then = lost
            # Mounted since before that baseline (1 s slack for age's whole seconds).
            throughout = old.age_s is not None and curr.age_s + 1 >= old.age_s + (now - then)
            if throughout and mount_reset(old, curr) is None:
                return old, now - then
        return self._prev, interval

    def _op_list_gap(self, prev: MountStats, curr: MountStats, now: float) -> Sample | None:
        """The gap when the two readings list different ops (no counter went down): one that
        lost ops was cut (the baseline stays); a baseline that lacked some was (``curr``
        replaces it)."""
        if mount_reset(prev, curr) is not None:
            return None
        missing = [op for op in prev.ops if op not in curr.ops]
        if missing:  # the kernel lists a mount's ops for as long as it is mounted
            why = f"op {missing[0]} of the previous reading is missing (a cut read?)"
            return self._gap(GAP_UNREADABLE, why, now)
        added = [op for op in curr.ops if op not in prev.ops]
        if added:
            self._prev, self._prev_now, self._absent, self._lost = curr, now, False, None
            why = (
                f"op {added[0]} was not in the baseline reading (cut short?): no rate; "
                "this reading is the new baseline"
            )
            return self._gap(GAP_UNREADABLE, why, now)
        return None

    def _no_baseline_why(self, curr: MountStats, interval: float) -> str:
        if self._absent:
            # Not listed by the reading before, yet mounted for longer than the time since:
            # that reading lost it (or it was remounted in between, its first calls unseen).
            return (
                f"mounted {curr.age_s} s ago, not listed by the reading {interval:g} s "
                "before: no rate; this reading is the baseline"
            )
        return f"no whole reading before ({self._waiting}): this reading is the baseline"

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
                    bad = self._unreadable_why(reading)
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
