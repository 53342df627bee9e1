"""``dbsim report RUN_DIR`` and ``dbsim runs``: look back at runs already made.

Importing this module registers both commands on :data:`sim.cli.app` (``sim.cli`` imports it
at its end). ``report`` re-analyses a bundle and rewrites its ``report.html``; ``runs`` lists
the bundles of an output directory, newest first, as a table or as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import app, output_width
from sim.errors import ConfigError

log = logging.getLogger(__name__)

RUN_COLUMNS = (
    "run",
    "started_at",
    "status",
    "workload",
    "target",
    "measured_s",
    "op",
    "ops_s",
    "p99_us",
    "verdict",
)


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        help="html (report.html, the default); markdown, text or pdf: the one-page ticket "
        "summary (report.md with report-chart.svg, report.txt, report.pdf) beside it; csv: "
        "the time series and SLOs into BUNDLE/csv (or --csv DIR).",
    ),
]
CsvOpt = Annotated[
    Path | None,
    typer.Option("--csv", help="Also export the time series and the SLOs as CSV into DIR "
                 "(made when missing; existing files are never overwritten).",
                 metavar="DIR"),
]  # fmt: skip


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run bundle directory (runs/<stamp>-<name>).")],
    fmt: FormatOpt = "html",
    csv_dir: CsvOpt = None,
) -> None:
    """Analyse a run bundle again, write its analysis.json and report.html (and the format
    asked); prints the answer on stderr and the paths written on stdout."""
    from sim.baseline.page import write_baseline_report
    from sim.bundle.reader import read_summary
    from sim.report import write_report

    fmt = fmt.lower()
    if fmt not in (*TICKET_FORMATS, "csv"):
        raise ConfigError(
            f"report: --format {fmt!r}: choose one of {', '.join((*TICKET_FORMATS, 'csv'))}"
        )
    summary = read_summary(run_dir, label="report: ")  # not a bundle, unreadable, wrong types
    if (run_dir / "baseline.json").is_file() and (fmt != "html" or csv_dir is not None):
        raise ConfigError(
            f"report: {run_dir} is a storage baseline (dbsim baseline): its page is HTML only, "
            "--format and --csv are for run bundles"
        )
    try:
        if (run_dir / "baseline.json").is_file():
            # A storage baseline (dbsim baseline): fio's points, no operations to correlate.
            path, problem = write_baseline_report(run_dir), None
        else:
            path, problem = write_report(run_dir)
    except OSError as exc:
        # Nothing was replaced (atomic_write renames last); exit 2, like an output directory
        # that cannot hold a bundle: a link planted at a temporary name, a read-only bundle.
        from sim.bundle.files import os_reason

        raise ConfigError(
            f"report: cannot write {exc.filename or run_dir}: {os_reason(exc)}"
        ) from exc
    if problem:
        sys.stderr.write(f"warning: report without analysis: {problem}\n")
    if (run_dir / "baseline.json").is_file():
        sys.stdout.write(f"{path}\n")
        return
    written = _extras(run_dir, summary, fmt, csv_dir)
    for out in [path] if fmt == "html" else []:
        written.insert(0, out)
    _say_answer(summary, run_dir)
    sys.stdout.write("".join(f"{p}\n" for p in written))


TICKET_FORMATS = ("html", "markdown", "text", "pdf")


def _extras(run_dir: Path, summary: dict[str, Any], fmt: str, csv_dir: Path | None) -> list[Path]:
    """The ticket of ``fmt`` and the CSV export, when asked; the paths written."""
    from sim.report.data import load_analysis_file

    analysis = load_analysis_file(run_dir)
    written: list[Path] = []
    try:
        if fmt in ("markdown", "text", "pdf"):
            from sim.report.ticket import write_ticket

            written += write_ticket(run_dir, fmt, analysis)
        if fmt == "csv" or csv_dir is not None:
            from sim.report.export import export_csv

            written += export_csv(run_dir, csv_dir or run_dir / "csv", summary, analysis)
    except OSError as exc:
        from sim.bundle.files import os_reason

        raise ConfigError(
            f"report: cannot write {exc.filename or run_dir}: {os_reason(exc)}"
        ) from exc
    return written


def _say_answer(summary: dict[str, Any], run_dir: Path) -> None:
    """The run's answer on stderr (stdout keeps the paths, for scripts)."""
    from rich.console import Console

    from sim.cli.console import print_answer
    from sim.report.data import load_analysis_file

    err = Console(stderr=True, width=output_width(sys.stderr))
    print_answer(err, summary, load_analysis_file(run_dir))


