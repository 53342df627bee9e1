"""What a person sees while a run goes: a live panel on a terminal, plain lines in a log.

The panel shows the state, elapsed and remaining time, per operation the last interval's ops/s
and p50/p99 (µs), and each collector's live figures as it declares them (block devices: IOPS
and await). At the end, summary tables: operations, errors, each collector's means.
Everything goes to stderr except the final table (stdout), so ``--json`` output stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sim import registry
from sim.cli.tables import Column, folded
from sim.core.cache import not_exercised_headline
from sim.core.metrics import Interval
from sim.core.progress import ProgressMeter
from sim.core.result import OUTCOME_COMPLETED
from sim.protocols import Sample
from sim.registry import Display

PLAIN_LINE_EVERY_S = 5.0
#: The engine's states before the sessions run: the header shows the set-up's progress then.
SETUP_STATES = frozenset({"setup", "loading", "verifying"})
#: The verdict's evidence lines printed at the end of a run (the passed checks, first ones).
MAX_FINDINGS = 5


def _us(value: Any) -> str:
    if value is None or value == "":
        return "-"
    v = float(value)
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"


class LiveConsole:
    """Listens to the engine's events and renders them."""

    def __init__(self, planned_s: float | None, *, stderr: Console | None = None) -> None:
        self.err = stderr or Console(stderr=True)
        self.planned_s = planned_s
        self.state = "setup"
        self.detail = ""
        self.progress = ""
        self.meter = ProgressMeter()
        self.rows: list[dict[str, Any]] = []
        self.samples: list[Sample] = []
        self.elapsed = 0.0
        self.interval_s = 1.0
        self._started = time.monotonic()
        self._live: Live | None = None
        self._last_plain = 0.0
        self._last_interval_line = 0.0

    def __enter__(self) -> LiveConsole:
        if self.err.is_terminal:
            self._live = Live(
                self._render(), console=self.err, refresh_per_second=4, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    # ------------------------------------------------------------------ listeners

    def on_state(self, state: str, detail: str = "") -> None:
        self.state, self.detail = state, detail
        if self._live is None and state not in ("stopping",):
            self.err.print(f"[dim]dbsim[/dim] {state} {detail}".rstrip(), highlight=False)
        self._refresh()

    def on_progress(self, what: str, done: int, total: int) -> None:
        self.meter.update(what, done, total)
        self.progress = self.meter.line(what)
        finished = done >= total
        if self._live is None and (
            finished or time.monotonic() - self._last_plain >= PLAIN_LINE_EVERY_S
        ):
            # A pipe or a log gets a line every few seconds: never silent for a whole load.
            self._last_plain = time.monotonic()
            self.err.print(f"[dim]dbsim[/dim] {self.progress}", highlight=False)
        self._refresh()

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        self.elapsed = interval.t_end
        self.interval_s = interval.t_end - interval.t_start
        self.rows = list(interval.rows())
        self.samples = samples
        self.progress = ""
        now = time.monotonic()
        if self._live is None and now - self._last_interval_line >= PLAIN_LINE_EVERY_S:
            self._last_interval_line = now
            seconds = max(interval.t_end - interval.t_start, 1e-9)
            ops = ", ".join(
                f"{r['op']} {r['ops_s']:,.0f}/s p99 {_us(r.get('p99_us'))}"
                f" errors {r['errors'] / seconds:,.0f}/s"
                for r in self.rows
            )
            dev = ", ".join(
                f"{s.entity} {shown.plain.format(s.values.get(shown.plain.key))} {shown.plain.label}"
                for s in samples
                if not s.gap and (shown := _display(s.source)) and shown.plain
            )
            self.err.print(
                f"[dim]{interval.t_end:6.0f}s {interval.phase}[/dim] {ops} {dev}", highlight=False
            )
        self._refresh()

    def on_notice(self, message: str, warning: bool = True) -> None:
        # One line, however wide: a log reader greps for it.
        self.err.print(
            f"dbsim {'warning: ' if warning else ''}{message}",
            style="yellow" if warning else None,
            highlight=False,
            markup=False,
            soft_wrap=True,
        )

    def on_collector_error(self, source: str, message: str) -> None:
        self.err.print(f"[yellow]warning[/yellow]: collector {source}: {message}", highlight=False)

    # ------------------------------------------------------------------ rendering

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        head = Text(f"dbsim  {self.state} {self.detail}  ", style="bold")
        parts: list[Any] = [head]
        if self.state in SETUP_STATES:
            # Loading: its own progress, rate and ETA; the run's clock has not started.
            if self.progress:
                parts.append(Text(self.progress))
            return Group(*parts)
        head.append(f"elapsed {self.elapsed:5.0f} s")
        if self.planned_s:
            head.append(f"  remaining {max(self.planned_s - self.elapsed, 0):5.0f} s")
        width = self.err.width
        if self.rows:
            seconds = max(self.interval_s, 1e-9)
            columns = [Column("op", "left"), *(Column(c) for c in ("ops/s", "p50", "p99"))]
            rows = [
                [
                    r["op"],
                    f"{r['ops_s']:,.0f}",
                    _us(r.get("p50_us")),
                    _us(r.get("p99_us")),
                    f"{r['errors'] / seconds:,.0f}",
                ]
                for r in self.rows
            ]
            columns.append(Column("errors/s"))
            parts.extend(folded(columns, rows, width, boxed=False))
        parts.extend(live_tables(self.samples, width))
        return Group(*parts)


def _display(source: str) -> Display | None:
    entry = registry.collector(source)
    return entry.display if entry is not None else None


def live_tables(samples: list[Sample], width: int | None = None) -> list[Table]:
    """One table per source with live figures: the latest interval, entities as rows,
    folded to ``width``."""
    by_source: dict[str, list[Sample]] = {}
    for sample in samples:
        if not sample.gap:
            by_source.setdefault(sample.source, []).append(sample)
    tables = []
    for source, rows in by_source.items():
        shown = _display(source)
        if shown is None or not shown.live:
            continue
        columns = [Column(shown.entity_label, "left"), *(Column(f.label) for f in shown.live)]
        cells = [[s.entity, *(f.format(s.values.get(f.key)) for f in shown.live)] for s in rows]
        tables.extend(folded(columns, cells, width, boxed=False))
    return tables


def summary_tables(summary: dict[str, Any], width: int | None = None) -> list[Table]:
    """The final tables: per operation over the measured window, then storage means, each
    folded to ``width`` (None: as wide as they are)."""
    timing = summary.get("timing", {})
    title = (
        f"{summary.get('scenario', {}).get('workload')} on {summary.get('scenario', {}).get('target')}: "
        f"{summary.get('status', '?')}, {timing.get('measured_s', 0):.1f} s measured, "
        f"{summary.get('sessions', '?')} sessions"
    )
    headers = ("op", "count", "ops/s", "p50", "p95", "p99", "max", "errors")
    columns = [Column(h, "left" if h == "op" else "right") for h in headers]
    rows = [
        [
            name,
            f"{op.get('count', 0):,}",
            f"{op.get('ops_s', 0):,.1f}",
            _us(op.get("p50_us")),
            _us(op.get("p95_us")),
            _us(op.get("p99_us")),
            _us(op.get("max_us")),
            f"{op.get('errors', 0):,}",
        ]
        for name, op in summary.get("operations", {}).items()
    ]
    tables = folded(columns, rows, width, title=title)
    errors = error_table(summary.get("errors") or {})
    if errors is not None:
        tables.append(errors)
    for source, entities in (summary.get("storage") or {}).items():
        shown = _display(source)
        if shown is None or not shown.console or not isinstance(entities, dict) or not entities:
            continue
        columns = [Column(shown.entity_label, "left"), *(Column(f.label) for f in shown.console)]
        cells = [
            [entity, *(f.format(means.get(f.key)) for f in shown.console)]
            for entity, means in entities.items()
        ]
        tables.extend(folded(columns, cells, width, title=shown.console_title or shown.title))
    return tables


def print_quiet(summary: dict[str, Any]) -> None:
    """``dbsim run --quiet``: the bundle's path alone on stdout (for ``old=$(dbsim run …)``),
    and on stderr the line of a run not to be compared (INVALID RUN, STORAGE NOT EXERCISED):
    quiet must not hide that the caches served the run. A run that failed says why in its
    error: line alone: these lines are about a completed run's figures."""
    if summary.get("status") == OUTCOME_COMPLETED:
        cached = not_exercised_headline(summary, figures=False)
        for headline in (invalid_headline(summary), cached):
            if headline is not None:
                sys.stderr.write(f"dbsim: {headline}\n")
    sys.stdout.write(f"{summary['bundle']}\n")


def print_summary(out: Console, summary: dict[str, Any]) -> None:
    """The final tables of ``dbsim run`` (with or without ``--workers``), after the headline
    that an invalid run gets before any figure."""
    import textwrap

    from sim.report.answer import workload_headline

    said_first = (workload_headline(summary), invalid_headline(summary))
    for headline in (*said_first, not_exercised_headline(summary)):
        if headline is not None:  # first, whole, wrapped at words to the width
            wrapped = textwrap.fill(headline, width=max(out.width, 40), subsequent_indent="  ")
            out.print(wrapped, style="bold red", highlight=False, markup=False, soft_wrap=True)
    for table in summary_tables(summary, out.width):
        out.print(table)


def error_table(section: dict[str, Any]) -> Table | None:
    """Failed operations of the measured window by class, with one example each."""
    rows = [
        (name, cls, n, entry)
        for name, entry in (section.get("operations") or {}).items()
        for cls, n in (entry.get("classes") or {}).items()
    ]
    if not rows:
        return None
    table = Table(title="errors (measured window)")
    for column in ("op", "class", "count", "% of issued", "example"):
        table.add_column(column, justify="right" if column in ("count", "% of issued") else "left")
    for name, cls, n, entry in rows:
        example = entry.get("example", "") if cls == entry.get("dominant") else ""
        # The class has its own column: at 80 columns the example needs the room.
        example = example.replace(f"{cls}: ", "")
        table.add_row(name, cls, f"{n:,}", f"{100 * n / max(entry['issued'], 1):.3g}", example)
    return table


def invalid_headline(summary: dict[str, Any]) -> str | None:
    """The line that goes before every figure of an invalid run."""
    section = summary.get("errors") or {}
    if not section.get("invalid"):
        return None
    return (
        "INVALID RUN: the figures below describe failed operations, not the storage "
        "(the errors table and the error: line say which)"
    )


def _shares(pct: dict[str, Any]) -> str:
    """``{"read": 90.0, "update": 10.0}`` -> ``read 90 %, update 10 %``."""
    # A no-break space: a wrapped line never leaves the % sign behind on the next.
    return ", ".join(f"{op} {float(v):.3g}\u00a0%" for op, v in pct.items())


def mix_line(mix: dict[str, Any], errors: dict[str, Any]) -> str | None:
    """The operation mix as a sentence: measured shares beside the requested ones, and the
    mix rule's check, saying what it counted (issued operations, failed or not)."""
    measured = mix.get("measured_pct") or {}
    if not measured and "exact" not in mix:
        return None
    line = f"mix (measured): {_shares(measured)}" if measured else "mix"
    if mix.get("requested_pct"):
        line += f"; asked {_shares(mix['requested_pct'])}"
    if "exact" in mix:
        counted = ", ".join(f"{op} {n:,}" for op, n in (mix.get("measured") or {}).items())
        verdict = "exact" if mix["exact"] else "NOT exact"
        line += f"; by the workload's rule {verdict} over the operations issued ({counted})"
    failed = int(errors.get("errors") or 0)
    if failed:
        line += f"; {failed:,} of them failed, so the mix applied to the target was not this"
    return line


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:,.4g}" if isinstance(value, float) else str(value)


