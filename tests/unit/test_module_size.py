"""STYLE.md: ~400 lines is a smell, 800 a hard cap for a module of the product."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARD_CAP_LINES = 800


def test_no_product_module_exceeds_the_hard_cap() -> None:
    too_long = {
        str(path.relative_to(REPO)): n
        for folder in ("sim", "workloads", "storage")
        for path in (REPO / folder).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > HARD_CAP_LINES
    }
    assert not too_long, f"split these modules: {too_long}"