DirectoryOpt = Annotated[Path, typer.Argument(help="The output.directory holding the run bundles.")]


@app.command()
def runs(
    directory: DirectoryOpt = Path("runs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List past runs, newest first: status, workload, target, main operation, verdict."""
    if not directory.is_dir():
        raise ConfigError(
            f"runs: {directory} is not a directory (pass the output.directory of your runs)"
        )
    problems: list[str] = []
    rows = [
        run_row(path, problems)
        for path in sorted(directory.iterdir())
        if os.path.lexists(path / "summary.json")
    ]
    rows.sort(key=lambda r: (r["started_at"] or "", r["run"]), reverse=True)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        _bad_bundles(problems)
        return
    from rich.console import Console

    from sim.cli.tables import Column, folded
    from sim.report.markup import us

    out = Console(width=output_width(sys.stdout))
    if not rows:
        out.print(f"no runs in {directory}")
        return
    right = ("measured", "ops/s", "p99")
    headers: tuple[str, ...] = ("run", "started", "status", "workload", "target", "measured")
    headers += ("main op", "ops/s", "p99", "verdict")
    columns = [Column(h, "right" if h in right else "left") for h in headers]
    cells = [
        [
            r["run"],  # in full: `dbsim compare` takes it
            (r["started_at"] or "-").replace("T", " ")[:19],
            r["status"],
            r["workload"] or "-",
            r["target"] or "-",
            "-" if r["measured_s"] is None else f"{r['measured_s']:.0f} s",
            r["op"] or "-",
            "-" if r["ops_s"] is None else f"{r['ops_s']:,.0f}",
            us(r["p99_us"]),
            r["verdict"] or "-",
        ]
        for r in rows
    ]
    for table in folded(columns, cells, out.width, title=f"runs in {directory}"):
        out.print(table)
    _bad_bundles(problems)


def _bad_bundles(problems: list[str]) -> None:
    """After the listing: the bundles that could not be read are bad input (exit 2), each
    named with its file and field, while the good ones are still listed."""
    if problems:
        raise ConfigError("\n".join(problems))


def run_row(bundle: Path, problems: list[str] | None = None) -> dict[str, Any]:
    """One bundle as a row of ``dbsim runs``; an unreadable summary gives status
    ``unreadable`` and its first problem line is added to ``problems``."""
    from sim.bundle.reader import read_summary

    row: dict[str, Any] = dict.fromkeys(RUN_COLUMNS)
    row["run"] = bundle.name
    row["path"] = str(bundle)
    try:
        summary = read_summary(bundle)
    except ConfigError as exc:
        log.debug("runs: %s: %s", bundle, exc)
        if problems is not None:
            problems.append(str(exc).splitlines()[0])
        row["status"] = "unreadable"
        return row
    scenario = summary.get("scenario") or {}
    operations = summary.get("operations") or {}
    # The main operation: the most frequent one (SLOB's read, SSB's query).
    main = max(operations, key=lambda op: operations[op].get("count") or 0, default=None)
    row.update(
        started_at=summary.get("started_at"),
        status=summary.get("status"),
        workload=scenario.get("workload"),
        target=scenario.get("target"),
        measured_s=(summary.get("timing") or {}).get("measured_s"),
        op=main,
        ops_s=operations[main].get("ops_s") if main else None,
        p99_us=operations[main].get("p99_us") if main else None,
        verdict=_verdict(summary, bundle),
    )
    return row


def _verdict(summary: dict[str, Any], bundle: Path) -> str | None:
    """The verdict's call, from the summary if the run put it there, else analysis.json."""
    from sim.report.data import load_analysis_file

    for holder in (summary, summary.get("analysis") or {}, load_analysis_file(bundle) or {}):
        verdict = holder.get("verdict") if isinstance(holder, dict) else None
        if isinstance(verdict, dict) and verdict.get("call"):
            return str(verdict["call"])
        if isinstance(verdict, str):
            return verdict
    return None
