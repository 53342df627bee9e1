"""``dbsim run``: run a scenario and write its bundle, in this process or through Locust's
master/worker mode (``--workers``)."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from sim.cli.app import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    WIDE_OUTPUT,
    DurationOpt,
    OutputOpt,
    ScenarioArg,
    SessionsOpt,
    SetOpt,
    WarmupOpt,
    app,
    debug_requested,
    print_error,
    run_overrides,
)
from sim.config.resolve import resolve
from sim.config.scenario import ScenarioBase
from sim.core.workers import parse_workers, plan_workers
from sim.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, ConfigError, SimError
from sim.safeio import strict_json


def _planned_seconds(scenario: ScenarioBase) -> float | None:
    load = scenario.load
    if load.loops_per_session:
        return None
    measured = sum(step.duration_s for step in load.steps) if load.steps else load.duration_s
    calibration = load.calibration_s if load.asks_iops else 0.0
    return calibration + load.warmup_s + measured


SkipLoadOpt = Annotated[
    bool, typer.Option("--skip-load", help="Use the data as loaded; do not build or verify.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the bundle path.")]
AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")]
WorkersOpt = Annotated[
    str,
    typer.Option(
        "--workers",
        help="Run through Locust's master/worker mode with N local worker processes; "
        "auto: as many as a file workload needs to not be bound by one process's CPU "
        "(0, the default: one process, no Locust).",
    ),
]


@app.command()
def run(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    duration: DurationOpt = None,
    sessions: SessionsOpt = None,
    warmup: WarmupOpt = None,
    output: OutputOpt = None,
    skip_load: SkipLoadOpt = False,
    quiet: QuietOpt = False,
    as_json: AsJsonOpt = False,
    workers: WorkersOpt = "0",
) -> None:
    """Run a scenario and write its bundle."""
    scenario_overrides = run_overrides(set_, duration, sessions, warmup, output)
    resolved = resolve(scenario, scenario_overrides)
    count = parse_workers(workers)
    if count is None:
        from sim.core.runner import build_target, build_workload

        sessions = resolved.load.sessions or (
            build_workload(resolved, build_target(resolved)).default_sessions()
        )
        plan = plan_workers(resolved, sessions)
        count = plan.workers
        sys.stderr.write(
            f"dbsim: --workers auto: {count or 'no'} worker processes ({plan.reason})\n"
        )
    if count > 0 and resolved.load.asks_iops:
        raise ConfigError(
            "--workers: load.rate_iops is calibrated by one process; run it without --workers "
            "(or ask in rate_ops_s)"
        )
    if count > 0:
        # Imported only here: sim.locust monkey-patches the process with gevent.
        from sim.locust.distributed import run_distributed

        code = run_distributed(
            resolved,
            workers=count,
            quiet=quiet,
            as_json=as_json,
            debug=debug_requested(),
            skip_load=skip_load,
        )
        raise typer.Exit(code)
    code = _execute(resolved, skip_load=skip_load, quiet=quiet, as_json=as_json)
    raise typer.Exit(code)


def _execute(scenario: ScenarioBase, *, skip_load: bool, quiet: bool, as_json: bool) -> int:
    from sim.cli.console import LiveConsole
    from sim.core.loops import new_event_loop
    from sim.core.runner import finish_summary, prepare_run

    not_yet_there = _missing_directories(Path(scenario.output.directory))
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    received: list[int] = []
    engines: list[Any] = []
    _stop_on_signals(loop, received, engines)

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
            events.notice.add_listener(live.on_notice)
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
    except SimError as exc:
        if exc.exit_code == EXIT_BAD_INPUT:
            _remove_if_empty(not_yet_there)
        raise
    finally:
        loop.close()
        # The bundle is complete; closing the loop restored the default handlers, under which a
        # late second Ctrl-C would kill us with a traceback while printing. Finish quietly.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    refused = _refused_before_start(engines[0].result if engines else None, summary)
    if refused is not None:
        _remove_if_empty(not_yet_there)
        return refused
    _print_outcome(summary, quiet=quiet, as_json=as_json)
    return _outcome_exit_code(summary, slos_declared=bool(scenario.slos), received=received)


def _outcome_exit_code(summary: dict[str, Any], *, slos_declared: bool, received: list[int]) -> int:
    """The exit code of a run that started: its SLOs' judgement, the signal that stopped it, or
    a failure (whose error line is printed)."""
    from sim.core.result import OUTCOME_COMPLETED, OUTCOME_INTERRUPTED
    from sim.judge.slo import completed_exit_code

    status = summary["status"]
    if status == OUTCOME_COMPLETED:
        code, problem = completed_exit_code(summary, declared=slos_declared)
        if problem:  # objectives that could not be judged
            print_error(problem)
        return code
    if status == OUTCOME_INTERRUPTED:
        return EXIT_SIGTERM if received and received[-1] == signal.SIGTERM else EXIT_SIGINT
    if summary.get("error"):
        print_error(str(summary["error"]))
    return EXIT_RUN_FAILED


def _stop_on_signals(
    loop: asyncio.AbstractEventLoop, received: list[int], engines: list[Any]
) -> None:
    """SIGINT and SIGTERM stop the run gracefully; each is kept in ``received`` (for the exit
    code). Installed before anything else, so a signal at any moment is handled the same
    way: one that lands before the engine exists stops it the moment it is created."""

    def on_signal(signum: int) -> None:
        received.append(signum)
        if engines:
            engines[0].request_stop(f"stopped by {signal.Signals(signum).name}")

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)


def _print_outcome(summary: dict[str, Any], *, quiet: bool, as_json: bool) -> None:
    """The run's summary on stdout: as JSON, as the bundle's path alone, or as tables."""
    from sim.cli.console import print_run_end, print_summary

    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")  # what summary.json holds
    elif quiet:
        sys.stdout.write(summary["bundle"] + "\n")
    else:
        # A log or a pipe gets a width that fits the tables rather than 80 columns.
        out = Console(width=None if sys.stdout.isatty() else WIDE_OUTPUT)
        print_summary(out, summary)
        print_run_end(out, summary)


def _refused_before_start(result: Any, summary: dict[str, Any]) -> int | None:
    """Exit 2, leaving no bundle, when the run was refused before any session started: a
    foreign object in the way, or the data missing under ``--skip-load``. That is bad input,
    like a wrong scenario, and is fixed the same way (another prefix, ``dbsim load``); the
    bundle directory was made a moment ago for this run alone and holds no measurement, so it
    is removed as a refused output directory is (sim.core.runner.prepare_run)."""
    from sim.core.result import OUTCOME_FAILED

    if (
        result is None
        or summary.get("status") != OUTCOME_FAILED
        or result.error_exit_code != EXIT_BAD_INPUT
        or result.sessions_started_wall is not None
    ):
        return None
    shutil.rmtree(summary["bundle"], ignore_errors=True)
    print_error(str(result.error))
    return EXIT_BAD_INPUT


def _missing_directories(directory: Path) -> list[Path]:
    """The directories of ``directory``'s path that do not exist yet, deepest first: the ones
    this invocation is about to create for its bundle, and so the only ones it may remove."""
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


def _remove_if_empty(created: list[Path]) -> None:
    """After a refused start, the output directories this invocation created, while they are
    empty (rmdir never removes a directory that holds anything, so nothing of the user's goes)."""
    for directory in created:
        try:
            directory.rmdir()
        except OSError:
            return


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
