"""The comparison of runs (:func:`sim.judge.compare.compare_runs`) as a DBA reads it: the
caveats of both sides first, one sentence, the judged figures grouped (regressions apart from
improvements) with each reason explained once, the table rows in their units (for the terminal,
the page and the CSV), and one self-contained page (inline CSS and SVG, no script, no request)
with both runs' charts overlaid on one time axis, the latency-versus-load curves of both and the
workload's score side by side. The charts (:mod:`sim.report.compare_charts`) are the run
report's (:mod:`sim.report.svg`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from sim.judge.compare import GROUPS
from sim.judge.compare_rows import LABELS, NO_SIGNIFICANT, POINT_METRICS, UNDETERMINED
from sim.judge.slo import format_value
from sim.report.compare_charts import SIDE_COLORS, charts_section
from sim.report.markup import DASH, Safe, esc, kv_table, num, page, section, short, table
from sim.report.scales import finite, fmt_number


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
    """The 95 % interval of the ratio candidate / baseline, ``0.93–1.08``; a dash without
    one (why is said once, under the table)."""
    ci = row.get("ci95")
    if not ci:
        return "–" if row["metric"] in POINT_METRICS else "no interval"
    return f"{ci[0]:.3f}–{ci[1]:.3f}"


#: A row's verdict as its table cell: the long ones shortened (explained under the table).
CELL = {UNDETERMINED: "undetermined"}


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
                CELL.get(row["change"], row["change"]),
            ]
        )
    return out


HEADERS = (
    "scope",
    "figure",
    "baseline",
    "candidate",
    "change",
    "ratio CI",  # the 95 % interval; a header no wider than its cells (it does not wrap)
    "threshold",
    "verdict",
)
#: The text columns (left-aligned); the first two are repeated in every folded part.
LEFT = (0, 1, 7)

CSV_HEADERS = (
    "scope",
    "figure",
    "unit",
    "baseline_level",
    "candidate_level",
    "baseline",
    "candidate",
    "delta",
    "delta_pct",
    "ratio",
    "ci95_low",
    "ci95_high",
    "batches_baseline",
    "batches_candidate",
    "threshold",
    "threshold_unit",
    "verdict",
)
UNITS = {
    "ops_s": "ops/s",
    "p50_us": "us",
    "p99_us": "us",
    "error_pct": "%",
    "device_iops": "IOPS",
    "await_ms": "ms",
    "ios_per_op": "I/Os per op",
}


def render_csv(result: Mapping[str, Any]) -> str:
    """The per-figure table as CSV: one row per figure, plain numbers (no thousands
    separators, latencies in µs as measured), the interval's bounds in two columns."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADERS)
    for row in result["rows"]:
        metric = row["metric"]
        ci = row.get("ci95") or [None, None]
        batches = row.get("batches") or [None, None]
        level = row.get("level") or {}
        writer.writerow(
            [
                row["scope"],
                LABELS.get(metric, metric),
                UNITS.get(metric, ""),
                level.get("baseline", ""),
                level.get("candidate", ""),
                *(_plain(row[k]) for k in ("baseline", "candidate", "delta", "delta_pct")),
                _plain(row.get("ratio")),
                _plain(ci[0]),
                _plain(ci[1]),
                _plain(batches[0]),
                _plain(batches[1]),
                _plain(row["threshold_pct"]),
                ""
                if row["threshold_pct"] is None
                else "points"
                if metric in POINT_METRICS
                else "%",
                row["change"],
            ]
        )
    return buffer.getvalue()


