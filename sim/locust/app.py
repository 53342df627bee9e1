"""The Locust processes of dbsim: ``dbsim ui`` (web UI, local or master) and ``dbsim worker``.

Every listener binds to 127.0.0.1 unless told otherwise: the web UI (``--host``, refused on
another interface without ``--web-login``, see :mod:`sim.cli.ui`) and the master's worker port
(``--master-bind``). Local workers (``--workers N``) are child processes of the master,
``python -m sim.locust worker --master 127.0.0.1:<port>``, stopped when it stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
from locust import argument_parser
from locust.env import Environment
from locust.event import Events
from locust.exception import RPCSendError
from locust.log import setup_logging
from locust.runners import Runner

from sim.config.scenario import ScenarioBase
from sim.errors import EXIT_OK, ConfigError
from sim.live.allowance import Allowance
from sim.locust import secure
from sim.locust.form import check_locust_scenario, register_form
from sim.locust.guard import install_guard
from sim.locust.handshake import check_master
from sim.locust.host import warm_inspect_caches
from sim.locust.master import MasterController
from sim.locust.roles import Controller, LocalController, WorkerController
from sim.locust.start import add_start_routes
from sim.locust.stats import install_bucket
from sim.locust.users import class_name, user_classes
from sim.locust.webui import extend_web_ui
from sim.locust.workerport import create_master_runner
from sim.run.preload import RUN_MODULES, preload, run_machinery
from sim.secrets import install_log_redaction

log = logging.getLogger(__name__)

DEFAULT_WEB_PORT = 8089
DEFAULT_MASTER_PORT = 5557
LOOPBACK = "127.0.0.1"
WORKERS_CONNECT_TIMEOUT_S = 60.0
SHUTDOWN_WAIT_S = 60.0  # a run still going at Ctrl-C gets this long to write its bundle
WORKER_EXIT_WAIT_S = 10.0


@dataclass(frozen=True)
class UiOptions:
    """How ``dbsim ui`` listens and where its workers come from."""

    host: str = LOOPBACK
    port: int = DEFAULT_WEB_PORT
    workers: int = 0
    #: Run as a Locust master even without local workers (remote ``dbsim worker`` join it).
    distributed: bool = False
    master_bind: str = LOOPBACK
    master_port: int = DEFAULT_MASTER_PORT
    #: The NAME of the environment variable holding the worker port's shared secret
    #: (sim.locust.secure); required by the CLI when master_bind is not loopback.
    master_secret_env: str | None = None
    login: tuple[str, str] | None = None
    debug: bool = False
    #: ``host`` is a loopback address: only loopback Host headers are answered (guard).
    loopback: bool = True
    #: Password variables and hosts the start form may use beyond the scenario's own.
    allow_env: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()


def setup_process(level: str, modules: tuple[str, ...] | None = None) -> None:
    """Logging (Locust's handlers: the console and the web UI's Logs tab) and µs buckets;
    ``modules``: what this process preloads (default: what any run imports, every dialect)."""
    setup_logging(level)
    # Locust's handlers replace the CLI's: mask secrets on them too (the Logs tab and what a
    # worker forwards to its master come from them).
    install_log_redaction()
    install_bucket()
    cache_default_args()
    # The run's modules before the hub serves anything: a first import later (the SLO judge's
    # numpy at the first live window, rich at a worker's load) holds the hub (sim.run.preload).
    if modules is None:
        run_machinery()
    else:
        preload(modules)
    warm_inspect_caches()


def cache_default_args() -> None:
    """Locust's ``argument_parser.default_args_dict`` computed once a process, not per call.

    A worker's ``spawn`` handler keeps the master's custom options with ``k not in
    default_args_dict()`` for each of the options the master sends (56, and the start form's),
    and every call builds and parses Locust's whole argument parser (3.2 ms): 0.18 CPU-s a
    worker a start, on its hub (a gevent monitor report, argparse's add_argument holding it).
    The defaults cannot change in a process (Locust's own arguments and the LOCUST_* variables,
    no config file); each caller gets its own copy.
    """
    build = argument_parser.default_args_dict
    if getattr(build, "dbsim_cached", False):
        return
    cached: dict[str, Any] = {}

    def default_args_dict() -> dict[str, Any]:
        if not cached:
            cached.update(build())
        return dict(cached)

    default_args_dict.dbsim_cached = True  # type: ignore[attr-defined]
    argument_parser.default_args_dict = default_args_dict


def default_users(scenario: ScenarioBase) -> int:
    """The scenario's sessions (load.sessions or the workload's default): Locust's users."""
    if scenario.load.sessions:
        return scenario.load.sessions
    from sim.run.runner import build_target, build_workload

    return build_workload(scenario, build_target(scenario)).default_sessions()


def environment_for(scenario: ScenarioBase, users: int) -> Environment:
    """A Locust environment running the scenario's workload's user class."""
    classes = user_classes()
    main = classes[class_name(scenario.workload.name)]  # type: ignore[attr-defined]
    register_form(lambda: scenario)
    options = argument_parser.get_parser().parse_args(
        ["--users", str(users), "--spawn-rate", str(users), "--stop-timeout", "0"]
    )
    return Environment(
        user_classes=[main],
        events=Events(),
        host=scenario.target.kind,  # type: ignore[attr-defined]
        stop_timeout=0,
        parsed_options=options,
    )


def check_port(host: str, port: int, what: str) -> None:
    """Fail with one line now, rather than in a greenlet later, when the port is taken."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"{what}: cannot listen on {host}:{port}: {exc.strerror}") from None


def start_local_workers(
    count: int,
    master_host: str,
    master_port: int,
    command: Sequence[str] | None,
    debug: bool,
    secret_env: str | None = None,
) -> list[subprocess.Popen[bytes]]:
    """``count`` worker processes connected to this master; their output goes to our stderr
    (stdout may carry ``--json``). ``secret_env`` names the variable holding the master's
    shared secret (the children inherit the environment)."""
    base = list(command) if command else [sys.executable, "-m", "sim.locust"]
    argv = [*base, *(["--debug"] if debug and not command else []), "worker"]
    argv += ["--master", f"{master_host}:{master_port}"]
    argv += ["--master-secret", secret_env] if secret_env else []
    return [
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno())
        for _ in range(count)
    ]


def stop_local_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    """Ask (SIGTERM), then make (SIGKILL), every local worker stop; reap them all."""
    for proc in processes:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + WORKER_EXIT_WAIT_S
    # Polled, not waited for: subprocess is not gevent-patched, and a wait would block the hub.
    while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
        gevent.sleep(0.1)
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for_workers(runner: Runner, count: int, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + WORKERS_CONNECT_TIMEOUT_S
    while runner.worker_count < count:  # type: ignore[attr-defined]
        dead = [p for p in processes if p.poll() is not None]
        if dead:
            raise ConfigError(f"workers: a local worker exited with code {dead[0].returncode}")
        if time.monotonic() > deadline:
            raise ConfigError(
                f"workers: only {runner.worker_count} of {count} connected "  # type: ignore[attr-defined]
                f"within {WORKERS_CONNECT_TIMEOUT_S:g} s"
            )
        gevent.sleep(0.1)


def on_signals(handler: Callable[[int], None]) -> None:
    """Run ``handler(signum)`` in the hub on SIGINT/SIGTERM (not as KeyboardInterrupt)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, handler, signum)