def verdict_lines(analysis: dict[str, Any] | None) -> list[str]:
    """The analysis' verdict and the checks behind it (analysis.json), as lines: the passed
    checks of the branch that made the call first, each saying which branch it fed."""
    verdict = (analysis or {}).get("verdict") or {}
    if not verdict.get("call"):
        return []
    said = verdict.get("summary") or verdict["call"]
    lines = [f"verdict (analysis.json): {said}"]
    call = verdict.get("storage_call_withheld") or verdict["call"]
    passed = [e for e in verdict.get("evidence") or [] if e.get("passed")]
    passed.sort(key=lambda e: e.get("branch") != call)  # the deciding branch first
    for item in passed[:MAX_FINDINGS]:
        sign = f"{item['comparison']} " if item.get("comparison") else ""
        branch = item.get("branch")
        fed = f"; drove {branch}" if branch == call else f"; {branch}" if branch else ""
        lines.append(
            f"  finding: {item.get('check')} {_figure(item.get('value'))} (threshold "
            f"{sign}{_figure(item.get('threshold'))}, measured{fed}): {item.get('meaning', '')}"
        )
    return lines


def _analysis(bundle: Any) -> dict[str, Any] | None:
    from sim.bundle.reader import read_analysis

    try:
        return read_analysis(bundle)
    except Exception:  # an unreadable analysis costs only the verdict lines
        return None


