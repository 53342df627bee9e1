"""Service-level objectives: the limits a scenario's run must meet, and their verdicts.

A scenario lists its objectives under ``slos``; each entry holds limits for operations or for
the storage, never both. Units are in the names, and latencies are in microseconds like every
latency of the bundle (``p99_us`` in summary.json): 5 ms is ``p99_us_max: 5000``.

Operation limits (``op``: an operation name, or ``"*"`` — the default):

* ``p50_us_max``, ``p95_us_max``, ``p99_us_max`` — with ``"*"``, every operation must meet it;
* ``ops_s_min``, ``error_pct_max`` — with ``"*"``, all operations together (throughput is
  the sum, the error share is errors over everything issued).

Storage limits (``device``: a block device name; unset: the device with the most IOPS):
``iops_min`` (the delivered device IOPS) and ``await_ms_max`` (reads' and writes' awaits
weighted by their rates, as iostat combines them), from the block collector's means;
``device_p95_ms_max`` and ``device_p99_ms_max``, from the device-latency collector (eBPF,
``storage.collectors.blocklatency``): the time-weighted mean of each interval's quantile of
block request latency, issue to completion. "p99 ≤ 2 ms at 20,000 IOPS" is one entry:
``{device_p99_ms_max: 2, iops_min: 20000}``.

A verdict is ``{slo, op | device, limit, measured, met, margin_pct}`` (+ ``name`` and
``note``). ``margin_pct`` is the headroom relative to the limit: positive when met, negative
when missed. A limit that could not be measured (no such operation, no block device) is not
met: dbsim does not vouch for what it did not see.

Verdicts are judged on a :class:`Window`: the measured window (from summary.json) or one step
of a sweep (:func:`sim.judge.sweep.step_windows`, from the bundle's time series and histograms).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sim import registry
from sim.bundle.figures import RATES, device_figures, finite, primary_device
from sim.config.scenario import DEVICE_LATENCY_LIMITS, LATENCY_LIMITS, Slo
from sim.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SLO_MISSED

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

ALL_OPS = "*"
#: Latency limit → the figure it bounds.
PERCENTILES = {"p50_us": 50.0, "p95_us": 95.0, "p99_us": 99.0}


def unknown_operations(slos: Iterable[Slo], known: Iterable[str]) -> list[str]:
    """One ``slos[i].op: …`` problem per entry naming an operation the workload does not have
    (for validation once the workload is built; ``"*"`` is always known)."""
    names = sorted(known)
    return [
        f"slos[{i}].op: unknown operation {slo.op!r} (this workload has: {', '.join(names)})"
        for i, slo in enumerate(slos)
        if slo.op not in (None, ALL_OPS) and slo.op not in names
    ]


# --------------------------------------------------------------------------- windows


@dataclass
class Window:
    """The figures verdicts are judged on: per operation ``count``, ``errors``, ``ops_s``,
    ``p50_us``, ``p95_us``, ``p99_us``; per block device ``iops`` and ``await_ms``."""

    label: str
    seconds: float
    ops: dict[str, dict[str, float | None]] = field(default_factory=dict)
    devices: dict[str, dict[str, float | None]] = field(default_factory=dict)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Window:
        """The measured window of a run, from its summary.json."""
        timing = summary.get("timing") or {}
        ops = {
            name: {k: finite(stats.get(k)) for k in ("count", "errors", "ops_s", *PERCENTILES)}
            for name, stats in (summary.get("operations") or {}).items()
            if isinstance(stats, dict)
        }
        storage = summary.get("storage") or {}
        means_of = storage.get(device_source()) or {}
        devices = {
            dev: device_figures(means) for dev, means in means_of.items() if isinstance(means, dict)
        }
        add_device_latency(devices, storage.get(device_latency_source() or "") or {})
        seconds = finite(timing.get("measured_s")) or 0.0
        return cls("measured window", seconds, ops, devices)


def device_source() -> str:
    """The collector whose per-device means (IOPS, await) the storage limits judge: the one
    declaring the device role (sim.registry.ROLE_DEVICE); "" when no plug-in declares it."""
    return registry.collector_with_role(registry.ROLE_DEVICE) or ""


def device_latency_source() -> str | None:
    """The collector whose per-device quantiles the device latency limits judge."""
    return registry.collector_with_role(registry.ROLE_DEVICE_LATENCY)


def add_device_latency(
    devices: dict[str, dict[str, float | None]], latency: Mapping[str, Any]
) -> None:
    """The device latency quantiles (means per device) added to the block devices' figures
    (the collector's per-direction entities name no block device and are left out)."""
    for dev, figures in devices.items():
        means = latency.get(dev)
        if isinstance(means, dict):
            figures.update({k: finite(means.get(k)) for k in DEVICE_LATENCY_LIMITS.values()})


class WindowBuilder:
    """Accumulates intervals into one window: histograms merged, device rates weighted by
    each interval's length (short leftovers at step boundaries carry noisy rates)."""

    def __init__(self) -> None:
        self.histograms: dict[str, HdrHistogram] = {}
        self.counts: dict[str, float] = {}
        self.errors: dict[str, float] = {}
        self.device_sums: dict[str, dict[str, float]] = {}
        self.device_seconds: dict[str, float] = {}
        #: Per device: each latency quantile × seconds, and the seconds of intervals with one.
        self.latency_sums: dict[str, dict[str, float]] = {}
        self.latency_seconds: dict[str, float] = {}

    def add_op(
        self, op: str, count: float, errors: float, histogram: HdrHistogram | None = None
    ) -> None:
        """One interval's figures of one operation."""
        self.counts[op] = self.counts.get(op, 0.0) + count
        self.errors[op] = self.errors.get(op, 0.0) + errors
        if histogram is not None and histogram.get_total_count():
            merged = self.histograms.get(op)
            if merged is None:
                from sim.core.metrics import new_histogram

                merged = self.histograms[op] = new_histogram()
            merged.add(histogram)

    def add_device(self, device: str, values: Mapping[str, Any], seconds: float) -> None:
        """One interval's block figures of one device."""
        if seconds <= 0:
            return
        sums = self.device_sums.setdefault(device, {})
        for key in RATES:
            if (v := finite(values.get(key))) is not None:
                sums[key] = sums.get(key, 0.0) + v * seconds
        # Awaits weighted by I/Os, so the step's await is the mean wait per I/O.
        for rate, wait in (("r_s", "r_await_ms"), ("w_s", "w_await_ms")):
            r, w = finite(values.get(rate)), finite(values.get(wait))
            if r is not None and w is not None:
                sums[wait] = sums.get(wait, 0.0) + r * w * seconds
        self.device_seconds[device] = self.device_seconds.get(device, 0.0) + seconds

    def add_device_latency(self, device: str, values: Mapping[str, Any], seconds: float) -> None:
        """One interval's latency quantiles of one device (the device-latency collector's),
        weighted by the interval's length like the summary's means."""
        found = {
            k: v for k in DEVICE_LATENCY_LIMITS.values() if (v := finite(values.get(k))) is not None
        }
        if seconds <= 0 or not found:
            return
        sums = self.latency_sums.setdefault(device, {})
        for key, value in found.items():
            sums[key] = sums.get(key, 0.0) + value * seconds
        self.latency_seconds[device] = self.latency_seconds.get(device, 0.0) + seconds

    def window(self, label: str, seconds: float) -> Window:
        """The accumulated figures over ``seconds`` of measured time."""
        # Imported here: `dbsim validate` and a refused run check SLO operation names through
        # this module (unknown_operations) and need no numpy (issue #25).
        from sim.core.metrics import percentile_values

        ops: dict[str, dict[str, float | None]] = {}
        for op in sorted(set(self.counts) | set(self.histograms)):
            hist = self.histograms.get(op)
            count = self.counts.get(op, 0.0)
            figures: dict[str, float | None] = {
                "count": count,
                "errors": self.errors.get(op, 0.0),
                "ops_s": count / seconds if seconds > 0 else None,
            }
            values = percentile_values(hist, PERCENTILES.values()) if hist else {}
            for name, pct in PERCENTILES.items():
                figures[name] = float(values.get(pct, 0)) if hist else None
            ops[op] = figures
        devices: dict[str, dict[str, float | None]] = {}
        for dev, sums in sorted(self.device_sums.items()):
            span = self.device_seconds[dev]
            means: dict[str, float] = {k: sums[k] / span for k in RATES if k in sums}
            for rate, wait in (("r_s", "r_await_ms"), ("w_s", "w_await_ms")):
                io_count = sums.get(rate, 0.0)
                if wait in sums and io_count > 0:
                    means[wait] = sums[wait] / io_count
            devices[dev] = device_figures(means)
        add_device_latency(
            devices,
            {
                dev: {k: v / self.latency_seconds[dev] for k, v in sums.items()}
                for dev, sums in self.latency_sums.items()
            },
        )
        return Window(label, seconds, ops, devices)


# --------------------------------------------------------------------------- verdicts


def _verdict(
    slo: Slo, limit_name: str, limit: float, scope: tuple[str, str | None], measured: float | None
) -> dict[str, Any]:
    minimum = limit_name.endswith("_min")
    entry: dict[str, Any] = {"slo": limit_name}
    if slo.name:
        entry["name"] = slo.name
    entry[scope[0]] = scope[1]
    met = measured is not None and (measured >= limit if minimum else measured <= limit)
    margin = None
    if measured is not None and limit > 0:
        margin = round(100 * ((measured - limit) if minimum else (limit - measured)) / limit, 1)
    entry.update(
        limit=limit,
        measured=None if measured is None else round(measured, 3),
        met=met,
        margin_pct=margin,
    )
    return entry


def _error_pct(count: float | None, errors: float | None) -> float | None:
    issued = (count or 0.0) + (errors or 0.0)
    return 100 * (errors or 0.0) / issued if issued > 0 else None


def _measure(limit_name: str, figures: Mapping[str, float | None]) -> float | None:
    if limit_name in LATENCY_LIMITS:
        return figures.get(LATENCY_LIMITS[limit_name])
    if limit_name == "ops_s_min":
        return figures.get("ops_s")
    return _error_pct(figures.get("count"), figures.get("errors"))


def _figure_of(storage_limit: str) -> str:
    if storage_limit in DEVICE_LATENCY_LIMITS:
        return DEVICE_LATENCY_LIMITS[storage_limit]
    return "iops" if storage_limit == "iops_min" else "await_ms"


def evaluate(
    slos: Sequence[Slo], window: Window, device: str | None = None
) -> list[dict[str, Any]]:
    """Every limit of every objective judged on ``window``; ``device`` is the device an
    objective without one is judged on (default: the window's busiest)."""
    out: list[dict[str, Any]] = []
    issued = {op: f for op, f in window.ops.items() if (f["count"] or 0) + (f["errors"] or 0)}
    # "*" for throughput and errors: all operations together.
    together = {k: sum(f[k] or 0.0 for f in issued.values()) for k in ("count", "errors", "ops_s")}
    for slo in slos:
        if slo.storage:
            dev = slo.device or device or primary_device(window.devices)
            block = window.devices.get(dev or "") or {}
            for name, limit in slo.limits():
                entry = _verdict(slo, name, limit, ("device", dev), block.get(_figure_of(name)))
                if not block:
                    entry["note"] = f"no block figures for device {dev or '(none measured)'}"
                elif name in DEVICE_LATENCY_LIMITS and entry["measured"] is None:
                    entry["note"] = (
                        f"no device latency percentiles for {dev} (eBPF unavailable: see "
                        "the summary's messages)"
                    )
                out.append(entry)
            continue
        op = slo.op or ALL_OPS
        for name, limit in slo.limits():
            if op == ALL_OPS and name not in LATENCY_LIMITS:
                out.append(_verdict(slo, name, limit, ("op", ALL_OPS), _measure(name, together)))
                continue
            targets = sorted(issued) if op == ALL_OPS else [op]
            if not targets:
                out.append(_verdict(slo, name, limit, ("op", op), None))
                out[-1]["note"] = "no operation completed"
            for target in targets:
                figures = window.ops.get(target)
                value = None if figures is None else _measure(name, figures)
                entry = _verdict(slo, name, limit, ("op", target), value)
                if figures is None:
                    known = ", ".join(sorted(issued)) or "none"
                    entry["note"] = f"no operation {target!r} was measured (measured: {known})"
                elif value is None:
                    entry["note"] = "not measured (no successful operation)"
                out.append(entry)
    return out


def all_met(verdicts: Iterable[Mapping[str, Any]]) -> bool:
    """Whether every verdict is met (True for none)."""
    return all(v.get("met") is True for v in verdicts)


def summary_section(slos: Sequence[Slo], summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary["slos"]`` of a run without a sweep: verdicts over the measured window."""
    verdicts = evaluate(slos, Window.from_summary(summary))
    source = device_latency_source()
    why = ((summary.get("findings") or {}).get(source or "") or {}).get("unavailable")
    for verdict in verdicts:
        if why and verdict["slo"] in DEVICE_LATENCY_LIMITS and verdict["measured"] is None:
            verdict["note"] = f"no device latency percentiles: {why}"
    return {"met": all_met(verdicts), "window": "measured window", "verdicts": verdicts}


def missed(summary: Mapping[str, Any]) -> bool | None:
    """True when the summary's SLO section says an objective was missed, False when all were
    met, None when the run had no objectives or their verdict could not be formed."""
    section = summary.get("slos")
    if not isinstance(section, dict) or not isinstance(section.get("met"), bool):
        return None
    return not section["met"]


def completed_exit_code(summary: Mapping[str, Any], *, declared: bool) -> tuple[int, str | None]:
    """The exit code of a run that completed, by its objectives (``declared``: the scenario
    has some): 0 every one met or none declared, 1 one missed, 3 when declared objectives
    could not be judged — with the line to print then, since dbsim does not vouch for them.
    ``dbsim run`` and ``dbsim run --workers`` both answer with this."""
    verdict = missed(summary)
    if declared and verdict is None:
        why = (summary.get("slos") or {}).get("error", "no verdict")
        return EXIT_RUN_FAILED, f"SLOs not judged: {why}"
    return (EXIT_SLO_MISSED if verdict else EXIT_OK), None


# --------------------------------------------------------------------------- text

LABELS = {
    "p50_us_max": ("p50", "≤"),
    "p95_us_max": ("p95", "≤"),
    "p99_us_max": ("p99", "≤"),
    "ops_s_min": ("ops/s", "≥"),
    "error_pct_max": ("errors", "≤"),
    "iops_min": ("IOPS", "≥"),
    "await_ms_max": ("await", "≤"),
    "device_p95_ms_max": ("device p95", "≤"),
    "device_p99_ms_max": ("device p99", "≤"),
}


def format_value(limit_name: str, value: float | None) -> str:
    """A limit or a measurement in the unit a DBA reads it."""
    if value is None:
        return "not measured"
    if limit_name in LATENCY_LIMITS:
        if value >= 1_000_000:
            return f"{value / 1_000_000:,.2f} s"
        return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.0f} µs"
    if limit_name == "error_pct_max":
        return f"{value:.2f} %"
    if limit_name == "await_ms_max" or limit_name in DEVICE_LATENCY_LIMITS:
        # In ms as iostat and the compare tables write it, in µs where two decimals would
        # lose it (a 1 µs limit printed "≤ 0.00 ms").
        return f"{value:.2f} ms" if value >= 0.01 else f"{value * 1000:,.1f} µs"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def verdict_line(entry: Mapping[str, Any]) -> str:
    """One verdict as a line: ``SLO met: read p99 ≤ 5.00 ms: 1.52 ms (margin +69.7 %)``."""
    name = str(entry.get("slo"))
    label, sign = LABELS.get(name, (name, "vs"))
    scope = entry.get("op") or entry.get("device") or "?"
    scope = "all operations" if scope == ALL_OPS else scope
    title = f" [{entry['name']}]" if entry.get("name") else ""
    state = "met" if entry.get("met") else "MISSED"
    at = f" at {entry['at']}" if entry.get("at") else ""  # IOPS asked: sweep.at_iops
    text = (
        f"SLO {state}{title}: {scope} {label} {sign} {format_value(name, entry.get('limit'))}"
        f"{at}: {format_value(name, entry.get('measured'))}"
    )
    if entry.get("margin_pct") is not None:
        text += f" (margin {entry['margin_pct']:+,.1f} %)"
    if entry.get("note"):
        text += f" — {entry['note']}"
    return text
