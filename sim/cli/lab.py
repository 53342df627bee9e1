"""``dbsim lab``: a loop device with a known IOPS ceiling, for ground-truth runs (root only).

Registered on the main app by importing this module (:mod:`sim.cli.entry` does).
Errors follow the rest of the CLI: one line on stderr and exit 2 for what the user can fix
(not root, no cgroup v1, tools missing, bad sizes), exit 3 when the lab cannot be built or
torn down completely.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

# The package imports its machinery (storage.lab.lifecycle, the array: ~0.03 CPU-s) at the
# first use of a name (storage.lab._LAZY): a command reads storage.lab.Lab and the rest when it
# runs, so `dbsim --help`, which registers it, imports only the options' ranges and defaults.
import storage.lab
from sim.cli.app import app
from sim.errors import EXIT_RUN_FAILED, ConfigError
from storage.lab import limits
from storage.lab.limits import DEFAULT_MOUNT, DEFAULT_PG_PORT

if TYPE_CHECKING:
    from storage.lab import Ceiling

lab_app = typer.Typer(
    help="The storage lab: ext4 on a loop device whose IOPS and bandwidth are capped by cgroup "
    "v1 blkio throttles, optionally with a throwaway PostgreSQL on it (root only).",
    no_args_is_help=False,  # `dbsim lab` alone: "Missing command" and exit 2, like the rest
)
app.add_typer(lab_app, name="lab")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the lab's status as JSON.")]
IopsOpt = Annotated[
    int | None,
    typer.Option(min=0, max=limits.MAX_IOPS, help="I/O operations per second; 0 = unlimited."),
]
BpsOpt = Annotated[
    str | None, typer.Option(help="Bytes per second (e.g. 20M); 0 = unlimited.", metavar="SIZE")
]
VolumeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--volume",
        help="A volume of its own with its ceilings, mounted at <mount>/NAME, e.g. "
        "old:read-iops=500 (keys read-iops, write-iops, read-bps, write-bps, size); "
        "on the lab array (a FUSE array under the loop device, so the device's await shows "
        "its QoS queue): lun:array=1,qos-iops=500 (keys qos-iops, qos-bps, service-us); "
        "repeat for more. Without it the lab has one volume at --mount.",
        metavar="NAME[:KEY=VALUE,…]",
    ),
]


PgCacheCapOpt = Annotated[
    str | None,
    typer.Option(
        "--pg-cache-cap",
        help="Cap the throwaway PostgreSQL's caches at SIZE (e.g. 64M, at least 32M): the "
        "lab's memory limit becomes SIZE and shared_buffers a quarter of it, so reads of "
        "data over 4 x SIZE reach the device (a running cluster is restarted). Instead of "
        "--memory-limit; needs --postgres.",
        metavar="SIZE",
    ),
]


def _print_status(status: dict[str, Any], as_json: bool) -> None:
    from storage.lab.status import text_lines

    if as_json:
        sys.stdout.write(json.dumps(status, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(text_lines(status)) + "\n")


def _size(option: str, value: str | None) -> int | None:
    """``value`` in bytes; the error names ``option``."""
    from storage.lab.system import parse_size

    if value is None:
        return None
    try:
        return parse_size(value)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _bps(option: str, value: str | None) -> int | None:
    return limits.ceiling(option, option.lstrip("-").replace("-", "_"), _size(option, value))


@lab_app.command()
def up(
    size: Annotated[
        str | None,
        typer.Option(
            "--size", help="Size of the sparse image, 16M to 1T (default 1G).", metavar="SIZE"
        ),
    ] = None,
    mount: Annotated[
        Path | None,
        typer.Option(
            "--mount",
            help=f"Where to mount the lab file system, an absolute path (default {DEFAULT_MOUNT}).",
        ),
    ] = None,
    read_iops: IopsOpt = None,
    write_iops: IopsOpt = None,
    read_bps: BpsOpt = None,
    write_bps: BpsOpt = None,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="memory.limit_in_bytes of the lab's processes (default 256M, at least 32M, "
            "at most the host's memory), so the page cache cannot hide the ceiling.",
            metavar="SIZE",
        ),
    ] = None,
    postgres: Annotated[
        bool,
        typer.Option(
            "--postgres/--no-postgres", help="Also start a throwaway PostgreSQL on the lab."
        ),
    ] = False,
    pg_port: Annotated[
        int,
        typer.Option(
            "--pg-port", min=1, max=65535, help="Port of the throwaway PostgreSQL (127.0.0.1)."
        ),
    ] = DEFAULT_PG_PORT,
    pg_cache_cap: PgCacheCapOpt = None,
    volume: VolumeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the lab (when it is up: apply the ceilings given, start PostgreSQL if asked)."""
    storage.lab.require_root()  # first of all, so the refusal is the first and only message
    specs = [storage.lab.parse_volume(text) for text in volume or []]
    status = storage.lab.Lab().up(
        _size("--size", size),
        mount,
        read_iops=read_iops,
        write_iops=write_iops,
        read_bps=_bps("--read-bps", read_bps),
        write_bps=_bps("--write-bps", write_bps),
        memory_limit_bytes=_size("--memory-limit", memory_limit),
        postgres=postgres,
        pg_port=pg_port,
        volumes=specs,
        pg_cache_cap_bytes=_size("--pg-cache-cap", pg_cache_cap),
    )
    _print_status(status, as_json)


