"""The sections of the analysis that describe a window: correlation, lag, curve, I/O per
operation, regression and Little's law. Each takes aligned series and returns JSON-ready
values (None where undefined, never NaN)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sim import registry
from sim.analysis import stats
from sim.analysis.series import BundleSeries, correlatable, database_figures
from sim.analysis.stats import FloatArray
from sim.analysis.verdict import PLATEAU_MIN_RISE, PLATEAU_TOLERANCE, SESSIONS_BUSY_RATIO
from sim.bundle.iops import window_iops
from sim.registry import ROLE_DEVICE

#: The primary device's figures correlated with application latency.
STORAGE_METRICS = ("iops", "await_ms", "r_await_ms", "w_await_ms", "aqu_sz", "util_pct")
LATENCIES = ("p50_us", "p99_us")
#: Figures the verdict tries as "storage latency": await, and the queue that blk-throttle
#: and QoS ceilings leave as the only visible trace when await stays low.
COUPLING_METRICS = ("await_ms", "aqu_sz")
#: Intervals binned per curve point when the run has no steps: at least MIN, at most MAX bins.
CURVE_MIN_BINS = 5
CURVE_MAX_BINS = 10
CURVE_INTERVALS_PER_BIN = 3
READ_OP = "read"


def rounded(value: float | None, digits: int = 4) -> float | None:
    """A finite float rounded for JSON, or None."""
    if value is None or not np.isfinite(value):
        return None
    return round(float(value), digits)


def as_list(values: FloatArray, digits: int = 3) -> list[float | None]:
    """An array as a JSON list (NaN becomes null)."""
    return [rounded(float(v), digits) for v in values]


def total_ops_s(series: BundleSeries) -> FloatArray:
    """Application ops/s of all operations together, per interval."""
    total = np.zeros(series.n)
    for figures in series.ops.values():
        total += np.nan_to_num(figures["ops_s"])
    return total


def op_count(series: BundleSeries, op: str | None = None) -> FloatArray:
    """Completed operations per interval: of ``op``, or of every operation."""
    if op is not None:
        figures = series.ops.get(op)
        return np.zeros(series.n) if figures is None else np.nan_to_num(figures["count"])
    total = np.zeros(series.n)
    for figures in series.ops.values():
        total += np.nan_to_num(figures["count"])
    return total


def read_op(series: BundleSeries, primary: str | None) -> str | None:
    """The operation counted as "a read": the op named ``read``, else the primary op."""
    return READ_OP if READ_OP in series.ops else primary


def per_op(rate: FloatArray | None, seconds: FloatArray, counts: FloatArray) -> float | None:
    """Σ(rate·seconds) / Σcount over the intervals where the rate is known."""
    if rate is None:
        return None
    keep = np.isfinite(rate)
    ops = float(np.sum(counts[keep]))
    if ops <= 0:
        return None
    value = float(np.sum(rate[keep] * seconds[keep])) / ops
    return value if np.isfinite(value) else None


def correlation_section(
    series: BundleSeries, device: Mapping[str, FloatArray] | None
) -> dict[str, Any]:
    """Per op and latency percentile: Pearson, Spearman and n against each storage metric."""
    if device is None:
        return {}
    out: dict[str, Any] = {}
    for op, figures in sorted(series.ops.items()):
        if not np.nansum(figures["count"]) > 0:
            continue
        out[op] = {
            latency: {
                metric: stats.correlation(figures[latency], device[metric])
                for metric in STORAGE_METRICS
                if metric in device
            }
            for latency in LATENCIES
        }
    return out


def coupling(
    series: BundleSeries, op: str | None, device: Mapping[str, FloatArray] | None
) -> tuple[float | None, str, int]:
    """The strongest sign that ``op``'s latency moves with storage latency: the best of
    Pearson and Spearman, p99 or p50, against await or aqu-sz. (r, description, n)."""
    if op is None or device is None or op not in series.ops:
        return None, "", 0
    best: tuple[float | None, str, int] = (None, "", 0)
    for latency in ("p99_us", "p50_us"):
        for metric in COUPLING_METRICS:
            if metric not in device:
                continue
            result = stats.correlation(series.ops[op][latency], device[metric])
            for kind in ("spearman", "pearson"):
                r = result[kind]
                if r is not None and (best[0] is None or r > best[0]):
                    name = latency.removesuffix("_us")
                    best = (r, f"{kind.capitalize()} of {op} {name} with {metric}", result["n"])
    return best


def collector_coupling(series: BundleSeries, op: str | None) -> list[dict[str, Any]]:
    """Per collector other than the block devices (whose figures :func:`correlation_section`
    and :func:`coupling` cover), the strongest sign that ``op``'s latency moves with one of
    the figures it declares correlatable (sim.registry ``CollectorEntry.correlate``): the best
    of Pearson and Spearman, p99 or p50, over its entities. One row per such collector."""
    if op is None or op not in series.ops:
        return []
    best: dict[str, dict[str, Any]] = {}
    for entry, entity, figure, values in correlatable(series):
        if entry.role == ROLE_DEVICE:
            continue
        title = entry.display.title if entry.display else entry.source
        row = best.setdefault(
            entry.source, {"source": entry.source, "title": title, "r": None, "what": "", "n": 0}
        )
        for latency in ("p99_us", "p50_us"):
            result = stats.correlation(series.ops[op][latency], values)
            for kind in ("spearman", "pearson"):
                r = result[kind]
                if r is not None and (row["r"] is None or r > row["r"]):
                    name = latency.removesuffix("_us")
                    row.update(
                        r=rounded(r),
                        what=f"{kind.capitalize()} of {op} {name} with {entity} {figure.label}",
                        n=result["n"],
                    )
    return list(best.values())


def lag_section(series: BundleSeries, device: Mapping[str, FloatArray] | None) -> dict[str, Any]:
    """Per op: the lag (−5..+5 intervals) at which p99 best follows await; + = storage leads."""
    if device is None or "await_ms" not in device:
        return {}
    out: dict[str, Any] = {}
    for op, figures in sorted(series.ops.items()):
        if not np.nansum(figures["count"]) > 0:
            continue
        found = stats.best_lag(device["await_ms"], figures["p99_us"])
        if found is None:
            out[op] = {"metric": "await_ms", "best_lag_s": None, "r": None, "leader": None}
            continue
        k, r = found
        leader = "storage" if k > 0 else "application" if k < 0 else "simultaneous"
        out[op] = {
            "metric": "await_ms",
            "best_lag_s": rounded(k * series.interval_s, 3),
            "r": rounded(r),
            "leader": leader,
        }
    return out


def curve_section(
    series: BundleSeries, op: str | None, device: Mapping[str, FloatArray] | None
) -> dict[str, Any]:
    """Latency versus load: a point per step (medians), or intervals binned by load."""
    use_device = device is not None and "iops" in device
    x = device["iops"] if device is not None and use_device else total_ops_s(series)
    ops_s = total_ops_s(series)
    nan = np.full(series.n, np.nan)
    p50 = series.ops[op]["p50_us"] if op in series.ops else nan
    p99 = series.ops[op]["p99_us"] if op in series.ops else nan
    steps = sorted({s for s in series.step if s is not None})
    groups: list[np.ndarray]
    if steps:
        step_arr = np.array([-1 if s is None else s for s in series.step])
        groups = [np.flatnonzero(step_arr == s) for s in steps]
    else:
        finite = x[np.isfinite(x)]
        # No spread: one point. Spread over fewer intervals than the minimum of bins: one
        # point per interval. Else 5–10 bins of about three intervals each.
        bins = 1 if stats.is_constant(finite) else finite.size
        if bins >= CURVE_MIN_BINS:
            bins = min(CURVE_MAX_BINS, max(CURVE_MIN_BINS, bins // CURVE_INTERVALS_PER_BIN))
        groups = stats.equal_count_bins(x, bins)
    # x is the group's IOPS by the one definition (sim.bundle.iops: the length-weighted mean),
    # what the chart and the tables show; the plateau is found on the medians (x_median), which
    # a neighbour's burst in one interval of a step does not move.
    points = [
        {
            "x": rounded(window_iops(x[g], series.duration_s[g]), 3),
            "x_median": rounded(stats.nan_median(x[g]), 3),
            "ops_s": rounded(stats.nan_median(ops_s[g]), 3),
            "p50_us": rounded(stats.nan_median(p50[g]), 1),
            "p99_us": rounded(stats.nan_median(p99[g]), 1),
            "n": int(g.size),
        }
        for g in groups
        if g.size
    ]
    knee: dict[str, Any] | None = None
    px = [np.nan if p["x"] is None else p["x"] for p in points]
    py = [np.nan if p["p99_us"] is None else p["p99_us"] for p in points]
    start = plateau_start(points) if steps and use_device else None
    if start is not None:
        # The plateau's IOPS is the highest step median from its first step on, not that first
        # step's own: the plateau test tolerates steps up to PLATEAU_TOLERANCE below the
        # ceiling, and a step that only nearly reached it (440 IOPS under a 500 ceiling, then
        # 499: storage lab, shared host) would put the knee 12 % low. p99 is the first step's,
        # where latency began to climb.
        plateau_x = [v for v in px[start:] if np.isfinite(v)]
        knee = {
            "x": rounded(max(plateau_x), 3),
            "p99_us": points[start]["p99_us"],
            "method": "plateau",
        }
    else:
        found = stats.hinge_knee(px, py)
        if found is not None:
            knee = {"x": rounded(found.x, 3), "p99_us": rounded(found.y, 1), "method": found.method}
    return {"x": "device_iops" if use_device else "ops_s", "points": points, "knee": knee}


#: Under one device read per this many reading operations, the data was served from a cache.
CACHED_READS_PER_READ = 0.05
#: Writes and flushes at least this share of the device's I/O: what it did was write-back.
WRITE_BACK_SHARE = 0.9
KNEE_NAMES = {
    "storage": "knee",
    "write-back": "write-back knee (data cached: the storage's read path was not exercised)",
    "cache": "cache knee (data cached: the storage was hardly exercised)",
}


def name_knee(
    knee: dict[str, Any] | None,
    reads_per_read: float | None,
    device: Mapping[str, FloatArray] | None,
) -> None:
    """Say whose knee ``knee`` is (``kind``, ``name``): the storage's, unless the device
    hardly read while the workload read (under :data:`CACHED_READS_PER_READ`) — then it is
    a write-back knee when writes and flushes were the device's I/O (WAL checkpoints, dirty
    pages flushed: the knee of the write-back, not of the storage's reads), else a cache knee."""
    if knee is None:
        return
    kind = "storage"
    if reads_per_read is not None and reads_per_read < CACHED_READS_PER_READ:
        kind = "cache"
        if device is not None:
            n = len(next(iter(device.values()), []))
            zero = np.zeros(n)
            r, w, f = (float(np.nansum(device.get(k, zero))) for k in ("r_s", "w_s", "f_s"))
            if r + w + f > 0 and (w + f) / (r + w + f) >= WRITE_BACK_SHARE:
                kind = "write-back"
    knee.update(kind=kind, name=KNEE_NAMES[kind])


