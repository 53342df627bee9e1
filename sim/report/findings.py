"""The analysis' tables: correlation, lag, regression, I/O cost per operation, Little's law."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.report.markup import Safe, esc, kv_table, plain, ratio, section, short, table, us
from sim.report.scales import finite

METRICS = {
    "await_ms": "device await",
    "r_await_ms": "device read await",
    "w_await_ms": "device write await",
    "iops": "device IOPS",
    "util_pct": "device %util",
    "aqu_sz": "device queue (aqu-sz)",
    "cpu_busy_pct": "host CPU busy",
    "process_cpu_pct": "dbsim process CPU",
}
LATENCY = {"p50_us": "p50", "p99_us": "p99"}
IO_COST = {
    "device_ios_per_op": "device I/Os per operation",
    "device_read_ios_per_read": "device read I/Os per read",
    "db_blocks_read_per_read": "database blocks read per read",
    "cache_hit_pct": "database cache hit %",
}
STRONG_R = 0.7
MODERATE_R = 0.4


def _tint(value: object) -> Safe:
    r = finite(value)
    strength = (
        ""
        if r is None
        else "strong"
        if abs(r) >= STRONG_R
        else "moderate"
        if abs(r) >= MODERATE_R
        else ""
    )
    text = esc(ratio(value))
    return Safe(f'<span class="{strength}">{text}</span>') if strength else Safe(text)


def analysis_tables(analysis: Mapping[str, Any] | None) -> Safe:
    """Correlation, lag, regression, I/O per operation and Little's law."""
    if not analysis:
        return Safe("")
    tables = (
        _correlation_table(analysis.get("correlation") or {}),
        _lag_table(analysis.get("lag") or {}),
        _regression_table(analysis.get("regression") or {}),
        _io_cost_table(analysis.get("io_per_op") or {}),
        _littles_law_table(analysis.get("littles_law") or {}),
    )
    parts = [part for part in tables if part is not None]
    if not parts:
        return Safe("")
    return section("analysis", "Analysis", *parts)


def _correlation_table(corr: Mapping[str, Any]) -> Safe | None:
    """Pearson and Spearman of p50 and p99 against every figure, per operation."""
    rows = []
    for op, by_y in corr.items():
        metrics = list(dict.fromkeys([*(by_y.get("p50_us") or {}), *(by_y.get("p99_us") or {})]))
        for metric in metrics:
            p50 = (by_y.get("p50_us") or {}).get(metric) or {}
            p99 = (by_y.get("p99_us") or {}).get(metric) or {}
            rows.append(
                [
                    op,
                    METRICS.get(metric, metric),
                    _tint(p50.get("pearson")),
                    _tint(p50.get("spearman")),
                    _tint(p99.get("pearson")),
                    _tint(p99.get("spearman")),
                    plain(p99.get("n", p50.get("n"))),
                ]
            )
    if not rows:
        return None
    return table(
        (
            "operation",
            "versus",
            "p50 Pearson r",
            "p50 Spearman ρ",
            "p99 Pearson r",
            "p99 Spearman ρ",
            "n",
        ),
        rows,
        left=2,
        caption="Correlation of latency with storage and host figures, per interval "
        "(|r| ≥ 0.7 strong, ≥ 0.4 moderate)",
    )


def _lag_table(lag: Mapping[str, Any]) -> Safe | None:
    rows = [
        [
            op,
            METRICS.get(str(v.get("metric")), v.get("metric")),
            short(v.get("best_lag_s")),
            ratio(v.get("r")),
            v.get("leader"),
        ]
        for op, v in lag.items()
        if isinstance(v, dict)
    ]
    if not rows:
        return None
    return table(
        ("operation", "versus", "best lag s", "r", "leads"),
        rows,
        left=2,
        caption="Lag: the time shift that best aligns latency with the storage figure, and "
        "which side moved first",
    )


def _regression_table(regression: Mapping[str, Any]) -> Safe | None:
    rows = [
        [
            op,
            f"{LATENCY.get(str(v.get('y')), v.get('y'))} ~ "
            f"{METRICS.get(str(v.get('x')), v.get('x'))}",
            short(v.get("slope_us_per_ms")),
            us(v.get("intercept_us")),
            ratio(v.get("r2")),
        ]
        for op, v in regression.items()
        if isinstance(v, dict)
    ]
    if not rows:
        return None
    return table(
        ("operation", "model", "µs per ms of await", "intercept", "R²"),
        rows,
        left=2,
        caption="Linear regression of latency on device await",
    )


def _io_cost_table(io: Mapping[str, Any]) -> Safe | None:
    if not io:
        return None
    rows = {IO_COST.get(k, k): v for k, v in io.items() if k != "layers"}
    rows.update(layer_rows(io))
    return kv_table(
        rows, caption="I/O cost per operation: the host's device, then the layers below"
    )


def layer_rows(io: Mapping[str, Any]) -> dict[str, Any]:
    """``{"ONTAP volume:lun I/Os per operation": 52.1, …}``: the layers below the host's
    block device that count their I/Os (analysis ``io_per_op.layers``)."""
    return {
        f"{layer.get('title')} {layer.get('entity')} I/Os per operation": layer.get("ios_per_op")
        for layer in io.get("layers") or []
        if isinstance(layer, Mapping)
    }


def _littles_law_table(little: Mapping[str, Any]) -> Safe | None:
    if not little:
        return None
    return kv_table(
        {
            "sessions": little.get("sessions"),
            "concurrency measured (ops/s × mean latency)": little.get("concurrency_measured"),
            "ratio": little.get("ratio"),
            "note": little.get("note"),
        },
        caption="Little's law",
    )
