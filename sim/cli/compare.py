"""``dbsim compare BASELINE CANDIDATE``: is the candidate storage worse than the baseline?

``dbsim compare OLD1 OLD2 OLD3 vs NEW1 NEW2 NEW3``: repeated runs of each side combined into
one interval per figure; runs at other load levels (sessions, rates, load steps) are compared
at levels matched by delivered IOPS (:func:`sim.judge.compare.compare_runs`).

Importing this module registers the command on :data:`sim.cli.app.app` (:mod:`sim.cli.entry`
does). Exit codes: 0 the candidate is not worse (better, equivalent, no significant
difference, or undetermined: a change with no interval to weigh it), 1 it is significantly worse beyond a threshold, 2 bad input (not a bundle, a bad
thresholds file or option), 4 the runs cannot be compared (a run is invalid, or a caveat
such as a different data size, mix or load shape invalidates the comparison).

``dbsim compare CAPTURE REPLAY``, when the second argument is a replay's directory (it holds
``replay.json``): the replay against the capture it was made from, per scale and figure,
recomputed from both bundles, with each side's intervals (:mod:`sim.replay.against`). Exit
codes: 0 every scale faithful, 5 a scale unfaithful (replay.json's judgement), 2 bad input
(not the capture the replay was made from, no readable replay.json).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
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
CsvOpt = Annotated[
    Path | None,
    typer.Option("--csv", help="Also write the per-figure table as CSV here (plain numbers)."),
]
#: The word between the baseline bundles and the candidate bundles.
SEPARATOR = "vs"


@app.command()
def compare(
    bundles: Annotated[
        list[Path] | None,
        typer.Argument(
            help="BASELINE CANDIDATE, or BASELINE... vs CANDIDATE... (repeated runs of each "
            "side, or runs at several load levels), or CAPTURE REPLAY (a replay's directory: "
            "the replay against the capture it was made from).",
            show_default=False,
            metavar="BASELINE [vs] CANDIDATE",
        ),
    ] = None,
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
    csv_path: CsvOpt = None,
) -> None:
    """Compare runs (per operation and storage) with the 95 % interval of each change;
    exit 1 when the candidate is significantly worse, 4 when the runs cannot be compared.
    CAPTURE REPLAY: the replay against its capture, per scale and figure; exit 5 when a
    scale was unfaithful."""
    from sim.judge.compare import compare_runs, load_thresholds

    options = {
        "max_p50_regression_pct": max_p50,
        "max_p99_regression_pct": max_p99,
        "max_ops_s_regression_pct": max_ops_s,
        "max_await_regression_pct": max_await,
        "max_iops_regression_pct": max_iops,
        "max_ios_per_op_regression_pct": max_ios_per_op,
        "max_error_pct_increase": max_error_pct,
    }
    given = bundles or []
    if len(given) == 2 and _is_replay(given[1]):  # CAPTURE REPLAY
        judged = [thresholds, *options.values()]
        _against_replay(given[0], given[1], judged, as_json, (html, csv_path))
    baselines, candidates = split_sides(given)
    result = compare_runs(baselines, candidates, load_thresholds(thresholds, options))
    if html is not None:
        _write(html, "--html", lambda: _html(result))
        result["html"] = str(html)
    if csv_path is not None:
        from sim.report.compare import render_csv

        _write(csv_path, "--csv", lambda: render_csv(result))
        result["csv"] = str(csv_path)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    else:
        _print(result)
    call = result["verdict"]["call"]
    codes = {"worse": EXIT_SLO_MISSED, "invalid": EXIT_NOT_COMPARABLE}
    raise typer.Exit(codes.get(call, EXIT_OK))


def _is_replay(path: Path) -> bool:
    from sim.replay.against import is_replay_dir

    return is_replay_dir(path)


def _against_replay(
    capture: Path,
    replay: Path,
    thresholds: list[Any],
    as_json: bool,
    files: tuple[Path | None, Path | None],
) -> None:
    """``dbsim compare CAPTURE REPLAY``: the model, its files (``--html``, ``--csv``), its
    text; exits. The runs' regression thresholds are refused: they judge runs."""
    from sim.replay.against import compare_replay, dumps
    from sim.report.against import console_lines, render_csv

    if any(v is not None for v in thresholds):
        raise ConfigError(
            "compare CAPTURE REPLAY: the regression thresholds judge runs; a replay is "
            "judged by its fidelity tolerances (replay.json)"
        )
    html, csv_path = files
    result = compare_replay(capture, replay)
    if html is not None:
        from sim.report.against_page import render_page

        _write_new(html, "--html", render_page(result))
        result["html"] = str(html)
    if csv_path is not None:
        _write_new(csv_path, "--csv", render_csv(result))
        result["csv"] = str(csv_path)
    if as_json:
        sys.stdout.write(dumps(result) + "\n")
    else:
        lines = console_lines(result)
        lines += [f"{key}: {result[key]}" for key in ("html", "csv") if result.get(key)]
        sys.stdout.write("\n".join(lines) + "\n")
    raise typer.Exit(result["exit_code"])


