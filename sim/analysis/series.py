"""Loading a run bundle into aligned numpy series (measured phase only).

Rows of ``ops.csv`` and of every ``timeseries/<source>.csv`` are aligned on the pair
(``interval``, ``t``): the engine gives application and storage rows of one interval the same
pair, and the pair — not ``interval`` alone — is unique, because a step boundary falling
inside an interval closes it early and the next tick may reuse its index. An interval present
in any file counts; an operation with no row in it completed nothing there (ops/s 0,
percentiles NaN), a device or source with no row there is NaN.

Intervals much shorter than the nominal one (a step boundary's leftover, the drain at the
end of the run) carry a handful of operations and rates extrapolated from milliseconds, so
they are left out (see :data:`SHORT_INTERVAL_FRACTION`) unless nothing else is left.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim import registry
from sim.analysis.stats import FloatArray
from sim.bundle import reader as bundle_files
from sim.bundle.figures import primary_device as primary_device_of
from sim.bundle.reader import read_csv_rows, read_summary
from sim.bundle.writer import OPS_COLUMNS, SAMPLE_PREFIX_COLUMNS
from sim.errors import BundleError, ConfigError
from sim.registry import ROLE_DATABASE, ROLE_DEVICE, ROLE_HOST_CPU, CollectorEntry, Figure

MEASURED_PHASE = "measure"
OPS_FILE = "ops.csv"
#: Files in timeseries/ that are not samples of a collector.
NOT_SAMPLES = frozenset({"ops.csv", "errors.csv"})
OPS_REQUIRED = ("t", "interval", "phase", "op", "count")
# The bundle's own column lists (sim.bundle.writer writes these files): one definition of the format.
SAMPLES_REQUIRED = SAMPLE_PREFIX_COLUMNS
OP_FIGURES = tuple(
    c for c in OPS_COLUMNS if c not in ("t", "interval", "phase", "step", "op", "min_us")
)
#: Intervals shorter than this fraction of the nominal interval are dropped: a 50 ms leftover
#: holding three operations says nothing about latency, and its per-second rates are noise.
SHORT_INTERVAL_FRACTION = 0.5
DEFAULT_INTERVAL_S = 1.0
DB_TABLE_PREFIX = "table:"

Key = tuple[int, float]


@dataclass
class BundleSeries:
    """A bundle's measured intervals, every figure as an array aligned on them."""

    path: Path
    summary: dict[str, Any]
    scenario: dict[str, Any]
    interval_s: float
    t: FloatArray = field(default_factory=lambda: np.zeros(0))
    duration_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    step: list[int | None] = field(default_factory=list)
    #: op -> figure (OP_FIGURES) -> array
    ops: dict[str, dict[str, FloatArray]] = field(default_factory=dict)
    #: source -> entity -> column -> array (block: entity = device; db: database or table:…)
    sources: dict[str, dict[str, dict[str, FloatArray]]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of measured intervals."""
        return int(self.t.size)

    def subset(self, index: np.ndarray) -> BundleSeries:
        """The same bundle restricted to the intervals at ``index`` (an index array)."""
        return BundleSeries(
            path=self.path,
            summary=self.summary,
            scenario=self.scenario,
            interval_s=self.interval_s,
            t=self.t[index],
            duration_s=self.duration_s[index],
            step=[self.step[i] for i in np.asarray(index, dtype=int)],
            ops={op: {k: v[index] for k, v in figs.items()} for op, figs in self.ops.items()},
            sources={
                src: {ent: {k: v[index] for k, v in cols.items()} for ent, cols in ents.items()}
                for src, ents in self.sources.items()
            },
        )


def number(text: str | None) -> float:
    """A CSV cell as a float; empty, missing or malformed cells are NaN."""
    if text is None or text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    """A CSV file's rows; BundleError when it cannot be read or lacks ``required`` columns."""
    try:
        return read_csv_rows(path, required=required)
    except ConfigError as exc:
        raise BundleError(str(exc)) from exc.__cause__


def row_key(row: dict[str, str]) -> Key | None:
    """The (interval, t) alignment key of a row; None for a damaged row."""
    interval, t = number(row.get("interval")), number(row.get("t"))
    if not (math.isfinite(interval) and math.isfinite(t)):
        return None
    return int(interval), round(t, 3)


def read_json_object(path: Path) -> dict[str, Any]:
    """A bundle's summary.json (``path``), read bounded and checked against its schema
    (:func:`sim.bundle.reader.read_summary`); BundleError otherwise."""
    try:
        return read_summary(path.parent)
    except ConfigError as exc:
        raise BundleError(str(exc).splitlines()[0]) from None


def read_scenario(path: Path) -> dict[str, Any]:
    """The resolved scenario; an absent file is an empty scenario, a damaged one an error."""
    try:
        return bundle_files.read_scenario(path.parent) or {}
    except ConfigError as exc:
        raise BundleError(str(exc).splitlines()[0]) from None


def nominal_interval_s(scenario: dict[str, Any]) -> float:
    """The collectors' sampling interval the run used (1 s by default)."""
    collectors = scenario.get("collectors")
    value: Any = collectors.get("interval_s") if isinstance(collectors, dict) else None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return DEFAULT_INTERVAL_S
    return seconds if seconds > 0 else DEFAULT_INTERVAL_S


def load_bundle(path: Path, summary: dict[str, Any] | None = None) -> BundleSeries:
    """Read a bundle's summary, scenario and time series; BundleError if it is unreadable.

    ``summary`` stands for summary.json when given: a finishing run judges its sweep on the
    summary it is about to write once, while the file still holds the running one."""
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"{path}: not a run bundle (no such directory)")
    if summary is None:
        summary = read_json_object(path / "summary.json")
    scenario = read_scenario(path / "scenario.yaml")
    ops_path = path / "timeseries" / OPS_FILE
    if not ops_path.is_file():
        raise BundleError(f"{path}: not a run bundle (no timeseries/{OPS_FILE})")
    ops_rows = read_rows(ops_path, OPS_REQUIRED)
    sample_rows: dict[str, list[dict[str, str]]] = {}
    for csv_path in sorted((path / "timeseries").glob("*.csv")):
        if csv_path.name in NOT_SAMPLES:
            continue
        try:
            sample_rows[csv_path.stem] = read_rows(csv_path, SAMPLES_REQUIRED)
        except BundleError:
            continue  # a collector's damaged file costs that view, not the analysis
    return align(path, summary, scenario, ops_rows, sample_rows)


