"""``NfsClientCollector``: nfsiostat's figures for one NFS mount, once per interval.

Load on the target: one read of ``/proc/self/mountstats`` per interval (kernel memory, a few
kilobytes per mount); nothing at all reaches the NFS server, since the kernel keeps these
counters on the client. ``describe()`` also reads three host tunables once (``/proc/sys``,
``/sys/module``). The file is read on the event loop, like ``/proc/diskstats``: it is served
from memory and does not wait on the server.

Samples per interval (arithmetic in :mod:`storage.collectors.mountstats`): one per NFS
operation that completed calls in the interval, entity ``"<mount>:<OP>"`` (``READ``,
``GETATTR``, NFSv4 ``SEQUENCE`` …) with ``ops_s``, ``kB_s``, ``kB_per_op``, ``retrans``,
``retrans_pct``, ``avg_rtt_ms``, ``avg_exe_ms``, ``avg_queue_ms``, ``timeouts`` and, with RPC
iostats 1.1, ``errors`` and ``errors_pct``; and one for the mount, entity ``"<mount>"``, with
``read_kB_s``, ``write_kB_s``, ``ops_s`` and the transport counts (``connections``,
``connects``, ``bad_xids``, ``max_slots``, ``rpc_sends_s``, ``rpc_bklog`` …).

``describe()`` lists the mount options and ``warnings``: plain sentences where the options
(or the host's NFS tunables) differ from the vendor advice in seed 002, tabled in
:data:`ADVICE` with the seed's own words.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sim.errors import CollectorError
from sim.protocols import GAP_RESET, GAP_UNREADABLE, Collector, Sample, Target, gap_sample
from sim.registry import CollectorEntry, register_collector
from storage.collectors.mountstats import (
    KERNEL_LONG_BITS,
    MOUNTSTATS,
    MountStats,
    MountstatsFile,
    read_mountstats,
)
from storage.collectors.nfs_rates import Figures, interval_figures, mount_reset
from storage.devices import DeviceResolver

SEED_SOURCE = (
    "shared/seeds/002_26a53d12d47323af.txt: Google Cloud NetApp Volumes, 'Otimizar o "
    "desempenho' (pt-BR), sections 'Ajustar o cliente' and 'Cargas de trabalho de computação "
    "de alto desempenho e alta simultaneidade'"
)
LOAD = "one read of /proc/self/mountstats per interval; nothing on the NFS server"


@dataclass(frozen=True)
class Advice:
    """One piece of seed 002's client advice: what it is about, the value it recommends,
    its words (pt-BR, quoted), what they say in English, and when the seed gives it."""

    key: str
    value: int | str
    quote: str
    meaning: str
    scope: str


_EXAMPLE = (
    "sudo mount -t nfs -o rw,hard,intr,rsize=1048576,wsize=1048576,vers=3,tcp,actimeo=600,"
    "nconnect=8 SERVER:/SHARE /mnt/netapp"
)
_HPC = "high-concurrency HPC/EDA NFS workloads (the seed's example mount)"

ADVICE: dict[str, Advice] = {
    a.key: a
    for a in (
        Advice(
            "nconnect", 8,
            "nconnect=8: usa várias conexões TCP por montagem, melhorando a largura de banda. "
            "[…] permite aumentar o número de sessões TCP compatíveis até um máximo de 16. "
            "[…] cada sessão TCP adicional adiciona uma fila para 128 solicitações pendentes",
            "use nconnect=8 (at most 16) TCP connections per mount; each adds a queue of 128 "
            "outstanding requests", _HPC,
        ),
        Advice("nconnect_max", 16, "até um máximo de 16", "nconnect goes up to 16", "Linux"),
        Advice(
            "actimeo", 600,
            "actimeo=600: aumenta o tempo em que os atributos são armazenados em cache no "
            "cliente, reduzindo as chamadas GETATTR.",
            "cache attributes for 600 s to cut GETATTR calls", _HPC,
        ),
        Advice("rsize", 1048576, _EXAMPLE, "read in 1 MiB transfers", _HPC),
        Advice("wsize", 1048576, _EXAMPLE, "write in 1 MiB transfers", _HPC),
        Advice("hard", "hard", _EXAMPLE, "a hard mount", _HPC),
        Advice("proto", "tcp", _EXAMPLE, "NFS over TCP (nconnect opens TCP sessions)", _HPC),
        Advice(
            "sunrpc.tcp_max_slot_table_entries", 128,
            "Recomendamos definir sunrpc.max_tpc_slot_table_enteries como 128 solicitações ou "
            "por conexão e não exceder 10.000 slots para todos os clientes NFS",
            "128 outstanding requests per connection (the seed misspells the sysctl, which "
            "Linux names sunrpc.tcp_max_slot_table_entries)", "Linux clients",
        ),
        Advice(
            "nfs.max_session_slots", 180,
            "Recomendamos mudar o valor compatível máximo por sessão para 180.",
            "raise the NFSv4.1 client's session slots from the default 64 to 180",
            "NFSv4.1 and later mounts",
        ),
        Advice(
            "net.ipv4.tcp_keepalive_time", 60,
            "sudo sysctl -w net.ipv4.tcp_keepalive_time=60",
            "detect unresponsive connections after 60 s", _HPC,
        ),
    )
}  # fmt: skip
"""Seed 002's NFS client advice (source: :data:`SEED_SOURCE`). The seed says nothing about
``nocto``, ``vers`` (its example uses 3 without recommending it) or ``timeo``; ``intr`` in
its example has been ignored by Linux since 2.6.25. No warning is given for those."""

TUNABLE_FILES: dict[str, tuple[str, str]] = {
    "sunrpc.tcp_max_slot_table_entries": ("proc_sys", "sunrpc/tcp_max_slot_table_entries"),
    "nfs.max_session_slots": ("sys_module", "nfs/parameters/max_session_slots"),
    "net.ipv4.tcp_keepalive_time": ("proc_sys", "net/ipv4/tcp_keepalive_time"),
}


def read_tunables(
    proc_sys: Path = Path("/proc/sys"), sys_module: Path = Path("/sys/module")
) -> dict[str, int]:
    """The host tunables seed 002 talks about, those that are readable here."""
    roots = {"proc_sys": Path(proc_sys), "sys_module": Path(sys_module)}
    out: dict[str, int] = {}
    for name, (root, rel) in TUNABLE_FILES.items():
        try:
            out[name] = int((roots[root] / rel).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _int(options: dict[str, str], key: str) -> int | None:
    value = options.get(key, "")
    return int(value) if value.isdigit() else None


def option_summary(stats: MountStats) -> dict[str, Any]:
    """The options that matter for performance, typed. ``nconnect`` is 1 when not set (the
    kernel prints it only when given); ``actimeo`` is set when the four attribute-cache
    timeouts (seconds) are equal; ``timeo`` is in tenths of a second."""
    opts = dict(stats.options)
    cache = {k: _int(opts, k) for k in ("acregmin", "acregmax", "acdirmin", "acdirmax")}
    soft = "soft" in opts or "softerr" in opts
    return {
        "vers": opts.get("vers"),
        "proto": opts.get("proto"),
        "nconnect": _int(opts, "nconnect") or 1,
        "rsize": _int(opts, "rsize"),
        "wsize": _int(opts, "wsize"),
        **cache,
        "actimeo": cache["acregmin"] if len(set(cache.values())) == 1 else None,
        "nocto": "nocto" in opts,
        "noac": "noac" in opts,
        "hard": not soft,
        "soft": soft,
        "timeo": _int(opts, "timeo"),
        "retrans": _int(opts, "retrans"),
        "sec": opts.get("sec"),
    }


def option_warnings(stats: MountStats, tunables: dict[str, int] | None = None) -> list[str]:
    """Plain sentences where ``stats``' options, or the host ``tunables``, differ from
    :data:`ADVICE`; an empty list when they follow it."""
    o = option_summary(stats)
    advised = {key: a.value for key, a in ADVICE.items()}
    out: list[str] = []
    n = o["nconnect"]
    if n < advised["nconnect"]:
        now = "nconnect is not set (one connection)" if n == 1 else f"nconnect={n}"
        out.append(
            f"{now}: seed 002 advises nconnect={advised['nconnect']} (at most "
            f"{advised['nconnect_max']}), each connection adding a queue of 128 outstanding "
            "requests."
        )
    for key in ("rsize", "wsize"):
        if o[key] is not None and o[key] < advised[key]:
            out.append(
                f"{key}={o[key]} is below the {key}={advised[key]} of seed 002's example mount."
            )
    short = {k: o[k] for k in ("acregmin", "acregmax", "acdirmin", "acdirmax")}
    if "noac" in stats.options or any(
        v is not None and v < advised["actimeo"] for v in short.values()
    ):
        shown = ", ".join(f"{k}={v}" for k, v in short.items() if v is not None)
        out.append(
            f"attribute caching ({shown or 'noac'}) is shorter than seed 002's "
            f"actimeo={advised['actimeo']} for high-concurrency HPC/EDA workloads, which cuts "
            "GETATTR calls (a database shared by several clients may need short caching)."
        )
    if o["proto"] and not str(o["proto"]).startswith(("tcp", "rdma")):  # tcp6, rdma6 too
        out.append(f"proto={o['proto']}: seed 002's example mount uses TCP, which nconnect needs.")
    if o["soft"]:
        out.append(
            "the mount is soft: seed 002's example mount is hard (a soft mount returns EIO to the "
            "application when the server does not answer in time)."
        )
    out.extend(_tunable_warnings(o, tunables or {}, advised))
    return out


def _tunable_warnings(
    o: dict[str, Any], tunables: dict[str, int], advised: dict[str, int | str]
) -> list[str]:
    out: list[str] = []
    slots = tunables.get("sunrpc.tcp_max_slot_table_entries")
    if slots is not None and slots > int(advised["sunrpc.tcp_max_slot_table_entries"]):
        out.append(
            f"sunrpc.tcp_max_slot_table_entries is {slots}: seed 002 recommends 128 outstanding "
            "requests per connection."
        )
    session = tunables.get("nfs.max_session_slots")
    vers = str(o["vers"] or "")
    v41 = vers.startswith("4.") and vers != "4.0"  # sessions arrived with NFSv4.1
    if v41 and session is not None and session < int(advised["nfs.max_session_slots"]):
        out.append(
            f"nfs max_session_slots is {session} for this NFSv{vers} mount: seed 002 "
            f"recommends {advised['nfs.max_session_slots']}."
        )
    keepalive = tunables.get("net.ipv4.tcp_keepalive_time")
    if keepalive is not None and keepalive > int(advised["net.ipv4.tcp_keepalive_time"]):
        out.append(
            f"net.ipv4.tcp_keepalive_time is {keepalive} s: seed 002 recommends 60 for "
            "high-concurrency HPC/EDA clients, to notice unresponsive connections sooner."
        )
    return out


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


def auto_nfs(
    target: Target,
    options: dict[str, Any],
    resolver: DeviceResolver | None = None,
    mountstats_path: Path = MOUNTSTATS,
) -> list[Collector]:
    """One collector per NFS mount under ``target.storage_paths()`` (each mount once).

    ``options["nfs_mounts"]`` (mount points) wins over resolution. Returns ``[]`` when no
    storage path is on NFS.
    """
    mounts = options.get("nfs_mounts")
    if mounts:
        if isinstance(mounts, str) or not all(isinstance(m, str) for m in mounts):
            raise CollectorError("collector nfs: option 'nfs_mounts' must be a list of paths")
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
    )
)
