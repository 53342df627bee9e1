"""``dbsim load`` and ``dbsim drop``: build and verify a workload's data, or remove exactly the
objects dbsim created, outside of a run."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from sim.cli.app import ScenarioArg, SetOpt, app, overrides


@app.command()
def load(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole load and verify report as JSON.")
    ] = False,
) -> None:
    """Build and verify the workload's data (idempotent), without running the workload."""
    from sim.cli.load_text import load_lines
    from sim.config.resolve import resolve  # here, as drop: `dbsim --help` imports no scenario
    from sim.core.dataset import load_and_verify
    from sim.run.runner import build_target, build_workload

    resolved = resolve(scenario, overrides(set_))
    target = build_target(resolved)
    workload = build_workload(resolved, target)
    _refuse_foreign_only(workload, "load")
    report = load_and_verify(workload, target)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        sys.stdout.write("\n".join(load_lines(report)) + "\n")


@app.command()
def drop(scenario: ScenarioArg = None, set_: SetOpt = None) -> None:
    """Remove the objects dbsim created for this scenario's workload (nothing else)."""
    from sim.config.resolve import resolve
    from sim.core.dataset import drop_objects
    from sim.run.runner import build_target, build_workload

    resolved = resolve(scenario, overrides(set_))
    target = build_target(resolved)
    workload = build_workload(resolved, target)
    _refuse_foreign_only(workload, "drop")
    target.check_paths()
    absent = target.data_absent()
    if absent:  # connecting would create the database file only to find it empty
        sys.stdout.write(f"nothing to drop: {absent}\n")
        return
    dropped = drop_objects(workload, target)
    sys.stdout.write(("dropped: " + ", ".join(dropped) if dropped else "nothing to drop") + "\n")


def _refuse_foreign_only(workload: object, command: str) -> None:
    """A workload that runs on the user's own tables (``sql``): dbsim made nothing to load or
    drop, so the command refuses with one line (exit 2) and touches nothing."""
    if getattr(workload, "creates_objects", True):
        return
    from sim.errors import ConfigError

    name = getattr(workload, "name", "this workload")
    raise ConfigError(
        f"dbsim {command}: the {name} workload runs on your own tables and dbsim creates "
        f"none, so there is nothing to {command}; run it with: dbsim run SCENARIO"
    )
