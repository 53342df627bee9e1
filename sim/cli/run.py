"""``dbsim run``: run a scenario and write its bundle, in this process or through Locust's
master/worker mode (``--workers``)."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sim.cli.app import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    DurationOpt,
    OutputOpt,
    ScenarioArg,
    SessionsOpt,
    SetOpt,
    WarmupOpt,
    app,
    debug_requested,
    output_width,
    print_error,
    run_overrides,
)
from sim.core.workers import parse_workers, plan_workers
from sim.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, ConfigError, SimError
from sim.safeio import strict_json

if TYPE_CHECKING:  # asyncio, the scenario's models and YAML are imported by the command
    # itself, so `dbsim --help`, which imports every command module, does not pay for them
    import asyncio

    from sim.config.scenario import ScenarioBase


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
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print only the bundle path (and, on stderr, INVALID RUN or STORAGE NOT "
        "EXERCISED when the run is one).",
    ),
]
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


MetricsPortOpt = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        help="Serve the run's figures for Prometheus at http://HOST:PORT/metrics while it "
        "runs (docs/prometheus.md).",
    ),
]
MetricsHostOpt = Annotated[
    str,
    typer.Option(
        "--metrics-host",
        help="Interface of --metrics-port; any but loopback needs --metrics-login.",
    ),
]
MetricsLoginOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics-login",
        metavar="ENV_VAR",
        help="Require HTTP Basic auth on /metrics: the NAME of an environment variable "
        "holding user:password.",
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
    metrics_port: MetricsPortOpt = None,
    metrics_host: MetricsHostOpt = "127.0.0.1",
    metrics_login: MetricsLoginOpt = None,
) -> None:
    """Run a scenario and write its bundle."""
    from sim.config.resolve import resolve  # here: see the TYPE_CHECKING import above

    metrics = _metrics_listener(metrics_port, metrics_host, metrics_login, workers)
    scenario_overrides = run_overrides(set_, duration, sessions, warmup, output)
    resolved = resolve(scenario, scenario_overrides)
    count = parse_workers(workers)
    if count is None:
        from sim.run.runner import build_target, build_workload

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
    code = _execute(resolved, skip_load=skip_load, quiet=quiet, as_json=as_json, metrics=metrics)
    raise typer.Exit(code)


def _metrics_listener(
    port: int | None, host: str, login_env: str | None, workers: str
) -> tuple[str, int, tuple[str, str] | None] | None:
    """``--metrics-port``'s listener, checked before anything runs: the UI's listen rules
    (loopback unless a login is required, sim.cli.ui)."""
    from sim.cli.ui import is_loopback, web_credentials

    if port is None:
        if login_env is not None or host != "127.0.0.1":
            raise ConfigError("--metrics-host/--metrics-login: give --metrics-port too")
        return None
    if not 0 <= port < 65536:
        raise ConfigError(f"--metrics-port: {port} is not a TCP port (0-65535)")
    if workers.strip() not in ("", "0"):
        raise ConfigError("--metrics-port: not with --workers yet; use `dbsim ui`'s /metrics")
    if not is_loopback(host) and login_env is None:
        raise ConfigError(
            f"--metrics-host {host}: /metrics beyond loopback needs --metrics-login ENV_VAR"
        )
    try:
        login = web_credentials(login_env)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("--web-login", "--metrics-login")) from None
    return host, port, login


def _execute(
    scenario: ScenarioBase,
    *,
    skip_load: bool,
    quiet: bool,
    as_json: bool,
    metrics: tuple[str, int, tuple[str, str] | None] | None = None,
) -> int:
    exporter = _serve_metrics(metrics)
    try:
        return _execute_run(
            scenario, skip_load=skip_load, quiet=quiet, as_json=as_json, exporter=exporter
        )
    finally:
        if exporter is not None:
            exporter[1].close()


def _serve_metrics(metrics: tuple[str, int, tuple[str, str] | None] | None) -> Any:
    """``(RunExporter, MetricsServer)`` listening now (a taken port: exit 2 before any bundle
    exists), or None without ``--metrics-port``. prometheus_client is imported only here."""
    if metrics is None:
        return None
    from sim.exporter import MetricsServer, RunExporter

    exporter = RunExporter()
    server = MetricsServer(exporter.registry, *metrics)
    sys.stderr.write(f"dbsim: Prometheus metrics on {server.url}\n")
    return exporter, server


def _execute_run(
    scenario: ScenarioBase, *, skip_load: bool, quiet: bool, as_json: bool, exporter: Any
) -> int:
    import asyncio

    from sim.cli.console import LiveConsole
    from sim.core.loops import new_event_loop
    from sim.run.finish import finish_summary
    from sim.run.preload import run_machinery
    from sim.run.runner import prepare_run

    # Before any session: a first import mid-run stalls them (sim.run.preload).
    run_machinery(scenario)
    not_yet_there = _missing_directories(Path(scenario.output.directory))
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    received: list[int] = []
    engines: list[Any] = []
    _stop_on_signals(loop, received, engines)

    async def main() -> dict[str, Any]:
        prepared = prepare_run(scenario, skip_load=skip_load)
        engines.append(prepared.engine)
        if exporter is not None:
            from sim.exporter import run_info

            exporter[0].attach(prepared.engine, run_info(scenario, prepared.bundle.path))
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
        _close_ignoring_signals(loop)
    refused = _refused_before_start(engines[0].result if engines else None, summary)
    if refused is not None:
        _remove_if_empty(not_yet_there)
        return refused
    _print_outcome(summary, quiet=quiet, as_json=as_json)
    return _outcome_exit_code(summary, slos_declared=bool(scenario.slos), received=received)


def _close_ignoring_signals(loop: asyncio.AbstractEventLoop) -> None:
    """The bundle is complete; closing the loop restores the default handlers, under which a
    late second Ctrl-C would kill us with a traceback while printing, and a SIGTERM with no
    exit code of ours. Finish quietly: the two are blocked from before the close until they
    are ignored, so none lands in between (one pending then is discarded)."""
    stopping = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
    try:
        loop.close()
        for signum in stopping:
            signal.signal(signum, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)


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
    from rich.console import Console

    from sim.cli.console import print_run_end, print_summary

    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")  # what summary.json holds
    elif quiet:
        from sim.cli.console import print_quiet

        print_quiet(summary)
    else:
        # A log or a pipe gets a width that fits the tables rather than 80 columns.
        out = Console(width=output_width(sys.stdout))
        print_summary(out, summary)
        print_run_end(out, summary)


def _refused_before_start(result: Any, summary: dict[str, Any]) -> int | None:
    """Exit 2, leaving no bundle, when the run was refused before any session started: a
    foreign object in the way, or the data missing under ``--skip-load``. That is bad input,
    like a wrong scenario, and is fixed the same way (another prefix, ``dbsim load``); the
    bundle directory was made a moment ago for this run alone and holds no measurement, so it
    is removed as a refused output directory is (sim.run.runner.prepare_run)."""
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
