"""The ``dbsim`` command.

Every error the user can cause prints one line per problem to stderr and exits 2; a run that
fails exits 3; a run stopped by SIGINT/SIGTERM exits 130/143 after writing its bundle.
Tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

from sim.cli.app import EXIT_SIGINT, app, debug_requested, print_error, print_traceback
from sim.cli.closed_pipe import guard_stdout
from sim.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED, SimError

#: Every command and the module of :mod:`sim.cli` that registers it on ``app`` when imported,
#: in --help order. A start imports only the module of the command it runs: a dbsim start is
#: ~0.3 CPU-s, most of it imports, and scripts (and the test suite) start dbsim thousands of
#: times. ``--help``, no command or an unknown one imports them all, so Click lists or
#: suggests every command. tests/unit/test_cli_entry.py checks this table against the modules.
COMMAND_MODULES: dict[str, str] = {
    "run": "run",
    "validate": "validate",
    "schema": "validate",
    "version": "validate",
    "load": "load",
    "drop": "load",
    "report": "report",
    "runs": "report",
    "compare": "compare",
    "size": "size",
    "baseline": "baseline",
    "lab": "lab",
    "ui": "ui",
    "worker": "ui",
    "import": "imports",
    "capture": "capture",
    "profile": "profile",
    "check": "check",
    "sql-from-stats": "sql_from_stats",
    "replay": "replay",
}
_MODULE_ORDER = {name: index for index, name in enumerate(dict.fromkeys(COMMAND_MODULES.values()))}


def command_name(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word that is not a root option (``--debug``)."""
    return next((word for word in argv if not word.startswith("-")), None)


def register_commands(argv: list[str] | None = None) -> None:
    """Import the module of the command ``argv`` runs, or every command module (``None``, help,
    an unknown command). Commands keep the table's order whatever was imported before (an
    earlier in-process call may have registered one command first)."""
    name = command_name(argv) if argv is not None else None
    modules = [COMMAND_MODULES[name]] if name in COMMAND_MODULES else list(_MODULE_ORDER)
    for module in modules:
        importlib.import_module(f"sim.cli.{module}")

    def order(callback: object) -> int:
        return _MODULE_ORDER.get(getattr(callback, "__module__", "").rpartition(".")[2], 0)

    app.registered_commands.sort(key=lambda command: order(command.callback))


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the Typer app and turns every failure into lines and an exit code."""
    # A name with a non-UTF-8 byte (a surrogate, to Python) cannot be encoded for stdout;
    # shown escaped, as stderr does, rather than failing mid-output.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    guard_stdout()  # a reader that stops reading (| head) leaves the command its own exit code
    register_commands(sys.argv[1:] if argv is None else argv)
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
