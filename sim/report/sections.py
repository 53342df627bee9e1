"""The report's text sections: header, verdict, tables of the summary and of the analysis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sim import registry
from sim.bundle.summary import status_text
from sim.core.result import OUTCOME_COMPLETED
from sim.registry import Display
from sim.report.markup import (
    DASH,
    Safe,
    badge,
    esc,
    kv_table,
    num,
    para,
    plain,
    section,
    short,
    table,
    us,
)
from sim.report.scales import finite

CALLS = {
    "storage-bound": "Storage-bound",
    "client-bound": "Client-bound",
    "database-bound": "Database-bound",
    "inconclusive": "Inconclusive",
    "invalid": "Invalid",
    "not-exercised": "Storage not exercised",
}


def when(stamp: object) -> str:
    """An ISO timestamp as ``2026-11-30 05:26:00 UTC``."""
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError:
        return DASH if stamp in (None, "") else str(stamp)
    zone = moment.strftime("%Z") if moment.tzinfo else ""
    return moment.strftime("%Y-%m-%d %H:%M:%S") + (f" {zone}" if zone else "")


def seconds(value: object) -> str:
    number = finite(value)
    if number is None:
        return DASH
    return f"{number:.1f} s" if number < 120 else f"{number / 60:.1f} min ({number:,.0f} s)"


def header(summary: Mapping[str, Any], bundle: Path, answer: str = "") -> Safe:
    """Title, who/what, the run's answer (markup), the facts grid, an unfinished run's warning."""
    scenario = summary.get("scenario") or {}
    status = str(summary.get("status") or "unknown")
    timing = summary.get("timing") or {}
    host = summary.get("host") or {}
    facts = [
        ("Status", badge(status_text(summary), status)),
        ("Reason", summary.get("reason") or DASH),
        ("Started", when(summary.get("started_at"))),
        ("Ended", when(summary.get("ended_at"))),
        ("Measured", seconds(timing.get("measured_s"))),
        ("Warm-up", seconds(timing.get("warmup_s"))),
        ("Sessions", plain(summary.get("sessions"))),
        ("Intervals", plain(summary.get("intervals_written"))),
        ("Host", f"{host.get('hostname', DASH)} ({host.get('cpus', '?')} CPUs)"),
        ("dbsim", plain(summary.get("dbsim_version"))),
        ("Run", plain(summary.get("run"))),
        ("Bundle", str(bundle)),
    ]
    grid = "".join(
        f"<dt>{esc(k)}</dt><dd>{v if isinstance(v, Safe) else esc(v)}</dd>" for k, v in facts
    )
    parts = [
        f"{scenario.get('workload') or '?'} workload on a {scenario.get('target') or '?'} target"
    ]
    if finite(timing.get("measured_s")) is not None:
        parts.append(f"{seconds(timing.get('measured_s'))} measured")
    if isinstance(summary.get("sessions"), int):
        parts.append(f"{summary['sessions']} session{'' if summary['sessions'] == 1 else 's'}")
    line = " · ".join(parts)
    out = [
        f"<header><h1>dbsim run report: {esc(scenario.get('name') or summary.get('run'))}</h1>",
        f'<div class="sub">{esc(line)}</div>{answer}<dl class="facts">{grid}</dl></header>',
    ]
    if status == "running":
        # A summary still saying "running" is a run in progress or one killed outright
        # (SIGKILL, power loss) before it could write its end.
        out.append(
            '<p class="alert"><strong>Partial report.</strong> The run had not ended when this '
            "report was made: it was still in progress, or it was killed before it could write "
            "its totals. The figures cover the intervals written so far.</p>"
        )
    elif (summary.get("errors") or {}).get("invalid"):
        problem = summary.get("error") or "its operations failed"
        out.append(
            f'<p class="alert"><strong>Run {esc(status)}:</strong> {esc(problem)}. The figures '
            "below describe failed operations, not the storage.</p>"
        )
    elif status != OUTCOME_COMPLETED:
        problem = summary.get("error") or summary.get("reason") or "the run did not complete"
        out.append(
            f'<p class="alert"><strong>Run {esc(status)}:</strong> {esc(problem)}. The figures '
            "cover the intervals measured before it ended.</p>"
        )
    # Storage not exercised is the answer's first caveat (sim.report.answer), above.
    return Safe("".join(out))


def verdict(analysis: Mapping[str, Any] | None) -> Safe:
    """The verdict in one sentence and the evidence behind it."""
    result = (analysis or {}).get("verdict")
    if not isinstance(result, dict):
        return section(
            "verdict",
            "Verdict",
            Safe(
                '<p class="note">No analysis is available for this bundle, so there is no '
                "verdict; the figures below are the raw measurements. <code>dbsim report "
                "RUN_DIR</code> analyses a bundle and rewrites its report.</p>"
            ),
        )
    call = str(result.get("call") or "inconclusive")
    label = CALLS.get(call, call)
    text = str(result.get("summary") or "")
    # The analysis' sentence may already open with the call ("Inconclusive: …"): bold that.
    if text.lower().startswith(label.lower()):
        lead, text = text[: len(label) + 1], text[len(label) + 1 :]
    else:
        lead = f"{label}."
    sentence = Safe(
        f'<p class="verdict {esc(call)}"><strong>{esc(lead)}</strong> {esc(text.strip())}</p>'
    )
    from sim.report.answer_html import evidence_table

    evidence = evidence_table(result) or para("The analysis gave no evidence rows.", "note")
    return section("verdict", "Verdict", sentence, evidence, segments(analysis or {}))


def segments(analysis: Mapping[str, Any]) -> Safe:
    rows = [
        [
            s.get("label"),
            (s.get("verdict") or {}).get("summary")
            or CALLS.get(str((s.get("verdict") or {}).get("call")), DASH),
            plain(s.get("intervals")),
            us(s.get("p99_us")),
            num(s.get("device_iops"), 0),
            num(s.get("await_ms"), 2),
        ]
        for s in analysis.get("segments") or []
        if isinstance(s, dict)
    ]
    if not rows:
        return Safe("")
    return table(
        ("part", "verdict", "intervals", "p99", "device IOPS", "await ms"),
        rows,
        left=2,
        caption="The verdict per part of the run (a call that changes from one part to the "
        "next points at a moving bottleneck)",
        cls="segments",
    )


def operations(summary: Mapping[str, Any], ops: Sequence[str]) -> Safe:
    """Per-operation totals over the measured window, then the mix."""
    stats = summary.get("operations") or {}
    rows = []
    for op in ops:
        s = stats.get(op) or {}
        by_class = s.get("errors_by_class") or {}
        errors = num(s.get("errors", 0)) + (
            f" ({', '.join(f'{k}: {v}' for k, v in by_class.items())})" if by_class else ""
        )
        rows.append(
            [op, num(s.get("count")), num(s.get("ops_s"))]
            + [us(s.get(k)) for k in ("p50_us", "p95_us", "p99_us", "p99_9_us", "max_us")]
            + [errors]
        )
    if not rows:
        return section(
            "operations",
            "Operations",
            para(
                "No totals: the run ended before it measured anything, or before it wrote "
                "its totals (then the time series below show what was measured).",
                "note",
            ),
        )
    ops_table = table(
        ("operation", "count", "ops/s", "p50", "p95", "p99", "p99.9", "max", "errors"), rows
    )
    return section("operations", "Operations (measured window)", ops_table, mix(summary))


def mix(summary: Mapping[str, Any]) -> Safe:
    data = summary.get("mix") or {}
    requested = data.get("requested_pct") or {}
    measured = data.get("measured") or {}
    measured_pct = data.get("measured_pct") or {}
    expected = data.get("expected_by_rule") or {}
    names = list(dict.fromkeys([*requested, *measured]))
    if not names:
        return Safe("")
    headers = ["operation", "requested %", "measured", "measured %"]
    if expected:
        headers.append("expected by rule")
    rows = []
    for op in names:
        row = [op, num(requested.get(op)), num(measured.get(op)), num(measured_pct.get(op))]
        if expected:
            row.append(num(expected.get(op)))
        rows.append(row)
    parts = [table(headers, rows, caption="Transaction mix")]
    failed = int((summary.get("errors") or {}).get("errors") or 0)
    if "exact" in data:
        parts.append(
            Safe(
                f'<p><span class="bad">exact over issued operations, {failed:,} of them '
                "failed</span>: the sessions issued exactly the workload's rule, but the mix "
                "the target served was not this.</p>"
            )
            if data["exact"] and failed
            else Safe(
                '<p><span class="ok">✓ exact</span>: every session ran exactly the '
                "workload's rule (issued operations; none failed).</p>"
            )
            if data["exact"]
            else Safe(
                '<p><span class="bad">✗ NOT exact</span>: the measured counts differ '
                "from the workload's rule.</p>"
            )
        )
    return Safe("".join(parts))


def storage(summary: Mapping[str, Any]) -> Safe:
    """Means over the measured window, one table per collector as it declares its display
    (block devices one row per device, host CPU one row per figure); a collector without a
    report display gets its figures as they are named in the bundle."""
    sources = summary.get("storage") or {}
    parts: list[str] = []
    for source, entities in sources.items():
        if not isinstance(entities, dict) or not entities:
            continue
        entry = registry.collector(source)
        shown = entry.display if entry is not None else None
        if shown is not None and shown.report and not shown.report_by_figure:
            parts.append(_entity_rows(shown, entities))
            continue
        labels = {f.key: f.label for f in shown.report} if shown is not None else {}
        names = list(entities)
        keys = list(dict.fromkeys(k for e in entities.values() for k in e))
        rows = [
            [labels.get(key, key), *(plain((entities[n] or {}).get(key)) for n in names)]
            for key in keys
        ]
        title = shown.title if shown is not None and shown.report else f"Collector {source}"
        parts.append(table(("figure", *names), rows, caption=f"{title} (mean per interval)"))
    if not parts:
        parts.append(para("No storage collector sampled during the measured window.", "note"))
    return section("storage", "Storage and host (measured window means)", *parts)


def _entity_rows(shown: Display, entities: Mapping[str, Any]) -> Safe:
    rows = [
        [name, *(num((m or {}).get(f.key), f.digits) for f in shown.report)]
        for name, m in entities.items()
    ]
    samples = ", ".join(
        f"{name}: {plain((m or {}).get('samples'))}" for name, m in entities.items()
    )
    caption = shown.report_caption or shown.title + " (mean of the intervals; samples {samples})"
    return table(
        (shown.entity_label, *(f.label for f in shown.report)),
        rows,
        caption=caption.format(samples=samples),
    )


def run_details(summary: Mapping[str, Any]) -> Safe:
    """Target, data set, collectors, collector errors and messages."""
    parts: list[str] = []
    messages = summary.get("messages") or []
    if summary.get("error"):
        parts.append(Safe(f'<p class="alert"><strong>Error:</strong> {esc(summary["error"])}</p>'))
    if messages:
        items = "".join(f"<li>{esc(m)}</li>" for m in messages)
        parts.append(Safe(f"<h3>Messages</h3><ul>{items}</ul>"))
    if isinstance(summary.get("target"), dict):
        parts.append(kv_table(summary["target"], caption="Target"))
    workload = summary.get("workload") or {}
    for part in ("load", "verify"):
        if isinstance(workload.get(part), dict):
            parts.append(kv_table(workload[part], caption=f"Workload {part}"))
    for collector in summary.get("collectors") or []:
        if isinstance(collector, dict):
            name = collector.get("source", "?")
            parts.append(
                kv_table(
                    {k: v for k, v in collector.items() if k != "source"},
                    caption=f"Collector {name}",
                )
            )
    stages = [s for s in summary.get("stages") or [] if isinstance(s, dict)]
    if stages:
        rows = [
            [
                plain(s.get("phase")),
                DASH if s.get("step") is None else str(s["step"] + 1),
                f"{short(s.get('t'))} s",
                plain(s.get("sessions")),
                plain(s.get("rate_ops_s")),
                plain(s.get("rate_iops")) if s.get("rate_iops") else DASH,
                plain(s.get("delivered_iops")) if s.get("rate_iops") else DASH,
                plain(s.get("lab")) if s.get("lab") else DASH,
            ]
            for s in stages
        ]
        heads = ("phase", "step", "started at", "sessions", "rate ops/s", "IOPS asked")
        parts.append(
            table(
                (*heads, "IOPS delivered", "lab ceilings"),
                rows,
                left=(0, 7),
                caption="Stages (as the engine entered them)",
            )
        )
    errors = summary.get("collector_errors") or {}
    if errors:
        parts.append(kv_table(errors, caption="Collector errors (samples lost)"))
    if not parts:
        return Safe("")
    return section("run", "Run details", Safe(f'<div class="grid2">{"".join(parts)}</div>'))
