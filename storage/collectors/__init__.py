"""Storage collectors, registered with ``sim.registry`` on import.

- ``block`` (:class:`storage.collectors.block.BlockDeviceCollector`): ``iostat -x`` figures
  from ``/proc/diskstats`` for the block devices under the target's storage paths (the file
  system's device, the disk of a partition, the devices beneath device-mapper and md).
  Options: ``devices`` (list of names as in ``/proc/diskstats``) overrides the resolution.
- ``db`` (storage.collectors.database): the database's own I/O statistics (PostgreSQL).
- ``nfs`` (storage.collectors.nfs): the NFS client's per-operation counters from
  ``/proc/self/mountstats``, computed as nfs-utils' nfsiostat does, and the mount options
  checked against the vendor's tuning advice.
- ``ontap`` (storage.collectors.ontap): NetApp ONTAP volume and LUN performance over REST.
- ``host`` (:class:`storage.collectors.host.HostCpuCollector`): CPU of the load generator's
  host and of dbsim itself, to tell a client-bound run from a storage-bound one.
"""

from __future__ import annotations

from typing import Any

from sim.errors import CollectorError
from sim.protocols import Collector, Target
from sim.registry import CollectorEntry, register_collector
from storage.collectors.block import BlockDeviceCollector
from storage.collectors.host import HostCpuCollector
from storage.devices import BlockDevice, DeviceResolver

__all__ = ["BlockDeviceCollector", "HostCpuCollector", "auto_block"]


def auto_block(
    target: Target, options: dict[str, Any], resolver: DeviceResolver | None = None
) -> list[Collector]:
    """The block collector for ``target``: one collector watching every device found.

    ``options["devices"]`` (names) wins over resolution; otherwise each of
    ``target.storage_paths()`` is resolved and its file-system device, parent disks and
    slaves are watched, each once. Returns ``[]`` when nothing is on a block device.
    """
    names = options.get("devices")
    if names:
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise CollectorError("collector block: option 'devices' must be a list of names")
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


register_collector(
    CollectorEntry(
        source="block",
        auto=_auto,
        summary="iostat -x figures per block device under the target, from /proc/diskstats",
    )
)
register_collector(
    CollectorEntry(
        source="host",
        auto=lambda target, options: [HostCpuCollector()],
        summary="CPU of the load generator's host and of dbsim itself, from /proc/stat",
    )
)