def _write_new(path: Path, option: str, text: str) -> None:
    from sim.safeio import create_text

    create_text(path, text, option)


def split_sides(bundles: list[Path]) -> tuple[list[Path], list[Path]]:
    """BASELINE CANDIDATE, or the bundles before and after the word ``vs``; anything else is
    bad input."""
    if not bundles:
        raise ConfigError(
            f"compare takes BASELINE CANDIDATE, or BASELINE... {SEPARATOR} CANDIDATE...: "
            "missing argument 'baseline'"
        )
    marks = [i for i, b in enumerate(bundles) if str(b) == SEPARATOR]
    if not marks:
        if len(bundles) != 2:
            raise ConfigError(
                f"compare takes BASELINE CANDIDATE, or BASELINE... {SEPARATOR} CANDIDATE... "
                f"(got {len(bundles)} bundles without '{SEPARATOR}')"
            )
        return [bundles[0]], [bundles[1]]
    if len(marks) > 1 or marks[0] == 0 or marks[0] == len(bundles) - 1:
        raise ConfigError(
            f"compare takes BASELINE... {SEPARATOR} CANDIDATE...: one '{SEPARATOR}' with at "
            "least one bundle on each side"
        )
    return bundles[: marks[0]], bundles[marks[0] + 1 :]


def _html(result: dict[str, Any]) -> str:
    from sim.report.compare import render_html

    return render_html(result)


def _write(path: Path, option: str, render: Callable[[], str]) -> None:
    """``render()``'s text at ``path``, atomically (never through a link, never over what is
    not a regular file); a bad path is bad input."""
    from sim.bundle.files import atomic_write

    try:
        atomic_write(path, render())
    except OSError as exc:
        # A refusal names the temporary file when that is what is in the way.
        other = f" {exc.filename}" if exc.filename and str(exc.filename) != str(path) else ""
        raise ConfigError(f"{option} {path}: cannot write{other}: {exc.strerror or exc}") from None


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console

    from sim.cli.tables import Column, folded
    from sim.report.compare import HEADERS, LEFT, console_lines, runs_line, table_rows

    width = output_width(sys.stdout)
    out = Console(width=width)
    head, tail = console_lines(result)
    for line in [*head, runs_line(result)]:  # first: the caveats of both sides
        _say(out, line)
    columns = [Column(h, "left" if i in LEFT else "right") for i, h in enumerate(HEADERS)]
    rows = table_rows(result)
    styles = {"worse": "bold red", "better": "bold green"}
    if not rows:
        _say(out, "figures: none compared")
    for table in folded(columns, rows, width, title="figures", keys=2) if rows else []:
        for i, row in enumerate(rows):
            style = styles.get(row[-1])
            if style:
                table.rows[i].style = style
        out.print(table)
    for line in tail:
        _say(out, line)
    for key in ("html", "csv"):
        if result.get(key):
            out.print(f"{key}: {result[key]}", highlight=False, markup=False, soft_wrap=True)


#: A figure and its unit stay on one line when a sentence wraps ("+55.0 %", "10.10 ms").
_FIGURE = re.compile(r"(?<=[0-9]) (?=(?:%|µs|ms|s|pt|points|IOPS|ops/s|intervals)(?!\w))")
_NBSP = "\u00a0"


def _say(out: Any, line: str) -> None:
    """``line`` wrapped at the console's width at spaces, never inside a figure, the
    continuation indented under the line's own indent."""
    import textwrap

    indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
    protected = _FIGURE.sub(_NBSP, line)
    # textwrap breaks only at ASCII whitespace: a no-break space keeps a figure whole.
    wrapped = textwrap.wrap(
        protected, width=max(out.width, 40), subsequent_indent=indent, break_long_words=False,
        break_on_hyphens=False,
    )  # fmt: skip
    for part in wrapped or [""]:
        out.print(part.replace(_NBSP, " "), highlight=False, markup=False, soft_wrap=True)
