"""Where each cited text sits in its seed: the line numbers of quotes and table rows.

The seeds are content-addressed files (their names carry a hash), so their lines are stable;
``data/lines.json`` maps each cited text — keyed by seed, section path and the text itself —
to the line it starts on. It is generated from the seeds by
``python -m storage.envelopes.verify --write-lines`` and checked against them by
``tests/unit/test_profiles.py`` (a stale index fails the test), so a citation can name its
line even where the seeds are not at hand.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LINES_FILE = Path(__file__).parent / "data" / "lines.json"


def line_key(seed: str, path: str, text: str) -> str:
    """The index key of ``text`` cited under ``path`` (``outer › section``) in ``seed``."""
    return f"{seed} › {path} | {' '.join(text.split())}"


@cache
def _index() -> dict[str, int]:
    try:
        loaded = json.loads(LINES_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): int(v) for k, v in loaded.items()}


def line_of(seed: str, path: str, text: str) -> int | None:
    """The 1-based line ``text`` starts on, or None when the index does not know it."""
    return _index().get(line_key(seed, path, text))


def lines_text(seed: str, path: str, texts: list[str]) -> str:
    """`` (line 9)`` or `` (lines 101–102)`` for the cited texts, or ``""``."""
    found = [n for n in (line_of(seed, path, t) for t in texts) if n is not None]
    if not found:
        return ""
    low, high = min(found), max(found)
    return f" (line {low})" if low == high else f" (lines {low}–{high})"
