"""The ``dbsim`` command.

Every error the user can cause prints one line per problem to stderr and exits 2; a run that
fails exits 3; a run stopped by SIGINT/SIGTERM exits 130/143 after writing its bundle.
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import contextlib
import sys

# isort: off
# Each command module registers its commands on ``app`` when imported, in this order in --help.
from sim.cli import run, validate, load, report, compare, size, baseline, lab, ui, imports
from sim.cli import capture, profile, check

# isort: on
from sim.cli.app import EXIT_SIGINT, app, debug_requested, print_error, print_traceback
from sim.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED, SimError

COMMAND_MODULES = (
    run,
    validate,
    load,
    report,
    compare,
    size,
    baseline,
    lab,
    ui,
    imports,
    capture,
    profile,
    check,
)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the Typer app and turns every failure into lines and an exit code."""
    # A name with a non-UTF-8 byte (a surrogate, to Python) cannot be encoded for stdout;
    # shown escaped, as stderr does, rather than failing mid-output.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        # standalone_mode=False: errors come back to us as exceptions, Exit codes as values.
        code = app(args=argv, standalone_mode=False)
    except SimError as exc:
        if debug_requested():
            print_traceback()
        print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return EXIT_SIGINT
    except Exception as exc:
        kind = {cls.__name__ for cls in type(exc).__mro__}
        if "Abort" in kind:
            print_error("interrupted")
            return EXIT_SIGINT
        if "Exit" in kind:
            return int(getattr(exc, "exit_code", 0))
        if "UsageError" in kind:
            ctx = getattr(exc, "ctx", None)
            command = ctx.command_path if ctx is not None else "dbsim"
            print_error(f"{exc.format_message()} (see {command} --help)")  # type: ignore[attr-defined]
            return EXIT_BAD_INPUT
        if "ClickException" in kind:
            print_error(exc.format_message())  # type: ignore[attr-defined]
            return int(getattr(exc, "exit_code", EXIT_BAD_INPUT))
        if debug_requested():
            print_traceback()
        print_error(f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return EXIT_RUN_FAILED
    return code if isinstance(code, int) else EXIT_OK
