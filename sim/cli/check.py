"""``dbsim check``: first contact with the scenario's SQL server, one line per check (✓ or ✗
with the fix), exit 0 when every check passed and 2 otherwise. The checks are
:mod:`sim.check`'s; this module resolves the scenario, opens the target and prints."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from sim.cli.app import ScenarioArg, SetOpt, app, overrides, print_error
from sim.errors import EXIT_BAD_INPUT

#: The SLOB knobs of the scenario that shape the check's table; the rest are the check's own.
KEPT_SLOB_KNOBS = ("block_size_bytes", "work_unit", "load_batch_rows", "load_seed")


@app.command()
def check(
    scenario: ScenarioArg = None,
    set_: SetOpt = None,
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows", min=10_000, help="Rows of the check's table (default: 4 x the cache)."
        ),
    ] = None,
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=10_000, help="Most rows the default size loads.")
    ] = 200_000,
    duration: Annotated[
        float, typer.Option("--duration", min=1.0, max=600.0, help="Seconds of reads.")
    ] = 20.0,
    sessions: Annotated[
        int, typer.Option("--sessions", min=1, max=64, help="Sessions reading.")
    ] = 2,
) -> None:
    """First contact with a server: connect, privileges (with the GRANTs), a small SLOB-like
    table with one row per block, reads that reach the storage, the statistics views, and
    the drop of everything, in a scratch table prefix of its own."""
    from sim.check import CheckLine, CheckOptions
    from sim.check.driver import check_target
    from sim.config.resolve import resolve
    from sim.run.runner import build_target

    resolved = resolve(scenario, overrides(set_))
    target = build_target(resolved)
    target.check_paths()
    spec = resolved.workload  # type: ignore[attr-defined]
    slob: dict[str, Any] = {}
    if spec.name == "slob":
        slob = {k: getattr(spec.parameters, k) for k in KEPT_SLOB_KNOBS}

    def emit(line: CheckLine) -> None:
        sys.stdout.write(line.render() + "\n")
        sys.stdout.flush()

    options = CheckOptions(rows, max_rows, duration, sessions, slob)
    lines, stopped = check_target(target, options, emit)
    if stopped is not None:
        print_error("interrupted: what the check had loaded was dropped (see the drop line)")
        raise typer.Exit(stopped)
    if not all(line.ok for line in lines):
        raise typer.Exit(EXIT_BAD_INPUT)
