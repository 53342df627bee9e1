"""The ``dbsim`` command line: :mod:`sim.cli.app` (the Typer app and the options every command
shares), one module per command, and :mod:`sim.cli.entry` (the entry point that registers the
command a start runs, or all of them for --help, and turns every failure into lines and an exit code)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``dbsim`` entry point (see :func:`sim.cli.entry.main`)."""
    # Imported when called, so importing one part of sim.cli (the console, a command's helpers)
    # does not load every command and its dependencies.
    from sim.cli.entry import main as run_cli

    return run_cli(argv)
