"""``dbsim ui`` and ``dbsim worker``: the Locust web UI and Locust workers driving dbsim.

Importing this module registers both commands on :data:`sim.cli.app`; Locust and gevent are
imported only when one of them runs (``sim.locust`` monkey-patches the process, which no other
command wants). Safety rules enforced here, before anything listens:

* the web UI binds 127.0.0.1 unless ``--host`` says otherwise, and a non-loopback ``--host``
  is refused (exit 2, one line) without ``--web-login``;
* ``--web-login`` names an environment variable holding ``user:password``: credentials never
  appear on a command line (where ``ps`` shows them) and are never printed or logged;
* the master's worker port binds 127.0.0.1 unless ``--master-bind`` says otherwise, and a
  non-loopback ``--master-bind`` is refused without ``--master-secret`` (Locust's worker
  protocol has no authentication of its own: sim.locust.secure adds CURVE keyed by it);
* the start form may name only the password variables and hosts the scenario names, and
  those of ``--allow-env``/``--allow-host`` (sim.live.allowance); the variables of
  ``--web-login`` and ``--master-secret`` can never be allowed.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import ScenarioArg, SetOpt, app, overrides
from sim.errors import ConfigError
from sim.secrets import ENV_NAME

LOCALHOST_NAMES = frozenset({"localhost", "localhost.localdomain"})
#: Shortest worker-port secret accepted: the CURVE keys are only as strong as it.
MIN_MASTER_SECRET_CHARS = 16


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


def master_secret(variable: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The worker port's shared secret, from the environment variable named ``variable``
    (never from the command line, where ``ps`` would show it)."""
    if variable is None:
        return None
    env = os.environ if environ is None else environ
    if not ENV_NAME.match(variable):
        raise ConfigError(
            "--master-secret: give the NAME of an environment variable holding the secret, "
            "not the secret itself"
        )
    value = env.get(variable)
    if not value:
        raise ConfigError(f"--master-secret: environment variable {variable} is not set")
    if len(value) < MIN_MASTER_SECRET_CHARS:
        raise ConfigError(
            f"--master-secret: {variable} holds fewer than {MIN_MASTER_SECRET_CHARS} "
            "characters (the port's keys are derived from it)"
        )
    return value