def align(
    path: Path,
    summary: dict[str, Any],
    scenario: dict[str, Any],
    ops_rows: list[dict[str, str]],
    sample_rows: dict[str, list[dict[str, str]]],
) -> BundleSeries:
    """Build the aligned measured-phase series from parsed rows."""
    interval_s = nominal_interval_s(scenario)
    keys, duration = measured_keys(
        (*ops_rows, *(r for rows in sample_rows.values() for r in rows)), interval_s
    )
    position = {k: i for i, k in enumerate(keys)}
    series = BundleSeries(
        path=path,
        summary=summary,
        scenario=scenario,
        interval_s=interval_s,
        t=np.array([k[1] for k in keys], dtype=np.float64),
        duration_s=np.array([duration[k] for k in keys], dtype=np.float64),
        step=[None] * len(keys),
    )
    for row in ops_rows:
        key = row_key(row)
        i = position.get(key) if key is not None else None
        if i is not None and row.get("op"):
            _put_op_row(series, row, i)
    for source, rows in sample_rows.items():
        entities = _sample_columns(rows, position)
        if entities:
            series.sources[source] = entities
    return series


def measured_keys(
    rows: Iterable[dict[str, str]], interval_s: float
) -> tuple[list[Key], dict[Key, float]]:
    """The measured intervals' keys in time order (short ones left out unless nothing else
    is left) and every interval's duration."""
    all_t: dict[Key, float] = {}
    measured: set[Key] = set()
    for row in rows:
        key = row_key(row)
        if key is None:
            continue
        all_t[key] = key[1]
        if row.get("phase") == MEASURED_PHASE:
            measured.add(key)
    # Each interval covers the time since the previous one ended (any phase); the first
    # starts when the sessions started (t = 0).
    ordered = sorted(all_t, key=lambda k: (k[1], k[0]))
    duration: dict[Key, float] = {}
    previous = 0.0
    for key in ordered:
        duration[key] = max(key[1] - previous, 0.0)
        previous = max(previous, key[1])
    keys = [k for k in ordered if k in measured]
    long_enough = [k for k in keys if duration[k] >= SHORT_INTERVAL_FRACTION * interval_s]
    return (long_enough or keys), duration


