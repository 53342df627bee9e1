"""The ``dbsim`` command.

Every error the user can cause prints one line per problem to stderr and exits 2; a run that
fails exits 3; a run stopped by SIGINT/SIGTERM exits 130/143 after writing its bundle.
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from sim import __version__
from sim.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    ConfigError,
    SimError,
)
from sim.safeio import strict_json
from sim.scenario import ScenarioBase, _parse_value, json_schema, resolve, resolved_dict
from sim.secrets import install_log_redaction, redact_known
from sim.workers import parse_workers, plan_workers

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


def _overrides(sets: list[str] | None, **named: Any) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for item in sets or []:
        if "=" not in item:
            raise ConfigError(f"--set {item}: expected FIELD=VALUE, e.g. load.sessions=8")
        key, _, value = item.partition("=")
        pairs.append((key.strip(), _parse_value(value, f"--set {key.strip()}")))
    pairs.extend((key, value) for key, value in named.items() if value is not None)
    return pairs


def _planned_seconds(scenario: ScenarioBase) -> float | None:
    load = scenario.load
    if load.loops_per_session:
        return None
    measured = sum(step.duration_s for step in load.steps) if load.steps else load.duration_s
    return load.warmup_s + measured


@app.command()
def run(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    duration: Annotated[float | None, typer.Option("--duration", help="load.duration_s")] = None,
    sessions: Annotated[int | None, typer.Option("--sessions", help="load.sessions")] = None,
    warmup: Annotated[float | None, typer.Option("--warmup", help="load.warmup_s")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="output.directory")] = None,
    skip_load: Annotated[
        bool, typer.Option("--skip-load", help="Use the data as loaded; do not build or verify.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the bundle path.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON on stdout.")
    ] = False,
    workers: Annotated[
        str,
        typer.Option(
            "--workers",
            help="Run through Locust's master/worker mode with N local worker processes; "
            "auto: as many as a file workload needs to not be bound by one process's CPU "
            "(0, the default: one process, no Locust).",
        ),
    ] = "0",
) -> None:
    """Run a scenario and write its bundle."""
    overrides = _overrides(
        set_,
        **{
            "load.duration_s": duration,
            "load.sessions": sessions,
            "load.warmup_s": warmup,
            "output.directory": str(output) if output else None,
        },
    )
    resolved = resolve(scenario, overrides)
    count = parse_workers(workers)
    if count is None:
        from sim.runner import build_target, build_workload

        sessions = resolved.load.sessions or (
            build_workload(resolved, build_target(resolved)).default_sessions()
        )
        plan = plan_workers(resolved, sessions)
        count = plan.workers
        sys.stderr.write(
            f"dbsim: --workers auto: {count or 'no'} worker processes ({plan.reason})\n"
        )
    if count > 0:
        # Imported only here: sim.locust monkey-patches the process with gevent.
        from sim.locust.distributed import run_distributed

        code = run_distributed(
            resolved,
            workers=count,
            quiet=quiet,
            as_json=as_json,
            debug=_debug,
            skip_load=skip_load,
        )
        raise typer.Exit(code)
    code = _execute(resolved, skip_load=skip_load, quiet=quiet, as_json=as_json)
    raise typer.Exit(code)


def _execute(scenario: ScenarioBase, *, skip_load: bool, quiet: bool, as_json: bool) -> int:
    from sim.console import LiveConsole, print_run_end, print_summary
    from sim.engine import OUTCOME_COMPLETED, OUTCOME_INTERRUPTED, new_event_loop
    from sim.runner import finish_summary, prepare_run
    from sim.slo import completed_exit_code

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    received: list[int] = []

    engines: list[Any] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        if engines:
            engines[0].request_stop(f"stopped by {signal.Signals(signum).name}")

    # Installed before anything else, so a signal at any moment is handled the same way:
    # one that lands before the engine exists stops it the moment it is created.
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)

    async def main() -> dict[str, Any]:
        prepared = prepare_run(scenario, skip_load=skip_load)
        engines.append(prepared.engine)
        live = LiveConsole(_planned_seconds(scenario))
        if not (quiet or as_json):
            events = prepared.engine.events
            events.state.add_listener(live.on_state)
            events.progress.add_listener(live.on_progress)
            events.interval.add_listener(live.on_interval)
            events.collector_error.add_listener(live.on_collector_error)
        try:
            with live if not (quiet or as_json) else _Null():
                if received:  # a signal arrived while the run was being prepared
                    prepared.engine.request_stop(f"stopped by {signal.Signals(received[0]).name}")
                await prepared.engine.run()
        finally:
            summary = finish_summary(prepared)
        summary["bundle"] = str(prepared.bundle.path)
        return summary

    try:
        summary = loop.run_until_complete(main())
    finally:
        loop.close()
        # The bundle is complete; closing the loop restored the default handlers, under which a
        # late second Ctrl-C would kill us with a traceback while printing. Finish quietly.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    refused = _refused_before_start(engines[0].result if engines else None, summary)
    if refused is not None:
        return refused
    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")  # what summary.json holds
    elif quiet:
        sys.stdout.write(summary["bundle"] + "\n")
    else:
        # A log or a pipe gets a width that fits the tables rather than 80 columns.
        out = Console(width=None if sys.stdout.isatty() else WIDE_OUTPUT)
        print_summary(out, summary)
        print_run_end(out, summary)
    status = summary["status"]
    if status == OUTCOME_COMPLETED:
        code, problem = completed_exit_code(summary, declared=bool(scenario.slos))
        if problem:  # objectives that could not be judged
            _error(problem)
        return code
    if status == OUTCOME_INTERRUPTED:
        return EXIT_SIGTERM if received and received[-1] == signal.SIGTERM else EXIT_SIGINT
    if summary.get("error"):
        _error(str(summary["error"]))
    return EXIT_RUN_FAILED


def _refused_before_start(result: Any, summary: dict[str, Any]) -> int | None:
    """Exit 2, leaving no bundle, when the run was refused before any session started: a
    foreign object in the way, or the data missing under ``--skip-load``. That is bad input,
    like a wrong scenario, and is fixed the same way (another prefix, ``dbsim load``); the
    bundle directory was made a moment ago for this run alone and holds no measurement, so it
    is removed as a refused output directory is (sim.runner.prepare_run)."""
    from sim.engine import OUTCOME_FAILED

    if (
        result is None
        or summary.get("status") != OUTCOME_FAILED
        or result.error_exit_code != EXIT_BAD_INPUT
        or result.sessions_started_wall is not None
    ):
        return None
    shutil.rmtree(summary["bundle"], ignore_errors=True)
    _error(str(result.error))
    return EXIT_BAD_INPUT


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@app.command()
def validate(scenario: ScenarioArg = None, set_: SetOpt = None) -> None:
    """Check a scenario and print it as it would run (after environment and --set overrides)."""
    import yaml

    resolved = resolve(scenario, _overrides(set_))
    sys.stdout.write(yaml.safe_dump(resolved_dict(resolved), sort_keys=False))


@app.command()
def schema(
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown", help="Print the scenario reference in Markdown (docs/reference/)."
        ),
    ] = False,
) -> None:
    """Print the scenario JSON Schema (for editor completion)."""
    if markdown:
        from sim.schema_doc import render_markdown

        sys.stdout.write(render_markdown())
        return
    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
def load(scenario: ScenarioArg = None, set_: SetOpt = None) -> None:
    """Build and verify the workload's data (idempotent), without running the workload."""
    from sim.runner import build_target, build_workload
    from sim.setup import load_and_verify

    resolved = resolve(scenario, _overrides(set_))
    target = build_target(resolved)
    report = load_and_verify(build_workload(resolved, target), target)
    sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")


