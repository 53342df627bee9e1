"""``dbsim compare BASELINE CANDIDATE``: is the candidate storage worse than the baseline?

Importing this module registers the command on :data:`sim.cli.app.app` (:mod:`sim.cli.entry`
does). Exit codes: 0 the candidate is not worse (better, equivalent, no significant
difference, or undetermined: a change with no interval to weigh it), 1 it is significantly worse beyond a threshold, 2 bad input (not a bundle, a bad
thresholds file or option), 4 the runs cannot be compared (a run is invalid, or a caveat
such as a different data size, mix or load shape invalidates the comparison).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import app, output_width
from sim.errors import EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_SLO_MISSED, ConfigError

ThresholdsOpt = Annotated[
    Path | None,
    typer.Option(
        "--thresholds",
        help="YAML file of thresholds (keys as the options below, with underscores; "
        "null: report without judging).",
    ),
]
MaxP50Opt = Annotated[
    float | None,
    typer.Option("--max-p50-regression-pct", min=0.0, help="p50 may rise this much (10)."),
]
MaxP99Opt = Annotated[
    float | None,
    typer.Option("--max-p99-regression-pct", min=0.0, help="p99 may rise this much (10)."),
]
MaxOpsOpt = Annotated[
    float | None,
    typer.Option("--max-ops-s-regression-pct", min=0.0, help="ops/s may fall this much (5)."),
]
MaxAwaitOpt = Annotated[
    float | None,
    typer.Option("--max-await-regression-pct", min=0.0, help="await may rise this much (20)."),
]
MaxIopsOpt = Annotated[
    float | None,
    typer.Option("--max-iops-regression-pct", min=0.0, help="IOPS may fall this much (off)."),
]
MaxIosPerOpOpt = Annotated[
    float | None,
    typer.Option(
        "--max-ios-per-op-regression-pct", min=0.0, help="I/Os per op may rise this much (off)."
    ),
]
MaxErrorPctOpt = Annotated[
    float | None,
    typer.Option(
        "--max-error-pct-increase",
        min=0.0,
        help="An operation's error share may rise this many points of percent (0.5).",
    ),
]
HtmlOpt = Annotated[
    Path | None, typer.Option("--html", help="Also write a self-contained HTML page here.")
]


@app.command()
def compare(
    baseline: Annotated[Path, typer.Argument(help="The baseline run bundle (the old storage).")],
    candidate: Annotated[Path, typer.Argument(help="The candidate run bundle (the new one).")],
    thresholds: ThresholdsOpt = None,
    max_p50: MaxP50Opt = None,
    max_p99: MaxP99Opt = None,
    max_ops_s: MaxOpsOpt = None,
    max_await: MaxAwaitOpt = None,
    max_iops: MaxIopsOpt = None,
    max_ios_per_op: MaxIosPerOpOpt = None,
    max_error_pct: MaxErrorPctOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    html: HtmlOpt = None,
) -> None:
    """Compare two runs (per operation and storage) with the 95 % interval of each change;
    exit 1 when the candidate is significantly worse, 4 when the runs cannot be compared."""
    from sim.judge.compare import compare as compare_runs
    from sim.judge.compare import load_thresholds

    limits = load_thresholds(
        thresholds,
        {
            "max_p50_regression_pct": max_p50,
            "max_p99_regression_pct": max_p99,
            "max_ops_s_regression_pct": max_ops_s,
            "max_await_regression_pct": max_await,
            "max_iops_regression_pct": max_iops,
            "max_ios_per_op_regression_pct": max_ios_per_op,
            "max_error_pct_increase": max_error_pct,
        },
    )
    result = compare_runs(baseline, candidate, limits)
    if html is not None:
        _write_html(html, result)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    else:
        _print(result)
    call = result["verdict"]["call"]
    codes = {"worse": EXIT_SLO_MISSED, "invalid": EXIT_NOT_COMPARABLE}
    raise typer.Exit(codes.get(call, EXIT_OK))


def _write_html(html: Path, result: dict[str, Any]) -> None:
    """The comparison's page at ``html`` (named in ``result``); a bad path is bad input."""
    from sim.bundle.files import atomic_write
    from sim.report.compare import render_html

    try:
        atomic_write(html, render_html(result))
    except OSError as exc:
        # A refusal names the temporary file when that is what is in the way.
        other = f" {exc.filename}" if exc.filename and str(exc.filename) != str(html) else ""
        raise ConfigError(f"--html {html}: cannot write{other}: {exc.strerror or exc}") from None
    result["html"] = str(html)


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from sim.report.compare import HEADERS, measured_line, table_rows

    out = Console(width=output_width(sys.stdout))
    verdict = result["verdict"]
    decided = "; ".join(verdict["decided_by"])
    if verdict["call"] == "invalid":  # said first: the table below is no verdict
        out.print(f"comparison invalid: {decided}", highlight=False, markup=False, soft_wrap=True)
    base, cand = result["baseline"], result["candidate"]
    table = Table(title=f"{base['run']} (baseline) → {cand['run']} (candidate)")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i in (0, 1, 7) else "right", no_wrap=True)
    styles = {"worse": "bold red", "better": "bold green"}
    for row in table_rows(result):
        table.add_row(*row, style=styles.get(row[-1]))
    out.print(table)
    for line in [measured_line(result), *(f"note: {n}" for n in result["notes"])]:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(
        f"verdict: candidate {verdict['call']}" + (f" ({decided})" if decided else ""),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if result.get("html"):
        out.print(f"html: {result['html']}", highlight=False, markup=False, soft_wrap=True)
