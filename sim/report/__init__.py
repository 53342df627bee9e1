"""The run report: one self-contained ``report.html`` per bundle, for a change ticket.

:func:`render_report` reads the bundle (summary.json, scenario.yaml, the time series, the
measured histograms) and, when given or found in ``analysis.json``, the analysis
(:func:`sim.analysis.analyze_bundle`'s dict), and writes ``report.html`` atomically.

The page opens offline and prints on A4: inline CSS, charts as inline SVG drawn here, no
JavaScript, no fonts, no request of any kind. Every value from the bundle is escaped —
scenario names, descriptions and target settings are user input.

A section that cannot be drawn (an analysis of an unexpected shape, a damaged file) becomes a
one-line note in the page instead of costing the whole report: the report is written at the
end of every run, and a run's figures must not be lost to a plotting problem.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bundle.files import atomic_write
from sim.errors import ConfigError, SimError
from sim.report import charts, findings, sections
from sim.report import hosts as report_hosts
from sim.report.collector_charts import bundle_collector_panels
from sim.report.data import (
    load_analysis_file,
    load_summary,
    measured_histograms,
    read_text,
    series_from_bundle,
)
from sim.report.markup import Safe, esc, num, page, para, section, table, us
from sim.report.scales import finite
from sim.safeio import strict_json
from sim.safeyaml import load_yaml

REPORT_NAME = "report.html"
ANALYSIS_NAME = "analysis.json"
ANALYSIS_SCHEMA = 1
log = logging.getLogger(__name__)

__all__ = ["ANALYSIS_NAME", "REPORT_NAME", "render_html", "render_report", "write_report"]


def write_report(bundle: Path) -> tuple[Path, str | None]:
    """Analyse ``bundle`` (when :mod:`sim.analysis` is installed), keep the result in
    ``analysis.json`` and write ``report.html``; returns the report's path and, when the
    analysis could not read the bundle, why (the report is then written without it).

    An analysis that fails with a :class:`~sim.errors.SimError` (a run killed before its first
    interval) is skipped and an ``analysis.json`` of an earlier attempt removed, so the report
    never shows a stale verdict; any other exception is a bug and propagates.
    """
    bundle = Path(bundle)
    load_summary(bundle)  # a ConfigError naming the directory when it is not a bundle
    problem: str | None = None
    analysis: dict[str, Any] | None = None
    try:
        from sim.analysis import analyze_bundle
    except ImportError:
        problem = "sim.analysis is not installed"
    else:
        try:
            analysis = analyze_bundle(bundle)
        except SimError as exc:
            problem = str(exc)
    if analysis is not None:
        text = strict_json(analysis) + "\n"
        atomic_write(bundle / ANALYSIS_NAME, text)
    else:
        (bundle / ANALYSIS_NAME).unlink(missing_ok=True)
    return render_report(bundle, analysis), problem


def render_report(bundle: Path, analysis: dict[str, Any] | None = None) -> Path:
    """Write ``<bundle>/report.html`` and return its path.

    ``analysis`` is :func:`sim.analysis.analyze_bundle`'s result; when None, the bundle's
    ``analysis.json`` is used if there is one, else the report shows the raw figures without
    verdict, correlations or knee. Raises :class:`sim.errors.ConfigError` when ``bundle`` is
    not a run bundle.
    """
    bundle = Path(bundle)
    path = bundle / REPORT_NAME
    atomic_write(path, render_html(bundle, analysis))
    return path


def _guarded(anchor: str, name: str, build: Callable[[], str]) -> str:
    try:
        return build()
    except Exception as exc:  # a damaged input costs one section, never the report
        log.warning("report: section %s failed", name, exc_info=True)
        return str(
            section(
                anchor,
                name,
                Safe(
                    f'<p class="alert">This section could not be drawn: '
                    f"{esc(type(exc).__name__)}: {esc(exc)}</p>"
                ),
            )
        )


def _scenario(bundle: Path) -> tuple[str | None, dict[str, Any]]:
    text = read_text(bundle / "scenario.yaml")
    try:
        data = load_yaml(text, what="scenario.yaml") if text else None
    except ConfigError:  # damaged, or past a bound (sim.safeio): shown as text only
        data = None
    return text, data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class _Run:
    """What the report's sections are drawn from, read once from the bundle."""

    bundle: Path
    summary: dict[str, Any]
    analysis: dict[str, Any] | None
    series: dict[str, Any]
    scenario_text: str | None
    steps: list[Any]
    ops: list[str]
    primary_op: str | None
    primary_device: str | None


def render_html(bundle: Path, analysis: dict[str, Any] | None = None) -> str:
    """The report page of ``bundle`` as a string (see :func:`render_report`)."""
    summary = load_summary(bundle)
    analysis, notes = _readable_analysis(bundle, analysis)
    run = _read_run(bundle, summary, analysis)
    name = (summary.get("scenario") or {}).get("name") or summary.get("run") or bundle.name
    answer = _guarded("answer", "Answer", lambda: _answer(summary, analysis))
    head = _guarded("header", "Header", lambda: sections.header(summary, bundle, answer))
    head += "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    built = [
        (anchor, title, _guarded(anchor, title, build))
        for anchor, title, build in _section_builders(run)
    ]
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t, html in built if html)
    body = head + f"<nav>{nav}</nav>" + "".join(html for _, _, html in built)
    return page(
        f"dbsim report: {name}",
        body,
        f"From {bundle.resolve()}. Latencies are measured by the client, per operation; "
        "storage figures come from the host's collectors over the same intervals.",
    )


