"""The one place where ``sim`` finds workloads, targets and collectors.

The built-in plug-ins are listed by module path in :data:`BUILTIN_PLUGINS` and imported on
first use; each module registers what it provides with the ``register_*`` functions below. A
consumer asks this registry: for the entry a scenario names (``workload.name``,
``target.kind``, ``collectors.enabled``), or, for a collector whose figures it reads, for the
source that declares the role it needs (:func:`collector_with_role`: the block devices' IOPS
and await, the host's CPU …), never for a source by name (tests/unit/test_import_graph.py).

Running a run never imports a plug-in module by name. A few parts of ``sim`` use a plug-in's
helpers directly, each for a job of its own rather than a run's: the baseline (NFS mount
parsing and advice, the device under a path, the EDA tree's ownership checks, the lab), the
``lab`` and ``size`` commands (``storage.lab``, ``storage.envelopes``), a run's ``lab:`` steps
(``storage.lab``, from ``sim.run.runner``) and the session runner's question whether the
native file loop was built (``storage.targets.fileloop``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from sim.errors import CollectorError, ConfigError

if TYPE_CHECKING:
    from sim.dialects import SqlDialect
    from sim.protocols import Collector, Target, Workload

ModelT = TypeVar("ModelT", bound=BaseModel)

BUILTIN_PLUGINS: tuple[str, ...] = (
    "storage.targets",
    "storage.targets.mysql_record",
    "storage.collectors",
    "storage.collectors.database",
    "storage.collectors.ontap",
    "storage.collectors.nfs",
    "storage.collectors.psi",
    "storage.collectors.blocklatency",
    "storage.collectors.fileops",
    "workloads.slob",
    "workloads.ssb",
    "workloads.eda",
    "workloads.sql",
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
    """A workload as ``sim`` knows it. ``implementation`` is the :class:`Workload` class, or
    ``"module:Class"`` imported on first use of :attr:`workload_class`, with the class's
    ``parameters_model`` and ``needs`` given here: validating a scenario then imports no
    workload's code (the built-ins' numpy and SQLAlchemy, ~0.2 CPU-s of a start)."""

    name: str
    implementation: type[Workload] | str
    summary: str
    parameters_model: type[BaseModel] = None  # type: ignore[assignment]  # set from the class
    needs: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.implementation, str):
            if self.parameters_model is None or not self.needs:
                raise TypeError(
                    f"workload {self.name}: a class given by name needs parameters_model and needs"
                )
            return
        object.__setattr__(self, "parameters_model", self.implementation.parameters_model)
        object.__setattr__(self, "needs", self.implementation.needs)

    @property
    def class_name(self) -> str:
        """The class's name, without importing it."""
        impl = self.implementation
        return impl.rpartition(":")[2] if isinstance(impl, str) else impl.__name__

    @property
    def workload_class(self) -> type[Workload]:
        impl = self.implementation
        if not isinstance(impl, str):
            return impl
        module, _, name = impl.partition(":")
        workload_class: type[Workload] = getattr(importlib.import_module(module), name)
        return workload_class


#: A collector's scope: what its samples observe. ``host``: the machine it runs on (block
#: devices, the NFS client, CPU), so a distributed run samples it on every worker and keeps one
#: view per host; ``shared``: one system every worker reaches (an array, a database server),
#: so one view counts for the whole run.
COLLECTOR_SCOPE_HOST = "host"
COLLECTOR_SCOPE_SHARED = "shared"

#: What the analysis reads a source's figures as (``CollectorEntry.role``): the block devices
#: (IOPS, await, %util of the primary device), the load generator's CPU, the database's own
#: block counters; "" for a source the analysis only correlates (``CollectorEntry.correlate``).
ROLE_DEVICE = "device"
ROLE_HOST_CPU = "host-cpu"
ROLE_DATABASE = "database"
#: Per-device latency quantiles (``p50_ms``, ``p95_ms``, ``p99_ms``) the device SLOs judge.
ROLE_DEVICE_LATENCY = "device-latency"
#: The NFS client's figures per mount and per NFS operation (``ops_s``, ``kB_per_op`` …), as
#: ``dbsim profile`` reads them.
ROLE_NFS = "nfs"
#: The array's own counters (volumes, LUNs), sampled once for the run: the layer the hosts'
#: devices share, beside them in a distributed run's verdict.
ROLE_ARRAY = "array"


@dataclass(frozen=True)
class Figure:
    """One figure of a collector's samples as a person reads it: the sample key, the column
    heading, the unit shown after the value and how many decimals."""

    key: str
    label: str
    unit: str = ""
    digits: int = 0
    #: Thousands separators (counts and rates; not latencies or percentages).
    grouped: bool = True

    def format(self, value: Any) -> str:
        """``value`` (missing: 0) as this figure is shown, its unit after it."""
        number = float(value or 0)
        text = f"{number:,.{self.digits}f}" if self.grouped else f"{number:.{self.digits}f}"
        return f"{text} {self.unit}" if self.unit else text


