"""STYLE.md: ~400 lines is a smell, 800 a hard cap for a module of the product; sim/ holds
itself to 500 (its modules are split by role, docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARD_CAP_LINES = 800
SIM_CAP_LINES = 500


def _too_long(folders: tuple[str, ...], cap: int) -> dict[str, int]:
    return {
        str(path.relative_to(REPO)): n
        for folder in folders
        for path in (REPO / folder).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > cap
    }


def test_no_product_module_exceeds_the_hard_cap() -> None:
    too_long = _too_long(("sim", "workloads", "storage"), HARD_CAP_LINES)
    assert not too_long, f"split these modules: {too_long}"


def test_no_sim_module_exceeds_500_lines() -> None:
    too_long = _too_long(("sim",), SIM_CAP_LINES)
    assert not too_long, f"split these modules by role: {too_long}"
