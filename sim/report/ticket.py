"""The ticket-ready summary of a run: ``dbsim report BUNDLE --format markdown|text|pdf``.

One page, in the order a change ticket reads: what ran where, the SLOs, the answer
(:mod:`sim.report.answer`, the same sentence report.html and the console give), the caveats,
the key chart (the primary operation's latency against the device's IOPS, from the report's
own drawing). Markdown links the chart as an SVG file written beside it; text names that file;
PDF is the report's own markup (styles, answer block, chart) printed by Chromium headless.

Files go into the bundle, as report.html does, through :func:`sim.bundle.files.atomic_write`
(:mod:`sim.nofollow`): a regular file dbsim wrote is replaced, anything else at that name —
a link, a device, a directory — is refused and left as it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.report.answer import Answer, build_answer

FORMATS = ("html", "markdown", "text", "pdf")
#: File names in the bundle, per format.
FILE_NAMES = {"markdown": "report.md", "text": "report.txt", "pdf": "report.pdf"}
CHART_NAME = "report-chart.svg"
#: Chromium as Debian installs it (the PDF's printer).
CHROMIUM = "/usr/bin/chromium"
PDF_TIMEOUT_MS = 60_000
#: A4 less the report's 12 mm margins (@page in sim.report.markup), in CSS pixels (96 dpi),
#: less a little for rounding: 186 × 273 mm.
A4_PRINT_PX = (703, 1020)
#: Below this the print is too small to read: a longer ticket takes a second page instead.
MIN_PDF_SCALE = 0.6


@dataclass(frozen=True)
class Ticket:
    """What every format of the ticket shows."""

    title: str
    where: list[tuple[str, str]]
    answer: Answer
    verdict: str | None
    chart_svg: str | None
    chart_caption: str


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _where(summary: Mapping[str, Any], answer: Answer, bundle: Path) -> list[tuple[str, str]]:
    """What ran where, as (label, value) pairs."""
    from sim.report.sections import seconds, when

    scenario, target = _mapping(summary.get("scenario")), _mapping(summary.get("target"))
    host, timing = _mapping(summary.get("host")), _mapping(summary.get("timing"))
    located = _mapping(target.get("data_location"))
    what = f"{scenario.get('workload') or '?'} on {scenario.get('target') or '?'}"
    load = f"{summary.get('sessions', '?')} sessions, {seconds(timing.get('measured_s'))} measured"
    rows = [
        ("workload", what),
        ("load", f"{load} (warm-up {seconds(timing.get('warmup_s'))})"),
        ("started", when(summary.get("started_at"))),
        ("status", str(summary.get("status") or "unknown")),
        ("host", f"{host.get('hostname', '-')} ({host.get('cpus', '?')} CPUs)"),
        ("device", answer.device or "none measured"),
    ]
    if located:
        rows.append(("data", f"{located.get('path')} ({located.get('from')})"))
    rows.append(("bundle", str(bundle)))
    return rows


def build_ticket(bundle: Path, summary: dict[str, Any], analysis: dict[str, Any] | None) -> Ticket:
    """The ticket of ``bundle`` from its summary and analysis."""
    answer = build_answer(summary, analysis)
    name = _mapping(summary.get("scenario")).get("name") or summary.get("run") or bundle.name
    verdict = _mapping(_mapping(analysis).get("verdict")).get("summary")
    svg, caption = _key_chart(bundle, summary, analysis, answer)
    return Ticket(
        title=f"dbsim run {name}",
        where=_where(summary, answer, bundle),
        answer=answer,
        verdict=str(verdict) if verdict else None,
        chart_svg=svg,
        chart_caption=caption,
    )


def _key_chart(
    bundle: Path, summary: dict[str, Any], analysis: dict[str, Any] | None, answer: Answer
) -> tuple[str | None, str]:
    """The report's latency-versus-load chart as one SVG element, and its caption."""
    from sim.report import charts
    from sim.report.data import series_from_bundle

    series = _mapping(analysis).get("series")
    if not (isinstance(series, dict) and series.get("t")):
        series = series_from_bundle(bundle)
    if not answer.op or not series.get("t"):
        return None, ""
    figure = str(charts.curve_figure(series, analysis, answer.op, answer.device))
    found = re.search(r"<svg\b.*?</svg>", figure, flags=re.S)
    caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, flags=re.S)
    text = re.sub(r"<[^>]+>", "", caption.group(1)) if caption else ""
    return (found.group(0) if found else None), _unescape(text)


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


# --------------------------------------------------------------------------- text, markdown


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _slo_cells(answer: Answer) -> list[list[str]]:
    return [
        [
            row.label + (f" [{row.name}]" if row.name else ""),
            row.measured,
            row.target,
            row.margin,
            "met" if row.met else "MISSED",
        ]
        for row in answer.slos
    ]


SLO_HEADERS = ("SLO", "measured", "target", "margin", "result")


