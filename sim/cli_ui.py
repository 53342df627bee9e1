"""``dbsim ui`` and ``dbsim worker``: the Locust web UI and Locust workers driving dbsim.

Importing this module registers both commands on :data:`sim.cli.app`; Locust and gevent are
imported only when one of them runs (``sim.locust`` monkey-patches the process, which no other
command wants). Safety rules enforced here, before anything listens:

* the web UI binds 127.0.0.1 unless ``--host`` says otherwise, and a non-loopback ``--host``
  is refused (exit 2, one line) without ``--web-login``;
* ``--web-login`` names an environment variable holding ``user:password``: credentials never
  appear on a command line (where ``ps`` shows them) and are never printed or logged.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from sim.cli import ScenarioArg, SetOpt, _overrides, app
from sim.errors import ConfigError
from sim.scenario import resolve

LOCALHOST_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts local connections."""
    if host.lower() in LOCALHOST_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to any interface


def web_credentials(
    variable: str | None, environ: dict[str, str] | None = None
) -> tuple[str, str] | None:
    """``(user, password)`` from the environment variable named ``variable`` (``user:password``)."""
    if variable is None:
        return None
    env = os.environ if environ is None else environ
    if ":" in variable or variable not in env:
        if ":" in variable:
            raise ConfigError(
                "--web-login: give the NAME of an environment variable holding user:password, "
                "not the credentials themselves"
            )
        raise ConfigError(f"--web-login: environment variable {variable} is not set")
    user, sep, password = env[variable].partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"--web-login: {variable} must hold user:password (both non-empty)")
    return user, password


def parse_master(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:5557`` for IPv6) → (host, port)."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"--master: {value!r} is not HOST:PORT (e.g. 127.0.0.1:5557)")
    return host, int(port_text)


def _debug() -> bool:
    return logging.getLogger().isEnabledFor(logging.DEBUG)  # dbsim --debug sets the root level


@app.command()
def ui(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    workers: Annotated[
        int, typer.Option("--workers", help="Start a Locust master and N local workers.")
    ] = 0,
    host: Annotated[
        str,
        typer.Option("--host", help="Web UI interface; any but loopback needs --web-login."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Web UI port.")] = 8089,
    web_login: Annotated[
        str | None,
        typer.Option(
            "--web-login",
            metavar="ENV_VAR",
            help="Require a login: the NAME of an environment variable holding user:password.",
        ),
    ] = None,
    distributed: Annotated[
        bool,
        typer.Option(
            "--distributed",
            help="Run as a Locust master even without --workers (remote dbsim worker join).",
        ),
    ] = False,
    master_bind: Annotated[
        str, typer.Option("--master-bind", help="Interface the master's worker port binds to.")
    ] = "127.0.0.1",
    master_port: Annotated[
        int, typer.Option("--master-port", help="The master's worker port (0: any free port).")
    ] = 5557,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="output.directory")] = None,
) -> None:
    """Start Locust's web UI driving dbsim's engine (users = sessions); Ctrl-C quits."""
    if not is_loopback(host) and web_login is None:
        raise ConfigError(
            f"--host {host}: the web UI on a non-loopback interface needs --web-login ENV_VAR"
        )
    if workers < 0:
        raise ConfigError(f"--workers: {workers} is not a number of worker processes")
    login = web_credentials(web_login)
    overrides = _overrides(set_, **{"output.directory": str(output) if output else None})
    resolved = resolve(scenario, overrides)
    from sim.locust.app import UiOptions, run_ui

    options = UiOptions(
        host=host,
        port=port,
        workers=workers,
        distributed=distributed,
        master_bind=master_bind,
        master_port=master_port,
        login=login,
        debug=_debug(),
    )
    raise typer.Exit(run_ui(resolved, options))


@app.command()
def worker(
    master: Annotated[
        str, typer.Option("--master", help="The master's HOST:PORT (its --master-port).")
    ],
) -> None:
    """Join a dbsim Locust master as a worker and run its sessions here."""
    host, port = parse_master(master)
    from sim.locust.app import run_worker

    raise typer.Exit(run_worker(host, port, debug=_debug()))
