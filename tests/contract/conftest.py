from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-contracts",
        action="store_true",
        help="Rewrite tests/contract/expected/ from the current statements (review the diff!).",
    )