def render_text(ticket: Ticket, chart_file: str | None) -> str:
    """The ticket as plain text (80 columns but for long values)."""
    import textwrap

    out = [ticket.title, "=" * min(len(ticket.title), 80), ""]
    width = max(len(k) for k, _ in ticket.where)
    out += [f"{k.ljust(width)}  {v}" for k, v in ticket.where]
    out += ["", ticket.answer.headline]
    if ticket.answer.slos:
        out += ["", *_grid(SLO_HEADERS, _slo_cells(ticket.answer), {1, 2, 3})]
    out += ["", "Answer:", *textwrap.wrap(ticket.answer.sentence, 78, initial_indent="  ",
                                          subsequent_indent="  ")]  # fmt: skip
    if ticket.verdict:
        out += ["", "Verdict:", *textwrap.wrap(ticket.verdict, 78, initial_indent="  ",
                                               subsequent_indent="  ")]  # fmt: skip
    out += ["", "Caveats:" if ticket.answer.caveats else "Caveats: none"]
    for caveat in ticket.answer.caveats:
        out += textwrap.wrap(caveat, 78, initial_indent="  - ", subsequent_indent="    ")
    if chart_file:
        said = f"Key chart: {chart_file} ({ticket.chart_caption})"
        out += ["", *textwrap.wrap(said, 80, subsequent_indent="  ")]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell or paragraph (user input escaped)."""
    return re.sub(r"([\\`*_{}\[\]<>|#])", r"\\\1", text).replace("\n", " ")


def render_markdown(ticket: Ticket, chart_file: str | None) -> str:
    """The ticket as Markdown; the chart linked as an image file beside it."""
    out = [f"# {_md(ticket.title)}", "", "| what ran where | |", "|---|---|"]
    out += [f"| {_md(k)} | {_md(v)} |" for k, v in ticket.where]
    out += ["", f"## {_md(ticket.answer.headline)}", ""]
    if ticket.answer.slos:
        out += ["| " + " | ".join(SLO_HEADERS) + " |", "|---|--:|--:|--:|---|"]
        out += [
            "| " + " | ".join(_md(c) for c in cells) + " |" for cells in _slo_cells(ticket.answer)
        ]
        out.append("")
    out += ["## Answer", "", f"**{_md(ticket.answer.sentence)}**", ""]
    if ticket.verdict:
        out += [f"Verdict: {_md(ticket.verdict)}", ""]
    out += ["## Caveats", ""]
    out += [f"- {_md(c)}" for c in ticket.answer.caveats] or ["None."]
    if chart_file:
        out += ["", "## Key chart", "", f"![Latency versus load]({chart_file})", "",
                f"_{_md(ticket.chart_caption)}_"]  # fmt: skip
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- html, pdf


def render_page(ticket: Ticket) -> str:
    """The ticket as one printable page in the report's own markup and styles."""
    from sim.report.answer_html import answer_block
    from sim.report.markup import Safe, esc, kv_table, page

    parts = [
        f"<header><h1>{esc(ticket.title)}</h1></header>",
        str(answer_block(ticket.answer)),
        str(kv_table(dict(ticket.where), caption="What ran where")),
    ]
    if ticket.verdict:
        parts.append(f'<p class="verdict">{esc(ticket.verdict)}</p>')
    if ticket.chart_svg:
        chart = Safe(ticket.chart_svg)
        parts.append(
            f"<figure>{chart}<figcaption>{esc(ticket.chart_caption)}</figcaption></figure>"
        )
    style = "<style>@media print { figure svg.chart { max-height: 95mm; } }</style>"
    return page(ticket.title, style + "".join(parts), "dbsim report --format pdf.")


def print_pdf(html: str) -> bytes:
    """``html`` printed to A4 PDF by Chromium headless (Playwright, Debian's Chromium)."""
    from sim.errors import ConfigError

    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise ConfigError("report: --format pdf needs Playwright (pip install playwright)") from exc
    if not Path(CHROMIUM).exists():
        raise ConfigError(
            f"report: --format pdf needs Chromium at {CHROMIUM} (apt install chromium)"
        )
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM)
        try:
            # The printable width of A4 at 96 dpi: measure the page as it will print, and
            # scale it down when it would run onto a second page.
            page = browser.new_page(viewport={"width": A4_PRINT_PX[0], "height": A4_PRINT_PX[1]})
            page.set_content(html, timeout=PDF_TIMEOUT_MS)
            page.emulate_media(media="print")
            height = float(page.evaluate("document.documentElement.scrollHeight"))
            scale = max(MIN_PDF_SCALE, min(1.0, A4_PRINT_PX[1] / max(height, 1.0)))
            return page.pdf(
                format="A4", print_background=True, prefer_css_page_size=True, scale=scale
            )
        finally:
            browser.close()


def write_ticket(bundle: Path, fmt: str, analysis: dict[str, Any] | None) -> list[Path]:
    """Write the ticket of ``bundle`` in ``fmt`` (markdown, text, pdf) into the bundle;
    returns the paths written (the chart's SVG beside the markdown or text)."""
    from sim.bundle.files import atomic_write
    from sim.bundle.reader import read_summary
    from sim.nofollow import replace_file

    ticket = build_ticket(bundle, read_summary(bundle), analysis)
    path = bundle / FILE_NAMES[fmt]
    written: list[Path] = []
    if fmt == "pdf":
        data = print_pdf(render_page(ticket))
        replace_file(str(path), data, str(path.with_name(f".{path.name}.tmp")))
        return [path]
    chart = None
    if ticket.chart_svg:
        atomic_write(bundle / CHART_NAME, ticket.chart_svg + "\n")
        chart = CHART_NAME
        written.append(bundle / CHART_NAME)
    text = render_markdown(ticket, chart) if fmt == "markdown" else render_text(ticket, chart)
    atomic_write(path, text)
    return [path, *written]
