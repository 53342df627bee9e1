"""Fenced blocks of the user guide, as the docs test reads them.

Pages: ``README.md``, every ``docs/**/*.md``. A block is a fenced code block (```` ``` ```` or
``~~~``, indented or not, e.g. inside a list item). Its language decides what the test does:

* ``sh`` / ``bash`` / ``shell``: the whole block is a script (run with ``set -eo pipefail``);
* ``console``: a transcript; the lines starting with ``$ `` (and their ``\\`` continuations)
  are the commands, everything else is output shown to the reader;
* ``yaml`` / ``yml``: a scenario (``dbsim validate``); a block whose first line is a comment
  naming a file (``# first-postgres.yaml``) is also written under that name into the page's
  working directory before the page's shell blocks run, as a reader would save it.

A directive is an HTML comment on the line(s) right above the fence (blank lines allowed in
between); MkDocs does not render it:

* ``<!-- docs-test: skip: REASON -->`` the block cannot run here; the reason is reported;
* ``<!-- docs-test: exit: N -->`` the block is expected to end with exit code N (it shows a
  refusal, say); without it every command must succeed;
* ``<!-- docs-test: over: FILE -->`` a YAML fragment (no ``workload:``) is validated merged
  over FILE (a file the page names, or ``examples/…``) instead of ``examples/quickstart.yaml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = frozenset({"sh", "bash", "shell", "console"})
YAML_LANGS = frozenset({"yaml", "yml"})
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_FILE_NAME = re.compile(r"^#\s*(?P<name>[\w.-]+\.ya?ml)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its directives."""

    page: Path  # relative to the repository
    line: int  # the opening fence's line number (1-based)
    lang: str
    text: str
    skip: str | None = None
    exit_code: int = 0
    over: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The file a YAML block says it is (``# name.yaml`` on its first line)."""
        first = self.text.splitlines()[0] if self.text.strip() else ""
        match = _FILE_NAME.match(first.strip())
        return match["name"] if match else None

    def script(self) -> str:
        """What the shell runs: the block, or a transcript's ``$`` commands."""
        if self.lang != "console":
            return self.text
        commands: list[str] = []
        continuing = False
        for line in self.text.splitlines():
            if continuing:
                commands.append(line)
            elif line.startswith("$ "):
                commands.append(line[2:])
            else:
                continue
            continuing = line.rstrip().endswith("\\")
        return "\n".join(commands) + "\n"


def pages() -> list[Path]:
    """Every page the test reads, relative to the repository, in a stable order."""
    found = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p.relative_to(REPO) for p in found if p.is_file()]


def _directives(lines: list[str], fence_index: int) -> list[str]:
    bodies: list[str] = []
    index = fence_index - 1
    while index >= 0 and not lines[index].strip():
        index -= 1
    while index >= 0 and (match := _DIRECTIVE.match(lines[index])):
        bodies.append(match["body"])
        index -= 1
    return bodies


def _block(page: Path, lines: list[str], start: int, end: int, indent: str, info: str) -> Block:
    body = [
        line[len(indent) :] if line.startswith(indent) else line for line in lines[start + 1 : end]
    ]
    skip: str | None = None
    exit_code = 0
    over: str | None = None
    for directive in _directives(lines, start):
        key, _, value = directive.partition(":")
        key, value = key.strip(), value.strip()
        if key == "skip" and value:
            skip = value
        elif key == "exit" and value.isdigit():
            exit_code = int(value)
        elif key == "over" and value:
            over = value
        else:
            raise ValueError(f"{page}:{start + 1}: unknown docs-test directive {directive!r}")
    text = "\n".join(body) + "\n"
    return Block(page, start + 1, info.lower(), text, skip, exit_code, over)


def blocks_of(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of one page (its text read from the repository unless given)."""
    if text is None:
        text = (REPO / page).read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence = opening["fence"]
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence[0] * len(fence)):
            end += 1
        found.append(_block(page, lines, index, end, opening["indent"], opening["info"]))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks_of(page)]