def allowed_names(
    env_names: list[str] | None, hosts: list[str] | None, *protected: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``--allow-env`` names and ``--allow-host`` hosts, checked: a name is a variable's name
    and none of the ``protected`` ones (the web login's, the master secret's), a host is one
    word."""
    names = tuple(env_names or ())
    for name in names:
        if not ENV_NAME.match(name):
            raise ConfigError(f"--allow-env: {name[:40]!r} is not an environment variable's name")
        if name in protected:
            raise ConfigError(
                f"--allow-env {name}: the web login's or the master secret's variable; the "
                "start form may never send it to a database"
            )
    allowed_hosts = tuple(hosts or ())
    for host in allowed_hosts:
        if not host or any(ch.isspace() or not ch.isprintable() for ch in host):
            raise ConfigError(f"--allow-host: {host[:40]!r} is not a host name or address")
    return names, allowed_hosts


def parse_master(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:5557`` for IPv6) → (host, port)."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"--master: {value!r} is not HOST:PORT (e.g. 127.0.0.1:5557)")
    return host, int(port_text)


def _debug() -> bool:
    return logging.getLogger().isEnabledFor(logging.DEBUG)  # dbsim --debug sets the root level


WorkersOpt = Annotated[
    int, typer.Option("--workers", help="Start a Locust master and N local workers.")
]
HostOpt = Annotated[
    str,
    typer.Option("--host", help="Web UI interface; any but loopback needs --web-login."),
]
WebLoginOpt = Annotated[
    str | None,
    typer.Option(
        "--web-login",
        metavar="ENV_VAR",
        help="Require a login: the NAME of an environment variable holding user:password.",
    ),
]
DistributedOpt = Annotated[
    bool,
    typer.Option(
        "--distributed",
        help="Run as a Locust master even without --workers (remote dbsim worker join).",
    ),
]
AllowEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-env",
        metavar="NAME",
        help="A password variable the start form may name, besides the scenario's own "
        "(repeatable).",
    ),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST",
        help="A target.host the start form may use, besides the scenario's own (repeatable).",
    ),
]
MasterBindOpt = Annotated[
    str, typer.Option("--master-bind", help="Interface the master's worker port binds to.")
]
MasterPortOpt = Annotated[
    int, typer.Option("--master-port", help="The master's worker port (0: any free port).")
]
MasterSecretEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--master-secret",
        metavar="ENV_VAR",
        help="Encrypt and authenticate the worker port (CURVE) with a shared secret: the "
        "NAME of an environment variable holding it (16+ characters). Required with a "
        "non-loopback --master-bind.",
    ),
]


@app.command()
def ui(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    workers: WorkersOpt = 0,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Web UI port.")] = 8089,
    web_login: WebLoginOpt = None,
    allow_env: AllowEnvOpt = None,
    allow_host: AllowHostOpt = None,
    distributed: DistributedOpt = False,
    master_bind: MasterBindOpt = "127.0.0.1",
    master_port: MasterPortOpt = 5557,
    master_secret_env: MasterSecretEnvOpt = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="output.directory")] = None,
) -> None:
    """Start Locust's web UI driving dbsim's engine (users = sessions); Ctrl-C quits."""
    if not is_loopback(host) and web_login is None:
        raise ConfigError(
            f"--host {host}: the web UI on a non-loopback interface needs --web-login ENV_VAR"
        )
    if workers < 0:
        raise ConfigError(f"--workers: {workers} is not a number of worker processes")
    if (distributed or workers) and not is_loopback(master_bind) and master_secret_env is None:
        # As the web UI needs a login: Locust's worker protocol itself authenticates nobody,
        # and whoever joins receives the scenario and writes into the bundle.
        raise ConfigError(
            f"--master-bind {master_bind}: a worker port beyond loopback needs "
            "--master-secret ENV_VAR (Locust's worker protocol has no authentication)"
        )
    master_secret(master_secret_env)  # checked now: set, long enough
    login = web_credentials(web_login)
    env_names, hosts = allowed_names(allow_env, allow_host, web_login, master_secret_env)
    scenario_overrides = overrides(set_, **{"output.directory": str(output) if output else None})
    from sim.config.resolve import resolve  # here: `dbsim --help` imports no scenario

    resolved = resolve(scenario, scenario_overrides)
    from sim.locust.app import UiOptions, run_ui

    options = UiOptions(
        host=host,
        port=port,
        workers=workers,
        distributed=distributed,
        master_bind=master_bind,
        master_port=master_port,
        master_secret_env=master_secret_env,
        login=login,
        debug=_debug(),
        loopback=is_loopback(host),
        allow_env=env_names,
        allow_hosts=hosts,
    )
    raise typer.Exit(run_ui(resolved, options))


MasterOpt = Annotated[
    str, typer.Option("--master", help="The master's HOST:PORT (its --master-port).")
]
WorkerSecretEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--master-secret",
        metavar="ENV_VAR",
        help="Encrypt and authenticate the worker port (CURVE) with a shared secret: the "
        "NAME of an environment variable holding it (16+ characters). The master's "
        "--master-secret.",
    ),
]


@app.command()
def worker(
    master: MasterOpt,
    master_secret_env: WorkerSecretEnvOpt = None,
) -> None:
    """Join a dbsim Locust master as a worker and run its sessions here."""
    host, port = parse_master(master)
    secret = master_secret(master_secret_env)
    from sim.locust.app import run_worker

    raise typer.Exit(run_worker(host, port, debug=_debug(), secret=secret))
