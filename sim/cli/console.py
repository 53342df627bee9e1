"""What a person sees while a run goes: a live panel on a terminal, plain lines in a log.

The panel shows the state, elapsed and remaining time, per operation the last interval's ops/s
and p50/p99 (µs), and each collector's live figures as it declares them (block devices: IOPS
and await). At the end, summary tables: operations, errors, each collector's means.
Everything goes to stderr except the final table (stdout), so ``--json`` output stays clean.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sim import registry
from sim.core.cache import not_exercised_headline
from sim.core.metrics import Interval
from sim.protocols import Sample
from sim.registry import Display

PLAIN_LINE_EVERY_S = 5.0


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
        self.rows: list[dict[str, Any]] = []
        self.samples: list[Sample] = []
        self.elapsed = 0.0
        self.interval_s = 1.0
        self._started = time.monotonic()
        self._live: Live | None = None
        self._last_plain = 0.0

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
        self.progress = f"{what}: {done:,}/{total:,} ({100 * done / max(total, 1):.0f} %)"
        self._refresh()

    def on_interval(self, interval: Interval, samples: list[Sample]) -> None:
        self.elapsed = interval.t_end
        self.interval_s = interval.t_end - interval.t_start
        self.rows = list(interval.rows())
        self.samples = samples
        self.progress = ""
        if self._live is None and time.monotonic() - self._last_plain >= PLAIN_LINE_EVERY_S:
            self._last_plain = time.monotonic()
            seconds = max(interval.t_end - interval.t_start, 1e-9)
            ops = ", ".join(
                f"{r['op']} {r['ops_s']:.0f}/s p99 {_us(r.get('p99_us'))}"
                + (f" errors {r['errors'] / seconds:,.0f}/s" if r["errors"] else "")
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
        head.append(f"elapsed {self.elapsed:5.0f} s")
        if self.planned_s:
            head.append(f"  remaining {max(self.planned_s - self.elapsed, 0):5.0f} s")
        parts: list[Any] = [head]
        if self.progress:
            parts.append(Text(self.progress))
        if self.rows:
            ops = Table(box=None, pad_edge=False)
            for column in ("op", "ops/s", "p50", "p99", "errors/s"):
                ops.add_column(column, justify="right" if column != "op" else "left")
            seconds = max(self.interval_s, 1e-9)
            for r in self.rows:
                ops.add_row(
                    r["op"],
                    f"{r['ops_s']:,.0f}",
                    _us(r.get("p50_us")),
                    _us(r.get("p99_us")),
                    f"{r['errors'] / seconds:,.0f}",
                )
            parts.append(ops)
        parts.extend(live_tables(self.samples))
        return Group(*parts)


def _display(source: str) -> Display | None:
    entry = registry.collector(source)
    return entry.display if entry is not None else None


def live_tables(samples: list[Sample]) -> list[Table]:
    """One table per source with live figures: the latest interval, entities as rows."""
    by_source: dict[str, list[Sample]] = {}
    for sample in samples:
        if not sample.gap:
            by_source.setdefault(sample.source, []).append(sample)
    tables = []
    for source, rows in by_source.items():
        shown = _display(source)
        if shown is None or not shown.live:
            continue
        table = Table(box=None, pad_edge=False)
        table.add_column(shown.entity_label, justify="left")
        for figure in shown.live:
            table.add_column(figure.label, justify="right")
        for s in rows:
            table.add_row(s.entity, *(f.format(s.values.get(f.key)) for f in shown.live))
        tables.append(table)
    return tables


def summary_tables(summary: dict[str, Any]) -> list[Table]:
    """The final tables: per operation over the measured window, then storage means."""
    timing = summary.get("timing", {})
    title = (
        f"{summary.get('scenario', {}).get('workload')} on {summary.get('scenario', {}).get('target')}: "
        f"{summary.get('status', '?')}, {timing.get('measured_s', 0):.1f} s measured, "
        f"{summary.get('sessions', '?')} sessions"
    )
    ops = Table(title=title)
    for column in ("op", "count", "ops/s", "p50", "p95", "p99", "max", "errors"):
        ops.add_column(column, justify="left" if column == "op" else "right", no_wrap=True)
    for name, op in summary.get("operations", {}).items():
        ops.add_row(
            name,
            f"{op.get('count', 0):,}",
            f"{op.get('ops_s', 0):,.1f}",
            _us(op.get("p50_us")),
            _us(op.get("p95_us")),
            _us(op.get("p99_us")),
            _us(op.get("max_us")),
            str(op.get("errors", 0)),
        )
    tables = [ops]
    errors = error_table(summary.get("errors") or {})
    if errors is not None:
        tables.append(errors)
    for source, entities in (summary.get("storage") or {}).items():
        shown = _display(source)
        if shown is None or not shown.console or not isinstance(entities, dict) or not entities:
            continue
        table = Table(title=shown.console_title or shown.title)
        table.add_column(shown.entity_label, justify="left", no_wrap=True)
        for figure in shown.console:
            table.add_column(figure.label, justify="right", no_wrap=True)
        for entity, means in entities.items():
            table.add_row(entity, *(f.format(means.get(f.key)) for f in shown.console))
        tables.append(table)
    return tables


def print_summary(out: Console, summary: dict[str, Any]) -> None:
    """The final tables of ``dbsim run`` (with or without ``--workers``), after the headline
    that an invalid run gets before any figure."""
    for headline in (invalid_headline(summary), not_exercised_headline(summary)):
        if headline is not None:
            out.print(headline, style="bold red", highlight=False, markup=False, soft_wrap=True)
    for table in summary_tables(summary):
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


def mix_line(mix: dict[str, Any], errors: dict[str, Any]) -> str | None:
    """The mix rule's check, saying what it counted: issued operations, failed or not."""
    if "exact" not in mix:
        return None
    counted = ", ".join(f"{op} {n:,}" for op, n in (mix.get("measured") or {}).items())
    failed = int(errors.get("errors") or 0)
    line = (
        f"mix by the workload's rule: {'exact' if mix['exact'] else 'NOT exact'} over the "
        f"operations issued ({counted})"
    )
    if failed:
        line += f"; {failed:,} of them failed, so the mix applied to the target was not this"
    return line


def print_run_end(out: Console, summary: dict[str, Any]) -> None:
    """What ``dbsim run`` prints after the tables (with or without ``--workers``): the mix
    rule's check, one line per SLO verdict, a sweep's answer, the bundle and its report."""
    from pathlib import Path

    from sim.judge.score import score_line
    from sim.judge.slo import verdict_line
    from sim.judge.sweep import sweep_line

    line = mix_line(summary.get("mix") or {}, summary.get("errors") or {})
    if line is not None:
        out.print(line, highlight=False, markup=False)
    for verdict in (summary.get("slos") or {}).get("verdicts") or []:
        out.print(verdict_line(verdict), highlight=False, markup=False)
    if summary.get("sweep"):
        out.print(sweep_line(summary["sweep"]), highlight=False, markup=False)
    scored = score_line((summary.get("workload") or {}).get("score"))
    if scored is not None:  # a workload's own scoring (EDA: its reference's load points)
        out.print(scored, highlight=False, markup=False)
    located = (summary.get("target") or {}).get("data_location")
    if located:  # what the device figures describe: the storage under this path
        out.print(f"data: {located['path']} ({located['from']})", highlight=False, markup=False)
    out.print(f"bundle: {summary['bundle']}")
    report = Path(summary["bundle"]) / "report.html"
    if report.exists():
        out.print(f"report: {report}")