def median_x(point: Mapping[str, Any]) -> float | None:
    """A curve point's median load (older analyses have only ``x``)."""
    value = point.get("x_median", point.get("x"))
    return None if value is None else float(value)


def plateau_start(points: list[dict[str, Any]]) -> int | None:
    """The first step from which IOPS stayed flat while p99 kept rising (see verdict), on
    the steps' median IOPS."""
    x = [np.nan if (v := median_x(p)) is None else v for p in points]
    y = [np.nan if p["p99_us"] is None else p["p99_us"] for p in points]
    return stats.plateau_knee(x, y, tolerance=PLATEAU_TOLERANCE, min_rise=PLATEAU_MIN_RISE)


def io_figures(
    series: BundleSeries, primary: str | None, device: Mapping[str, FloatArray] | None
) -> dict[str, float | None]:
    """I/O cost per operation over the window, plus the database cache hit ratio."""
    seconds = series.duration_s
    all_ops = op_count(series)
    reads = op_count(series, read_op(series, primary))
    db = database_figures(series)
    db_read = db.get("blks_read_s") if db else None
    cache_hit: float | None = None
    if db is not None:
        hit = db.get("blks_hit_s")
        if hit is not None and db_read is not None:
            keep = np.isfinite(hit) & np.isfinite(db_read)
            hits = float(np.sum(hit[keep] * seconds[keep]))
            total = hits + float(np.sum(db_read[keep] * seconds[keep]))
            cache_hit = 100.0 * hits / total if total > 0 else None
        elif "cache_hit_pct" in db:
            cache_hit = stats.nan_mean(db["cache_hit_pct"])
    sync: FloatArray | None = None
    if device is not None and "r_s" in device:
        # Reads and flushes: what sessions wait for (flush counts exist on kernels ≥ 5.5).
        sync = device["r_s"] + np.nan_to_num(device.get("f_s", np.zeros(series.n)))
    return {
        "device_ios_per_op": per_op(device.get("iops") if device else None, seconds, all_ops),
        "device_sync_ios_per_op": per_op(sync, seconds, all_ops),
        "device_read_ios_per_read": per_op(device.get("r_s") if device else None, seconds, reads),
        "db_blocks_read_per_read": per_op(db_read, seconds, reads),
        "db_blocks_read_per_op": per_op(db_read, seconds, all_ops),
        "cache_hit_pct": cache_hit,
    }


