"""docs/index.md's exit-code table names every exit code sim.errors defines, and no other."""

from __future__ import annotations

import re
from pathlib import Path

import sim.errors

INDEX = Path(__file__).resolve().parents[2] / "docs" / "index.md"
SIGNALS = {130, 143}


def test_the_exit_code_table_matches_sim_errors() -> None:
    text = INDEX.read_text(encoding="utf-8")
    table = text[text.index("## Exit codes") :].split("\n## ")[0]
    documented: set[int] = set()
    for line in table.splitlines():
        match = re.match(r"^\| ([0-9, ]+) \|", line)
        if match:
            documented.update(int(code) for code in match.group(1).split(","))
    defined = {v for k, v in vars(sim.errors).items() if k.startswith("EXIT_")}
    assert defined == {0, 1, 2, 3, 4, 5}
    assert documented == defined | SIGNALS
