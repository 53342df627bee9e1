"""``dbsim validate``, ``dbsim schema`` and ``dbsim version``: the scenario as it would run, its
JSON Schema, and dbsim's version."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from sim import __version__
from sim.cli.app import (
    DurationOpt,
    OutputOpt,
    ScenarioArg,
    SessionsOpt,
    SetOpt,
    WarmupOpt,
    app,
    run_overrides,
)
from sim.errors import ConfigError

if TYPE_CHECKING:
    from sim.protocols import Target  # an annotation: `dbsim version` needs no asyncio


@app.command()
def validate(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    duration: DurationOpt = None,
    sessions: SessionsOpt = None,
    warmup: WarmupOpt = None,
    output: OutputOpt = None,
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="Also connect: a round trip to the server, the login and the privileges "
            "dbsim needs, one line each on stderr (exit 2 when one fails).",
        ),
    ] = False,
) -> None:
    """Check a scenario as `dbsim run` would, without connecting (unless --connect), and print
    it as it would run (after environment and --set overrides). With --connect: the server
    answers a round trip, the login is accepted and the user holds the privileges dbsim needs
    (each check a line on stderr); exit 2 naming host, port and the driver's message if not."""
    # Imported here: `dbsim version` shares this module and needs neither (issue #25); the
    # runner only once the scenario resolved (a refused one needs none of it).
    import yaml

    from sim.config.resolve import resolve, resolved_dict

    resolved = resolve(scenario, run_overrides(set_, duration, sessions, warmup, output))
    from sim.run.runner import check_before_run

    target = check_before_run(resolved)
    if connect:
        _connect(target)
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
        from sim.config.schema_doc import render_markdown

        sys.stdout.write(render_markdown())
        return
    from sim.config.resolve import json_schema  # here: see validate

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
def version() -> None:
    """Print dbsim's version."""
    sys.stdout.write(f"dbsim {__version__}\n")


def _connect(target: Target) -> None:
    """The probe's lines on stderr; exit 2 (ConfigError) when a required privilege is not held."""
    from sim.connect_check import connect_check

    report = connect_check(target)
    for line in report.lines():
        sys.stderr.write(f"{line}\n")
    if report.missing:
        fixes = "; ".join(f"{p.name}: {p.grant}" for p in report.missing)
        raise ConfigError(
            f"{report.kind} at {report.address}: {report.user or 'the user'} lacks what "
            f"dbsim needs ({fixes})"
        )