def layer_ios_per_op(series: BundleSeries) -> list[dict[str, Any]]:
    """I/Os per operation at every other layer that counts its I/Os (a collector's declared
    ``ios_figure``: the array's volumes and LUNs, NFS calls), per entity — what the host's
    block device shows, seen from below it too. A LUN and the volume holding it each count
    the same I/Os: entities are listed, never summed."""
    seconds, all_ops = series.duration_s, op_count(series)
    out: list[dict[str, Any]] = []
    for entry in registry.collectors().values():
        if not entry.ios_figure or entry.role == ROLE_DEVICE:
            continue
        title = entry.display.title if entry.display else entry.source
        for entity, columns in sorted((series.sources.get(entry.source) or {}).items()):
            value = per_op(columns.get(entry.ios_figure), seconds, all_ops)
            if value is not None:
                out.append(
                    {"source": entry.source, "title": title, "entity": entity,
                     "ios_per_op": rounded(value)}
                )  # fmt: skip
    return out


def regression_section(
    series: BundleSeries, device: Mapping[str, FloatArray] | None
) -> dict[str, Any]:
    """Per op: p99 (µs) against await (ms) by least squares."""
    if device is None or "await_ms" not in device:
        return {}
    out: dict[str, Any] = {}
    for op, figures in sorted(series.ops.items()):
        if not np.nansum(figures["count"]) > 0:
            continue
        fit = stats.linear_fit(device["await_ms"], figures["p99_us"])
        out[op] = {
            "y": "p99_us",
            "x": "await_ms",
            "slope_us_per_ms": rounded(fit.slope, 3) if fit else None,
            "intercept_us": rounded(fit.intercept, 1) if fit else None,
            "r2": rounded(fit.r2) if fit else None,
        }
    return out


