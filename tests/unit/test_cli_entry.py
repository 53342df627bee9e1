"""The entry point registers only the command a start runs (sim/cli/entry.py): its table of
commands must name every command the modules register, and a start must not import the others."""

from __future__ import annotations

import subprocess
import sys

from sim.cli.app import app
from sim.cli.entry import COMMAND_MODULES, command_name, register_commands


def _registered() -> dict[str, str]:
    commands = {
        (c.name or c.callback.__name__.replace("_", "-")): c.callback.__module__
        for c in app.registered_commands
        if c.callback is not None
    }
    for group in app.registered_groups:
        first = group.typer_instance.registered_commands[0].callback
        commands[str(group.name)] = first.__module__
    return {name: module.rpartition(".")[2] for name, module in commands.items()}


def test_the_table_names_every_command_and_its_module() -> None:
    register_commands()
    assert _registered() == COMMAND_MODULES


def test_help_lists_the_commands_in_the_tables_order() -> None:
    register_commands()
    names = [c.name or c.callback.__name__ for c in app.registered_commands if c.callback]
    table = [name for name in COMMAND_MODULES if name != "lab"]
    assert names == table


def test_the_command_is_the_first_word_that_is_not_a_root_option() -> None:
    assert command_name(["--debug", "size", "--list"]) == "size"
    assert command_name(["--help"]) is None
    assert command_name([]) is None


def test_a_start_imports_only_the_module_of_its_command() -> None:
    probe = (
        "import sys; from sim.cli.entry import main; code = main(['size', '--list']);"
        "print(sorted(m for m in sys.modules if m.startswith('sim.cli.') and m not in"
        " ('sim.cli.app', 'sim.cli.entry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    loaded = out.strip().splitlines()[-1]
    assert "sim.cli.size" in loaded
    assert "sim.cli.run" not in loaded and "sim.cli.lab" not in loaded, loaded
