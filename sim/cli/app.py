"""The ``dbsim`` Typer app and what every command shares: the scenario argument, ``--set``,
the root ``--debug`` option, the output width for logs and pipes, and the one way an error
line is printed. Each command lives in its own module of :mod:`sim.cli` and registers itself on
:data:`app`; :mod:`sim.cli.entry` imports the one a start runs (all of them for --help).
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.errors import ConfigError
from sim.secrets import install_log_redaction, redact_known

app = typer.Typer(
    name="dbsim",
    help="Drive SLOB-like, SSB-like and EDA workloads against real databases and file trees, "
    "and correlate application latency with storage IOPS.",
    add_completion=False,
    no_args_is_help=False,
    pretty_exceptions_enable=False,
)

WIDE_OUTPUT = 140
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
_debug = False

ScenarioArg = Annotated[
    Path | None,
    typer.Argument(help="Scenario YAML file. Omitted: the embedded default (SLOB-like on SQLite)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a field: --set load.sessions=8 (repeatable)."),
]

DurationOpt = Annotated[float | None, typer.Option("--duration", help="load.duration_s")]
SessionsOpt = Annotated[int | None, typer.Option("--sessions", help="load.sessions")]
WarmupOpt = Annotated[float | None, typer.Option("--warmup", help="load.warmup_s")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="output.directory")]


def output_width(stream: Any) -> int | None:
    """The width for a command's tables on ``stream``: ``COLUMNS`` when it is set (a
    terminal or not), else the terminal's own (None), else :data:`WIDE_OUTPUT` for a pipe or
    a log, so tables fit without folding."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if stream.isatty() else WIDE_OUTPUT


def run_overrides(
    sets: list[str] | None,
    duration: float | None,
    sessions: int | None,
    warmup: float | None,
    output: Path | None,
) -> list[tuple[str, Any]]:
    """The overrides ``run`` and ``validate`` share: ``--set`` and the named load options."""
    return overrides(
        sets,
        **{
            "load.duration_s": duration,
            "load.sessions": sessions,
            "load.warmup_s": warmup,
            "output.directory": str(output) if output else None,
        },
    )


def overrides(sets: list[str] | None, **named: Any) -> list[tuple[str, Any]]:
    """``--set FIELD=VALUE`` pairs, then the named options that were given."""
    # Imported here: the scenario models are ~80 ms of a start that commands without a
    # scenario (size, lab, import, profile) need not pay.
    from sim.config.resolve import parse_value

    pairs: list[tuple[str, Any]] = []
    for item in sets or []:
        if "=" not in item:
            raise ConfigError(f"--set {item}: expected FIELD=VALUE, e.g. load.sessions=8")
        key, _, value = item.partition("=")
        pairs.append((key.strip(), parse_value(value, f"--set {key.strip()}")))
    pairs.extend((key, value) for key, value in named.items() if value is not None)
    return pairs


def debug_requested() -> bool:
    """Whether ``dbsim --debug`` was given (tracebacks shown, debug logs on)."""
    return _debug


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> None:
    global _debug
    _debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # A driver's own text (in a log record or its traceback) may hold the password.
    install_log_redaction()


def print_error(message: str) -> None:
    # Masked here too: an exception no target translated carries the driver's raw text.
    for line in redact_known(message).splitlines() or [message]:
        sys.stderr.write(f"error: {line}\n")


def print_traceback() -> None:
    """``--debug``'s traceback, masked: its chained cause is the driver's exception, which the
    target's redacted message wraps but does not change (``raise TargetError(...) from exc``)."""
    sys.stderr.write(redact_known(traceback.format_exc()))