def print_answer(out: Console, summary: dict[str, Any], analysis: dict[str, Any] | None) -> None:
    """The run's answer (sim.report.answer): the SLOs met or missed, the sentence with the
    deciding figures, the caveats; each line wrapped at words to the width."""
    import textwrap

    from sim.report.answer import build_answer, text_lines

    answer = build_answer(summary, analysis)
    for i, text in enumerate(text_lines(answer)):
        indent = "  " if i == 0 else "      "
        wrapped = textwrap.fill(text, width=max(out.width, 40), subsequent_indent=indent)
        bold = i == 0 or text.lstrip().startswith(
            ("SLO MISSED", "caveat: INVALID", "caveat: STORAGE")
        )
        out.print(
            wrapped, highlight=False, markup=False, soft_wrap=True, style="bold" if bold else None
        )


def print_run_end(out: Console, summary: dict[str, Any]) -> None:
    """What ``dbsim run`` prints after the tables (with or without ``--workers``): the mix
    rule's check, one line per SLO verdict, a sweep's answer, the bundle and its report."""
    import textwrap
    from pathlib import Path

    from sim.judge.score import score_line
    from sim.judge.sweep import sweep_line

    def say(text: str) -> None:  # wrapped at words, continuation lines indented
        wrapped = textwrap.fill(text, width=max(out.width, 40), subsequent_indent="    ")
        out.print(wrapped, highlight=False, markup=False, soft_wrap=True)

    line = mix_line(summary.get("mix") or {}, summary.get("errors") or {})
    if line is not None:
        say(line)
    if summary.get("sweep"):
        say(sweep_line(summary["sweep"]))
    scored = score_line((summary.get("workload") or {}).get("score"))
    if scored is not None:  # a workload's own scoring (EDA: its reference's load points)
        say(scored)
    analysis = _analysis(Path(summary["bundle"]))
    for text in verdict_lines(analysis):
        say(text)
    print_answer(out, summary, analysis)
    located = (summary.get("target") or {}).get("data_location")
    if located:  # what the device figures describe: the storage under this path
        out.print(f"data: {located['path']} ({located['from']})", highlight=False, markup=False)
    out.print(f"bundle: {summary['bundle']}")
    report = Path(summary["bundle"]) / "report.html"
    if report.exists():
        out.print(f"report: {report}")
