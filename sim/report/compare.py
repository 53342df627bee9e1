"""The comparison of two runs (:func:`sim.judge.compare.compare`) as a DBA reads it: the table
rows in their units (for the terminal and the page) and one self-contained page (inline CSS,
no script, no request), beside the run report's pages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.judge.compare import LABELS, POINT_METRICS
from sim.judge.slo import format_value
from sim.report.markup import DASH, Safe, esc, kv_table, num, page, section, short, table


def fmt(metric: str, value: float | None, *, signed: bool = False) -> str:
    """A figure in the unit a DBA reads it (signed for a delta)."""
    if value is None:
        return DASH
    sign = "+" if signed and value > 0 else ""
    if metric in ("p50_us", "p99_us"):
        return ("−" if value < 0 else sign) + format_value("p99_us_max", abs(value))
    if metric == "await_ms":
        return sign + f"{value:.2f} ms".replace("-", "−")
    if metric == "ios_per_op":
        return sign + short(value)
    if metric in POINT_METRICS:
        return sign + f"{value:.3g} %".replace("-", "−")
    return sign + num(value, 1 if metric == "ops_s" else 0)


def fmt_pct(value: float | None) -> str:
    """A percent change with its sign."""
    return "–" if value is None else f"{value:+.1f} %".replace("-", "−")


def fmt_ci(row: Mapping[str, Any]) -> str:
    """The 95 % interval of the ratio candidate / baseline, ``0.93–1.08``; a dash without."""
    ci = row.get("ci95")
    if not ci:
        return "–" if row["metric"] in POINT_METRICS else "too few batches"
    return f"{ci[0]:.3f}–{ci[1]:.3f}"


def table_rows(result: Mapping[str, Any]) -> list[list[str]]:
    """The comparison as text cells: scope, metric, baseline, candidate, Δ %, the ratio's
    95 % interval, threshold, verdict (shared by the terminal table and the HTML page)."""
    out = []
    for row in result["rows"]:
        metric = row["metric"]
        threshold = row["threshold_pct"]
        out.append(
            [
                row["scope"],
                LABELS.get(metric, metric),
                fmt(metric, row["baseline"]),
                fmt(metric, row["candidate"]),
                fmt(metric, row["delta"], signed=True)
                if metric in POINT_METRICS
                else fmt_pct(row["delta_pct"]),
                fmt_ci(row),
                "–"
                if threshold is None
                else f"{threshold:g} pt"
                if metric in POINT_METRICS
                else f"{threshold:g} %",
                row["change"],
            ]
        )
    return out


HEADERS = (
    "scope",
    "figure",
    "baseline",
    "candidate",
    "change",
    "ratio 95 % CI",
    "threshold",
    "verdict",
)


def measured_line(result: Mapping[str, Any]) -> str:
    """What the figures are and where they come from: measured, over which window, with how
    many intervals, and how the interval was computed."""
    parts = []
    for role in ("baseline", "candidate"):
        run = result[role]
        n, seconds = run.get("intervals"), run.get("measured_s")
        held = "no per-interval series" if n is None else f"{n} intervals"
        parts.append(f"{role} {held}" + ("" if seconds is None else f" ({seconds:.1f} s)"))
    return (
        f"figures: measured, over {result['baseline'].get('window', 'the measured window')}: "
        + ", ".join(parts)
        + f"; ratio CI: {result['verdict'].get('interval', '')}"
    )


def _sentence(call: str) -> str:
    """The verdict in one sentence (markup)."""
    if call == "invalid":
        return (
            "No comparison is made: a run is invalid (its operations failed) or the runs "
            "differ in more than the storage"
        )
    if call == "no significant difference":
        return (
            "No significant difference: a figure moved beyond its threshold, but its 95 % "
            "interval includes no change (run-to-run noise)"
        )
    return (
        f"The candidate is <strong>{esc(call)}</strong> "
        f"{'to' if call == 'equivalent' else 'than'} the baseline by the thresholds below"
        + ("" if call != "equivalent" else " (no judged figure moved beyond its threshold)")
    )


def render_html(result: Mapping[str, Any]) -> str:
    """The comparison as one self-contained page (inline CSS, no script, no request)."""
    verdict = result["verdict"]
    call = verdict["call"]
    kind = {"worse": "fail", "invalid": "fail", "better": "pass"}.get(call, "")
    sentence = _sentence(call)
    decided = "".join(f"<li>{esc(line)}</li>" for line in verdict["decided_by"])
    summary = (
        f'<p class="verdict"><span class="badge {kind}">{esc(call)}</span> {sentence}.</p>'
        + (f"<ul>{decided}</ul>" if decided else "")
    )
    cells = [
        [*row[:-1], Safe(f'<span class="{_css(row[-1])}">{esc(row[-1])}</span>')]
        for row in table_rows(result)
    ]
    runs = {
        "baseline": f"{result['baseline']['run']} ({result['baseline']['path']})",
        "candidate": f"{result['candidate']['run']} ({result['candidate']['path']})",
        "baseline device": result["baseline"]["device"],
        "candidate device": result["candidate"]["device"],
    }
    thresholds = dict(verdict["thresholds"])
    notes = "".join(
        f'<p class="note">{esc(n)}</p>' for n in [measured_line(result), *result["notes"]]
    )
    body = (
        f"<header><h1>dbsim compare: {esc(call)}</h1></header>"
        + section("verdict", "Verdict", Safe(summary), Safe(notes))
        + section("figures", "Figures", table(HEADERS, cells, left=(0, 1, 7)))
        + section("runs", "Runs", kv_table(runs), kv_table(thresholds, caption="Thresholds"))
    )
    return page(
        f"dbsim compare: {result['baseline']['run']} vs {result['candidate']['run']}",
        body,
        "Percent changes are relative to the baseline; a regression is a rise of a latency, "
        "await or I/Os per op, or a fall of ops/s or IOPS; worse or better only when the "
        "ratio's 95 % interval excludes 1.",
    )


def _css(change: str) -> str:
    return {"worse": "bad", "better": "ok"}.get(change, "")