@app.command()
def drop(scenario: ScenarioArg = None, set_: SetOpt = None) -> None:
    """Remove the objects dbsim created for this scenario's workload (nothing else)."""
    from sim.runner import build_target, build_workload
    from sim.setup import drop_objects

    resolved = resolve(scenario, _overrides(set_))
    target = build_target(resolved)
    dropped = drop_objects(build_workload(resolved, target), target)
    sys.stdout.write(("dropped: " + ", ".join(dropped) if dropped else "nothing to drop") + "\n")


@app.command()
def version() -> None:
    """Print dbsim's version."""
    sys.stdout.write(f"dbsim {__version__}\n")


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


def _error(message: str) -> None:
    # Masked here too: an exception no target translated carries the driver's raw text.
    for line in redact_known(message).splitlines() or [message]:
        sys.stderr.write(f"error: {line}\n")


def _print_traceback() -> None:
    """``--debug``'s traceback, masked: its chained cause is the driver's exception, which the
    target's redacted message wraps but does not change (``raise TargetError(...) from exc``)."""
    sys.stderr.write(redact_known(traceback.format_exc()))


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the Typer app and turns every failure into lines and an exit code."""
    # A name with a non-UTF-8 byte (a surrogate, to Python) printed on stdout raised
    # UnicodeEncodeError mid-output: shown escaped instead, as stderr already does.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        # standalone_mode=False: errors come back to us as exceptions, Exit codes as values.
        code = app(args=argv, standalone_mode=False)
    except SimError as exc:
        if _debug:
            _print_traceback()
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_SIGINT
    except Exception as exc:
        kind = {cls.__name__ for cls in type(exc).__mro__}
        if "Abort" in kind:
            _error("interrupted")
            return EXIT_SIGINT
        if "Exit" in kind:
            return int(getattr(exc, "exit_code", 0))
        if "UsageError" in kind:
            ctx = getattr(exc, "ctx", None)
            command = ctx.command_path if ctx is not None else "dbsim"
            _error(f"{exc.format_message()} (see {command} --help)")  # type: ignore[attr-defined]
            return EXIT_BAD_INPUT
        if "ClickException" in kind:
            _error(exc.format_message())  # type: ignore[attr-defined]
            return int(getattr(exc, "exit_code", EXIT_BAD_INPUT))
        if _debug:
            _print_traceback()
        _error(f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return EXIT_RUN_FAILED
    return code if isinstance(code, int) else EXIT_OK


# Commands that live in their own modules register themselves on ``app`` when imported.
# (dbsim baseline, compare, lab …, report/runs, size, ui/worker)
from sim import cli_baseline, cli_compare, cli_lab, cli_report, cli_size, cli_ui  # noqa: E402, F401

if __name__ == "__main__":  # pragma: no cover
    # Run as `python -m sim.cli`, this file is __main__ and `sim.cli` is a second copy: the
    # command modules registered themselves on that copy's app, so run that one.
    from sim.cli import main as _main

    sys.exit(_main())
