"""Issue #14's bar, held by a test: no product module over 500 lines (STYLE.md calls ~400 a
smell and 800 the hard cap) and no function over 60 lines; modules are split by role and long
functions read as their steps (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("sim", "workloads", "storage")
MODULE_CAP_LINES = 500
FUNCTION_CAP_LINES = 60


def _modules() -> list[Path]:
    return [path for folder in PRODUCT for path in sorted((REPO / folder).rglob("*.py"))]


def test_no_product_module_exceeds_500_lines() -> None:
    too_long = {
        str(path.relative_to(REPO)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_CAP_LINES
    }
    assert not too_long, f"split these modules by role: {too_long}"


def test_no_product_function_exceeds_60_lines() -> None:
    too_long: dict[str, int] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_CAP_LINES:
                    too_long[f"{path.relative_to(REPO)}:{node.lineno} {node.name}"] = length
    assert not too_long, f"cut these functions into their steps: {too_long}"
