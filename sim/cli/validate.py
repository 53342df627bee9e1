"""``dbsim validate``, ``dbsim schema`` and ``dbsim version``: the scenario as it would run, its
JSON Schema, and dbsim's version."""

from __future__ import annotations

import json
import sys
from typing import Annotated

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
from sim.config.resolve import json_schema, resolve, resolved_dict


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
            help="Also open the target and close it again: reachability and credentials.",
        ),
    ] = False,
) -> None:
    """Check a scenario as `dbsim run` would, without connecting (unless --connect), and print
    it as it would run (after environment and --set overrides)."""
    import yaml

    from sim.run.runner import check_before_run

    resolved = resolve(scenario, run_overrides(set_, duration, sessions, warmup, output))
    target = check_before_run(resolved)
    if connect:
        from sim.core.dataset import connect_and_close

        connect_and_close(target)
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
    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
def version() -> None:
    """Print dbsim's version."""
    sys.stdout.write(f"dbsim {__version__}\n")
