"""``dbsim run --workers N``: a scenario run through Locust's master/worker mode, headless.

The master binds 127.0.0.1 on a free port, starts ``N`` local worker processes, waits for them
to connect, starts ``load.sessions`` users (all at once: the sessions start together, the
SLOB way), and returns when the merged bundle is written — with the same output and exit
codes as a single-process ``dbsim run``: 0 completed (and every SLO met), 1 completed with an
SLO missed, 2 bad input (a sweep, which Locust cannot run, included), 3 failed or SLOs that
could not be judged, 130/143 stopped by SIGINT/SIGTERM (which stops the workers' engines and
still writes the bundle). The SLOs are judged by the master on the merged bundle.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from typing import Any

import gevent
import gevent.event

from sim.config.scenario import ScenarioBase
from sim.core.dataset import check_loaded
from sim.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, ConfigError
from sim.judge.slo import completed_exit_code
from sim.locust.app import (
    LOOPBACK,
    default_users,
    environment_for,
    on_signals,
    setup_process,
    start_local_workers,
    stop_local_workers,
    wait_for_workers,
)
from sim.locust.form import check_locust_scenario
from sim.locust.master import MasterController
from sim.locust.workerport import create_master_runner
from sim.run.preload import MASTER_MODULES
from sim.run.runner import build_target, build_workload, check_slo_operations
from sim.safeio import strict_json

EXIT_SIGINT = 130
EXIT_SIGTERM = 143
WIDE_OUTPUT = 140
START_TIMEOUT_S = 120.0  # from "start" to the merged run existing (spawning, placing users)


def run_distributed(
    scenario: ScenarioBase,
    *,
    workers: int,
    quiet: bool = False,
    as_json: bool = False,
    debug: bool = False,
    skip_load: bool = False,
    worker_command: Sequence[str] | None = None,
) -> int:
    """Run ``scenario`` on ``workers`` local Locust workers; returns the process exit code.

    ``worker_command`` replaces ``python -m sim.cli`` for starting workers (the benchmark uses
    it to start workers that register an extra workload first); ``worker --master HOST:PORT``
    is appended to it.
    """
    if workers < 1:
        raise ConfigError(f"--workers: {workers} is not a number of worker processes (1 or more)")
    check_locust_scenario(scenario)
    if scenario.slos:  # as prepare_run does: an objective on an unknown operation is bad input
        check_slo_operations(scenario, build_workload(scenario, build_target(scenario)))
    if skip_load:  # missing data is bad input found before any worker or bundle exists
        target = build_target(scenario)
        check_loaded(build_workload(scenario, target), target)
    users = default_users(scenario)
    setup_process("DEBUG" if debug else "WARNING", MASTER_MODULES)
    environment = environment_for(scenario, users)
    runner = create_master_runner(environment, LOOPBACK, 0)
    done = gevent.event.Event()
    controller = MasterController(
        environment, lambda: scenario, on_finished=lambda _: done.set(), skip_load=skip_load
    )
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        controller.stop_for_signal(signum)
        if controller.merger is None:
            done.set()  # nothing started yet: nothing to write
        gevent.spawn(runner.stop)

    on_signals(on_signal)
    port = runner.server.port
    processes = start_local_workers(workers, LOOPBACK, port, worker_command, debug)
    try:
        wait_for_workers(runner, workers, processes)
        if not received:
            gevent.spawn(runner.start, users, float(users))
        if not done.wait(START_TIMEOUT_S) and controller.merger is None:
            raise ConfigError(f"workers: the run did not start within {START_TIMEOUT_S:g} s")
        done.wait()
        runner.quit()
    finally:
        stop_local_workers(processes)
    summary = controller.last_summary
    if summary is None:
        sys.stderr.write("error: stopped before the run started; no bundle written\n")
        return _signal_code(received) or EXIT_RUN_FAILED
    _print(summary, quiet=quiet, as_json=as_json)
    return _exit_code(scenario, summary, controller, received)


def _exit_code(
    scenario: ScenarioBase,
    summary: dict[str, Any],
    controller: MasterController,
    received: list[int],
) -> int:
    """The exit code a single-process run of the same outcome would give (and its error)."""
    status = summary.get("status")
    if status == "completed":
        code, problem = completed_exit_code(summary, declared=bool(scenario.slos))
        if problem:  # objectives that could not be judged
            sys.stderr.write(f"error: {problem}\n")
        return code
    if status == "interrupted":
        return _signal_code(received) or EXIT_SIGINT
    if summary.get("error"):
        sys.stderr.write(f"error: {summary['error']}\n")
    phase = controller.load_phase
    if phase is not None and phase.exit_code == EXIT_BAD_INPUT:
        # The load was refused before anything ran (a foreign object in the way): bad input,
        # as a single-process run says it.
        return EXIT_BAD_INPUT
    return EXIT_RUN_FAILED


def _signal_code(received: list[int]) -> int | None:
    if not received:
        return None
    return EXIT_SIGTERM if received[-1] == signal.SIGTERM else EXIT_SIGINT


def _print(summary: dict[str, Any], *, quiet: bool, as_json: bool) -> None:
    """What ``dbsim run`` prints, plus one line per worker."""
    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")  # as summary.json: no Infinity/NaN
        return
    if quiet:
        from sim.cli.console import print_quiet

        print_quiet(summary)
        return
    from rich.console import Console

    from sim.cli.console import print_run_end, print_summary

    out = Console(width=None if sys.stdout.isatty() else WIDE_OUTPUT)
    print_summary(out, summary)
    for worker in (summary.get("distributed") or {}).get("workers", []):
        counts = {op: v["count"] for op, v in worker.get("operations", {}).items()}
        out.print(
            f"worker {worker['index']} ({worker.get('host')}): {worker.get('status')}, "
            f"{worker.get('sessions')} sessions, {counts}"
        )
    print_run_end(out, summary)