@dataclass(frozen=True)
class UiFigure:
    """One cell of the web UI's Storage table: the table's column (key and heading, shared by
    every source that fills it), the sample key and a factor (kB/s -> MB/s). ``or_sum``: when
    the sample lacks ``key``, the sum of these keys (IOPS as reads plus writes)."""

    column: str
    title: str
    key: str
    scale: float = 1.0
    or_sum: tuple[str, ...] = ()


@dataclass(frozen=True)
class Display:
    """How a collector's figures are shown. Empty parts are not shown: a source with no
    ``console`` figures has no table in the final console output, and so on.

    ``live``: the console's live panel (latest interval), with ``plain`` the one figure of the
    plain log line; ``console``: the final console table (means of the measured window, under
    ``console_title``); ``report``: the report's table; ``report_by_figure`` lays it out one
    row per figure (every figure the means hold, labelled by ``report`` where it names them)
    instead of one row per entity; ``ui``: the web UI's Storage table, ``ui_source`` naming
    the source there."""

    title: str
    entity_label: str = "entity"
    live: tuple[Figure, ...] = ()
    plain: Figure | None = None
    console: tuple[Figure, ...] = ()
    console_title: str = ""
    report: tuple[Figure, ...] = ()
    report_caption: str = ""
    report_by_figure: bool = False
    ui: tuple[UiFigure, ...] = ()
    ui_source: str = ""


@dataclass(frozen=True)
class CollectorEntry:
    """A collector family as ``sim`` knows it: everything the scenario, the runner, the
    distributed merge, the console, the report, the web UI and the analysis need of it."""

    source: str
    #: ``auto(target, options) -> list[Collector]``: the collectors that apply to a target.
    #: ``options[source]``: this collector's validated ``options_model`` (absent when the
    #: model has required fields and the scenario gave none); the other keys are the
    #: workload's context (``table_prefix``, ``table_pattern``).
    auto: Callable[[Target, dict[str, Any]], list[Collector]]
    summary: str
    #: ``collectors.<source>`` in the scenario; validated with it. A model with required
    #: fields makes the section optional (``null``: the collector is not configured).
    options_model: type[BaseModel] | None = None
    scope: str = COLLECTOR_SCOPE_HOST
    #: The entity already names the host (the host's CPU): not prefixed with it when workers
    #: on several hosts are merged.
    entity_names_host: bool = False
    #: Figures of one process (dbsim's own CPU): summed over the workers of a host instead of
    #: taken from one of them.
    per_process: frozenset[str] = frozenset()
    display: Display | None = None
    role: str = ""
    #: Device-level storage figures the analysis may correlate with application latency.
    correlate: tuple[Figure, ...] = ()
    #: The figure that counts this layer's I/Os per second (an array volume's IOPS, NFS calls
    #: per second): the analysis divides it by the operations, per entity, to give the I/Os per
    #: operation at this layer beside the block device's (the block devices have their own).
    ios_figure: str = ""
    #: Earlier scenario keys under ``collectors`` -> this source's option they now are.
    legacy_keys: Mapping[str, str] = field(default_factory=dict)


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


def collector_options(model: type[ModelT], source: str, options: Mapping[str, Any]) -> ModelT:
    """``options[source]`` (a validated model or a plain mapping) as ``model``; the model's
    defaults when absent. A bad value raises CollectorError naming the option."""
    try:
        return model.model_validate(options.get(source) or {})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "options"
        raise CollectorError(f"collector {source}: option {where}: {first['msg']}") from None


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_PLUGINS:
        importlib.import_module(module)

    # Collectors in BUILTIN_PLUGINS order whichever module was imported first: their order is
    # the scenario's collectors.<source> fields, the reference page and the tables' order.
    def rank(entry: CollectorEntry) -> int:
        module = getattr(entry.auto, "__module__", "")
        return BUILTIN_PLUGINS.index(module) if module in BUILTIN_PLUGINS else len(BUILTIN_PLUGINS)

    ordered = sorted(_collectors.values(), key=rank)
    _collectors.clear()
    _collectors.update((entry.source, entry) for entry in ordered)


def targets() -> dict[str, TargetEntry]:
    _ensure_loaded()
    return dict(_targets)


def workloads() -> dict[str, WorkloadEntry]:
    _ensure_loaded()
    return dict(_workloads)


def collectors() -> dict[str, CollectorEntry]:
    _ensure_loaded()
    return dict(_collectors)


def collector(source: str) -> CollectorEntry | None:
    """The entry of ``source`` (None for a source no plug-in registers, e.g. in an old
    bundle)."""
    return collectors().get(source)


def collector_with_role(role: str) -> str | None:
    """The source that plays ``role`` for the analysis (:data:`ROLE_DEVICE` …), if any."""
    return next((e.source for e in collectors().values() if e.role == role), None)


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
