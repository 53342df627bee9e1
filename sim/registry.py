"""The one place where ``sim`` finds workloads, targets and collectors.

Built-in plug-ins are listed by module path in ``BUILTIN_PLUGINS`` and imported on first use;
each module registers what it provides with the ``register_*`` functions below. ``sim`` never
imports a workload, target or collector by name anywhere else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from sim.errors import ConfigError

if TYPE_CHECKING:
    from sim.dialects import SqlDialect
    from sim.protocols import Collector, Target, Workload

BUILTIN_PLUGINS: tuple[str, ...] = (
    "storage.targets",
    "storage.collectors",
    "storage.collectors.database",
    "storage.collectors.ontap",
    "storage.collectors.nfs",
    "workloads.slob",
    "workloads.ssb",
    "workloads.eda",
)


@dataclass(frozen=True)
class TargetEntry:
    kind: str
    settings_model: type[BaseModel]
    #: Builds the target from validated settings; ``None`` while the driver is not built yet.
    factory: Callable[[BaseModel], Target] | None
    summary: str
    #: The SQL dialect the kind speaks (None: no SQL, or chosen by its settings like ``odbc``).
    dialect: SqlDialect | None = None


@dataclass(frozen=True)
class WorkloadEntry:
    name: str
    workload_class: type[Workload]
    summary: str


@dataclass(frozen=True)
class CollectorEntry:
    source: str
    #: ``auto(target, options) -> list[Collector]``: the collectors that apply to a target.
    auto: Callable[[Target, dict[str, Any]], list[Collector]]
    summary: str


_targets: dict[str, TargetEntry] = {}
_workloads: dict[str, WorkloadEntry] = {}
_collectors: dict[str, CollectorEntry] = {}
_loaded = False


def register_target(entry: TargetEntry) -> None:
    _targets[entry.kind] = entry


def register_workload(entry: WorkloadEntry) -> None:
    _workloads[entry.name] = entry


def register_collector(entry: CollectorEntry) -> None:
    _collectors[entry.source] = entry


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_PLUGINS:
        importlib.import_module(module)


def targets() -> dict[str, TargetEntry]:
    _ensure_loaded()
    return dict(_targets)


def workloads() -> dict[str, WorkloadEntry]:
    _ensure_loaded()
    return dict(_workloads)


def collectors() -> dict[str, CollectorEntry]:
    _ensure_loaded()
    return dict(_collectors)


def workload(name: str) -> WorkloadEntry:
    entries = workloads()
    if name not in entries:
        raise ConfigError(
            f"workload.name: unknown workload {name!r} (known: {', '.join(sorted(entries))})"
        )
    return entries[name]


def target(kind: str) -> TargetEntry:
    entries = targets()
    if kind not in entries:
        raise ConfigError(
            f"target.kind: unknown target kind {kind!r} (known: {', '.join(sorted(entries))})"
        )
    return entries[kind]