def _plain(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def measured_line(result: Mapping[str, Any]) -> str:
    """What the figures are and where they come from: measured, over which window, with how
    many intervals, and how the interval was computed."""
    parts = []
    for role in ("baseline", "candidate"):
        run = result[role]
        n, seconds = run.get("intervals"), run.get("measured_s")
        held = "no per-interval series" if n is None else f"{n} intervals"
        runs = len(run.get("runs") or []) or 1
        held = f"{runs} runs, {held}" if runs > 1 else held
        parts.append(f"{role} {held}" + ("" if seconds is None else f" ({seconds:.1f} s)"))
    levels = result.get("levels")
    at = (
        f"; at load levels matched by delivered load (within {levels['within'] * 100:g} %), "
        "each level's figures the means of its intervals"
        if levels
        else ""
    )
    return (
        f"figures: measured, over {result['baseline'].get('window', 'the measured window')}: "
        + ", ".join(parts)
        + at
        + f"; ratio CI: {result['verdict'].get('interval', '')}"
    )


def sentence(call: str) -> str:
    """The verdict in one plain sentence, the same in the terminal and on the page."""
    return {
        "invalid": "No comparison is made: a run is invalid (its operations failed) or the "
        "runs differ in more than the storage",
        "worse": "The candidate is worse than the baseline: a judged figure moved beyond its "
        "threshold and its 95 % interval excludes no change",
        "better": "The candidate is better than the baseline: a judged figure improved beyond "
        "its threshold, its 95 % interval excluding no change, and none regressed",
        "equivalent": "The candidate is equivalent to the baseline: no judged figure moved "
        "beyond its threshold",
        UNDETERMINED: "Undetermined: a figure moved beyond its threshold, but no 95 % interval "
        "could weigh it (run longer), and none is significantly worse",
        NO_SIGNIFICANT: "No significant difference: a figure moved beyond its threshold, but "
        "its 95 % interval includes no change (run-to-run noise)",
    }.get(call, f"The call is {call}")


def runs_line(result: Mapping[str, Any]) -> str:
    """Which runs are compared: each side's run (and repeats) and primary device."""
    parts = []
    for role in ("baseline", "candidate"):
        side = result[role]
        names = ", ".join(r["run"] for r in side.get("runs") or [side])
        parts.append(f"{role} {names} (device {side.get('device') or 'none'})")
    return "runs: " + "; ".join(parts)


def caveat_lines(result: Mapping[str, Any]) -> list[str]:
    """The caveats that come before every figure: each run's own (not exercised, invalid)
    and those that invalidate the comparison."""
    return [c["text"] for c in result.get("caveats") or [] if "run" in c or c.get("invalidates")]


def grouped(result: Mapping[str, Any]) -> list[tuple[str, list[str], str | None]]:
    """(heading, the rows' descriptions, the one explanation of that reason) for every group
    of judged rows: regressions, improvements, undetermined, within the noise."""
    verdict = result["verdict"]
    explanations = verdict.get("explanations") or {}
    return [
        (heading, verdict[heading], explanations.get(heading))
        for heading in GROUPS.values()
        if verdict.get(heading)
    ]


def console_lines(result: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The lines before the table (the caveats of both sides; no verdict when invalid) and
    after it (what the figures are, the notes, the verdict and its reasons, each reason's
    explanation once)."""
    verdict = result["verdict"]
    call = verdict["call"]
    head = []
    if call == "invalid":
        head.append(f"comparison invalid: {'; '.join(verdict['decided_by'])}")
    shown = set(verdict["decided_by"]) if call == "invalid" else set()
    head += [f"caveat: {text}" for text in caveat_lines(result) if text not in shown]
    tail = [measured_line(result), *score_lines(result), *(f"note: {n}" for n in result["notes"])]
    if call == "invalid":
        tail.append(f"verdict: candidate invalid ({'; '.join(verdict['decided_by'])})")
        return head, tail
    tail.append(f"verdict: candidate {call}. {sentence(call)}.")
    for heading, lines, why in grouped(result):
        tail.append(f"  {heading}" + (f" ({why}):" if why else ":"))
        tail += [f"    {line}" for line in lines]
    return head, tail


# --------------------------------------------------------------------------- the page


def render_html(result: Mapping[str, Any]) -> str:
    """The comparison as one self-contained page (inline CSS and SVG, no script, no
    request)."""
    verdict = result["verdict"]
    call = verdict["call"]
    kind = {"worse": "fail", "invalid": "fail", "better": "pass"}.get(call, "")
    warnings = "".join(
        f'<p class="alert">{esc(t[:1].upper() + t[1:])}</p>' for t in caveat_lines(result)
    )
    groups = "".join(
        f"<h3>{esc(heading.capitalize())}</h3><ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in lines)
        + "</ul>"
        + (f'<p class="note">{esc(why.capitalize())}.</p>' if why else "")
        for heading, lines, why in grouped(result)
    )
    if call == "invalid":
        groups = "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in verdict["decided_by"]) + "</ul>"
    summary = (
        warnings
        + f'<p class="verdict"><span class="badge {kind}">{esc(call)}</span> '
        + f"{esc(sentence(call))}.</p>"
        + groups
    )
    cells = [
        [*row[:-1], Safe(f'<span class="{_css(row[-1])}">{esc(row[-1])}</span>')]
        for row in table_rows(result)
    ]
    notes = "".join(
        f'<p class="note">{esc(n)}</p>' for n in [measured_line(result), *result["notes"]]
    )
    body = (
        f"<header><h1>dbsim compare: {esc(call)}</h1>"
        f'<p class="sub">{esc(result["baseline"]["run"])} (baseline, '
        f'<span style="color:{SIDE_COLORS["baseline"]}">blue</span>) → '
        f"{esc(result['candidate']['run'])} (candidate, "
        f'<span style="color:{SIDE_COLORS["candidate"]}">vermilion</span>)</p></header>'
        + section("verdict", "Verdict", Safe(summary))
        + section("figures", "Figures", table(HEADERS, cells, left=LEFT), Safe(notes))
        + score_section(result)
        + charts_section(result)
        + section("runs", "Runs", _runs_table(result), _thresholds_table(verdict))
    )
    return page(
        f"dbsim compare: {result['baseline']['run']} vs {result['candidate']['run']}",
        body,
        "Percent changes are relative to the baseline; a regression is a rise of a latency, "
        "await or I/Os per op, or a fall of ops/s or IOPS; worse or better only when the "
        "ratio's 95 % interval excludes 1.",
    )


def _runs_table(result: Mapping[str, Any]) -> Safe:
    items: dict[str, Any] = {}
    for role in ("baseline", "candidate"):
        side = result[role]
        for i, run in enumerate(side.get("runs") or [side]):
            name = role if i == 0 else f"{role} repeat {i}"
            items[name] = f"{run['run']} ({run['path']}), device {run['device'] or DASH}"
    levels = result.get("levels")
    if levels:
        for role in ("baseline", "candidate"):
            items[f"{role} load levels"] = ", ".join(
                f"{v['label']}: {fmt_number(v['load'] or 0)} {v['load_unit']}" for v in levels[role]
            )
    return kv_table(items)


def _thresholds_table(verdict: Mapping[str, Any]) -> Safe:
    return kv_table(dict(verdict["thresholds"]), caption="Thresholds")


def _css(change: str) -> str:
    return {"worse": "bad", "better": "ok"}.get(change, "")


# --------------------------------------------------------------------------- score


def score_section(result: Mapping[str, Any]) -> str:
    """The workload's own score (EDA: the highest valid load point and the overall response
    time) of each run side by side; nothing when neither run keeps one."""
    from sim.judge.score import score_line

    scores = result.get("scores") or {}
    rows = []
    for role in ("baseline", "candidate"):
        for i, score in enumerate(scores.get(role) or []):
            line = score_line(score)
            if line is None:
                continue
            best = score.get("highest_valid") if isinstance(score, Mapping) else None
            best = best if isinstance(best, Mapping) else {}
            rows.append(
                [
                    role if i == 0 else f"{role} repeat {i}",
                    _score_num(best.get("achieved_ops_s"), 1),
                    _score_num(best.get("mb_s"), 2),
                    _score_num(best.get("mean_latency_ms"), 3),
                    _score_num(score.get("overall_response_time_ms"), 3),
                    str(
                        sum(
                            1
                            for p in score.get("load_points") or []
                            if isinstance(p, Mapping) and p.get("valid") is not None
                        )
                    ),
                ]
            )
    if not rows:
        return ""
    headers = (
        "run",
        "highest valid ops/s",
        "MB/s",
        "mean latency (ms)",
        "overall response time (ms)",
        "load points judged",
    )
    caption = "The workload's own score of each run, side by side (measured)"
    return section("score", "Score", table(headers, rows, left=1, caption=caption))


def score_lines(result: Mapping[str, Any]) -> list[str]:
    """The workload's score of each run side by side, one line (none without a score)."""
    parts = []
    for role in ("baseline", "candidate"):
        for i, score in enumerate((result.get("scores") or {}).get(role) or []):
            if not isinstance(score, Mapping) or not isinstance(score.get("load_points"), list):
                continue
            best = score.get("highest_valid")
            best = best if isinstance(best, Mapping) else {}
            name = role if i == 0 else f"{role} repeat {i}"
            parts.append(
                f"{name} highest valid {_score_num(best.get('achieved_ops_s'), 1)} ops/s, "
                f"overall response time {_score_num(score.get('overall_response_time_ms'), 3)} ms"
            )
    return ["score (the workload's own, measured): " + "; ".join(parts)] if parts else []


def _score_num(value: Any, digits: int) -> str:
    number = finite(value)
    return DASH if number is None else f"{number:,.{digits}f}"


# --------------------------------------------------------------------------- charts
