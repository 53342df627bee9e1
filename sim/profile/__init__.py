"""``dbsim profile``: what a workload asks of its storage, from a capture or a run bundle.

The profile reads the bundle only through :mod:`sim.bundle.reader` and finds its sources by
the role their collectors declare (:func:`sim.registry.collector_with_role`): the block
devices (:data:`~sim.registry.ROLE_DEVICE`), their traced requests
(:data:`~sim.registry.ROLE_DEVICE_LATENCY`), the database (:data:`~sim.registry.ROLE_DATABASE`)
and the NFS client (:data:`~sim.registry.ROLE_NFS`). It gives, per interval, the storage's
IOPS, MB/s, request sizes, sequential share, queue depth and latency, the database's physical
I/O by kind and the NFS calls by operation; then the peaks (busiest minute and 15 minutes, the
hour at the 95th percentile), the shape of an average day, and what the data could not say.

The document (``profile_version`` 1, docs/bundle.md) is what ``dbsim profile --json`` prints
and what ``profile.json`` in the bundle holds; :mod:`sim.profile.console` and
:mod:`sim.profile.page` show it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim import registry
from sim.errors import ConfigError
from sim.profile import database, device, limits, nfs, peaks
from sim.profile.figures import DERIVED
from sim.profile.source import BundleInfo, open_bundle, read_table
from sim.profile.storage_doc import device_document, device_window

PROFILE_VERSION = 1
PROFILE_NAME = "profile.json"
HTML_NAME = "profile.html"


def build_profile(bundle: Path) -> dict[str, Any]:
    """The profile document of ``bundle`` (see the module docstring); a :class:`ConfigError`
    (exit 2) when it is not a bundle or holds no storage figures at all."""
    info = open_bundle(bundle)
    parts = _Parts(info)
    load = parts.load()
    if load is None:
        unread = [item["what"].split(":")[0] for item in limits.unread_layers(info, parts.read)]
        besides = (
            f"; {', '.join(unread)} holds a layer's I/O figures, but its collector declares no "
            "role the profile reads"
            if unread
            else ""
        )
        raise ConfigError(
            f"profile: {bundle}: no storage figures to profile (no measured rows of a block "
            f"device, of the database I/O vocabulary or of an NFS mount){besides}"
        )
    doc = _header(info)
    doc["devices"] = parts.device_doc
    doc["database"] = parts.db_doc
    doc["nfs_client"] = parts.nfs_doc
    doc["peaks"] = peaks.peaks_document(info, load)
    doc["hours"] = peaks.hours_document(info, load)
    doc["daily_shape"] = peaks.daily_document(info, load)
    doc["span"] = _span(load)
    doc["not_in_data"] = [
        *limits.from_summary(info),
        *limits.device_limits(info, parts.device_doc, parts.traced, parts.latency_name),
        *limits.peak_limits(doc["peaks"], doc["daily_shape"]),
        *limits.database_limits(info, parts.db_doc, parts.db_source),
        *limits.unread_layers(info, parts.read),
    ]
    return doc


def _header(info: BundleInfo) -> dict[str, Any]:
    return {
        "profile_version": PROFILE_VERSION,
        "bundle": str(info.path),
        "kind": info.kind,
        "origin": info.origin,
        "format": info.format,
        "status": info.status,
        "start": None if info.start is None else info.start.isoformat(timespec="seconds"),
        "timezone": info.zone,
        "files": info.capture.get("files") or [],
    }


def _span(load: peaks.Load) -> dict[str, Any]:
    from sim.profile.windows import span_s, typical_length

    return {
        "intervals": len(load.times),
        "seconds": round(span_s(load.lengths), 3),
        "first_t": load.times[0] - load.lengths[0],
        "last_t": load.times[-1],
        "interval_s": round(typical_length(load.lengths), 3),
    }


class _Parts:
    """The bundle's sources, each read once, and their sections of the document."""

    def __init__(self, info: BundleInfo) -> None:
        self.info = info
        self.read: set[str] = set()
        self.device: device.DeviceData | None = None
        self.device_doc: dict[str, Any] | None = None
        self.traced = False
        self.latency_name = ""
        self.db: database.DatabaseData | None = None
        self.db_doc: dict[str, Any] | None = None
        self.db_source = registry.collector_with_role(registry.ROLE_DATABASE)
        self.nfs: nfs.NfsData | None = None
        self.nfs_doc: dict[str, Any] | None = None
        self._devices()
        self._database()
        self._nfs()

    def _table(self, role: str, keep: Any) -> Any:
        source = registry.collector_with_role(role)
        if source is None:
            return None
        self.read.add(source)
        return read_table(self.info, source, keep)

    def _devices(self) -> None:
        block = self._table(registry.ROLE_DEVICE, device.BLOCK_COLUMNS.__contains__)
        if block is None:
            return
        latency = self._table(registry.ROLE_DEVICE_LATENCY, device.LATENCY_COLUMNS.__contains__)
        self.traced = latency is not None
        self.latency_name = latency.name if latency is not None else ""
        self.device = device.device_data(block, latency, self.info.column_kind)
        if not any(v is not None for v in self.device.series.get("iops", ())):
            self.device = None
            return
        self.device_doc = device_document(self.device)

    def _database(self) -> None:
        table = self._table(registry.ROLE_DATABASE, database.keep_column)
        if table is not None:
            self.db = database.database_data(table, self.info.column_kind)
            self.db_doc = database.database_document(self.db)

    def _nfs(self) -> None:
        table = self._table(registry.ROLE_NFS, nfs.keep_column)
        if table is not None:
            self.nfs = nfs.nfs_data(table, self.info.column_kind)
            if self.nfs.mounts:
                self.nfs_doc = nfs.nfs_document(self.nfs)

    def load(self) -> peaks.Load | None:
        """The series the peaks are found on: the devices' IOPS, else the database's I/O
        requests, else the NFS calls."""
        if self.device is not None:
            data = self.device
            return peaks.Load(
                "iops",
                "IOPS",
                "1/s",
                data.info["iops"]["source"],
                data.info["iops"]["what"],
                data.block.times,
                data.lengths,
                data.series["iops"],
                lambda first, last: device_window(data, first, last),
            )
        if self.db is not None and self.db.series:
            db = self.db
            rates, source = database.load_series(db)
            return peaks.Load(
                "io_req_s",
                "database I/O requests/s",
                "1/s",
                source,
                DERIVED,
                db.table.times,
                db.lengths,
                rates,
                lambda first, last: database.window_document(db, first, last),
            )
        if self.nfs is not None and self.nfs.mounts:
            nfs_data = self.nfs
            rates, source = nfs.load_series(nfs_data)
            return peaks.Load(
                "ops_s",
                "NFS calls/s",
                "1/s",
                source,
                DERIVED,
                nfs_data.table.times,
                nfs_data.lengths,
                rates,
                lambda first, last: nfs.window_document(nfs_data, first, last),
            )
        return None