def _answer(summary: dict[str, Any], analysis: dict[str, Any] | None) -> str:
    """The run's answer block (sim.report.answer): SLOs, the sentence, the caveats."""
    from sim.report.answer import build_answer
    from sim.report.answer_html import answer_block

    return str(answer_block(build_answer(summary, analysis)))


def _readable_analysis(
    bundle: Path, analysis: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The analysis given, else the bundle's ``analysis.json``; one of another schema is left
    out, with a note saying so."""
    if analysis is None:
        analysis = load_analysis_file(bundle)
    if analysis is not None and analysis.get("schema") != ANALYSIS_SCHEMA:
        note = (
            f"The analysis has schema {analysis.get('schema')!r}; this report reads schema "
            f"{ANALYSIS_SCHEMA}, so it is left out."
        )
        return None, [note]
    return analysis, []


def _read_run(bundle: Path, summary: dict[str, Any], analysis: dict[str, Any] | None) -> _Run:
    scenario_text, scenario = _scenario(bundle)
    series = (analysis or {}).get("series")
    if not (isinstance(series, dict) and series.get("t")):
        series = series_from_bundle(bundle)
    ops = charts.op_order(summary, analysis)
    return _Run(
        bundle=bundle,
        summary=summary,
        analysis=analysis,
        series=series,
        scenario_text=scenario_text,
        steps=(scenario.get("load") or {}).get("steps") or [],
        ops=ops,
        primary_op=(analysis or {}).get("primary_op") or (ops[0] if ops else None),
        primary_device=(analysis or {}).get("primary_device"),
    )


def _section_builders(run: _Run) -> list[tuple[str, str, Callable[[], str]]]:
    """(anchor, navigation title, builder) of every section after the header, in page order."""
    summary, analysis = run.summary, run.analysis
    return [
        ("verdict", "Verdict", lambda: sections.verdict(analysis)),
        ("operations", "Operations", lambda: sections.operations(summary, run.ops)),
        ("hosts", "Hosts", lambda: report_hosts.hosts(analysis)),
        ("score", "Score", lambda: _score_section(summary)),
        ("timeseries", "Time series", lambda: _timeseries_section(run)),
        ("curve", "Latency vs load", lambda: _curve_section(run)),
        ("histograms", "Histograms", lambda: _histograms_section(run)),
        ("analysis", "Analysis", lambda: findings.analysis_tables(analysis)),
        ("storage", "Storage", lambda: sections.storage(summary)),
        ("run", "Run details", lambda: sections.run_details(summary)),
        ("scenario", "Scenario", lambda: _scenario_section(run.scenario_text)),
    ]


def _score_section(summary: Mapping[str, Any]) -> str:
    """The workload's own scoring (EDA: the reference's load points), when it keeps one."""
    from sim.judge.score import SCORE_HEADERS, score_line, score_rows

    score = (summary.get("workload") or {}).get("score")
    line = score_line(score)
    if line is None:
        return ""
    rows = score_rows(score)
    caption = "Load points, scored by the workload's reference rule (measured)"
    return section("score", "Score", para(line), table(SCORE_HEADERS, rows, caption=caption))


def _timeseries_section(run: _Run) -> str:
    figure = charts.timeseries_figure(
        run.series,
        run.ops,
        run.primary_device,
        run.steps,
        finite((run.summary.get("timing") or {}).get("warmup_s")),
        run.summary.get("stages") or [],
        bundle_collector_panels(run.bundle, [float(v) for v in run.series.get("t") or []]),
    )
    return section("timeseries", "Time series", figure)


def _curve_section(run: _Run) -> str:
    if not run.primary_op:
        return ""
    figure = charts.curve_figure(run.series, run.analysis, run.primary_op, run.primary_device)
    return section("curve", "Latency versus load", figure, _curve_table(run.analysis))


def _histograms_section(run: _Run) -> str:
    figures = charts.histogram_figures(
        measured_histograms(run.bundle), run.summary.get("operations") or {}, run.ops
    )
    return section("histograms", "Latency histograms (measured window)", figures)


def _scenario_section(scenario_text: str | None) -> str:
    body = scenario_text if scenario_text is not None else "(scenario.yaml is missing)"
    # Two columns on a long scenario: it is reference material, not worth three pages.
    cls = ' class="columns"' if body.count("\n") > 40 else ""
    return section("scenario", "Scenario as run", Safe(f"<pre{cls}>{esc(body)}</pre>"))


def _curve_table(analysis: dict[str, Any] | None) -> str:
    curve = (analysis or {}).get("curve") or {}
    points = [p for p in curve.get("points") or [] if isinstance(p, dict)]
    if not points:
        return ""
    x_name = "device IOPS (mean)" if curve.get("x") == "device_iops" else "ops/s (all, mean)"
    rows = [
        [
            num(p.get("x")),
            num(p.get("ops_s")),
            us(p.get("p50_us")),
            us(p.get("p99_us")),
            num(p.get("n")),
        ]
        for p in points
    ]
    return table(
        (x_name, "ops/s", "p50", "p99", "intervals"),
        rows,
        left=0,
        caption="Curve points per load step, or per bin of intervals: the load is the mean "
        "over the intervals (the IOPS the verdict and the tables quote), ops/s and latencies "
        "are medians",
    )