def wait_until_quiet(controller: Controller, timeout: float) -> None:
    """Wait (bounded) for a run in progress to write its bundle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = controller.snapshot().get("status")
        if status not in ("running", "finishing"):
            return
        gevent.sleep(0.2)


def add_dbsim_pages(
    environment: Environment, controller: Controller, scenario: ScenarioBase, options: UiOptions
) -> None:
    """dbsim's tabs, routes and start form on Locust's web UI, all behind the guard (only the
    operator's own page changes state, sim.locust.guard) and the login when there is one."""
    web_ui = environment.web_ui
    assert web_ui is not None
    protect = web_ui.auth_required_if_enabled
    guard = install_guard(web_ui.app, options.loopback, protect)
    extend_web_ui(environment, controller, guard, options.login)
    allowance = Allowance.of(scenario, options.allow_env, options.allow_hosts)
    add_start_routes(web_ui.app, protect, environment, controller, allowance)


def run_ui(scenario: ScenarioBase, options: UiOptions) -> int:
    """``dbsim ui``: Locust's web UI driving dbsim's engine until SIGINT/SIGTERM."""
    check_locust_scenario(scenario)
    check_port(options.host, options.port, "--port")
    distributed = options.distributed or options.workers > 0
    if distributed:
        check_port(options.master_bind, options.master_port, "--master-port")
    setup_process("DEBUG" if options.debug else "INFO")
    # Locust's web UI rebuilds its start form by parsing sys.argv with its own parser
    # (argument_parser.ui_extra_args_dict): dbsim's own arguments must not be there.
    del sys.argv[1:]
    environment = environment_for(scenario, default_users(scenario))
    processes: list[subprocess.Popen[bytes]] = []

    def announce(summary: dict[str, Any]) -> None:
        sys.stderr.write(f"dbsim: run {summary.get('status')}: bundle {summary.get('bundle')}\n")

    controller: Controller
    runner: Runner
    if distributed:
        if options.master_secret_env:
            secure.install(os.environ[options.master_secret_env])  # before the socket exists
        master = create_master_runner(environment, options.master_bind, options.master_port)
        runner = master
        controller = MasterController(environment, lambda: scenario, on_finished=announce)
        connect = LOOPBACK if options.master_bind in ("0.0.0.0", "*", "") else options.master_bind
        port = master.server.port
        processes = start_local_workers(
            options.workers, connect, port, None, options.debug, options.master_secret_env
        )
        sys.stderr.write(f"dbsim: Locust master on {options.master_bind}:{port}\n")
    else:
        runner = environment.create_local_runner()
        controller = LocalController(environment, lambda: scenario, on_finished=announce)
    web_ui = environment.create_web_ui(
        options.host, options.port, web_login=options.login is not None, delayed_start=True
    )
    add_dbsim_pages(environment, controller, scenario, options)
    web_ui.start()
    environment.events.init.fire(environment=environment, runner=runner, web_ui=web_ui)
    sys.stderr.write(f"dbsim: web UI on http://{options.host}:{options.port}/ (Ctrl-C to quit)\n")
    quit_event = gevent.event.Event()

    def on_quit(signum: int) -> None:
        controller.stop_for_signal(signum)  # a run still going is interrupted, not stopped early
        quit_event.set()

    on_signals(on_quit)
    try:
        quit_event.wait()
        if runner.state not in ("ready", "stopped"):
            gevent.spawn(runner.stop)
        wait_until_quiet(controller, SHUTDOWN_WAIT_S)
        runner.quit()
        web_ui.stop()
    finally:
        stop_local_workers(processes)
    return EXIT_OK


def run_worker(
    master_host: str, master_port: int, *, debug: bool = False, secret: str | None = None
) -> int:
    """``dbsim worker``: join a master and run its engines until it quits (or SIGINT/SIGTERM);
    ``secret``: the master's shared secret (sim.locust.secure)."""
    # A run's modules but not SQLAlchemy's (~0.4 CPU-s of a worker's start, with its three
    # dialects): the engine imports what its scenario needs (its target's dialect; none for a
    # file-tree workload) when it is built, in gevent's thread pool (build_engine).
    setup_process("DEBUG" if debug else "INFO", RUN_MODULES)
    if secret is not None:
        secure.install(secret)
    environment = Environment(
        user_classes=list(user_classes().values()), events=Events(), stop_timeout=0
    )
    # A master whose security differs from ours never answers Locust's worker: say so now.
    # After the workloads' imports above: this first use of the hub starts gevent's monitor,
    # which would report those imports as the hub blocked.
    check_master(master_host, master_port, secret)
    try:
        runner = environment.create_worker_runner(master_host, master_port)
    except (ConnectionError, RPCSendError):  # the master went away since the handshake
        raise ConfigError(f"--master: no master answered at {master_host}:{master_port}") from None
    controller = WorkerController(environment)
    host = controller.host

    def leave(signum: int) -> None:
        if host.active:  # finish the engine and send its final report first
            host.stop(f"worker stopped by {signal.Signals(signum).name}")
            host.wait(SHUTDOWN_WAIT_S)
        environment.events.quitting.fire(environment=environment, reverse=True)  # tells the master
        runner.quit()

    on_signals(lambda signum: gevent.spawn(leave, signum))
    runner.greenlet.join()
    if host.active:  # the master went away mid-run: still finish the engine cleanly
        host.stop("the master quit")
        host.wait(SHUTDOWN_WAIT_S)
    with contextlib.suppress(Exception):
        runner.client.close(linger=0)
    return EXIT_OK