def _put_op_row(series: BundleSeries, row: dict[str, str], i: int) -> None:
    """One ``ops.csv`` row into interval ``i`` of its operation's figures."""
    op = row["op"]
    figures = series.ops.get(op)
    if figures is None:
        figures = series.ops[op] = {name: np.full(series.n, np.nan) for name in OP_FIGURES}
        for name in ("ops_s", "count", "errors"):
            figures[name][:] = 0.0  # no row in an interval: nothing completed there
    for name in OP_FIGURES:
        figures[name][i] = number(row.get(name))
    if not figures["count"][i] > 0:  # percentiles of nothing are not zero
        for name in OP_FIGURES[3:]:
            figures[name][i] = np.nan
    for name in ("ops_s", "count", "errors"):
        if not np.isfinite(figures[name][i]):
            figures[name][i] = 0.0
    step = number(row.get("step"))
    if math.isfinite(step):
        series.step[i] = int(step)


def _sample_columns(
    rows: list[dict[str, str]], position: dict[Key, int]
) -> dict[str, dict[str, FloatArray]]:
    """A collector's rows as entity -> column -> array over the measured intervals."""
    n = len(position)
    entities: dict[str, dict[str, FloatArray]] = {}
    for row in rows:
        key = row_key(row)
        i = position.get(key) if key is not None else None
        if i is None:
            continue
        columns = entities.setdefault(row.get("entity") or "", {})
        for name, text in row.items():
            if name in SAMPLES_REQUIRED or name is None:
                continue
            column = columns.get(name)
            if column is None:
                column = columns[name] = np.full(n, np.nan)
            column[i] = number(text)
    return entities


# --------------------------------------------------------------------------- derived views


def role_entities(series: BundleSeries, role: str) -> dict[str, dict[str, FloatArray]]:
    """The entities of the source that plays ``role`` (sim.registry ROLE_*) in this bundle."""
    source = registry.collector_with_role(role)
    return (series.sources.get(source) or {}) if source else {}


def correlatable(series: BundleSeries) -> list[tuple[CollectorEntry, str, Figure, FloatArray]]:
    """Every figure a collector declares correlatable with application latency, per entity
    present in the bundle: (collector, entity, figure, its series), in registry order."""
    out: list[tuple[CollectorEntry, str, Figure, FloatArray]] = []
    for entry in registry.collectors().values():
        for entity, cols in sorted((series.sources.get(entry.source) or {}).items()):
            out.extend(
                (entry, entity, figure, cols[figure.key])
                for figure in entry.correlate
                if figure.key in cols
            )
    return out


def device_figures(series: BundleSeries) -> dict[str, dict[str, FloatArray]]:
    """Per block device: iops, r/w await, the IOPS-weighted ``await_ms``, aqu_sz, util…"""
    out: dict[str, dict[str, FloatArray]] = {}
    for device, cols in role_entities(series, ROLE_DEVICE).items():
        nan = np.full(series.n, np.nan)
        r_s, w_s = cols.get("r_s", nan), cols.get("w_s", nan)
        r_await, w_await = cols.get("r_await_ms", nan), cols.get("w_await_ms", nan)
        figures = dict(cols)
        if "iops" not in figures:
            figures["iops"] = r_s + w_s
        ios = np.nan_to_num(r_s) + np.nan_to_num(w_s)
        weighted = np.nan_to_num(r_s * r_await) + np.nan_to_num(w_s * w_await)
        with np.errstate(invalid="ignore", divide="ignore"):
            # iostat's convention: no I/O in the interval means an await of 0, not unknown.
            await_ms = np.where(ios > 0, weighted / np.where(ios > 0, ios, 1.0), 0.0)
        await_ms[~(np.isfinite(r_s) | np.isfinite(w_s))] = np.nan
        figures["await_ms"] = await_ms
        out[device] = figures
    total = hosts_sum(series, out)
    if total is not None:
        out[HOSTS_SUM] = total
    return out