def littles_law(series: BundleSeries, sessions: FloatArray) -> stats.LittlesLaw | None:
    """Little's law over the window, sessions time-weighted over the intervals."""
    counts = np.concatenate([f["count"] for f in series.ops.values()] or [np.zeros(0)])
    means = np.concatenate([f["mean_us"] for f in series.ops.values()] or [np.zeros(0)])
    known = np.isfinite(sessions)
    mean_sessions = (
        stats.nan_mean(sessions[known], series.duration_s[known]) if np.any(known) else None
    )
    return stats.littles_law(counts, means, float(np.sum(series.duration_s)), mean_sessions)


#: Little's L / sessions above which a closed loop's figures contradict each other.
LITTLES_IMPOSSIBLE_RATIO = 1.2


def littles_law_section(
    law: stats.LittlesLaw | None, *, varying: bool, open_loop: bool, think: bool
) -> dict[str, Any]:
    """The report's view of Little's law, with a note saying what the ratio means."""
    if law is None:
        return {
            "sessions": None,
            "concurrency_measured": None,
            "ratio": None,
            "note": "no completed operations in the measured window",
        }
    ratio = law.ratio
    how = "time-weighted mean of the steps' sessions; " if varying else ""
    if ratio is None:
        note = "the session count is unknown, so the ratio cannot be formed"
    elif open_loop:
        note = (
            "open loop: latency counts from each operation's intended start, so L also counts "
            "operations queued behind their schedule and the ratio is no share of session time; "
            "below 1 is expected (sessions wait for their schedule), above 1 the sessions fell "
            "behind the rate asked (a slow target, or a client short of CPU) and operations "
            "queued"
        )
    elif ratio > LITTLES_IMPOSSIBLE_RATIO:
        note = (
            "more operations in flight than sessions: the latency clock or the session count "
            "is wrong"
        )
    elif ratio >= SESSIONS_BUSY_RATIO:
        note = "sessions spent nearly all their time inside operations (waiting on the target)"
    else:
        elsewhere = "think time, " if think else ""
        note = (
            f"sessions spent {100 * (1 - ratio):.0f} % of their time outside timed operations "
            f"({elsewhere}client CPU between operations)"
        )
    return {
        "sessions": rounded(law.sessions, 3),
        "concurrency_measured": rounded(law.concurrency),
        "ratio": rounded(ratio),
        "note": how + note,
    }


def sessions_busy(ratio: float | None, *, open_loop: bool) -> str:
    """What Little's L / sessions says of the sessions' time, as the verdict's plateau
    evidence prints it after the IOPS variation: a share of time only in a closed loop, and
    never above 100 %. An open loop's latency counts from the intended start, so its L also
    counts the operations queued behind the schedule (docs/report.md, Little's law)."""
    if ratio is None:
        return "with the sessions' share of time inside operations unknown (no session count)"
    figure = f"Little's L / sessions {ratio:.2f}"
    if open_loop:
        return (
            f"in an open loop, whose IOPS follow the rate asked ({figure} is no share of "
            "session time there: latency counts from the intended start)"
        )
    if ratio > LITTLES_IMPOSSIBLE_RATIO:
        return (
            f"with {figure}: more operations in flight than sessions, the latency clock or "
            "the session count is wrong"
        )
    if ratio > 1:
        return f"with the sessions inside operations all the time ({figure})"
    return f"with the sessions inside operations {100 * ratio:.0f} % of the time"
