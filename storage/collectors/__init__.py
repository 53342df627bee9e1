"""Storage collectors, registered with ``sim.registry`` on import (``sim.registry.
BUILTIN_PLUGINS`` lists the modules). The role a collector declares is how the analysis, the
judges and the report find its figures (``sim.registry.ROLE_*``); the others are correlated
through their declared ``correlate`` figures.

- ``block`` (:class:`storage.collectors.block.BlockDeviceCollector`, here; role ``device``):
  ``iostat -x`` figures from ``/proc/diskstats`` (``diskstats.py``) for the block devices
  under the target's storage paths (the file system's device, the disk of a partition, the
  devices beneath device-mapper and md). Options (:class:`BlockOptions`,
  ``collectors.block``): ``devices`` (names as in ``/proc/diskstats``) overrides the
  resolution.
- ``host`` (:class:`storage.collectors.host.HostCpuCollector`, here; role ``host-cpu``): CPU
  of the load generator's host and of dbsim itself, to tell a client-bound run from a
  storage-bound one.
- ``db`` (storage.collectors.database, arithmetic in ``database_figures.py``; role
  ``database``): the database's own I/O statistics, sampled by the collectors the target's
  dialect record names (PostgreSQL here, MariaDB/MySQL's InnoDB counters in
  storage.collectors.innodb), with the database I/O vocabulary of ``database_io.py``.
- ``ontap`` (storage.collectors.ontap): NetApp ONTAP volume and LUN performance over REST.
- ``nfs`` (storage.collectors.nfs): the NFS client's per-operation counters from
  ``/proc/self/mountstats`` (parsed by ``mountstats.py`` and ``mountstats_format.py``),
  computed as nfs-utils' nfsiostat does (``nfs_rates.py``), and the mount options checked
  against the vendor's tuning advice (``nfs_advice.py``).
- ``psi`` (storage.collectors.psi): the kernel's I/O pressure stall information, for the
  whole host and for dbsim's cgroup.
- ``blocklatency`` (storage.collectors.blocklatency; role ``device-latency``): per-device
  block request latency quantiles with eBPF, which the device latency SLOs judge.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sim.errors import CollectorError
from sim.protocols import Collector, Target
from sim.registry import (
    ROLE_DEVICE,
    ROLE_HOST_CPU,
    CollectorEntry,
    Display,
    Figure,
    UiFigure,
    collector_options,
    register_collector,
)
from storage.collectors.block import BlockDeviceCollector
from storage.collectors.host import HostCpuCollector
from storage.devices import BlockDevice, DeviceResolver

__all__ = ["BlockDeviceCollector", "BlockOptions", "HostCpuCollector", "auto_block"]


class BlockOptions(BaseModel):
    """Which block devices the block collector watches."""

    model_config = ConfigDict(extra="forbid")

    devices: list[str] = Field(
        default_factory=list,
        description="Watch these block devices (names as in /proc/diskstats) instead of "
        "resolving the target's paths.",
    )


def auto_block(
    target: Target, options: dict[str, Any], resolver: DeviceResolver | None = None
) -> list[Collector]:
    """The block collector for ``target``: one collector watching every device found.

    ``options["block"].devices`` (names) wins over resolution; otherwise each of
    ``target.storage_paths()`` is resolved and its file-system device, parent disks and
    slaves are watched, each once. Returns ``[]`` when nothing is on a block device.
    """
    names = collector_options(BlockOptions, "block", options).devices
    if names:
        return [BlockDeviceCollector(list(dict.fromkeys(names)))]
    resolver = resolver or DeviceResolver()
    found: dict[str, BlockDevice] = {}
    for path in target.storage_paths():
        try:
            resolved = resolver.resolve(path)
        except OSError as exc:
            raise CollectorError(f"collector block: cannot resolve {path}: {exc}") from exc
        for device in resolved.devices:
            found.setdefault(device.name, device)
    if not found:
        return []
    return [BlockDeviceCollector(list(found.values()))]


def _auto(target: Target, options: dict[str, Any]) -> list[Collector]:
    return auto_block(target, options)


def _await(key: str, label: str, unit: str = "") -> Figure:
    return Figure(key, label, unit, 2, grouped=False)


BLOCK_DISPLAY = Display(
    title="block devices",
    entity_label="device",
    live=(
        Figure("r_s", "r/s"),
        Figure("w_s", "w/s"),
        Figure("iops", "IOPS"),
        _await("r_await_ms", "r_await", "ms"),
        _await("w_await_ms", "w_await", "ms"),
        Figure("util_pct", "%util", grouped=False),
    ),
    plain=Figure("iops", "IOPS", grouped=False),
    console=(
        Figure("r_s", "r/s", digits=1),
        Figure("w_s", "w/s", digits=1),
        Figure("iops", "IOPS", digits=1),
        Figure("rkB_s", "rkB/s"),
        Figure("wkB_s", "wkB/s"),
        _await("r_await_ms", "r_await"),
        _await("w_await_ms", "w_await"),
        _await("aqu_sz", "aqu-sz"),
        Figure("util_pct", "%util", grouped=False),
    ),
    console_title="block devices (mean per second, measured window)",
    report=(
        Figure("r_s", "r/s", digits=1),
        Figure("w_s", "w/s", digits=1),
        Figure("iops", "IOPS", digits=1),
        Figure("rkB_s", "rkB/s"),
        Figure("wkB_s", "wkB/s"),
        Figure("r_await_ms", "r_await ms", digits=2),
        Figure("w_await_ms", "w_await ms", digits=2),
        Figure("rareq_sz_kB", "rareq-sz kB", digits=1),
        Figure("wareq_sz_kB", "wareq-sz kB", digits=1),
        Figure("aqu_sz", "aqu-sz", digits=2),
        Figure("util_pct", "%util", digits=1),
    ),
    report_caption="Block devices (iostat figures, mean of the intervals; samples {samples})",
    ui=(
        UiFigure("iops", "IOPS", "iops", or_sum=("r_s", "w_s")),
        UiFigure("read_s", "Reads/s", "r_s"),
        UiFigure("write_s", "Writes/s", "w_s"),
        UiFigure("read_mb_s", "Read MB/s", "rkB_s", 1 / 1024),
        UiFigure("write_mb_s", "Write MB/s", "wkB_s", 1 / 1024),
        UiFigure("read_await_ms", "Read await (ms)", "r_await_ms"),
        UiFigure("write_await_ms", "Write await (ms)", "w_await_ms"),
        UiFigure("util_pct", "Util %", "util_pct"),
        UiFigure("aqu_sz", "aqu-sz", "aqu_sz"),
    ),
)

register_collector(
    CollectorEntry(
        source="block",
        auto=_auto,
        summary="iostat -x figures per block device under the target, from /proc/diskstats",
        options_model=BlockOptions,
        display=BLOCK_DISPLAY,
        role=ROLE_DEVICE,
        correlate=(
            Figure("r_s", "r/s"),
            Figure("w_s", "w/s"),
            Figure("r_await_ms", "r_await", "ms", 2),
            Figure("w_await_ms", "w_await", "ms", 2),
            Figure("aqu_sz", "aqu-sz", digits=2),
            Figure("util_pct", "%util"),
        ),
        legacy_keys={"block_devices": "devices"},
    )
)
register_collector(
    CollectorEntry(
        source="host",
        auto=lambda target, options: [HostCpuCollector()],
        summary="CPU of the load generator's host and of dbsim itself, from /proc/stat",
        entity_names_host=True,
        per_process=frozenset({"process_cpu_pct"}),
        display=Display(
            title="Host CPU",
            report=(
                Figure("cpu_busy_pct", "busy %"),
                Figure("cpu_user_pct", "user %"),
                Figure("cpu_system_pct", "system %"),
                Figure("cpu_iowait_pct", "iowait %"),
                Figure("cpu_steal_pct", "steal %"),
                Figure("cpu_idle_pct", "idle %"),
                Figure("process_cpu_pct", "dbsim process CPU % (of one CPU)"),
                Figure("cpu_limit_cores", "CPU quota (cores, its cgroup's)", digits=2),
                Figure("cpu_throttled_pct", "throttled % (of its quota's periods)"),
                Figure("cpus", "CPUs"),
                Figure("samples", "samples"),
            ),
            report_by_figure=True,
            ui=(UiFigure("util_pct", "Util %", "cpu_busy_pct"),),
            ui_source="host CPU",
        ),
        role=ROLE_HOST_CPU,
    )
)