@lab_app.command()
def down() -> None:
    """Stop the lab's PostgreSQL and remove its cgroups, mount, loop device and image."""
    storage.lab.require_root()
    lab = storage.lab.Lab()
    before = lab.status()
    warnings: list[str] = []
    problems = lab.down(warnings)
    for warning in warnings:  # not the lab's: left alone, and no failure of the lab's down
        sys.stderr.write(f"warning: lab down: {warning}\n")
    if problems:
        for problem in problems:
            sys.stderr.write(f"error: lab down: {problem}\n")
        sys.stderr.write(f"error: what is left is recorded in {lab.state_file}\n")
        raise typer.Exit(EXIT_RUN_FAILED)
    if "volumes" in before:
        plural = "s" if len(warnings) > 1 else ""
        left = f" (what is not the lab's was left alone: {len(warnings)} warning{plural})"
        left = left if warnings else ""
        sys.stdout.write(f"lab {before['name']} is down: nothing of it is left{left}\n")
    else:
        sys.stdout.write("no lab was up\n")


@lab_app.command()
def status(as_json: JsonOpt = False) -> None:
    """Show the lab: device, mount, ceilings, cgroups, PostgreSQL, free space."""
    _print_status(storage.lab.Lab().status(), as_json)


@lab_app.command("set")
def set_(
    read_iops: IopsOpt = None,
    write_iops: IopsOpt = None,
    read_bps: BpsOpt = None,
    write_bps: BpsOpt = None,
    volume: Annotated[
        str | None,
        typer.Option(
            "--volume",
            help="The volume whose ceilings change (needed when the lab has several); "
            "NAME:KEY=VALUE,… names ceilings too, as for `up`.",
            metavar="NAME[:KEY=VALUE,…]",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change ceilings now, while a run goes on; ceilings not named stay as they are."""
    storage.lab.require_root()
    spec = storage.lab.parse_volume(volume) if volume is not None else None
    named = dict(spec.ceilings) if spec else {}
    flags = (read_iops, write_iops, _bps("--read-bps", read_bps), _bps("--write-bps", write_bps))
    values: list[Ceiling] = []
    for kind, value in zip(storage.lab.CEILING_KEYS, flags, strict=True):
        if value is None and kind in named:
            value = named[kind] or 0
        values.append(storage.lab.KEEP if value is None else value)
    policy = dict(spec.array) if spec and spec.array else {}
    if all(value is storage.lab.KEEP for value in values) and not policy:
        raise ConfigError(
            "dbsim lab set: name at least one of --read-iops, --write-iops, "
            "--read-bps, --write-bps (0 = unlimited), or an array volume's policy "
            "(--volume NAME:qos-iops=500)"
        )
    lab = storage.lab.Lab()
    if policy:
        lab.set_policy(spec.name if spec else None, policy)
    if not all(value is storage.lab.KEEP for value in values):
        lab.set_ceiling(*values, volume=spec.name if spec else None)
    _print_status(lab.status(), as_json)


def exec_argv(command: list[str]) -> list[str]:
    """``command`` as ``lab exec`` runs it. ``dbsim`` is this very dbsim (the interpreter that
    runs now, ``-m sim.cli``), not a lookup on PATH: ``sudo`` resets PATH, and a checkout's
    ``.venv/bin/dbsim`` is on nobody's PATH, so ``lab exec -- dbsim run …`` works as written."""
    if command and command[0] == "dbsim":
        return [sys.executable, "-m", "sim.cli", *command[1:]]
    return command


@lab_app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments.")],
) -> None:
    """Run a command inside the lab's cgroups (its files dropped from the page cache first), e.g.
    `dbsim lab exec -- dbsim run tree.yaml` for a file-tree workload on the lab mount."""
    storage.lab.require_root()
    storage.lab.Lab().join(os.getpid())
    argv = exec_argv(command)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        raise ConfigError(f"dbsim lab exec: {command[0]}: {exc.strerror}") from exc