#: A distributed run's devices summed across its hosts (each host's busiest device once).
HOSTS_SUM = "all hosts (sum)"
#: The figures that add up across hosts (queues too); awaits are IOPS-weighted means and
#: %util the busiest host's (a device busy all the time on one host saturates the run there).
SUMMED = ("r_s", "w_s", "rkB_s", "wkB_s", "iops", "aqu_sz")


def hosts_sum(
    series: BundleSeries, devices: dict[str, dict[str, FloatArray]]
) -> dict[str, FloatArray] | None:
    """With workers on two or more hosts (entities ``<host>/<device>``,
    sim.live.worker_samples), the sum over hosts of each host's busiest device: what the
    correlation and the I/Os per operation use, since every host's operations are in the
    merged counts. Its await is the IOPS-weighted mean, its %util the busiest host's. None
    for a run on one host."""
    workers = (series.summary.get("distributed") or {}).get("workers") or []
    hosts = sorted({str(w.get("host")) for w in workers if w.get("host")})
    if len(hosts) < 2:
        return None
    busiest = []
    for host in hosts:
        mine = {d: f for d, f in devices.items() if d.startswith(f"{host}/")}
        name = primary_device(mine)
        if name is not None:
            busiest.append(mine[name])
    if len(busiest) < 2:
        return None
    total: dict[str, FloatArray] = {}
    for key in SUMMED:
        parts = [f[key] for f in busiest if key in f]
        if parts:
            total[key] = np.nansum(parts, axis=0)
    utils = [f["util_pct"] for f in busiest if "util_pct" in f]
    if utils:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an interval no host sampled
            total["util_pct"] = np.nanmax(utils, axis=0)
    for key in ("r_await_ms", "w_await_ms", "await_ms"):
        weight = {"r_await_ms": "r_s", "w_await_ms": "w_s", "await_ms": "iops"}[key]
        pairs = [(f[key], f[weight]) for f in busiest if key in f and weight in f]
        if pairs:
            ios = np.nansum([w for _, w in pairs], axis=0)
            weighted = np.nansum([a * w for a, w in pairs], axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                total[key] = np.where(ios > 0, weighted / np.where(ios > 0, ios, 1.0), 0.0)
    return total


def primary_device(devices: dict[str, dict[str, FloatArray]]) -> str | None:
    """The device with the highest mean IOPS over the measured intervals (None if none)."""
    means = {
        device: {"iops": float(np.nanmean(iops))}
        for device, figures in devices.items()
        if (iops := figures.get("iops")) is not None and np.any(np.isfinite(iops))
    }
    return primary_device_of(means)


def primary_op(series: BundleSeries) -> str | None:
    """The operation with the most measured count (ties: alphabetical)."""
    totals = {op: float(np.nansum(f["count"])) for op, f in series.ops.items()}
    totals = {op: c for op, c in totals.items() if c > 0}
    if not totals:
        return None
    return min(totals, key=lambda op: (-totals[op], op))


def host_figures(series: BundleSeries) -> dict[str, FloatArray] | None:
    """The host source's columns (the entity with the most samples when there are several)."""
    entities = role_entities(series, ROLE_HOST_CPU)
    if not entities:
        return None
    return max(
        entities.values(),
        key=lambda cols: max((int(np.sum(np.isfinite(v))) for v in cols.values()), default=0),
    )


def database_figures(series: BundleSeries) -> dict[str, FloatArray] | None:
    """The database source's database-level rows (not ``table:…``), summed over databases."""
    entities = {
        e: cols
        for e, cols in role_entities(series, ROLE_DATABASE).items()
        if not e.startswith(DB_TABLE_PREFIX)
    }
    if not entities:
        return None
    if len(entities) == 1:
        return next(iter(entities.values()))
    names = set().union(*(cols.keys() for cols in entities.values()))
    return {
        name: np.nansum([cols[name] for cols in entities.values() if name in cols], axis=0)
        for name in names
    }
